package cluster

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func newTestStore(t *testing.T) *store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	if err := Join(path, "Test", "tcp:127.0.0.1:1", []string{"tcp:127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close() })
	return st
}

func logs(from, to, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte("x")})
	}
	return out
}

// TestDeferredSync: entries stored while deferSync says so (the leader's)
// become durable once syncLoop has fsynced them, and what a restart reads
// back includes them; a store that must overwrite entries does so
// synchronously, and the durable index follows the truncation.
func TestDeferredSync(t *testing.T) {
	st := newTestStore(t)
	if err := st.StoreLogs(logs(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	if d := st.durableIndex(); d != 3 {
		t.Fatalf("a synchronous store left the durable index at %d, want 3", d)
	}
	st.deferSync = func() bool { return true }
	if err := st.StoreLogs(logs(4, 6, 1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.waitDurable(ctx, 6); err != nil {
		t.Fatalf("waiting for the deferred fsync: %v", err)
	}
	// Overwriting 5 and 6 (a new leader's entries) is synchronous even
	// when deferring, and 5 and 6 are durable again only as rewritten.
	if err := st.StoreLogs(logs(5, 5, 2)); err != nil {
		t.Fatal(err)
	}
	if d := st.durableIndex(); d != 5 {
		t.Fatalf("after overwriting from 5 the durable index is %d, want 5", d)
	}
	var l raft.Log
	if err := st.GetLog(5, &l); err != nil || l.Term != 2 {
		t.Fatalf("entry 5: %+v, %v", l, err)
	}
	if err := st.GetLog(6, &l); err != raft.ErrLogNotFound {
		t.Fatalf("entry 6 survived the overwrite: %+v, %v", l, err)
	}
	if err := st.DeleteRange(5, 5); err != nil {
		t.Fatal(err)
	}
	if d := st.durableIndex(); d != 4 {
		t.Fatalf("after truncating from 5 the durable index is %d, want 4", d)
	}
	// Entries still being fsynced and overwritten at once: the fsync
	// under way does not count for the new ones.
	if err := st.StoreLogs(logs(5, 7, 2)); err != nil {
		t.Fatal(err)
	}
	if err := st.StoreLogs(logs(6, 6, 3)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if d := st.durableIndex(); d != 6 {
		t.Fatalf("after overwriting deferred entries from 6 the durable index is %d, want 6", d)
	}
	if err := st.DeleteRange(5, 6); err != nil {
		t.Fatal(err)
	}
	path := st.path
	st.close()
	again, err := openStore(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer again.close()
	if last, _ := again.LastIndex(); last != 4 || again.durableIndex() != 4 {
		t.Fatalf("reopened: last index %d, durable %d, want 4 and 4", last, again.durableIndex())
	}
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if err := again.waitDurable(short, 5); err == nil {
		t.Fatal("waiting for an entry that is not there succeeded")
	}
}

// TestDurableTransportClampsCommitIndex: followers learn a commit index
// no higher than the leader's durable entries.
func TestDurableTransportClampsCommitIndex(t *testing.T) {
	st := newTestStore(t)
	if err := st.StoreLogs(logs(1, 4, 1)); err != nil {
		t.Fatal(err)
	}
	tr := &durableTransport{store: st, peers: map[raft.ServerAddress]*peerCommit{}}
	for _, tc := range []struct{ commit, want uint64 }{{2, 2}, {4, 4}, {9, 4}} {
		req := &raft.AppendEntriesRequest{LeaderCommitIndex: tc.commit}
		tr.clamp("f", "addr", req)
		if req.LeaderCommitIndex != tc.want {
			t.Errorf("commit index %d sent as %d, want %d", tc.commit, req.LeaderCommitIndex, tc.want)
		}
	}
}

// TestWatchedConnSignalsEnd: a connection a peer opened says once that it
// ended, when a read fails, and not before.
func TestWatchedConnSignalsEnd(t *testing.T) {
	a, b := net.Pipe()
	ended := 0
	c := &watchedConn{Conn: a, ended: func() { ended++ }}
	go func() { b.Write([]byte("x")); b.Close() }()
	buf := make([]byte, 4)
	if n, err := c.Read(buf); n != 1 || err != nil || ended != 0 {
		t.Fatalf("first read: %d, %v; ended %d times", n, err, ended)
	}
	for range 2 {
		if _, err := c.Read(buf); err == nil {
			t.Fatal("read after the peer closed succeeded")
		}
	}
	if ended != 1 {
		t.Fatalf("ended %d times, want 1", ended)
	}
}
