package client

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/server"
)

// testServer is an OVSDB server the client tests run against.
type testServer interface {
	Socket() string
	Stop()
	Start()
}

// eachServer runs f against the real ovsdb-server (skipped if missing) and
// against govn's server, each serving a fresh database of schema.
func eachServer(t *testing.T, schema string, f func(t *testing.T, srv testServer)) {
	t.Run("ovsdb-server", func(t *testing.T) { f(t, startOvsdbServer(t, schema)) })
	t.Run("govn", func(t *testing.T) { f(t, startGovnServer(t, schema)) })
}

// govnServer is govn's OVSDB server running in the test process on a
// database file in a temp dir.
type govnServer struct {
	t      testing.TB
	db     string
	socket string
	cancel context.CancelFunc
	done   chan struct{}
}

func startGovnServer(t testing.TB, schema string) *govnServer {
	t.Helper()
	dir := t.TempDir()
	s := &govnServer{t: t, db: filepath.Join(dir, "test.db"), socket: filepath.Join(dir, "db.sock")}
	if err := server.CreateFile(s.db, []byte(schema)); err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

func (s *govnServer) Socket() string { return s.socket }

func (s *govnServer) Start() {
	s.t.Helper()
	logger := slog.New(slog.DiscardHandler)
	db, log, err := server.OpenFile(s.db, logger)
	if err != nil {
		s.t.Fatal(err)
	}
	srv := server.New(server.Options{Logger: logger})
	if err := srv.AddDatabase(db, log); err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := server.Listen(ctx, "punix:"+s.socket)
	if err != nil {
		cancel()
		s.t.Fatal(err)
	}
	s.cancel, s.done = cancel, make(chan struct{})
	served := serve(ctx, srv, l)
	go func() {
		defer close(s.done)
		defer log.Close()
		<-served
	}()
}

// serve serves connections from l with srv until ctx ends, and
// closes the returned channel when done.
func serve(ctx context.Context, srv *server.Server, l net.Listener) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, l)
	}()
	return done
}

func (s *govnServer) Stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
		s.cancel = nil
		os.Remove(s.socket)
	}
}

// TestTCPAndEndpointRotation connects over TCP, trying a dead endpoint
// first: the client must move on to the next one.
func TestTCPAndEndpointRotation(t *testing.T) {
	dir := t.TempDir()
	dbFile := filepath.Join(dir, "test.db")
	if err := server.CreateFile(dbFile, []byte(testSchema)); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	db, log, err := server.OpenFile(dbFile, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	srv := server.New(server.Options{Logger: logger})
	if err := srv.AddDatabase(db, log); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	l, err := server.Listen(ctx, "ptcp:0:127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	done := serve(ctx, srv, l)
	defer func() { cancel(); <-done }()

	connectCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	c, err := Connect(connectCtx, Options{
		Endpoints:  []string{"unix:" + filepath.Join(dir, "nobody-here.sock"), "tcp:" + l.Addr().String()},
		Database:   "Test",
		MinBackoff: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Transact(ctx, Operation{Op: "insert", Table: "Switch", Row: map[string]ovsdb.Datum{"name": str("over-tcp")}}); err != nil {
		t.Fatal(err)
	}
	if c.Cache().Len("Switch") != 1 {
		t.Error("insert over TCP not in the cache")
	}
}

// TestSchemaChange reconnects to a server whose schema has changed (a new
// column): the client drops the old rows, loads the new ones under the new
// schema and reports both.
func TestSchemaChange(t *testing.T) {
	srv := startGovnServer(t, testSchema)
	var rec recorder
	c := connect(t, srv.Socket(), Options{OnChange: rec.record, Indexes: map[string][]string{"Switch": {"name"}}})
	ctx := t.Context()
	if _, err := c.Transact(ctx, Operation{Op: "insert", Table: "Switch", Row: map[string]ovsdb.Datum{"name": str("old")}}); err != nil {
		t.Fatal(err)
	}
	rec.take(c.Cache().Schema())

	// Restart on a new database file whose Switch has one more column.
	srv.Stop()
	newSchema := strings.Replace(testSchema, `"counter": {"type": "integer"}`, `"counter": {"type": "integer"}, "extra": {"type": "string"}`, 1)
	srv.db = filepath.Join(t.TempDir(), "new.db")
	if err := server.CreateFile(srv.db, []byte(newSchema)); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	other := connect(t, srv.Socket(), Options{})
	if _, err := other.Transact(ctx, Operation{Op: "insert", Table: "Switch", Row: map[string]ovsdb.Datum{"name": str("new"), "extra": str("x")}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(c.Cache().Lookup("Switch", "name", str("new"))) == 1 })
	s := c.Cache().Schema()
	if s.Tables["Switch"].Column("extra") == nil {
		t.Fatal("cache kept the old schema")
	}
	if len(c.Cache().Lookup("Switch", "name", str("old"))) != 0 || c.Cache().Len("Switch") != 1 {
		t.Errorf("old rows remain: %d rows", c.Cache().Len("Switch"))
	}
	rows := c.Cache().Rows("Switch")
	if got, _ := c.Cache().Get("Switch", rows[0].UUID, "extra"); !got.Equal(str("x")) {
		t.Errorf("extra = %v", got)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var kinds []string
	for _, cs := range rec.sets {
		for _, e := range cs.Events {
			kinds = append(kinds, e.Kind.String())
		}
	}
	if !slices.Contains(kinds, "delete") || !slices.Contains(kinds, "insert") {
		t.Errorf("events after the schema change: %v", kinds)
	}
}
