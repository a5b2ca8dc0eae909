package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/storage"
)

// testSchemaV2 is testSchema converted: "opts" dropped, "color" added,
// "tags" narrowed to at most 2.
const testSchemaV2 = `{
  "name": "Test",
  "version": "1.1.0",
  "tables": {
    "Box": {
      "isRoot": true,
      "columns": {
        "name": {"type": "string"},
        "n": {"type": {"key": "integer", "min": 0, "max": 1}},
        "tags": {"type": {"key": "string", "min": 0, "max": 2}},
        "color": {"type": {"key": {"type": "string", "enum": ["set", ["", "red"]]}}}
      },
      "indexes": [["name"]]
    }
  }
}`

func TestConvertOnline(t *testing.T) {
	_, sock := startServer(t, nil)
	aware, unaware, c := dial(t, sock), dial(t, sock), dial(t, sock)
	mustContain(t, c.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"a","tags":["set",["x","y"]],"opts":["map",[["k","v"]]]}},{"op":"insert","table":"Box","row":{"name":"b","n":3}}]`), `"uuid"`)

	mustContain(t, aware.call("set_db_change_aware", `[true]`), `{}`)
	mustContain(t, aware.call("monitor_cond", `["_Server","srv",{"Database":[{"columns":["name","schema"]}]}]`), `"Test"`)
	mustContain(t, aware.call("monitor_cond", `["Test","m1",{"Box":[{"columns":["name"]}]}]`), `"a"`)
	mustContain(t, unaware.call("monitor", `["Test","m2",{"Box":{"columns":["name"]}}]`), `"a"`)

	// Conversions that cannot succeed change nothing and disconnect no one.
	tooNarrow := strings.Replace(testSchemaV2, `"max": 2`, `"max": 1`, 1)
	for _, tc := range []struct{ params, want string }{
		{`["Test",` + tooNarrow + `]`, "column tags"},
		{`["Nope",` + testSchemaV2 + `]`, "unknown database"},
		{`["_Server",` + strings.Replace(testSchemaV2, `"Test"`, `"_Server"`, 1) + `]`, "cannot be converted"},
		{`["Test",` + strings.Replace(testSchemaV2, `"name": "Test"`, `"name": "Other"`, 1) + `]`, "does not match"},
		{`["Test",{"name":"Test"}]`, "syntax error"},
		{`["Test"]`, "syntax error"},
	} {
		mustContain(t, c.call("convert", tc.params), tc.want)
	}
	aware.noNote()
	unaware.noNote()
	mustContain(t, c.call("get_schema", `["Test"]`), `"1.0.0"`)

	if got := c.call("convert", `["Test",`+testSchemaV2+`]`); got != "{}" {
		t.Fatalf("convert: %s", got)
	}
	// The db_change_aware client hears of it and stays connected.
	methods := map[string]string{}
	for range 2 {
		m := aware.note()
		methods[m.Method] = string(m.Params)
	}
	if got := methods["monitor_canceled"]; got != `["m1"]` {
		t.Errorf("monitor_canceled params = %q, want [\"m1\"] (notes %v)", got, methods)
	}
	mustContain(t, methods["update2"], `"srv"`, `1.1.0`)
	mustContain(t, aware.call("get_schema", `["Test"]`), `"1.1.0"`, `"color"`)
	// The canceled monitor is gone; its id can be used again.
	mustContain(t, aware.call("monitor_cancel", `["m1"]`), "unknown monitor")
	mustContain(t, aware.call("monitor_cond", `["Test","m1",{"Box":[{"columns":["name","color"]}]}]`), `"name":"a"`)

	// The others were disconnected.
	for name, cl := range map[string]*client{"unaware": unaware, "converter": c} {
		select {
		case <-cl.conn.Done():
		case <-time.After(5 * time.Second):
			t.Errorf("%s client still connected after the conversion", name)
		}
	}
	rows := aware.call("transact", `["Test",{"op":"select","table":"Box","where":[["name","==","a"]]}]`)
	mustContain(t, rows, `"tags":["set",["x","y"]]`, `"color":""`)
	if strings.Contains(rows, "opts") {
		t.Errorf("dropped column still served: %s", rows)
	}
	mustContain(t, aware.call("transact", `["Test",{"op":"update","table":"Box","where":[],"row":{"color":"red"}}]`), `"count":2`)
}

// TestConvertRewritesFile converts a database served from a file and
// serves the file again, as a restart does.
func TestConvertRewritesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.db")
	if err := CreateFile(path, []byte(testSchema)); err != nil {
		t.Fatal(err)
	}
	db, log, err := OpenFile(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
	if err := srv.AddDatabase(db, log); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d := srv.database("Test")
	commitOps(t, d, `[{"op":"insert","table":"Box","row":{"name":"a","opts":["map",[["k","v"]]]}}]`)
	commitOps(t, d, `[{"op":"insert","table":"Box","row":{"name":"b","tags":"t"}}]`)
	// A running compaction would write the old schema over the converted
	// file: the conversion waits for it.
	running, err := log.StartCompaction()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.ConvertDatabase(ctx, "Test", []byte(testSchemaV2)) }()
	select {
	case err := <-done:
		t.Fatalf("conversion did not wait for the running compaction (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	running.Abort()
	if err := <-done; err != nil {
		t.Fatalf("ConvertDatabase: %v", err)
	}
	// A commit after the conversion goes to the new file.
	commitOps(t, d, `[{"op":"insert","table":"Box","row":{"name":"c","color":"red"}}]`)
	if l, ok := srv.DatabaseLog("Test").(io.Closer); !ok || l.Close() != nil {
		t.Fatal("the converted database's log does not close cleanly")
	}

	schema, recs, err := storage.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(schema), `"1.1.0"`) {
		t.Errorf("file schema is not the new one: %s", schema)
	}
	if len(recs) != 2 {
		t.Errorf("file holds %d records, want 2 (snapshot and one commit)", len(recs))
	}
	db2, log2, err := OpenFile(path, quietLogger())
	if err != nil {
		t.Fatalf("reopening the converted file: %v", err)
	}
	defer log2.Close()
	if n := len(db2.Table("Box").Rows); n != 3 {
		t.Errorf("reopened database has %d rows, want 3", n)
	}
	if db2.Schema.Version != "1.1.0" {
		t.Errorf("reopened schema version %s", db2.Schema.Version)
	}
}

// commitOps runs a transaction on d as a session does and waits until it
// is durable.
func commitOps(t *testing.T, d *dbState, ops string) {
	t.Helper()
	d.mu.Lock()
	res := d.db.Transact(mustOps(t, ops), ovsdb.TxnOptions{})
	if res.Failed || res.Changes == nil {
		d.unlock()
		t.Fatalf("transaction %s: %s", ops, res.Reply)
	}
	c, err := d.commitLocked(res.Changes)
	d.unlock()
	if err == nil && c != nil { // nil without a log
		err = c.Wait(context.Background())
	}
	if err != nil {
		t.Fatalf("commit %s: %v", ops, err)
	}
}

func mustOps(t *testing.T, text string) []any {
	t.Helper()
	var ops []any
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&ops); err != nil {
		t.Fatal(err)
	}
	return ops
}

// FuzzConvertDatabase feeds arbitrary schema text to ConvertDatabase of a
// served database with a monitor: it must convert or refuse, never panic,
// and the database must stay usable.
func FuzzConvertDatabase(f *testing.F) {
	f.Add([]byte(testSchemaV2))
	f.Add([]byte(testSchema))
	f.Add([]byte(`{"name":"Test","tables":{"Box":{"columns":{"name":{"type":"integer"}}}}}`))
	f.Add([]byte(`{"name":"Test","tables":{}}`))
	f.Fuzz(func(t *testing.T, text []byte) {
		srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
		if err := srv.AddDatabase(ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(testSchema))), nil); err != nil {
			t.Fatal(err)
		}
		d := srv.database("Test")
		commitOps(t, d, `[{"op":"insert","table":"Box","row":{"name":"a","n":1,"tags":["set",["x","y"]],"opts":["map",[["k","v"]]]}}]`)
		err := srv.ConvertDatabase(context.Background(), "Test", text)
		d.mu.Lock()
		res := d.db.Transact(mustOps(t, `[{"op":"comment","comment":"still here"}]`), ovsdb.TxnOptions{})
		d.unlock()
		if res.Failed {
			t.Fatalf("database unusable after conversion (err %v): %s", err, res.Reply)
		}
		if err == nil && !strings.Contains(string(srv.database("Test").schemaJSON()), `"Test"`) {
			t.Fatal("converted schema lost its name")
		}
	})
}

// TestConvertUnderLoad converts back and forth while db_change_aware
// clients transact, monitor, change conditions and read the schema; run
// with -race it checks that nothing reaches a replaced database.
func TestConvertUnderLoad(t *testing.T) {
	srv, sock := startServer(t, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 3 {
		c := dial(t, sock)
		mustContain(t, c.call("set_db_change_aware", `[true]`), `{}`)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("c%d-%d", i, n)
				c.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"`+name+`","tags":["set",["a","b"]]}}]`)
				c.call("monitor_cond", `["Test","`+name+`",{"Box":[{"columns":["name","tags"],"where":[["name","==","`+name+`"]]}]}]`)
				c.call("monitor_cond_change", `["`+name+`","`+name+`x",{"Box":[{"where":[["name","!=","`+name+`"]]}]}]`)
				c.call("get_schema", `["Test"]`)
				c.call("monitor_cancel", `["`+name+`x"]`)
				c.call("transact", `["Test",{"op":"wait","table":"Box","timeout":50,"where":[["name","==","`+name+`"]],"columns":["name"],"until":"!=","rows":[{"name":"`+name+`"}]}]`)
			}
		}()
	}
	ctx := context.Background()
	for i := range 10 {
		schema := testSchemaV2
		if i%2 == 1 {
			schema = testSchema
		}
		if err := srv.ConvertDatabase(ctx, "Test", []byte(schema)); err != nil {
			t.Errorf("conversion %d: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	c := dial(t, sock)
	mustContain(t, c.call("get_schema", `["Test"]`), `"1.0.0"`)
	mustContain(t, c.call("transact", `["Test",{"op":"select","table":"Box","where":[["name","==","c0-0"]],"columns":["name"]}]`), `"c0-0"`)
}
