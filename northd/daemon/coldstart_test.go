package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/govn/govn/bench/northdbench"
	"github.com/govn/govn/ovsdb/jsonrpc"
	"github.com/govn/govn/ovsdb/server"
	"github.com/govn/govn/schema"
)

// inProcessDB is govn db serving one database file in the test process.
type inProcessDB struct {
	sock   string
	cancel context.CancelFunc
	done   chan struct{}
}

func startInProcessDB(tb testing.TB, dir, name string) *inProcessDB {
	tb.Helper()
	file := filepath.Join(dir, name+".db")
	if err := server.CreateFile(file, schema.MustLookup(name)); err != nil {
		tb.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	db, log, err := server.OpenFile(file, logger)
	if err != nil {
		tb.Fatal(err)
	}
	srv := server.New(server.Options{Logger: logger})
	if err := srv.AddDatabase(db, log); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &inProcessDB{sock: filepath.Join(dir, name+".sock"), cancel: cancel, done: make(chan struct{})}
	l, err := server.Listen(ctx, "punix:"+s.sock)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	go func() {
		defer close(s.done)
		defer log.Close()
		_ = srv.Serve(ctx, l)
	}()
	return s
}

func (s *inProcessDB) stop() {
	s.cancel()
	<-s.done
}

// loadNorthbound writes the bench's cluster of n nodes into the
// Northbound at sock in one transaction.
func loadNorthbound(tb testing.TB, sock string, n int) {
	tb.Helper()
	ctx := context.Background()
	nc, err := jsonrpc.Dial(ctx, "unix:"+sock)
	if err != nil {
		tb.Fatal(err)
	}
	c := jsonrpc.NewConn(ctx, nc, jsonrpc.Options{MaxMessageSize: 1 << 30})
	defer c.Close()
	params := []any{"OVN_Northbound"}
	for _, op := range (northdbench.Shape{Nodes: n}).Northbound() {
		params = append(params, op)
	}
	if err := c.Call(ctx, "transact", params, nil); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkColdStart times a govn northd from start to its first
// Southbound commit on the bench's cluster (GOVN_COLD_NODES nodes, 20 by
// default), with govn db for both databases in the process: connecting,
// the Northbound's initial contents, the full compute, the Southbound
// transaction through the server and back into northd's cache.
func BenchmarkColdStart(b *testing.B) {
	nodes := 20
	if v := os.Getenv("GOVN_COLD_NODES"); v != "" {
		var err error
		if nodes, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	nb := startInProcessDB(b, dir, "nb")
	defer nb.stop()
	loadNorthbound(b, nb.sock, nodes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sbDir := filepath.Join(dir, "sb"+strconv.Itoa(i))
		if err := os.Mkdir(sbDir, 0o755); err != nil {
			b.Fatal(err)
		}
		sb := startInProcessDB(b, sbDir, "sb")
		wrote := make(chan LastWrite, 1)
		logger := slog.New(slog.DiscardHandler)
		if os.Getenv("GOVN_COLD_LOG") != "" {
			logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		}
		d, err := New(Config{NB: []string{"unix:" + nb.sock}, SB: []string{"unix:" + sb.sock}, Logger: logger,
			OnWrite: func(w LastWrite) {
				select {
				case wrote <- w:
				default:
				}
			}})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		b.StartTimer()
		start := time.Now()
		go func() { done <- d.Run(ctx) }()
		var w LastWrite
		select {
		case w = <-wrote:
		case err := <-done:
			b.Fatalf("northd stopped: %v", err)
		}
		took := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(w.Engine.Milliseconds()), "engine-ms")
		b.ReportMetric(float64(w.Build.Milliseconds()), "build-ms")
		b.ReportMetric(float64(w.Commit.Milliseconds()), "commit-ms")
		b.ReportMetric(float64(took.Milliseconds()), "total-ms")
		b.ReportMetric(float64(w.Ops), "ops")
		cancel()
		<-done
		sb.stop()
		os.RemoveAll(sbDir)
		b.StartTimer()
	}
}

// rpcConn is a plain JSON-RPC connection to an in-process database.
func rpcConn(t testing.TB, sock string) *jsonrpc.Conn {
	t.Helper()
	nc, err := jsonrpc.Dial(context.Background(), "unix:"+sock)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonrpc.NewConn(context.Background(), nc, jsonrpc.Options{MaxMessageSize: 1 << 30})
	t.Cleanup(func() { c.Close() })
	return c
}

// selectRows returns the rows of table (all of them, the columns asked for).
func selectRows(t testing.TB, c *jsonrpc.Conn, db, table string, columns ...string) []map[string]json.RawMessage {
	t.Helper()
	var res []struct {
		Rows  []map[string]json.RawMessage `json:"rows"`
		Error string                       `json:"error"`
	}
	if err := c.Call(context.Background(), "transact", []any{db, map[string]any{"op": "select", "table": table, "where": []any{}, "columns": columns}}, &res); err != nil || len(res) != 1 || res[0].Error != "" {
		t.Fatalf("select %s: %v %+v", table, err, res)
	}
	return res[0].Rows
}

// TestDatapathGroupsChangedInPlace runs the daemon on the bench's cluster
// and adds a node: Logical_DP_Group rows of the sets the node joins (the
// load balancer group's switches) grow in place, which they do only once
// the daemon has told the state the UUIDs its Southbound transaction gave
// them (State.Committed).
func TestDatapathGroupsChangedInPlace(t *testing.T) {
	dir := t.TempDir()
	nb, sb := startInProcessDB(t, dir, "nb"), startInProcessDB(t, dir, "sb")
	defer nb.stop()
	defer sb.stop()
	shape := northdbench.Shape{Nodes: 3}
	loadNorthbound(t, nb.sock, 3)
	writes := make(chan LastWrite, 100)
	d, err := New(Config{NB: []string{"unix:" + nb.sock}, SB: []string{"unix:" + sb.sock},
		OnWrite: func(w LastWrite) { writes <- w }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// quiet waits until the daemon has written and then written nothing
	// for a while (its own rows come back in between).
	quiet := func() {
		t.Helper()
		wrote := false
		for {
			select {
			case w := <-writes:
				t.Logf("southbound write: %d operations", w.Ops)
				wrote = true
			case err := <-done:
				t.Fatalf("northd stopped: %v", err)
			case <-time.After(time.Second):
				if wrote {
					return
				}
			case <-time.After(60 * time.Second):
				t.Fatal("northd wrote nothing")
			}
		}
	}
	quiet()
	sbc, nbc := rpcConn(t, sb.sock), rpcConn(t, nb.sock)
	groups := func() map[string]int {
		out := map[string]int{}
		for _, r := range selectRows(t, sbc, "OVN_Southbound", "Logical_DP_Group", "_uuid", "datapaths") {
			var dps []any
			_ = json.Unmarshal(r["datapaths"], &dps)
			n := 1
			if len(dps) == 2 && dps[0] == "set" {
				n = len(dps[1].([]any))
			}
			out[string(r["_uuid"])] = n
		}
		return out
	}
	before := groups()
	var lbGroup []string
	rows := selectRows(t, nbc, "OVN_Northbound", "Load_Balancer_Group", "_uuid")
	if len(rows) != 1 || json.Unmarshal(rows[0]["_uuid"], &lbGroup) != nil || len(lbGroup) != 2 {
		t.Fatalf("load balancer groups: %v", rows)
	}
	params := []any{"OVN_Northbound"}
	for _, op := range shape.NodeAdd(3, lbGroup[1]) {
		params = append(params, op)
	}
	var res []map[string]any
	if err := nbc.Call(context.Background(), "transact", params, &res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r["error"] != nil {
			t.Fatalf("node add operation %d: %v", i, r)
		}
	}
	quiet()
	after := groups()
	// Groups of flows on several datapaths that are no set are
	// replaced when the datapaths change; the sets' own are not.
	grown := 0
	for id, n := range before {
		if after[id] > n {
			grown++
		}
	}
	if grown == 0 {
		t.Errorf("no group grew in place with the node: before %v, after %v", before, after)
	}
}
