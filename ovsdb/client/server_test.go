package client

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
)

// testSchema exercises scalars, optional values, sets, maps and references.
const testSchema = `{
  "name": "Test", "version": "1.0.0",
  "tables": {
    "Switch": {
      "columns": {
        "name": {"type": "string"},
        "ports": {"type": {"key": {"type": "uuid", "refTable": "Port"}, "min": 0, "max": "unlimited"}},
        "external_ids": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}},
        "tag": {"type": {"key": {"type": "integer", "minInteger": 0, "maxInteger": 4095}, "min": 0, "max": 1}},
        "counter": {"type": "integer"}
      },
      "isRoot": true,
      "indexes": [["name"]]
    },
    "Port": {
      "columns": {
        "name": {"type": "string"},
        "addresses": {"type": {"key": "string", "min": 0, "max": "unlimited"}}
      },
      "isRoot": false
    }
  }
}`

// ovsdbServer is a real ovsdb-server on a unix socket in a temp dir.
type ovsdbServer struct {
	t      *testing.T
	dir    string
	db     string
	socket string
	cmd    *exec.Cmd
}

func startOvsdbServer(t *testing.T, schema string) *ovsdbServer {
	t.Helper()
	for _, bin := range []string{"ovsdb-server", "ovsdb-tool"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	dir := t.TempDir()
	s := &ovsdbServer{t: t, dir: dir, db: filepath.Join(dir, "test.db"), socket: filepath.Join(dir, "db.sock")}
	schemaFile := filepath.Join(dir, "test.ovsschema")
	if err := os.WriteFile(schemaFile, []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ovsdb-tool", "create", s.db, schemaFile).CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool create: %v\n%s", err, out)
	}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

func (s *ovsdbServer) Socket() string { return s.socket }

func (s *ovsdbServer) Start() {
	s.t.Helper()
	s.cmd = exec.Command("ovsdb-server", "--no-chdir", "--remote=punix:"+s.socket,
		"--unixctl="+filepath.Join(s.dir, "ctl"), "--log-file="+filepath.Join(s.dir, "log"),
		"--pidfile="+filepath.Join(s.dir, "pid"), s.db)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(s.socket); err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatal("ovsdb-server did not create its socket")
		}
	}
}

func (s *ovsdbServer) Stop() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
		os.Remove(s.socket)
	}
}

// recorder collects change sets.
type recorder struct {
	mu   sync.Mutex
	sets []ChangeSet
}

func (r *recorder) record(cs ChangeSet) {
	r.mu.Lock()
	r.sets = append(r.sets, cs)
	r.mu.Unlock()
}

// take returns the events recorded since the last take, as "kind table
// name" strings.
func (r *recorder) take(s *ovsdb.Schema) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, cs := range r.sets {
		for _, e := range cs.Events {
			row := e.New
			if row == nil {
				row = e.Old
			}
			name := row.Get(s.Tables[e.Table].Column("name")).Keys[0].Str()
			out = append(out, fmt.Sprintf("%s %s %s", e.Kind, e.Table, name))
		}
	}
	r.sets = nil
	return out
}

func connect(t testing.TB, socket string, opts Options) *Client {
	t.Helper()
	return connectDB(t, socket, "Test", opts)
}

