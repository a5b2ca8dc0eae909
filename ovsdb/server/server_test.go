package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
)

const testSchema = `{
  "name": "Test",
  "version": "1.0.0",
  "tables": {
    "Box": {
      "isRoot": true,
      "columns": {
        "name": {"type": "string"},
        "n": {"type": {"key": "integer", "min": 0, "max": 1}},
        "tags": {"type": {"key": "string", "min": 0, "max": "unlimited"}},
        "opts": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}}
      },
      "indexes": [["name"]]
    }
  }
}`

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startServer serves a fresh Test database on a unix socket in a temporary
// directory and returns the socket path.
func startServer(t *testing.T, log Log) (*Server, string) {
	t.Helper()
	return startServerWith(t, log, func(l net.Listener) net.Listener { return l })
}

// startServerWith is startServer serving on wrap's replacement for the
// listener.
func startServerWith(t *testing.T, log Log, wrap func(net.Listener) net.Listener) (*Server, string) {
	t.Helper()
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
	if err := srv.AddDatabase(ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(testSchema))), log); err != nil {
		t.Fatal(err)
	}
	return srv, serve(t, srv, wrap)
}

// serve serves srv on a unix socket in a temporary directory, through
// wrap's replacement for the listener (nil: as it is), until the test
// ends, and returns the socket path.
func serve(t *testing.T, srv *Server, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "db.sock")
	ctx, cancel := context.WithCancel(context.Background())
	l, err := Listen(ctx, "punix:"+sock)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if wrap != nil {
		l = wrap(l)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return sock
}

// client is a test client that records notifications.
type client struct {
	t     *testing.T
	conn  *jsonrpc.Conn
	notes chan *jsonrpc.Message
}

func dial(t *testing.T, sock string) *client {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, notes: make(chan *jsonrpc.Message, 100)}
	c.conn = jsonrpc.NewConn(context.Background(), nc, jsonrpc.Options{Logger: quietLogger(), Handler: func(ctx context.Context, conn *jsonrpc.Conn, m *jsonrpc.Message) {
		if m.ID != nil && m.Method == "echo" {
			conn.Reply(m.ID, m.Params)
			return
		}
		c.notes <- m
	}})
	t.Cleanup(func() { c.conn.Close() })
	return c
}

func (c *client) call(method string, params string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := c.conn.CallRaw(ctx, method, json.RawMessage(params))
	if err != nil {
		return "ERROR " + err.Error()
	}
	return string(raw)
}

func (c *client) note() *jsonrpc.Message {
	c.t.Helper()
	select {
	case m := <-c.notes:
		return m
	case <-time.After(5 * time.Second):
		c.t.Fatal("no notification")
		return nil
	}
}

func (c *client) noNote() {
	c.t.Helper()
	select {
	case m := <-c.notes:
		c.t.Fatalf("unexpected notification %s %s", m.Method, m.Params)
	case <-time.After(50 * time.Millisecond):
	}
}

func mustContain(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Fatalf("%s\ndoes not contain %s", got, w)
		}
	}
}

func TestBasicMethods(t *testing.T) {
	_, sock := startServer(t, nil)
	c := dial(t, sock)
	if got := c.call("list_dbs", `[]`); got != `["Test","_Server"]` {
		t.Fatalf("list_dbs: %s", got)
	}
	mustContain(t, c.call("get_schema", `["Test"]`), `"name":"Test"`)
	mustContain(t, c.call("get_schema", `["Nope"]`), "unknown database")
	if got := c.call("echo", `["x",1]`); got != `["x",1]` {
		t.Fatalf("echo: %s", got)
	}
	mustContain(t, c.call("frob", `[]`), "unknown method")
	mustContain(t, c.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"a","n":1}}]`), `"uuid":["uuid"`)
	mustContain(t, c.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"a"}}]`), "constraint violation")
	mustContain(t, c.call("transact", `["Test",{"op":"select","table":"Box","where":[["n","==",1]],"columns":["name"]}]`), `[{"rows":[{"name":"a"}]}]`)
	mustContain(t, c.call("transact", `["_Server",{"op":"delete","table":"Database","where":[]}]`), "not allowed")
	// _Server describes the database as a standalone, connected leader.
	mustContain(t, c.call("transact", `["_Server",{"op":"select","table":"Database","where":[["name","==","Test"]],"columns":["model","connected","leader"]}]`),
		`"model":"standalone"`, `"connected":true`, `"leader":true`)
}

