package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
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
		defer reportCPU(b)()
		for i := 0; i < b.N; i++ {
			if _, err := c.conn.CallRaw(ctx, "transact", json.RawMessage(fmt.Sprintf(`["Test",{"op":"insert","table":"Box","row":{"name":"n%d"}}]`, i))); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(parallelism)
	b.ResetTimer()
	defer reportCPU(b)()
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

// BenchmarkFanout measures one commit reaching 200 monitoring sessions
// over unix sockets: from sending the update until every monitor has
// received it (the writer's reply is not waited for in the timing).
func BenchmarkFanout(b *testing.B) {
	benchmarkFanout(b, `["Test","fan",{"Box":[{"columns":["n"]}]}]`)
}

// BenchmarkFanoutConditional is BenchmarkFanout with monitors that all
// have the same condition (as many ovn-controllers monitoring a shared
// datapath do).
func BenchmarkFanoutConditional(b *testing.B) {
	benchmarkFanout(b, `["Test","fan",{"Box":[{"columns":["n"],"where":[["name","==","fan"]]}]}]`)
}

func benchmarkFanout(b *testing.B, request string) {
	const monitors = 200
	dir := b.TempDir()
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
	if err := srv.AddDatabase(ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(testSchema))), nil); err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "db.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := Listen(ctx, "punix:"+sock)
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ctx, l)
	writer := dial(&testing.T{}, sock)
	defer writer.conn.Close()
	if _, err := writer.conn.CallRaw(ctx, "transact", json.RawMessage(`["Test",{"op":"insert","table":"Box","row":{"name":"fan","n":0}}]`)); err != nil {
		b.Fatal(err)
	}
	var got atomic.Int32
	done := make(chan struct{}, 1)
	for range monitors {
		nc, err := net.Dial("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		c := jsonrpc.NewConn(ctx, nc, jsonrpc.Options{Logger: quietLogger(), Handler: func(ctx context.Context, conn *jsonrpc.Conn, m *jsonrpc.Message) {
			if m.Method == "update2" && got.Add(1) == monitors {
				done <- struct{}{}
			}
		}})
		defer c.Close()
		if _, err := c.CallRaw(ctx, "monitor_cond", json.RawMessage(request)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	defer reportCPU(b)()
	for i := 0; i < b.N; i++ {
		got.Store(0)
		params := json.RawMessage(fmt.Sprintf(`["Test",{"op":"update","table":"Box","where":[["name","==","fan"]],"row":{"n":%d}}]`, i+1))
		// Sent without waiting for the reply, which arrives with an id
		// nobody waits for and is dropped.
		if err := writer.conn.Send(&jsonrpc.Message{ID: json.RawMessage(fmt.Sprint(i + 1000)), Method: "transact", Params: params}); err != nil {
			b.Fatal(err)
		}
		<-done
	}
}

// BenchmarkCommitDuringInitialMonitor times commits made while another
// session's initial monitor of a 100k-row table is being built: the
// reported max-commit-ms is how long the dump stalls the database.
func BenchmarkCommitDuringInitialMonitor(b *testing.B) {
	const rows = 100000
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
	db := ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(testSchema)))
	if err := srv.AddDatabase(db, nil); err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(b.TempDir(), "db.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := Listen(ctx, "punix:"+sock)
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ctx, l)
	w := dial(&testing.T{}, sock)
	defer w.conn.Close()
	for start := 0; start < rows; start += 5000 {
		ops := []byte(`["Test"`)
		for i := start; i < start+5000; i++ {
			ops = fmt.Appendf(ops, `,{"op":"insert","table":"Box","row":{"name":"b%d","n":%d,"opts":["map",[["owner","bench"]]]}}`, i, i)
		}
		ops = append(ops, ']')
		if _, err := w.conn.CallRaw(ctx, "transact", json.RawMessage(ops)); err != nil {
			b.Fatal(err)
		}
	}
	var worst time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := dial(&testing.T{}, sock)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := m.conn.CallRaw(ctx, "monitor_cond", json.RawMessage(`["Test","all",{"Box":{}}]`)); err != nil {
				b.Error(err)
			}
		}()
		for n := 0; ; n++ {
			select {
			case <-done:
			default:
				start := time.Now()
				if _, err := w.conn.CallRaw(ctx, "transact", json.RawMessage(fmt.Sprintf(`["Test",{"op":"insert","table":"Box","row":{"name":"x%d-%d"}}]`, i, n))); err != nil {
					b.Fatal(err)
				}
				worst = max(worst, time.Since(start))
				continue
			}
			break
		}
		m.conn.Close()
	}
	b.ReportMetric(float64(worst)/float64(time.Millisecond), "max-commit-ms")
}

// reportCPU starts counting the process's CPU time (user and system); the
// returned function reports it per operation as cpu-ns/op, a figure that
// varies less than wall time on a machine shared with other work.
func reportCPU(b *testing.B) func() {
	var start syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &start)
	return func() {
		var end syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &end)
		ns := func(r *syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
		b.ReportMetric(float64(ns(&end)-ns(&start))/float64(b.N), "cpu-ns/op")
	}
}

// discard is a transport that swallows writes and has nothing to read.
type discard struct{ closed chan struct{} }

func (d discard) Read([]byte) (int, error)    { <-d.closed; return 0, io.EOF }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) Close() error                { return nil }

// BenchmarkNotify measures the server's side of one commit reaching 200
// monitors of the same shape, without the sockets: the transaction, the
// encoding and the queueing of 200 notifications.
func BenchmarkNotify(b *testing.B) {
	const monitors = 200
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
	if err := srv.AddDatabase(ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(testSchema))), nil); err != nil {
		b.Fatal(err)
	}
	d := srv.database("Test")
	closed := make(chan struct{})
	defer close(closed)
	ctx := b.Context()
	for i := range monitors {
		sess := &session{srv: srv, monitors: map[string]*monitor{}, locks: map[string]bool{}, pending: map[string][]*blockedTxn{}}
		sess.conn = jsonrpc.NewConn(ctx, discard{closed}, jsonrpc.Options{Logger: quietLogger()})
		v, _ := ovsdb.DecodeJSON([]byte(`{"Box":[{"columns":["n"]}]}`))
		tables, err := parseMonitorRequests(d.db, v, monitorV2)
		if err != nil {
			b.Fatal(err)
		}
		m := &monitor{sess: sess, d: d, version: monitorV2, tables: tables}
		m.setID(json.RawMessage(fmt.Sprintf(`"m%d"`, i)))
		m.computeShape()
		d.mu.Lock()
		d.monitors[m] = struct{}{}
		d.watchLocked(m)
		d.unlock()
	}
	run := func(ops string) {
		v, _ := ovsdb.DecodeJSON([]byte(ops))
		d.mu.Lock()
		res := d.db.Transact(v.([]any), ovsdb.TxnOptions{})
		if res.Changes != nil {
			if _, err := d.commitLocked(res.Changes); err != nil {
				b.Fatal(err)
			}
		}
		d.unlock()
	}
	run(`[{"op":"insert","table":"Box","row":{"name":"fan","n":0}}]`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run(fmt.Sprintf(`[{"op":"update","table":"Box","where":[["name","==","fan"]],"row":{"n":%d}}]`, i+1))
	}
}