func connectDB(t testing.TB, socket, db string, opts Options) *Client {
	t.Helper()
	opts.Endpoints = []string{"unix:" + socket}
	opts.Database = db
	opts.MinBackoff = 20 * time.Millisecond
	opts.MaxBackoff = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func str(s string) ovsdb.Datum { return ovsdb.Scalar(ovsdb.String(s)) }
func integer(i int64) ovsdb.Datum {
	return ovsdb.Scalar(ovsdb.Integer(i))
}

func TestClientBasics(t *testing.T) {
	eachServer(t, testSchema, testClientBasics)
}

func testClientBasics(t *testing.T, srv testServer) {
	var rec recorder
	c := connect(t, srv.Socket(), Options{OnChange: rec.record})
	ctx := t.Context()
	schema := c.Cache().Schema()
	if schema == nil || schema.Name != "Test" {
		t.Fatalf("schema %v", schema)
	}

	// Insert a switch with a port, referring to the port by placeholder.
	txn := c.Txn()
	port := txn.Insert("Port", map[string]ovsdb.Datum{"name": str("p1"), "addresses": ovsdb.Set(ovsdb.String("a"), ovsdb.String("b"))})
	sw := txn.Insert("Switch", map[string]ovsdb.Datum{
		"name":         str("sw1"),
		"ports":        ovsdb.Scalar(ovsdb.UUIDAtom(port)),
		"external_ids": ovsdb.Map([]ovsdb.Atom{ovsdb.String("k")}, []ovsdb.Atom{ovsdb.String("v")}),
	})
	res, err := txn.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	swID, portID := res.UUID(sw), res.UUID(port)
	if swID.IsZero() || portID.IsZero() {
		t.Fatalf("no real UUIDs: %v %v", swID, portID)
	}
	// The server sends updates before replies: the cache has the rows now.
	row := c.Cache().Row("Switch", swID)
	if row == nil {
		t.Fatal("inserted switch not in the cache when Commit returned")
	}
	if got, _ := c.Cache().Get("Switch", swID, "ports"); !got.Equal(ovsdb.Scalar(ovsdb.UUIDAtom(portID))) {
		t.Errorf("ports = %v", got)
	}
	if got := strings.Join(rec.take(schema), "; "); got != "insert Port p1; insert Switch sw1" && got != "insert Switch sw1; insert Port p1" {
		t.Errorf("events after insert: %s", got)
	}

	// Update, mutate (set, map and integer columns) and check the diffs
	// arrive as the right new rows.
	txn = c.Txn()
	txn.Update("Switch", swID, map[string]ovsdb.Datum{"tag": integer(7)})
	txn.Mutate("Switch", swID,
		Mutation{Column: "counter", Mutator: "+=", Value: integer(5)},
		Mutation{Column: "external_ids", Mutator: "insert", Value: ovsdb.Map([]ovsdb.Atom{ovsdb.String("k2")}, []ovsdb.Atom{ovsdb.String("v2")})},
		Mutation{Column: "external_ids", Mutator: "delete", Value: ovsdb.Set(ovsdb.String("k"))},
	)
	txn.Mutate("Port", portID, Mutation{Column: "addresses", Mutator: "delete", Value: ovsdb.Set(ovsdb.String("a"))},
		Mutation{Column: "addresses", Mutator: "insert", Value: ovsdb.Set(ovsdb.String("c"))})
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(table string, id ovsdb.UUID, col string, want ovsdb.Datum) {
		t.Helper()
		got, ok := c.Cache().Get(table, id, col)
		if !ok || !got.Equal(want) {
			t.Errorf("%s.%s = %v, want %v", table, col, got, want)
		}
	}
	check("Switch", swID, "tag", integer(7))
	check("Switch", swID, "counter", integer(5))
	check("Switch", swID, "external_ids", ovsdb.Map([]ovsdb.Atom{ovsdb.String("k2")}, []ovsdb.Atom{ovsdb.String("v2")}))
	check("Port", portID, "addresses", ovsdb.Set(ovsdb.String("b"), ovsdb.String("c")))
	rec.mu.Lock()
	last := rec.sets[len(rec.sets)-1]
	rec.mu.Unlock()
	for _, e := range last.Events {
		if e.Kind != Update || e.Old == nil || e.New == nil {
			t.Errorf("event %v %s: want an update with old and new rows", e.Kind, e.Table)
		}
		if e.Table == "Switch" && e.Old.Get(schema.Tables["Switch"].Column("counter")).Keys[0].Int() != 0 {
			t.Error("old row of the update does not hold the old counter")
		}
	}
	rec.take(schema)

	// Select through Transact.
	results, err := c.Transact(ctx, Operation{Op: "select", Table: "Switch", Where: []Condition{Equal("name", str("sw1"))}, Columns: []string{"name", "tag"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(results[0].Rows) != 1 || !results[0].Rows[0]["tag"].Equal(integer(7)) {
		t.Errorf("select returned %v", results[0].Rows)
	}

	// An optional column changed, then cleared: ovsdb-server sends the new
	// value rather than a set difference, and the cache must hold it.
	for _, tag := range []ovsdb.Datum{integer(9), ovsdb.Set()} {
		txn = c.Txn()
		txn.Update("Switch", swID, map[string]ovsdb.Datum{"tag": tag})
		if _, err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		check("Switch", swID, "tag", tag)
	}
	rec.take(schema)

	// A constraint violation comes back as an *OpError.
	_, err = c.Transact(ctx, Operation{Op: "insert", Table: "Switch", Row: map[string]ovsdb.Datum{"name": str("bad"), "tag": integer(5000)}})
	if oe, ok := err.(*OpError); !ok || oe.Err.Tag != ovsdb.ErrConstraintViolation {
		t.Errorf("out-of-range insert: %v", err)
	}

	// Delete the switch: the port, no longer referenced, is collected.
	txn = c.Txn()
	txn.Delete("Switch", swID)
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Cache().Len("Switch") != 0 || c.Cache().Len("Port") != 0 {
		t.Errorf("after delete: %d switches, %d ports", c.Cache().Len("Switch"), c.Cache().Len("Port"))
	}
	got := rec.take(schema)
	if strings.Join(got, "; ") != "delete Port p1; delete Switch sw1" {
		t.Errorf("events after delete: %v", got)
	}
}

func TestVerifyConflictAndRetry(t *testing.T) {
	eachServer(t, testSchema, testVerifyConflictAndRetry)
}

func testVerifyConflictAndRetry(t *testing.T, srv testServer) {
	a := connect(t, srv.Socket(), Options{})
	b := connect(t, srv.Socket(), Options{})
	ctx := t.Context()
	txn := a.Txn()
	sw := txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("sw"), "counter": integer(1)})
	res, err := txn.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := res.UUID(sw)
	waitFor(t, func() bool { return b.Cache().Row("Switch", id) != nil })

	// a reads counter, b changes it, a's verified write must fail.
	read, _ := a.Cache().Get("Switch", id, "counter")
	stale := a.Txn()
	stale.Verify("Switch", id, "counter")
	stale.Update("Switch", id, map[string]ovsdb.Datum{"counter": integer(read.Keys[0].Int() + 10)})

	bt := b.Txn()
	bt.Update("Switch", id, map[string]ovsdb.Datum{"counter": integer(100)})
	if _, err := bt.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.Commit(ctx); err == nil || !isConflict(err) {
		t.Fatalf("stale verified update: %v, want a conflict", err)
	}

	// Do rereads and retries: the increment applies to b's value.
	if _, err := a.Do(ctx, func(t *Txn) error {
		t.Verify("Switch", id, "counter")
		cur, _ := a.Cache().Get("Switch", id, "counter")
		t.Update("Switch", id, map[string]ovsdb.Datum{"counter": integer(cur.Keys[0].Int() + 10)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		v, _ := b.Cache().Get("Switch", id, "counter")
		return v.Equal(integer(110))
	})
}

func isConflict(err error) bool {
	for e := err; e != nil; {
		if e == ErrConflict {
			return true
		}
		if oe, ok := e.(*OpError); ok {
			return oe.Is(ErrConflict)
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
	}
}

func TestConditions(t *testing.T) {
	eachServer(t, testSchema, testConditions)
}

func testConditions(t *testing.T, srv testServer) {
	writer := connect(t, srv.Socket(), Options{})
	ctx := t.Context()
	txn := writer.Txn()
	for _, n := range []string{"a", "b", "c"} {
		txn.Insert("Switch", map[string]ovsdb.Datum{"name": str(n)})
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	c := connect(t, srv.Socket(), Options{
		Tables:     map[string][]string{"Switch": nil},
		Conditions: map[string][]Condition{"Switch": {Equal("name", str("a"))}},
		OnChange:   rec.record,
	})
	schema := c.Cache().Schema()
	if got := rec.take(schema); strings.Join(got, ";") != "insert Switch a" {
		t.Errorf("initial events with condition name==a: %v", got)
	}
	if err := c.SetConditions(ctx, "Switch", []Condition{Equal("name", str("b")), Equal("name", str("c"))}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return c.Cache().Len("Switch") == 2 })
	got := rec.take(schema)
	want := map[string]bool{"delete Switch a": true, "insert Switch b": true, "insert Switch c": true}
	if len(got) != 3 {
		t.Fatalf("events after the condition change: %v", got)
	}
	for _, g := range got {
		if !want[g] {
			t.Errorf("unexpected event %q", g)
		}
	}
	if err := c.SetConditions(ctx, "Switch", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return c.Cache().Len("Switch") == 3 })
}

func TestReconnectResyncs(t *testing.T) {
	eachServer(t, testSchema, testReconnectResyncs)
}

func testReconnectResyncs(t *testing.T, srv testServer) {
	var rec recorder
	c := connect(t, srv.Socket(), Options{OnChange: rec.record, Indexes: map[string][]string{"Switch": {"name"}}})
	ctx := t.Context()
	schema := c.Cache().Schema()
	txn := c.Txn()
	keep := txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("keep")})
	gone := txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("gone")})
	mod := txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("mod")})
	res, err := txn.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec.take(schema)
	keepRow := c.Cache().Row("Switch", res.UUID(keep))

	// Restart the server and change the database behind the client's back
	// with another client while the first one reconnects.
	srv.Stop()
	srv.Start()
	other := connect(t, srv.Socket(), Options{})
	otxn := other.Txn()
	otxn.Delete("Switch", res.UUID(gone))
	otxn.Update("Switch", res.UUID(mod), map[string]ovsdb.Datum{"counter": integer(3)})
	otxn.Insert("Switch", map[string]ovsdb.Datum{"name": str("new")})
	if _, err := otxn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		v, _ := c.Cache().Get("Switch", res.UUID(mod), "counter")
		return c.Cache().Len("Switch") == 3 && v.Equal(integer(3))
	})
	got := rec.take(schema)
	want := map[string]bool{"delete Switch gone": true, "update Switch mod": true, "insert Switch new": true}
	if len(got) != 3 {
		t.Fatalf("events after reconnect: %v, want exactly %v", got, want)
	}
	for _, g := range got {
		if !want[g] {
			t.Errorf("unexpected event %q", g)
		}
	}
	// The index followed the resync.
	if len(c.Cache().Lookup("Switch", "name", str("gone"))) != 0 || len(c.Cache().Lookup("Switch", "name", str("new"))) != 1 {
		t.Error("index not updated by the resync")
	}
	// An unchanged row keeps its identity: nothing was reported for it.
	if c.Cache().Row("Switch", res.UUID(keep)) != keepRow {
		t.Error("unchanged row was replaced on resync")
	}
	// The client works on the new session.
	if _, err := c.Transact(ctx, Operation{Op: "insert", Table: "Switch", Row: map[string]ovsdb.Datum{"name": str("after")}}); err != nil {
		t.Fatal(err)
	}
}