func TestMonitorCond(t *testing.T) {
	_, sock := startServer(t, nil)
	w := dial(t, sock)
	c := dial(t, sock)
	c.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"a","n":1}},{"op":"insert","table":"Box","row":{"name":"b","n":2}}]`)
	init := w.call("monitor_cond", `["Test","m1",{"Box":[{"columns":["name","n","tags"],"where":[["n","<=",1]]}]}]`)
	mustContain(t, init, `"initial":{"n":1,"name":"a"}`)
	if strings.Contains(init, `"b"`) {
		t.Fatalf("initial has a row outside the condition: %s", init)
	}
	// A change the monitor sees arrives as update2 with a diff.
	c.call("transact", `["Test",{"op":"mutate","table":"Box","where":[["name","==","a"]],"mutations":[["tags","insert",["set",["x","y"]]]]}]`)
	m := w.note()
	if m.Method != "update2" {
		t.Fatalf("got %s", m.Method)
	}
	mustContain(t, string(m.Params), `"m1"`, `"modify":{"tags":["set",["x","y"]]}`)
	// Changes to rows outside the condition are not sent.
	c.call("transact", `["Test",{"op":"update","table":"Box","where":[["name","==","b"]],"row":{"n":3}}]`)
	w.noNote()
	// A row moving into the condition is an insert.
	c.call("transact", `["Test",{"op":"update","table":"Box","where":[["name","==","b"]],"row":{"n":0}}]`)
	mustContain(t, string(w.note().Params), `"insert":{"n":0,"name":"b"}`)
	// Changing the condition sends the rows that enter and leave, before the reply.
	if got := w.call("monitor_cond_change", `["m1","m2",{"Box":[{"where":[["name","==","a"]]}]}]`); got != "{}" {
		t.Fatalf("monitor_cond_change: %s", got)
	}
	p := string(w.note().Params)
	mustContain(t, p, `"m2"`, `"delete":null`)
	// The session's own transaction: update before reply.
	reply := w.call("transact", `["Test",{"op":"delete","table":"Box","where":[["name","==","a"]]}]`)
	mustContain(t, reply, `{"count":1}`)
	select {
	case m := <-w.notes:
		mustContain(t, string(m.Params), `"delete":null`)
	default:
		t.Fatal("the update for the client's own transaction must arrive before the reply")
	}
	mustContain(t, w.call("monitor_cancel", `["m2"]`), "{}")
	mustContain(t, w.call("monitor_cancel", `["m2"]`), "unknown monitor")
}

func TestMonitorV1(t *testing.T) {
	_, sock := startServer(t, nil)
	w := dial(t, sock)
	w.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"a"}}]`)
	mustContain(t, w.call("monitor", `["Test",null,{"Box":{"columns":["name","n"]}}]`), `"new":{"n":["set",[]],"name":"a"}`)
	w.call("transact", `["Test",{"op":"update","table":"Box","where":[],"row":{"n":5}}]`)
	mustContain(t, string(w.note().Params), `"old":{"n":["set",[]]}`, `"new":{"n":5,"name":"a"}`)
}

func TestMonitorCondSince(t *testing.T) {
	_, sock := startServer(t, nil)
	c := dial(t, sock)
	got := c.call("monitor_cond_since", `["Test","s",{"Box":[{"columns":["name"]}]},"00000000-0000-0000-0000-000000000000"]`)
	if !strings.HasPrefix(got, `[false,"`) {
		t.Fatalf("fresh monitor_cond_since: %s", got)
	}
	c.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"a"}}]`)
	m := c.note()
	if m.Method != "update3" {
		t.Fatalf("got %s", m.Method)
	}
	var params []any
	json.Unmarshal(m.Params, &params)
	last := params[1].(string)
	c.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"b"}}]`)
	c.note()
	// Resume from "last": only what came after it, with found=true.
	d := dial(t, sock)
	got = d.call("monitor_cond_since", `["Test","s",{"Box":[{"columns":["name"]}]},"`+last+`"]`)
	if !strings.HasPrefix(got, `[true,"`) || !strings.Contains(got, `"insert":{"name":"b"}`) || strings.Contains(got, `"a"`) {
		t.Fatalf("resume: %s", got)
	}
	// An unknown id gives the whole table.
	e := dial(t, sock)
	got = e.call("monitor_cond_since", `["Test","s",{"Box":[{"columns":["name"]}]},"`+ovsdb.NewUUID().String()+`"]`)
	mustContain(t, got, `[false,"`, `"initial":{"name":"a"}`, `"initial":{"name":"b"}`)
}

