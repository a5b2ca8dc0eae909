package client

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

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
	t      *testing.T
	db     string
	socket string
	cancel context.CancelFunc
	done   chan struct{}
}

func startGovnServer(t *testing.T, schema string) *govnServer {
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
	go func() {
		defer close(s.done)
		defer log.Close()
		defer l.Close()
		go func() { <-ctx.Done(); l.Close() }()
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			// server.ServeConn stores the jsonrpc.Conn only after NewConn
			// has started reading, and its handler reads that field: hold
			// the connection's reads until ServeConn has returned.
			g := &gatedConn{Conn: nc, open: make(chan struct{})}
			srv.ServeConn(ctx, g)
			close(g.open)
		}
	}()
}

// gatedConn blocks reads until open is closed.
type gatedConn struct {
	net.Conn
	open chan struct{}
}

func (g *gatedConn) Read(p []byte) (int, error) {
	<-g.open
	return g.Conn.Read(p)
}

func (s *govnServer) Stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
		s.cancel = nil
		os.Remove(s.socket)
	}
}