func TestLocks(t *testing.T) {
	eachServer(t, testSchema, testLocks)
}

func testLocks(t *testing.T, srv testServer) {
	ctx := t.Context()
	events := make(chan string, 10)
	onLock := func(who string) func(string, bool) {
		return func(name string, held bool) { events <- fmt.Sprintf("%s %s %v", who, name, held) }
	}
	a := connect(t, srv.Socket(), Options{Tables: map[string][]string{}, OnLock: onLock("a")})
	b := connect(t, srv.Socket(), Options{Tables: map[string][]string{}, OnLock: onLock("b")})
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-events:
			if got != want {
				t.Errorf("lock event %q, want %q", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no lock event, want %q", want)
		}
	}
	if held, err := a.Lock(ctx, "L"); err != nil || !held {
		t.Fatalf("a lock: %v %v", held, err)
	}
	expect("a L true")
	if held, err := b.Lock(ctx, "L"); err != nil || held {
		t.Fatalf("b lock: %v %v", held, err)
	}
	// Asserting the lock works only for its holder.
	if _, err := a.Transact(ctx, Operation{Op: "assert", Lock: "L"}); err != nil {
		t.Errorf("assert by holder: %v", err)
	}
	if _, err := b.Transact(ctx, Operation{Op: "assert", Lock: "L"}); err == nil {
		t.Error("assert by non-holder succeeded")
	}
	if err := a.Unlock(ctx, "L"); err != nil {
		t.Fatal(err)
	}
	expect("a L false")
	expect("b L true")
	if !b.HasLock("L") || a.HasLock("L") {
		t.Error("HasLock disagrees")
	}
	if held, err := a.Steal(ctx, "L"); err != nil || !held {
		t.Fatalf("steal: %v %v", held, err)
	}
	got := map[string]bool{}
	for range 2 {
		select {
		case e := <-events:
			got[e] = true
		case <-time.After(5 * time.Second):
			t.Fatal("missing lock events after steal")
		}
	}
	if !got["a L true"] || !got["b L false"] {
		t.Errorf("events after steal: %v", got)
	}
}