func TestLocks(t *testing.T) {
	_, sock := startServer(t, nil)
	a, b := dial(t, sock), dial(t, sock)
	if got := a.call("lock", `["L"]`); got != `{"locked":true}` {
		t.Fatalf("lock: %s", got)
	}
	if got := b.call("lock", `["L"]`); got != `{"locked":false}` {
		t.Fatalf("second lock: %s", got)
	}
	mustContain(t, a.call("transact", `["Test",{"op":"assert","lock":"L"}]`), `[{}]`)
	mustContain(t, b.call("transact", `["Test",{"op":"assert","lock":"L"}]`), "not owner")
	a.call("unlock", `["L"]`)
	if m := b.note(); m.Method != "locked" {
		t.Fatalf("b got %s", m.Method)
	}
	if got := a.call("steal", `["L"]`); got != `{"locked":true}` {
		t.Fatalf("steal: %s", got)
	}
	if m := b.note(); m.Method != "stolen" {
		t.Fatalf("b got %s", m.Method)
	}
	// A session that goes away releases its locks.
	b.call("lock", `["L"]`)
	a.conn.Close()
	if m := b.note(); m.Method != "locked" {
		t.Fatalf("b got %s after a closed", m.Method)
	}
}

func TestWaitBlocksUntilCommit(t *testing.T) {
	_, sock := startServer(t, nil)
	a, b := dial(t, sock), dial(t, sock)
	res := make(chan string, 1)
	go func() {
		res <- a.call("transact", `["Test",{"op":"wait","table":"Box","where":[],"columns":["name"],"until":"==","rows":[{"name":"x"}],"timeout":5000},{"op":"insert","table":"Box","row":{"name":"y"}}]`)
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case r := <-res:
		t.Fatalf("wait returned early: %s", r)
	default:
	}
	b.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"x"}}]`)
	select {
	case r := <-res:
		mustContain(t, r, `[{},{"uuid"`)
	case <-time.After(3 * time.Second):
		t.Fatal("wait did not finish after the commit that satisfied it")
	}
	// Without a timeout the wait survives commits that do not satisfy it.
	go func() {
		res <- a.call("transact", `["Test",{"op":"wait","table":"Box","where":[["name","==","z"]],"columns":["name"],"until":"!=","rows":[]}]`)
	}()
	time.Sleep(30 * time.Millisecond)
	b.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"unrelated"}}]`)
	b.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"other"}}]`)
	select {
	case r := <-res:
		t.Fatalf("wait without timeout returned early: %s", r)
	case <-time.After(30 * time.Millisecond):
	}
	b.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"z"}}]`)
	select {
	case r := <-res:
		mustContain(t, r, `[{}]`)
	case <-time.After(3 * time.Second):
		t.Fatal("wait without timeout never finished")
	}
	// A short timeout expires with "timed out".
	mustContain(t, a.call("transact", `["Test",{"op":"wait","table":"Box","where":[],"columns":["name"],"until":"==","rows":[],"timeout":20}]`), "timed out")
}

