package server

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
)

// TestInactivityProbe checks that a silent peer gets an "echo" and, when
// it does not answer, is disconnected, while an answering peer stays.
func TestInactivityProbe(t *testing.T) {
	srv := New(Options{Logger: quietLogger(), ProbeInterval: 200 * time.Millisecond})
	srv.AddDatabase(ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(testSchema))), nil)
	sock := filepath.Join(t.TempDir(), "db.sock")
	ctx, cancel := context.WithCancel(context.Background())
	l, err := Listen(ctx, "punix:"+sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	alive := dial(t, sock) // answers echo requests
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(nc)
	if err != nil {
		t.Fatalf("silent peer was not disconnected: %v (read %q)", err, got)
	}
	if !strings.Contains(string(got), `"method":"echo"`) {
		t.Fatalf("silent peer got %q, want an echo request before the hang-up", got)
	}
	if r := alive.call("list_dbs", `[]`); !strings.Contains(r, "Test") {
		t.Fatalf("answering peer lost: %s", r)
	}
}