// TestEchoAndFallback runs the client against a minimal server that knows
// only plain "monitor" and probes the client with "echo".
func TestEchoAndFallback(t *testing.T) {
	l, err := jsonrpc.Listen(t.Context(), "punix:"+filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	echoed := make(chan string, 1)
	var methods []string
	var mu sync.Mutex
	go func() {
		nc, err := l.Accept()
		if err != nil {
			return
		}
		var conn *jsonrpc.Conn
		conn = jsonrpc.NewConn(t.Context(), nc, jsonrpc.Options{Handler: func(ctx context.Context, c *jsonrpc.Conn, m *jsonrpc.Message) {
			mu.Lock()
			methods = append(methods, m.Method)
			mu.Unlock()
			switch m.Method {
			case "get_schema":
				_ = c.Reply(m.ID, json.RawMessage(testSchema))
			case "monitor":
				if strings.HasPrefix(string(m.Params), `["_Server"`) {
					// A server older than _Server: the client goes on unwatched.
					_ = c.ReplyError(m.ID, json.RawMessage(`{"error":"unknown database"}`))
					return
				}
				_ = c.Reply(m.ID, json.RawMessage(`{"Switch":{"6f2b2b1e-0000-4000-8000-000000000001":{"new":{"name":"x","counter":2}}}}`))
				go func() {
					var got []string
					if err := c.Call(context.Background(), "echo", []string{"hi"}, &got); err == nil {
						echoed <- strings.Join(got, ",")
					}
					_ = c.Notify("update", json.RawMessage(`["govn",{"Switch":{"6f2b2b1e-0000-4000-8000-000000000001":{"old":{"counter":2},"new":{"name":"x","counter":3}}}}]`))
				}()
			default:
				_ = c.ReplyError(m.ID, "unknown method")
			}
		}})
		<-conn.Done()
	}()
	c := connect(t, l.Addr().String(), Options{})
	select {
	case got := <-echoed:
		if got != "hi" {
			t.Errorf("echo reply %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("client did not answer echo")
	}
	id := ovsdb.MustParseUUID("6f2b2b1e-0000-4000-8000-000000000001")
	waitFor(t, func() bool {
		v, _ := c.Cache().Get("Switch", id, "counter")
		return v.Equal(integer(3))
	})
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(methods[:5], ",") != "monitor,get_schema,monitor_cond_since,monitor_cond,monitor" {
		t.Errorf("methods tried: %v", methods)
	}
}

// TestResume drops the client's connection (the server keeps running),
// changes the database meanwhile, and checks the client catches up with
// exactly those changes. govn's server keeps transaction history, so there
// the client must resume with monitor_cond_since instead of resyncing.
func TestResume(t *testing.T) {
	eachServer(t, testSchema, testResume)
}

func testResume(t *testing.T, srv testServer) {
	var rec recorder
	c := connect(t, srv.Socket(), Options{OnChange: rec.record})
	c.opts.MinBackoff, c.opts.MaxBackoff = 300*time.Millisecond, 300*time.Millisecond
	other := connect(t, srv.Socket(), Options{})
	ctx := t.Context()
	schema := c.Cache().Schema()
	txn := other.Txn()
	a := txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("a")})
	res, err := txn.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return c.Cache().Row("Switch", res.UUID(a)) != nil })
	rec.take(schema)

	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	s.conn.Close()
	txn = other.Txn()
	txn.Update("Switch", res.UUID(a), map[string]ovsdb.Datum{"counter": integer(9)})
	txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("b")})
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return c.Cache().Len("Switch") == 2 })
	rec.mu.Lock()
	resynced := slices.ContainsFunc(rec.sets, func(cs ChangeSet) bool { return cs.Resync })
	rec.mu.Unlock()
	got := rec.take(schema)
	if len(got) != 2 || !slices.Contains(got, "update Switch a") || !slices.Contains(got, "insert Switch b") {
		t.Errorf("events after reconnecting: %v", got)
	}
	if _, ok := srv.(*govnServer); ok {
		if resynced {
			t.Error("client resynced although govn's server keeps history")
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.lastTxnID == "" {
			t.Error("no transaction id recorded from monitor_cond_since")
		}
	}
}