func TestBadInputKeepsServing(t *testing.T) {
	_, sock := startServer(t, nil)
	good := dial(t, sock)
	for _, junk := range []string{"}{not json", `{"method":"transact","params":"x","id":1}`, `[1,2,3]`} {
		nc, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write([]byte(junk))
		nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.ReadAll(nc)
		nc.Close()
	}
	bad := dial(t, sock)
	mustContain(t, bad.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":5}}]`), "syntax error")
	mustContain(t, bad.call("transact", `[]`), "syntax error")
	mustContain(t, bad.call("monitor_cond", `["Test",1,{"Nope":{}}]`), "syntax error")
	if got := good.call("list_dbs", `[]`); got != `["Test","_Server"]` {
		t.Fatalf("server stopped serving others: %s", got)
	}
}

func TestHistoryBounds(t *testing.T) {
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1, HistoryLength: 3, HistoryRows: 5})
	srv.AddDatabase(ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(testSchema))), nil)
	d := srv.database("Test")
	commit := func(n int) {
		ops := `[`
		for i := 0; i < n; i++ {
			if i > 0 {
				ops += ","
			}
			ops += `{"op":"insert","table":"Box","row":{"name":"` + ovsdb.NewUUID().String() + `"}}`
		}
		v, _ := ovsdb.DecodeJSON([]byte(ops + "]"))
		d.mu.Lock()
		defer d.unlock()
		if _, err := d.commitLocked(d.db.Transact(v.([]any), ovsdb.TxnOptions{}).Changes); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		commit(1)
	}
	if len(d.history) != 3 {
		t.Fatalf("history has %d commits, want 3", len(d.history))
	}
	commit(4)
	if len(d.history) != 2 || d.historyRows != 5 {
		t.Fatalf("history has %d commits of %d rows, want 2 of 5", len(d.history), d.historyRows)
	}
	commit(6)
	if len(d.history) != 0 || d.historyRows != 0 {
		t.Fatalf("a commit larger than the bound must leave the history empty, got %d", len(d.history))
	}
}

// failingListener fails its first Accept as a process out of descriptors
// does, then accepts normally.
type failingListener struct {
	net.Listener
	failed bool
}

func (l *failingListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// Running out of file descriptors for a moment must not stop the server
// accepting connections for good.
func TestServeSurvivesEMFILE(t *testing.T) {
	_, sock := startServerWith(t, nil, func(l net.Listener) net.Listener { return &failingListener{Listener: l} })
	c := dial(t, sock)
	if got := c.call("list_dbs", `[]`); got != `["Test","_Server"]` {
		t.Fatalf("after EMFILE, list_dbs gave %s", got)
	}
}

// monitor_cond_change may not take the ID of another monitor of the
// session, which would then be lost to monitor_cancel and session close.
func TestMonitorCondChangeDuplicateID(t *testing.T) {
	_, sock := startServer(t, nil)
	w := dial(t, sock)
	for _, id := range []string{"a", "b"} {
		mustContain(t, w.call("monitor_cond", `["Test","`+id+`",{"Box":[{"columns":["name"]}]}]`), "{}")
	}
	mustContain(t, w.call("monitor_cond_change", `["b","a",{"Box":[{"where":[["name","==","x"]]}]}]`), "duplicate new monitor ID")
	mustContain(t, w.call("monitor_cond_change", `["b","b",{"Box":[{"where":[["name","==","x"]]}]}]`), "{}")
	mustContain(t, w.call("monitor_cancel", `["a"]`), "{}")
	mustContain(t, w.call("monitor_cancel", `["b"]`), "{}")
}

// Blocked transactions that reuse a request id must all be released when
// their session ends; otherwise they stay queued, retried on every commit.
func TestBlockedWaitsWithSameIDReleased(t *testing.T) {
	srv, sock := startServer(t, nil)
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	wait := `{"method":"transact","id":7,"params":["Test",{"op":"wait","table":"Box","where":[],"columns":["name"],"until":"==","rows":[{"name":"x"}]}]}`
	if _, err := nc.Write([]byte(wait + wait + `{"method":"echo","id":8,"params":[]}`)); err != nil {
		t.Fatal(err)
	}
	// Requests are handled in order: the echo's reply means both waits
	// are queued.
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	dec := json.NewDecoder(nc)
	for {
		var m struct{ ID json.RawMessage }
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if string(m.ID) == "8" {
			break
		}
	}
	d := srv.database("Test")
	blocked := func() int {
		d.mu.Lock()
		defer d.unlock()
		return len(d.blocked)
	}
	if n := blocked(); n != 2 {
		t.Fatalf("%d blocked transactions, want 2", n)
	}
	nc.Close()
	for deadline := time.Now().Add(5 * time.Second); blocked() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d blocked transactions outlive their session", blocked())
		}
	}
}
