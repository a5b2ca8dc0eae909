package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
)

// Options configure a Client.
type Options struct {
	// Endpoints are the servers to try, in turn: "unix:PATH",
	// "tcp:IP:PORT" or, with TLS set, "ssl:IP:PORT".
	Endpoints []string
	// TLS configures ssl: endpoints; LoadTLS builds one from the key,
	// certificate and CA files that OVS tools take.
	TLS *tls.Config
	// Database is the name of the database to monitor and change.
	Database string
	// Tables maps each table to monitor to the columns to monitor (nil:
	// all). A nil map monitors every table of the server's schema; an
	// empty non-nil map monitors nothing.
	Tables map[string][]string
	// Indexes names, per table, the columns Cache.Lookup finds rows by
	// through an index kept up to date with every change (other columns
	// are scanned).
	Indexes map[string][]string
	// Conditions are the initial monitor conditions per table (a table
	// without an entry is monitored whole). SetConditions changes them.
	Conditions map[string][]Condition
	// OnChange, if set, is called with each change set after it has been
	// applied to the cache, in commit order, on the session's reader
	// goroutine: it must not block for long or wait for a reply from this
	// Client.
	OnChange func(ChangeSet)
	// OnLock, if set, is called when a lock this client asked for is
	// granted (held true) or stolen (held false).
	OnLock func(name string, held bool)
	// MinBackoff and MaxBackoff bound the wait between reconnection
	// attempts (defaults 100ms and 8s).
	MinBackoff, MaxBackoff time.Duration
	// ProbeInterval, if not zero, makes the client send "echo" after this
	// much silence from the server and drop the session when no answer
	// comes within the same time.
	ProbeInterval time.Duration
	// LeaderOnly makes the client use only a server that reports, in its
	// _Server database, that it is the leader of a clustered database (a
	// standalone server always is); other servers are skipped like
	// unreachable ones, and a session whose server stops being the leader
	// ends and moves on to the next endpoint.
	LeaderOnly bool
	// MaxMessageSize bounds incoming messages (jsonrpc.DefaultMaxMessageSize
	// if 0).
	MaxMessageSize int
	Logger         *slog.Logger
}

// ErrNotConnected is returned by operations that need a session when the
// Client has none and the context allows no waiting.
var ErrNotConnected = errors.New("ovsdb client: not connected")

// Client is a reconnecting OVSDB client for one database; see the package
// documentation.
type Client struct {
	opts  Options
	log   *slog.Logger
	cache *Cache

	mu        sync.Mutex
	sess      *session      // current synced session or nil
	up        chan struct{} // closed while a session is synced; replaced when it ends
	lastTxnID string        // last transaction seen (monitor_cond_since)
	conds     map[string][]Condition
	condsSent bool // the current conditions are what the server applies
	locks     map[string]bool

	closeFn func() // set by Connect
}

// session is one connection's state.
type session struct {
	conn      *jsonrpc.Conn
	schema    *ovsdb.Schema
	method    monitorMethod
	monitorID json.RawMessage
	tables    []string // monitored tables in this session, sorted

	// Updates that arrive before the monitor's initial reply is applied
	// wait in pending, in order.
	mu      sync.Mutex
	synced  bool
	pending []*jsonrpc.Message

	lastRecv atomic.Int64 // unix nanoseconds of the last byte received

	// serverRowID is the UUID (as the server wrote it) of the database's
	// row in _Server.Database; see watchServer.
	serverRowID string
}

// New returns a Client that does nothing until Run.
func New(opts Options) (*Client, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("ovsdb client: no endpoints")
	}
	for _, e := range opts.Endpoints {
		if err := checkEndpoint(e, opts.TLS); err != nil {
			return nil, fmt.Errorf("ovsdb client: %w", err)
		}
	}
	if opts.Database == "" {
		return nil, errors.New("ovsdb client: no database")
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(8*time.Second, opts.MinBackoff)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Client{
		opts:  opts,
		log:   log.With("db", opts.Database),
		cache: newCache(opts.Indexes),
		up:    make(chan struct{}),
		conds: map[string][]Condition{},
		locks: map[string]bool{},
	}
	for t, w := range opts.Conditions {
		c.conds[t] = slices.Clone(w)
	}
	return c, nil
}

// Connect creates a Client, starts it in the background and waits until
// its cache holds the server's contents, or until ctx ends. The Client runs
// until ctx is cancelled or Close is called.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	c, err := New(opts)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	c.closeFn = func() { cancel(); <-done }
	go func() {
		defer close(done)
		_ = c.Run(runCtx)
	}()
	// Connect's own ctx governs the wait; the client's life is Close's.
	stop := context.AfterFunc(ctx, cancel)
	if err := c.WaitConnected(ctx); err != nil {
		c.Close()
		return nil, err
	}
	stop()
	return c, nil
}

