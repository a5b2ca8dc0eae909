package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb/jsonrpc"
	"github.com/govn/govn/ovsdb/server"
)

const testSchema = `{"name": "T", "version": "1.0.0", "tables": {
  "R": {"columns": {"name": {"type": "string"}, "n": {"type": "integer"},
                    "e": {"type": "string", "ephemeral": true}}, "isRoot": true}}}`

// testMember is one running member of a test cluster.
type testMember struct {
	path string
	srv  *server.Server
	node *Node
	ctx  context.Context
	stop context.CancelFunc
}

type testCluster struct {
	t       *testing.T
	dir     string
	members []*testMember
	opts    Options
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "tcp:" + l.Addr().String()
}

func quietLogger(t *testing.T) *slog.Logger {
	if os.Getenv("CLUSTER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newCluster creates and starts n members: the first with create-cluster,
// the others with join-cluster.
func newCluster(t *testing.T, n int, opts Options) *testCluster {
	c := &testCluster{t: t, dir: t.TempDir(), opts: opts}
	if c.opts.Logger == nil {
		c.opts.Logger = quietLogger(t)
	}
	first := freeAddr(t)
	for i := 0; i < n; i++ {
		path := filepath.Join(c.dir, fmt.Sprintf("s%d.db", i))
		var err error
		if i == 0 {
			err = Create(path, []byte(testSchema), first)
		} else {
			err = Join(path, "T", freeAddr(t), []string{first})
		}
		if err != nil {
			t.Fatal(err)
		}
		c.members = append(c.members, &testMember{path: path})
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.stopMember(i)
		}
	})
	c.waitServed()
	return c
}

// waitServed waits until every running member serves the database.
func (c *testCluster) waitServed() {
	c.t.Helper()
	waitFor(c.t, "every member to serve the database", 20*time.Second, func() bool {
		for _, m := range c.members {
			if m.node != nil && m.node.rep.Load() == nil {
				return false
			}
		}
		return true
	})
}

func (c *testCluster) start(i int) {
	c.t.Helper()
	m := c.members[i]
	m.srv = server.New(server.Options{Logger: c.opts.Logger, ProbeInterval: -1})
	m.ctx, m.stop = context.WithCancel(context.Background())
	node, err := Start(m.ctx, m.path, m.srv, c.opts)
	if err != nil {
		c.t.Fatalf("starting member %d: %v", i, err)
	}
	m.node = node
}

