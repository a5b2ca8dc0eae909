package server

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
)

// readOnlyReplica is a Replicator of a follower that never leads.
type readOnlyReplica struct{}

func (readOnlyReplica) Writable() bool { return false }
func (readOnlyReplica) Propose(ovsdb.UUID, *ovsdb.ChangeSet) (Durable, error) {
	return nil, ErrNotLeader
}
func (readOnlyReplica) Forward(context.Context, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`[{"error":"not leader"}]`), nil
}

// TestClusteredDatabaseServes: a clustered database served by a
// follower answers reads, sends writes to the leader (Forward), shows
// itself in _Server as clustered, and a client that knows the last
// transaction id it was added with resumes monitor_cond_since without a
// dump.
func TestClusteredDatabaseServes(t *testing.T) {
	s := ovsdb.MustParseSchema([]byte(`{"name":"T","version":"1.0.0","tables":{"R":{"columns":{"n":{"type":"integer"}}}}}`))
	srv := New(Options{ProbeInterval: -1})
	last := ovsdb.NewUUID()
	rep, err := srv.AddClusteredDatabase(ovsdb.NewDatabase(s), readOnlyReplica{}, ClusterStatus{SID: ovsdb.NewUUID(), CID: ovsdb.NewUUID(), Connected: true, Index: 7}, last)
	if err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.ServeConn(ctx, a)
	c := jsonrpc.New(ctx, b, jsonrpc.Options{Handler: func(context.Context, *jsonrpc.Conn, *jsonrpc.Message) {}})
	c.Start()
	defer c.Close()
	call := func(method string, params ...any) string {
		t.Helper()
		res, err := c.CallRaw(ctx, method, params)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return string(res)
	}
	if got := call("monitor_cond_since", "T", "m", map[string]any{"R": []any{map[string]any{}}}, last.String()); !strings.HasPrefix(got, `[true,"`+last.String()+`"`) {
		t.Errorf("monitor_cond_since from the last transaction: %s", got)
	}
	if got := call("transact", "T", map[string]any{"op": "insert", "table": "R", "row": map[string]any{"n": 1}}); got != `[{"error":"not leader"}]` {
		t.Errorf("a write on a follower was not forwarded: %s", got)
	}
	if got := call("transact", "T", map[string]any{"op": "select", "table": "R", "where": []any{}}); got != `[{"rows":[]}]` {
		t.Errorf("a read on a follower: %s", got)
	}
	got := call("transact", "_Server", map[string]any{"op": "select", "table": "Database", "where": []any{[]any{"name", "==", "T"}}, "columns": []string{"model", "leader", "connected", "index"}})
	if got != `[{"rows":[{"model":"clustered","leader":false,"connected":true,"index":7}]}]` {
		t.Errorf("_Server row: %s", got)
	}
	if err := rep.SetStatus(ClusterStatus{Leader: true, Connected: true, Index: 9}); err != nil {
		t.Fatal(err)
	}
	got = call("transact", "_Server", map[string]any{"op": "select", "table": "Database", "where": []any{[]any{"name", "==", "T"}}, "columns": []string{"leader", "index"}})
	if got != `[{"rows":[{"leader":true,"index":9}]}]` {
		t.Errorf("_Server row after SetStatus: %s", got)
	}
}