// Cache returns the client's cache.
func (c *Client) Cache() *Cache { return c.cache }

// Run keeps a session up until ctx is cancelled, reconnecting with backoff.
// It returns ctx's error.
func (c *Client) Run(ctx context.Context) error {
	backoff := c.opts.MinBackoff
	for attempt := 0; ; attempt++ {
		endpoint := c.opts.Endpoints[attempt%len(c.opts.Endpoints)]
		synced, err := c.runSession(ctx, endpoint)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if synced {
			backoff = c.opts.MinBackoff
		}
		c.log.Info("ovsdb session ended; reconnecting", "endpoint", endpoint, "err", err, "in", backoff)
		// Jitter keeps a crowd of clients from reconnecting in lockstep.
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(2*backoff, c.opts.MaxBackoff)
	}
}

// Close stops a Client started by Connect.
func (c *Client) Close() {
	if c.closeFn != nil {
		c.closeFn()
	}
}

// WaitConnected waits until a session is up and its initial contents are
// in the cache.
func (c *Client) WaitConnected(ctx context.Context) error {
	_, err := c.session(ctx)
	return err
}

// session returns the current synced session, waiting for one.
func (c *Client) session(ctx context.Context) (*session, error) {
	for {
		c.mu.Lock()
		s, up := c.sess, c.up
		c.mu.Unlock()
		if s != nil {
			return s, nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrNotConnected, context.Cause(ctx))
		}
	}
}

// runSession runs one connection to its end. synced reports whether the
// monitor got established.
func (c *Client) runSession(ctx context.Context, endpoint string) (synced bool, err error) {
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	nc, err := dial(dialCtx, endpoint, c.opts.TLS)
	cancel()
	if err != nil {
		return false, err
	}
	s := &session{}
	s.lastRecv.Store(time.Now().UnixNano())
	// New, then Start once s.conn is set: the handler uses it.
	s.conn = jsonrpc.New(ctx, &wire{Conn: nc, s: s}, jsonrpc.Options{
		Handler:        func(ctx context.Context, conn *jsonrpc.Conn, m *jsonrpc.Message) { c.handle(s, m) },
		MaxMessageSize: c.opts.MaxMessageSize,
		Logger:         c.log,
		// A transaction whose context ends is cancelled on the server too
		// (session.transact).
		CancelAbandoned: true,
	})
	s.conn.Start()
	defer s.conn.Close()
	if err := c.startSession(ctx, s); err != nil {
		return false, err
	}
	c.mu.Lock()
	c.sess = s
	close(c.up)
	locks := slices.Sorted(maps.Keys(c.locks))
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.sess = nil
		c.up = make(chan struct{})
		for _, name := range slices.Sorted(maps.Keys(c.locks)) {
			if c.locks[name] {
				c.locks[name] = false
				if c.opts.OnLock != nil {
					defer c.opts.OnLock(name, false)
				}
			}
		}
		c.mu.Unlock()
	}()
	c.log.Debug("ovsdb session up", "endpoint", endpoint, "method", s.method)
	for _, name := range locks {
		if _, err := c.lockRequest(ctx, s, "lock", name); err != nil {
			c.log.Warn("re-taking lock failed", "lock", name, "err", err)
		}
	}
	if c.opts.ProbeInterval > 0 {
		go c.probe(s)
	}
	<-s.conn.Done()
	return true, s.conn.Err()
}

// probe sends "echo" after ProbeInterval of silence and ends the session
// when the echo is not answered in time.
func (c *Client) probe(s *session) {
	interval := c.opts.ProbeInterval
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-s.conn.Done():
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, s.lastRecv.Load())) < interval {
			continue
		}
		ctx, cancel := context.WithTimeout(s.conn.Context(), interval)
		err := s.conn.Call(ctx, "echo", []string{"probe"}, nil)
		cancel()
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			err = nil // an error reply still shows the server is there
		}
		if err != nil && s.conn.Err() == nil {
			c.log.Warn("server did not answer an inactivity probe; dropping the session", "err", err)
			s.conn.Close()
			return
		}
	}
}

