package server

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// BenchmarkInsert measures single-row insert transactions, each waited on
// until durable, from parallel clients over a unix socket.
func BenchmarkInsert(b *testing.B) { benchmarkInsert(b, true, 8) }

// BenchmarkInsertOneClient is BenchmarkInsert from one client: the latency
// of one durable commit.
func BenchmarkInsertOneClient(b *testing.B) { benchmarkInsert(b, true, 0) }

// BenchmarkInsertMemory is BenchmarkInsert without a log: the cost of
// everything but the disk.
func BenchmarkInsertMemory(b *testing.B) { benchmarkInsert(b, false, 8) }

// benchmarkInsert runs parallelism*GOMAXPROCS clients, or one when
// parallelism is 0.
func benchmarkInsert(b *testing.B, durable bool, parallelism int) {
	dir := b.TempDir()
	path := filepath.Join(dir, "test.db")
	if err := CreateFile(path, []byte(testSchema)); err != nil {
		b.Fatal(err)
	}
	db, log, err := OpenFile(path, quietLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
	if durable {
		srv.AddDatabase(db, log)
	} else {
		srv.AddDatabase(db, nil)
	}
	sock := filepath.Join(dir, "db.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := Listen(ctx, "punix:"+sock)
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ctx, l)
	var n atomic.Int64
	if parallelism == 0 {
		c := dial(&testing.T{}, sock)
		defer c.conn.Close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := c.conn.CallRaw(ctx, "transact", json.RawMessage(fmt.Sprintf(`["Test",{"op":"insert","table":"Box","row":{"name":"n%d"}}]`, i))); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		t := &testing.T{}
		c := dial(t, sock)
		defer c.conn.Close()
		for pb.Next() {
			i := n.Add(1)
			raw, err := c.conn.CallRaw(ctx, "transact", json.RawMessage(fmt.Sprintf(`["Test",{"op":"insert","table":"Box","row":{"name":"n%d"}}]`, i)))
			if err != nil {
				b.Error(err, string(raw))
				return
			}
		}
	})
}