func (c *testCluster) stopMember(i int) {
	m := c.members[i]
	if m.node == nil {
		return
	}
	m.node.Close()
	m.stop()
	m.node = nil
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leader waits for a member that takes writes and returns its index.
func (c *testCluster) leader() int {
	c.t.Helper()
	found := -1
	waitFor(c.t, "a leader", 20*time.Second, func() bool {
		for i, m := range c.members {
			if m.node == nil || m.node.rep.Load() == nil {
				continue
			}
			w := false
			m.node.rep.Load().Do(func() { w = m.node.Writable() })
			if w {
				found = i
				return true
			}
		}
		return false
	})
	return found
}

// conn opens a JSON-RPC session to member i's server.
func (c *testCluster) conn(i int) *jsonrpc.Conn {
	a, b := net.Pipe()
	m := c.members[i]
	m.srv.ServeConn(m.ctx, a)
	conn := jsonrpc.New(context.Background(), b, jsonrpc.Options{Handler: func(context.Context, *jsonrpc.Conn, *jsonrpc.Message) {}})
	conn.Start()
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

func rpc(t *testing.T, conn *jsonrpc.Conn, method string, params ...any) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := conn.CallRaw(ctx, method, params)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return res
}

func insert(t *testing.T, conn *jsonrpc.Conn, name string, n int) {
	t.Helper()
	res := rpc(t, conn, "transact", "T", map[string]any{"op": "insert", "table": "R", "row": map[string]any{"name": name, "n": n, "e": "eph-" + name}})
	if strings.Contains(string(res), "error") {
		t.Fatalf("insert %s: %s", name, res)
	}
}

// names returns the names of member i's rows, sorted, read from its own
// copy.
func (c *testCluster) names(i int) string {
	m := c.members[i]
	rep := m.node.rep.Load()
	if rep == nil {
		return ""
	}
	var out []string
	rep.Do(func() {
		db := rep.DatabaseLocked()
		ts := db.Schema.Table("R")
		for _, r := range db.Table("R").Rows {
			j := func(col string) string { c := ts.Column(col); return string(r.Get(c).AppendJSON(nil, &c.Type)) }
			out = append(out, j("name")+"="+j("n")+"/"+j("e"))
		}
	})
	sortStrings(out)
	return strings.Join(out, " ")
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func (c *testCluster) waitSame(want string) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got []string
		ok := true
		for i, m := range c.members {
			if m.node != nil {
				n := c.names(i)
				got = append(got, n)
				ok = ok && n == want
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for every member to hold %s; they hold %q", want, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestClusterReplicatesAndForwards(t *testing.T) {
	c := newCluster(t, 3, Options{})
	l := c.leader()
	f := (l + 1) % 3
	insert(t, c.conn(l), "a", 1)
	insert(t, c.conn(f), "b", 2) // forwarded to the leader
	c.waitSame(`"a"=1/"eph-a" "b"=2/"eph-b"`)

	// A follower's reply comes once it has applied the commit itself.
	fc := c.conn(f)
	insert(t, fc, "c", 3)
	if got := c.names(f); !strings.Contains(got, `"c"`) {
		t.Errorf("follower replied before applying its forwarded commit: %s", got)
	}

	// _Server.Database: clustered, one leader, all connected (a joined
	// member once the join's reply told it the cluster id).
	var rows []map[string]any
	ok := func() bool {
		rows = nil
		leaders, connected := 0, 0
		for i := range c.members {
			res := rpc(t, c.conn(i), "transact", "_Server", map[string]any{"op": "select", "table": "Database", "where": []any{[]any{"name", "==", "T"}}})
			var out []struct {
				Rows []map[string]any `json:"rows"`
			}
			if err := json.Unmarshal(res, &out); err != nil || len(out) != 1 || len(out[0].Rows) != 1 {
				t.Fatalf("member %d: _Server select: %s", i, res)
			}
			row := out[0].Rows[0]
			rows = append(rows, row)
			if row["model"] == "clustered" && row["connected"] == true {
				connected++
			}
			if row["leader"] == true {
				leaders++
			}
		}
		return leaders == 1 && connected == len(c.members)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("_Server rows, want all clustered and connected and one leader: %v", rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(c.members[l].node.Status(), "Role: leader") {
		t.Errorf("cluster/status of the leader:\n%s", c.members[l].node.Status())
	}
}

func TestClusterFailoverAndRestart(t *testing.T) {
	c := newCluster(t, 3, Options{})
	l := c.leader()
	insert(t, c.conn(l), "a", 1)
	c.waitSame(`"a"=1/"eph-a"`)
	c.stopMember(l)
	nl := c.leader()
	if nl == l {
		t.Fatal("the stopped member still leads")
	}
	insert(t, c.conn(nl), "b", 2)
	// The old leader restarts from its file and catches up.
	c.start(l)
	c.waitSame(`"a"=1/"eph-a" "b"=2/"eph-b"`)
}

func TestClusterSnapshotCompactsAndNewMemberCatchesUp(t *testing.T) {
	c := newCluster(t, 2, Options{SnapshotThreshold: 20, SnapshotInterval: 100 * time.Millisecond, TrailingLogs: 5})
	l := c.leader()
	conn := c.conn(l)
	var want []string
	for i := 0; i < 60; i++ {
		insert(t, conn, fmt.Sprintf("r%02d", i), i)
		want = append(want, fmt.Sprintf(`"r%02d"=%d/"eph-r%02d"`, i, i, i))
	}
	sortStrings(want)
	c.waitSame(strings.Join(want, " "))
	waitFor(t, "a snapshot that compacts the log", 20*time.Second, func() bool {
		first, _ := c.members[l].node.store.FirstIndex()
		return first > 10
	})
	// A third member joins after compaction: it gets a snapshot.
	path := filepath.Join(c.dir, "s2.db")
	if err := Join(path, "T", freeAddr(t), []string{c.members[0].node.local}); err != nil {
		t.Fatal(err)
	}
	c.members = append(c.members, &testMember{path: path})
	c.start(2)
	c.waitServed()
	c.waitSame(strings.Join(want, " "))
	// Every member restarts from its compacted file.
	for i := range c.members {
		c.stopMember(i)
	}
	for i := range c.members {
		c.start(i)
	}
	c.leader()
	c.waitSame(strings.Join(want, " "))
}

func TestMonitorCondSinceResumesOnAnotherMember(t *testing.T) {
	c := newCluster(t, 3, Options{})
	l := c.leader()
	f := (l + 1) % 3
	insert(t, c.conn(l), "a", 1)
	c.waitSame(`"a"=1/"eph-a"`)
	// A monitor on one member learns the last transaction id ...
	res := rpc(t, c.conn(f), "monitor_cond_since", "T", "m", map[string]any{"R": []any{map[string]any{"columns": []string{"name"}}}}, "00000000-0000-0000-0000-000000000000")
	var out []json.RawMessage
	if err := json.Unmarshal(res, &out); err != nil || len(out) != 3 {
		t.Fatalf("monitor_cond_since: %s", res)
	}
	var last string
	json.Unmarshal(out[1], &last)
	// ... and resumes from it on another member without a full dump.
	insert(t, c.conn(l), "b", 2)
	c.waitSame(`"a"=1/"eph-a" "b"=2/"eph-b"`)
	other := (l + 2) % 3
	res = rpc(t, c.conn(other), "monitor_cond_since", "T", "m", map[string]any{"R": []any{map[string]any{"columns": []string{"name"}}}}, last)
	if err := json.Unmarshal(res, &out); err != nil || len(out) != 3 {
		t.Fatalf("monitor_cond_since: %s", res)
	}
	if string(out[0]) != "true" {
		t.Fatalf("monitor_cond_since from %s on another member: not found: %s", last, res)
	}
	if strings.Contains(string(out[2]), `"a"`) || !strings.Contains(string(out[2]), `"b"`) {
		t.Errorf("resumed monitor got %s, want only b", out[2])
	}
}

func TestRollbackOfUncommittedTransactions(t *testing.T) {
	// A leader cut off from its followers applies a transaction that
	// never commits; once it steps down it rolls the transaction back.
	c := newCluster(t, 3, Options{})
	l := c.leader()
	insert(t, c.conn(l), "a", 1)
	c.waitSame(`"a"=1/"eph-a"`)
	for i := range c.members {
		if i != l {
			c.stopMember(i)
		}
	}
	conn := c.conn(l)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := conn.CallRaw(ctx, "transact", []any{"T", map[string]any{"op": "insert", "table": "R", "row": map[string]any{"name": "lost"}}})
	if err == nil && !strings.Contains(string(res), "error") {
		t.Fatalf("a transaction without a majority succeeded: %s", res)
	}
	waitFor(t, "the rollback", 10*time.Second, func() bool { return c.names(l) == `"a"=1/"eph-a"` })
}

func TestRestartedMemberServesItsCommittedLog(t *testing.T) {
	// A member restarted alone (no majority to learn the commit index
	// from) serves what its own file says was committed.
	c := newCluster(t, 3, Options{})
	l := c.leader()
	conn := c.conn(l)
	insert(t, conn, "a", 1)
	insert(t, conn, "b", 2)
	// A file learns the commit index with the entries written after
	// (raft tells a follower with the next entries it sends).
	for i := 0; i < 4; i++ {
		insert(t, conn, fmt.Sprintf("pad%d", i), 0)
	}
	c.waitSame(`"a"=1/"eph-a" "b"=2/"eph-b" "pad0"=0/"eph-pad0" "pad1"=0/"eph-pad1" "pad2"=0/"eph-pad2" "pad3"=0/"eph-pad3"`)
	for i := range c.members {
		c.stopMember(i)
	}
	f := (l + 1) % 3
	c.start(f)
	c.waitServed()
	var got string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got = c.names(f); strings.Contains(got, `"a"=1`) && strings.Contains(got, `"b"=2`) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(got, `"a"=1`) || !strings.Contains(got, `"b"=2`) {
		st := c.members[f].node.store
		first, _ := st.FirstIndex()
		last, _ := st.LastIndex()
		ci, _ := st.GetCommitIndex()
		t.Fatalf("member restarted alone holds %q, want at least a and b (log %d-%d, commit index %d)", got, first, last, ci)
	}
}