// fakeServer serves the test schema with plain monitor only, describes
// the database in _Server.Database with the given connected and leader
// flags (which setServerRow changes, notifying the _Server monitors), and
// records the methods it was asked for.
type fakeServer struct {
	socket     string
	silentEcho bool // leave "echo" unanswered
	mu         sync.Mutex
	methods    []string
	watchers   []*jsonrpc.Conn // connections monitoring _Server
}

// fakeServerRowID is the UUID of the database's row in the fake _Server.
const fakeServerRowID = "5c4f3a6e-0000-4000-8000-000000000001"

func fakeServerRow(connected, leader bool) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"Database":{%q:{"new":{"name":"Test","connected":%v,"leader":%v,"model":"clustered"}}}}`,
		fakeServerRowID, connected, leader))
}

func startFakeServer(t *testing.T, connected, leader bool) *fakeServer {
	return startFakeServerWith(t, &fakeServer{}, connected, leader)
}

func startFakeServerWith(t *testing.T, f *fakeServer, connected, leader bool) *fakeServer {
	l, err := jsonrpc.Listen(t.Context(), "punix:"+filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	f.socket = l.Addr().String()
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			jsonrpc.NewConn(t.Context(), nc, jsonrpc.Options{Handler: func(ctx context.Context, c *jsonrpc.Conn, m *jsonrpc.Message) {
				f.mu.Lock()
				f.methods = append(f.methods, m.Method)
				f.mu.Unlock()
				switch m.Method {
				case "get_schema":
					_ = c.Reply(m.ID, json.RawMessage(testSchema))
				case "monitor":
					if !strings.HasPrefix(string(m.Params), `["_Server"`) {
						_ = c.Reply(m.ID, json.RawMessage(`{}`))
						return
					}
					f.mu.Lock()
					f.watchers = append(f.watchers, c)
					_ = c.Reply(m.ID, fakeServerRow(connected, leader))
					f.mu.Unlock()
				case "echo":
					if !f.silentEcho {
						_ = c.Reply(m.ID, m.Params)
					}
				default:
					_ = c.ReplyError(m.ID, "unknown method")
				}
			}})
		}
	}()
	return f
}

// setServerRow changes the database's row in _Server and notifies the
// connections that monitor it, as a clustered ovsdb-server does when it
// loses its cluster or its leadership. Then it sends each an "echo", which
// the client answers after reading the update, and returns the first
// error: one means a client hung up instead.
func (f *fakeServer) setServerRow(connected, leader bool) error {
	f.mu.Lock()
	watchers := slices.Clone(f.watchers)
	f.mu.Unlock()
	for _, c := range watchers {
		_ = c.Notify("update", []json.RawMessage{json.RawMessage(`"` + serverMonitorID + `"`), fakeServerRow(connected, leader)})
	}
	for _, c := range watchers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Call(ctx, "echo", []string{"sync"}, nil)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeServer) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.methods {
		if m == method {
			n++
		}
	}
	return n
}

func (f *fakeServer) asked(method string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.methods, method)
}

// connectFakes connects a client to the Test database of the fake servers,
// tried in order.
func connectFakes(t *testing.T, leaderOnly bool, servers ...*fakeServer) *Client {
	t.Helper()
	var endpoints []string
	for _, f := range servers {
		endpoints = append(endpoints, "unix:"+f.socket)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, Options{Endpoints: endpoints, Database: "Test", LeaderOnly: leaderOnly, MinBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestServerChecks: the client skips a server that its _Server database
// says is not connected, and with LeaderOnly one that is not the leader.
func TestServerChecks(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		connected, leader    bool
		leaderOnly, rejected bool
	}{
		{"disconnected", false, true, false, true},
		{"follower, leader only", true, false, true, true},
		{"follower, any server", true, false, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := startFakeServer(t, tt.connected, tt.leader)
			good := startFakeServer(t, true, true)
			connectFakes(t, tt.leaderOnly, bad, good)
			if got := !bad.asked("get_schema"); got != tt.rejected {
				t.Errorf("first server rejected = %v, want %v", got, tt.rejected)
			}
			if tt.rejected && !good.asked("monitor") {
				t.Error("client did not move on to the good server")
			}
		})
	}
}

// TestConcurrentIncrements has several clients increment one counter with
// verified read-modify-write transactions: no increment may be lost, and
// a watching client must see the values in commit order.
func TestConcurrentIncrements(t *testing.T) {
	eachServer(t, testSchema, testConcurrentIncrements)
}

func testConcurrentIncrements(t *testing.T, srv testServer) {
	ctx := t.Context()
	var mu sync.Mutex
	var seen []int64
	watcher := connect(t, srv.Socket(), Options{OnChange: func(cs ChangeSet) {
		for _, e := range cs.Events {
			if e.Kind == Update {
				mu.Lock()
				seen = append(seen, e.New.Data[0].Keys[0].Int()) // "counter" sorts first
				mu.Unlock()
			}
		}
	}})
	if watcher.Cache().Schema().Tables["Switch"].Columns[0].Name != "counter" {
		t.Fatal("test assumes counter is the first column")
	}
	txn := watcher.Txn()
	sw := txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("c")})
	res, err := txn.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := res.UUID(sw)
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for range writers {
		c := connect(t, srv.Socket(), Options{Tables: map[string][]string{"Switch": {"counter"}}})
		wg.Go(func() {
			for range each {
				_, err := c.Do(ctx, func(txn *Txn) error {
					// Verify before reading: the cache may move on in
					// between, and then the wait fails and Do retries.
					txn.Verify("Switch", id, "counter")
					cur, ok := c.Cache().Get("Switch", id, "counter")
					if !ok {
						return fmt.Errorf("row %s not in cache", id)
					}
					txn.Update("Switch", id, map[string]ovsdb.Datum{"counter": integer(cur.Keys[0].Int() + 1)})
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		v, _ := watcher.Cache().Get("Switch", id, "counter")
		if v.Equal(integer(writers * each)) {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			t.Fatalf("the watcher's counter is %v after all increments; updates seen: %v", v, seen)
		}
	}
	// Every update comes in commit order. (A server may merge the updates
	// of several commits for a client that reads slowly, as ovsdb-server
	// does, so values can be skipped, but never repeated or reordered.)
	mu.Lock()
	defer mu.Unlock()
	for i, v := range seen {
		if i > 0 && v <= seen[i-1] {
			t.Fatalf("update %d carried counter %d after %d; updates seen: %v", i, v, seen[i-1], seen)
		}
	}
	if len(seen) == 0 || seen[len(seen)-1] != writers*each {
		t.Errorf("last update seen carried %v, want %d", seen[len(seen)-1:], writers*each)
	}
}

// TestInactivityProbe: a server that stops answering "echo" is dropped and
// the client reconnects; one that answers keeps its session.
func TestInactivityProbe(t *testing.T) {
	for _, silent := range []bool{true, false} {
		t.Run(fmt.Sprintf("silent=%v", silent), func(t *testing.T) {
			f := startFakeServerWith(t, &fakeServer{silentEcho: silent}, true, true)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			c, err := Connect(ctx, Options{
				Endpoints:     []string{"unix:" + f.socket},
				Database:      "Test",
				ProbeInterval: 50 * time.Millisecond,
				MinBackoff:    10 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			time.Sleep(500 * time.Millisecond)
			echoes, sessions := f.count("echo"), f.count("get_schema")
			if echoes < 2 {
				t.Errorf("client sent %d probes in 500ms at a 50ms interval", echoes)
			}
			if silent && sessions < 2 {
				t.Errorf("a server that never answers probes kept the only session (%d sessions)", sessions)
			}
			if !silent && sessions != 1 {
				t.Errorf("a server that answers probes was dropped (%d sessions)", sessions)
			}
		})
	}
}

// TestLookup finds rows by column value through an index and by scanning,
// as rows are inserted, changed and deleted.
func TestLookup(t *testing.T) {
	eachServer(t, testSchema, testLookup)
}

func testLookup(t *testing.T, srv testServer) {
	ctx := t.Context()
	c := connect(t, srv.Socket(), Options{Indexes: map[string][]string{"Switch": {"name", "external_ids"}}})
	names := func(table, column string, value ovsdb.Datum) string {
		var out []string
		for _, r := range c.Cache().Lookup(table, column, value) {
			out = append(out, r.Get(c.Cache().Schema().Tables[table].Column("name")).Keys[0].Str())
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	owner := func(o string) ovsdb.Datum { return ovsdb.Map(strs("owner"), strs(o)) }
	txn := c.Txn()
	a := txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("a"), "counter": integer(1), "external_ids": owner("x")})
	txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("b"), "counter": integer(1), "external_ids": owner("x")})
	res, err := txn.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check := func(column string, value ovsdb.Datum, want string) {
		t.Helper()
		if got := names("Switch", column, value); got != want {
			t.Errorf("Lookup(%s == %v) = %q, want %q", column, value, got, want)
		}
	}
	check("name", str("a"), "a")
	check("external_ids", owner("x"), "a,b")
	check("counter", integer(1), "a,b") // not indexed: scanned
	txn = c.Txn()
	txn.Update("Switch", res.UUID(a), map[string]ovsdb.Datum{"name": str("c"), "external_ids": owner("y")})
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	check("name", str("a"), "")
	check("name", str("c"), "c")
	check("external_ids", owner("x"), "b")
	check("external_ids", owner("y"), "c")
	txn = c.Txn()
	txn.Delete("Switch", res.UUID(a))
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	check("name", str("c"), "")
	check("external_ids", owner("y"), "")
	check("name", str("b"), "b")
}

// TestServerWatch: the client keeps watching _Server.Database during the
// session and moves to the next endpoint when its server loses its
// cluster, or its leadership when LeaderOnly is set.
func TestServerWatch(t *testing.T) {
	for _, tt := range []struct {
		name              string
		connected, leader bool // the first server's row, once connected
		leaderOnly, moves bool
	}{
		{"loses its cluster", false, true, false, true},
		{"loses leadership, leader only", true, false, true, true},
		{"loses leadership, any server", true, false, false, false},
		{"stays the leader", true, true, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			first := startFakeServer(t, true, true)
			second := startFakeServer(t, true, true)
			c := connectFakes(t, tt.leaderOnly, first, second)
			if second.asked("get_schema") {
				t.Fatal("client went to the second server before the first changed")
			}
			// The echo after the update returns once the client has read
			// the update: an error means it hung up.
			err := first.setServerRow(tt.connected, tt.leader)
			if moved := err != nil; moved != tt.moves {
				t.Fatalf("client hung up on the first server = %v (%v), want %v", moved, err, tt.moves)
			}
			if tt.moves {
				waitFor(t, func() bool { return second.count("monitor") == 2 })
				if err := c.WaitConnected(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestWatchesServerDatabase: against real servers the session finds its
// database's row through the _Server monitor (which it then keeps).
func TestWatchesServerDatabase(t *testing.T) {
	eachServer(t, testSchema, func(t *testing.T, srv testServer) {
		c := connect(t, srv.Socket(), Options{LeaderOnly: true})
		c.mu.Lock()
		s := c.sess
		c.mu.Unlock()
		if s == nil || s.serverRowID == "" {
			t.Fatal("session has not found the database in _Server.Database")
		}
		if _, err := ovsdb.ParseUUID(s.serverRowID); err != nil {
			t.Errorf("row id %q: %v", s.serverRowID, err)
		}
	})
}

// clusterMember is a real ovsdb-server serving a member of a clustered
// Test database.
type clusterMember struct {
	socket, ctl, raft string
}

// startClusterMember creates the Test cluster (join == "") or joins the
// one at raft address join, and runs an ovsdb-server for the member.
func startClusterMember(t *testing.T, join string) *clusterMember {
	t.Helper()
	for _, bin := range []string{"ovsdb-server", "ovsdb-tool", "ovs-appctl"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "test.db")
	m := &clusterMember{socket: filepath.Join(dir, "db.sock"), ctl: filepath.Join(dir, "ctl"), raft: "unix:" + filepath.Join(dir, "raft")}
	tool := exec.Command("ovsdb-tool", "join-cluster", db, "Test", m.raft, join)
	if join == "" {
		schemaFile := filepath.Join(dir, "test.ovsschema")
		if err := os.WriteFile(schemaFile, []byte(testSchema), 0o644); err != nil {
			t.Fatal(err)
		}
		tool = exec.Command("ovsdb-tool", "create-cluster", db, schemaFile, m.raft)
	}
	if out, err := tool.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", tool, err, out)
	}
	cmd := exec.Command("ovsdb-server", "--no-chdir", "--remote=punix:"+m.socket, "--unixctl="+m.ctl,
		"--log-file="+filepath.Join(dir, "log"), db)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	waitFor(t, func() bool { _, err := os.Stat(m.socket); return err == nil })
	return m
}

// status returns the member's cluster/status report.
func (m *clusterMember) status() string {
	out, _ := exec.Command("ovs-appctl", "-t", m.ctl, "cluster/status", "Test").CombinedOutput()
	return string(out)
}

// sessionAddr is the socket of the client's current session ("" when it
// has none).
func sessionAddr(c *Client) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return ""
	}
	return c.sess.conn.RemoteAddr()
}

// TestLeaderOnlyFollowsLeadership runs a two-server cluster of the real
// ovsdb-server: a LeaderOnly client skips the follower, and when the
// leader hands its leadership over, keeping the client's connection, the
// client moves to the new leader.
func TestLeaderOnlyFollowsLeadership(t *testing.T) {
	leader := startClusterMember(t, "")
	follower := startClusterMember(t, leader.raft)
	// The follower must have finished joining to be able to take over.
	waitFor(t, func() bool {
		s := follower.status()
		return strings.Contains(s, "Status: cluster member") && strings.Contains(s, "Role: follower")
	})

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, Options{
		Endpoints:  []string{"unix:" + follower.socket, "unix:" + leader.socket},
		Database:   "Test",
		LeaderOnly: true,
		MinBackoff: 20 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if got := sessionAddr(c); got != leader.socket {
		t.Fatalf("LeaderOnly client is on %q, want the leader %q", got, leader.socket)
	}

	// The old leader stays up and keeps the client's connection; only its
	// _Server row says it no longer leads.
	if out, err := exec.Command("ovs-appctl", "-t", leader.ctl, "cluster/failure-test", "transfer-leadership").CombinedOutput(); err != nil {
		t.Fatalf("transfer-leadership: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for sessionAddr(c) != follower.socket {
		if time.Now().After(deadline) {
			t.Fatalf("client on %q 20s after the leadership moved; follower says:\n%s", sessionAddr(c), follower.status())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.Transact(ctx, Operation{Op: "comment", Comment: "on the new leader"}); err != nil {
		t.Errorf("transaction on the new leader: %v", err)
	}
}