// startSession starts watching the server's _Server database, fetches
// the schema and establishes the monitor.
func (c *Client) startSession(ctx context.Context, s *session) error {
	if err := c.watchServer(ctx, s); err != nil {
		return err
	}
	var raw json.RawMessage
	if err := s.conn.Call(ctx, "get_schema", []string{c.opts.Database}, &raw); err != nil {
		return fmt.Errorf("get_schema %s: %w", c.opts.Database, err)
	}
	schema, err := ovsdb.ParseSchema(raw)
	if err != nil {
		return fmt.Errorf("schema from server: %w", err)
	}
	s.schema = schema
	tables := c.opts.Tables
	if tables == nil {
		tables = map[string][]string{}
		for _, n := range schema.TableNames {
			tables[n] = nil
		}
	}
	for n := range tables {
		if schema.Tables[n] != nil {
			s.tables = append(s.tables, n)
		} else {
			c.log.Warn("server schema has no table to monitor", "table", n)
		}
	}
	slices.Sort(s.tables)

	c.mu.Lock()
	method := methodCondSince // each server is asked afresh: endpoints may differ
	conds := c.condsCopy()
	since := c.lastTxnID
	if !c.condsSent {
		// Conditions changed while no server applied them: history
		// filtered by the old conditions would miss rows the new ones
		// select, so ask for everything.
		since = ""
	}
	c.mu.Unlock()

	old := c.cache.Schema()
	schemaChanged := old != nil && string(old.JSON()) != string(schema.JSON())
	if schemaChanged {
		since = ""
	}

	s.monitorID, _ = json.Marshal(monitorID)
	for ; ; method++ {
		s.method = method
		reqs, err := monitorRequests(schema, tables, conds, method)
		if err != nil {
			return err
		}
		var params []json.RawMessage
		dbName, _ := json.Marshal(c.opts.Database)
		params = append(params, dbName, s.monitorID, reqs)
		if method == methodCondSince {
			txn := since
			if txn == "" {
				txn = zeroTxnID
			}
			t, _ := json.Marshal(txn)
			params = append(params, t)
		}
		raw, err := s.conn.CallRaw(ctx, method.String(), params)
		if jsonrpc.IsUnknownMethod(err) && method < methodPlain {
			c.log.Info("server lacks a monitor method; falling back", "method", method)
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if err := c.applyInitial(s, raw, since, schemaChanged); err != nil {
			return fmt.Errorf("%s reply: %w", method, err)
		}
		c.mu.Lock()
		c.condsSent = true
		c.mu.Unlock()
		return nil
	}
}

func (c *Client) condsCopy() map[string][]Condition {
	m := make(map[string][]Condition, len(c.conds))
	for t, w := range c.conds {
		m[t] = slices.Clone(w)
	}
	return m
}

// applyInitial applies the monitor reply, then the updates that arrived
// meanwhile, and marks the session synced.
func (c *Client) applyInitial(s *session, raw json.RawMessage, since string, schemaChanged bool) error {
	updates, found, txnID := []byte(raw), false, ""
	if s.method == methodCondSince {
		parts, err := splitArray(raw)
		if err != nil || len(parts) != 3 {
			return fmt.Errorf("want [found, last-txn-id, updates]: %v", err)
		}
		found = string(parts[0]) == "true"
		txnID, _ = jsonString(parts[1])
		updates = parts[2]
		found = found && since != ""
	}
	var cs ChangeSet
	if found {
		// The server resumed: the reply holds what changed since.
		events, err := parseUpdates(s.schema, c.cache.snapshotTable, updates, s.method)
		if err != nil {
			return err
		}
		cs = ChangeSet{Events: events}
	} else {
		empty := func(string) map[ovsdb.UUID]*ovsdb.Row { return nil }
		full, err := parseUpdates(s.schema, empty, updates, s.method)
		if err != nil {
			return err
		}
		var events []Event
		current := c.cache.snapshotTable
		if schemaChanged {
			// Old rows do not fit the new schema: delete them all and
			// insert the server's contents afresh.
			for _, table := range c.cacheTables(s) {
				for _, r := range c.cache.Rows(table) {
					events = append(events, Event{Table: table, Kind: Delete, Old: r})
				}
			}
			current = empty
		}
		events = append(events, resyncEvents(c.cacheTables(s), current, full)...)
		cs = ChangeSet{Events: events, Resync: true}
	}
	if txnID != "" && txnID != zeroTxnID {
		cs.TxnID = txnID
	}
	c.publish(s, &cs, s.schema)

	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.pending {
		c.applyUpdate(s, m)
	}
	s.pending = nil
	s.synced = true
	return nil
}

// cacheTables lists the tables the cache holds or the session monitors:
// tables no longer monitored must empty out on a resync.
func (c *Client) cacheTables(s *session) []string {
	c.cache.mu.RLock()
	names := slices.Clone(s.tables)
	for n := range c.cache.tables {
		names = append(names, n)
	}
	c.cache.mu.RUnlock()
	slices.Sort(names)
	return slices.Compact(names)
}

// publish applies a change set to the cache, remembers its transaction id
// and reports it.
func (c *Client) publish(s *session, cs *ChangeSet, schema *ovsdb.Schema) {
	c.cache.apply(cs, schema)
	c.mu.Lock()
	if cs.TxnID != "" {
		c.lastTxnID = cs.TxnID
	} else if s.method != methodCondSince {
		c.lastTxnID = ""
	}
	c.mu.Unlock()
	if c.opts.OnChange != nil && (len(cs.Events) > 0 || cs.Resync) {
		c.opts.OnChange(*cs)
	}
}

// handle is the session's JSON-RPC handler.
func (c *Client) handle(s *session, m *jsonrpc.Message) {
	switch m.Method {
	case "echo":
		if m.Kind() == jsonrpc.KindRequest {
			p := m.Params
			if p == nil {
				p = json.RawMessage("[]")
			}
			_ = s.conn.Reply(m.ID, p)
		}
	case "update", "update2", "update3":
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.synced {
			s.pending = append(s.pending, m)
			return
		}
		c.applyUpdate(s, m)
	case "locked", "stolen":
		var p []string
		if json.Unmarshal(m.Params, &p) == nil && len(p) == 1 {
			c.lockChanged(p[0], m.Method == "locked")
		}
	default:
		if m.Kind() == jsonrpc.KindRequest {
			_ = s.conn.ReplyError(m.ID, "unknown method")
		}
	}
}

// applyUpdate applies one update notification; a bad one ends the session,
// since the cache can no longer be trusted to match the server.
func (c *Client) applyUpdate(s *session, m *jsonrpc.Message) {
	params, err := splitArray(m.Params)
	if err != nil {
		c.dropSession(s, fmt.Errorf("%s: %w", m.Method, err))
		return
	}
	want := map[string]int{"update": 2, "update2": 2, "update3": 3}[m.Method]
	if len(params) != want {
		c.dropSession(s, fmt.Errorf("%s: want %d params, got %d", m.Method, want, len(params)))
		return
	}
	id, _ := jsonString(params[0])
	if id == serverMonitorID && m.Method == "update" {
		if err := s.watchUpdate(params[1], c.opts.Database, c.opts.LeaderOnly); err != nil {
			c.log.Warn("server can no longer be used; reconnecting", "err", err)
			// Closed here, on the reader, so that nothing after this
			// update is taken from a server given up on.
			s.conn.Close()
		}
		return
	}
	if id != monitorID {
		return // another monitor's update
	}
	method := map[string]monitorMethod{"update": methodPlain, "update2": methodCond, "update3": methodCondSince}[m.Method]
	events, err := parseUpdates(s.schema, c.cache.snapshotTable, params[len(params)-1], method)
	if err != nil {
		c.dropSession(s, fmt.Errorf("%s: %w", m.Method, err))
		return
	}
	cs := ChangeSet{Events: events}
	if method == methodCondSince {
		cs.TxnID, _ = jsonString(params[1])
	}
	c.publish(s, &cs, nil)
}

func (c *Client) dropSession(s *session, err error) {
	c.log.Error("ovsdb session: bad update from server; reconnecting", "err", err)
	go s.conn.Close()
}

// SetConditions replaces the monitor conditions of table (nil: all rows)
// and, when connected, sends monitor_cond_change. The rows that start or
// stop matching arrive as ordinary events before SetConditions returns.
func (c *Client) SetConditions(ctx context.Context, table string, where []Condition) error {
	c.mu.Lock()
	if where == nil {
		delete(c.conds, table)
	} else {
		c.conds[table] = slices.Clone(where)
	}
	c.condsSent = false
	s := c.sess
	c.mu.Unlock()
	if s == nil {
		return nil // the next session's monitor uses them
	}
	if s.method == methodPlain {
		return fmt.Errorf("server supports only plain monitor: conditions on %s not applied", table)
	}
	t := s.schema.Tables[table]
	if t == nil {
		return fmt.Errorf("set conditions: no table %q", table)
	}
	if where == nil {
		where = []Condition{Constant(true)}
	}
	b := []byte(`{`)
	b = ovsdb.AppendJSONString(b, table)
	b, err := appendWhere(append(b, `:[{"where":`...), where, t, nil)
	if err != nil {
		return fmt.Errorf("set conditions on %s: %w", table, err)
	}
	b = append(b, "}]}"...)
	params := []json.RawMessage{s.monitorID, s.monitorID, b}
	if err := s.conn.Call(ctx, "monitor_cond_change", params, nil); err != nil {
		return fmt.Errorf("monitor_cond_change on %s: %w", table, err)
	}
	c.mu.Lock()
	if c.sess == s {
		c.condsSent = true
	}
	c.mu.Unlock()
	return nil
}
