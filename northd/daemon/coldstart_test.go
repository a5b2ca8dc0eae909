package daemon

import (
	"context"
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
