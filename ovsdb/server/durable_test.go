package server

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDurableRestart commits through the server, closes everything, and
// reads the database back from its file.
func TestDurableRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "test.db")
	if err := CreateFile(path, []byte(testSchema)); err != nil {
		t.Fatal(err)
	}
	db, log, err := OpenFile(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
	srv.AddDatabase(db, log)
	sock := filepath.Join(dir, "db.sock")
	ctx, cancel := context.WithCancel(context.Background())
	l, err := Listen(ctx, "punix:"+sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ctx, l); close(done) }()
	c := dial(t, sock)
	for _, name := range []string{"a", "b", "c"} {
		mustContain(t, c.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"`+name+`","opts":["map",[["k","`+name+`"]]]}},{"op":"comment","comment":"add `+name+`"}]`), `"uuid"`)
	}
	mustContain(t, c.call("transact", `["Test",{"op":"delete","table":"Box","where":[["name","==","b"]]}]`), `{"count":1}`)
	mustContain(t, c.call("transact", `["Test",{"op":"mutate","table":"Box","where":[["name","==","c"]],"mutations":[["opts","insert",["map",[["z","1"]]]]]}]`), `{"count":1}`)
	c.conn.Close()
	cancel()
	<-done
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}

	db2, log2, err := OpenFile(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer log2.Close()
	var names []string
	for _, r := range db2.Table("Box").Rows {
		names = append(names, r.Data[db2.Schema.Table("Box").Column("name").Index].Keys[0].Str())
		if opts := r.Data[db2.Schema.Table("Box").Column("opts").Index]; names[len(names)-1] == "c" && opts.Len() != 2 {
			t.Errorf("c's opts after restart: %v", opts)
		}
	}
	if len(names) != 2 || !(strings.Contains(strings.Join(names, ","), "a") && strings.Contains(strings.Join(names, ","), "c")) {
		t.Fatalf("rows after restart: %v", names)
	}
	if _, err := exec.LookPath("ovsdb-tool"); err == nil {
		out, err := exec.Command("ovsdb-tool", "show-log", path).CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"add b"`) {
			t.Errorf("ovsdb-tool show-log: %v\n%s", err, out)
		}
	}
}
