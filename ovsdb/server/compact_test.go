package server

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/storage"
)

// TestCompaction compacts a log that has grown and checks that a restart
// sees the same rows.
func TestCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.db")
	if err := CreateFile(path, []byte(testSchema)); err != nil {
		t.Fatal(err)
	}
	log, err := storage.Open(path, storage.Options{Logger: quietLogger(), CompactMinSize: 1, CompactGrowth: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Replay(func(storage.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
	db := ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(testSchema)))
	srv.AddDatabase(db, log)
	d := srv.database("Test")
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		ops, _ := ovsdb.DecodeJSON([]byte(fmt.Sprintf(`[{"op":"insert","table":"Box","row":{"name":"n%d"}},{"op":"delete","table":"Box","where":[["name","==","n%d"]]}]`, i, i-1)))
		d.mu.Lock()
		res := d.db.Transact(ops.([]any), ovsdb.TxnOptions{})
		c, err := d.commitLocked(res.Changes)
		d.unlock()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	before := log.Size()
	d.maybeCompact(ctx)
	if after := log.Size(); after >= before {
		t.Fatalf("compaction did not shrink the file: %d -> %d bytes", before, after)
	}
	log.Close()
	db2, log2, err := OpenFile(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer log2.Close()
	rows := db2.Table("Box").Rows
	if len(rows) != 1 {
		t.Fatalf("%d rows after compaction and restart, want 1", len(rows))
	}
	for _, r := range rows {
		if got := r.Data[db2.Schema.Table("Box").Column("name").Index].Keys[0].Str(); got != "n49" {
			t.Fatalf("row %q, want n49", got)
		}
	}
}
