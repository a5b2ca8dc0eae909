package server

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
)

// session is one client connection.
type session struct {
	srv  *Server
	conn *jsonrpc.Conn

	mu       sync.Mutex
	monitors map[string]*monitor // by the monitor's <json-value>, as raw text
	locks    map[string]bool     // locks requested (owned or waited for)
	// pending holds the transactions blocked in "wait", by request id; a
	// misbehaving client may reuse an id, and each must still be released.
	pending map[string][]*blockedTxn
	closed  bool
	// changeAware is set by set_db_change_aware (see convert.go).
	changeAware bool
	// readOnly refuses transactions that write (a read-only remote).
	readOnly bool
	// checker authorizes writes (RBAC); nil when the remote has no role.
	checker ovsdb.WriteChecker
	// lastRecv is when the peer last sent anything (for probes).
	lastRecv time.Time
}

func (s *session) replyError(id json.RawMessage, e json.RawMessage) {
	if id != nil {
		s.conn.ReplyError(id, e)
	}
}

// handle serves one request or notification; it runs on the connection's
// reader goroutine.
func (s *session) handle(ctx context.Context, c *jsonrpc.Conn, m *jsonrpc.Message) {
	s.mu.Lock()
	s.lastRecv = time.Now()
	s.mu.Unlock()
	if n := int64(len(m.Params)); n >= largeRequest {
		// Decoded and executed, a large request may take several
		// times its size: a few at a time (see byteBudget).
		n = min(n, s.srv.large.capacity)
		if !s.srv.large.acquire(ctx, n) {
			return // the session is ending
		}
		defer s.srv.large.release(n)
	}
	var params []any
	if len(m.Params) > 0 {
		v, err := ovsdb.DecodeJSON(m.Params)
		var tooComplex *ovsdb.TooComplexError
		if errors.As(err, &tooComplex) {
			s.replyError(m.ID, errorJSON(ovsdb.ErrResourcesExhausted, "params: %v", err))
			return
		}
		if err != nil {
			s.replyError(m.ID, errorJSON(ovsdb.ErrSyntax, "params: %v", err))
			return
		}
		arr, ok := v.([]any)
		if !ok {
			s.replyError(m.ID, errorJSON(ovsdb.ErrSyntax, "params must be an array"))
			return
		}
		params = arr
	}
	if m.ID == nil {
		// Of notifications only "cancel" means anything; others, such as
		// an "echo" sent without an id, are ignored.
		if m.Method == "cancel" && len(params) == 1 {
			s.cancel(params[0])
		}
		return
	}
	switch m.Method {
	case "echo":
		c.Reply(m.ID, json.RawMessage(orEmpty(m.Params)))
	case "list_dbs":
		c.Reply(m.ID, ovsdb.ServerOrder(s.srv.databaseNames()))
	case "get_server_id":
		c.Reply(m.ID, s.srv.sid.String())
	case "get_schema":
		d, err := s.db(m.Method, params)
		if err != nil {
			s.replyError(m.ID, err)
			return
		}
		c.Reply(m.ID, json.RawMessage(d.schemaJSON()))
	case "transact":
		s.transact(m.ID, params, m.Params)
	case "monitor", "monitor_cond", "monitor_cond_since":
		s.monitor(m.ID, m.Method, params)
	case "monitor_cond_change":
		s.monitorCondChange(m.ID, params)
	case "monitor_cancel":
		s.monitorCancel(m.ID, params)
	case "lock", "steal", "unlock":
		s.lockMethod(m.ID, m.Method, params)
	case "set_db_change_aware":
		s.setDBChangeAware(m.ID, params)
	case "convert":
		s.convert(m.ID, params)
	default:
		c.ReplyError(m.ID, "unknown method")
	}
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("[]")
	}
	return b
}

// db returns the database named by params[0] of a method's request.
func (s *session) db(method string, params []any) (*dbState, json.RawMessage) {
	var name string
	if len(params) > 0 {
		name, _ = params[0].(string)
	}
	if name == "" {
		return nil, errorAtJSON(params, ovsdb.ErrSyntax, "%s request params must begin with <db-name>", method)
	}
	d := s.srv.database(name)
	if d == nil {
		return nil, errorAtJSON(params, ovsdb.ErrUnknownDatabase, "%s request specifies unknown database %s", method, name)
	}
	return d, nil
}

// blockedTxn is a transaction waiting in a "wait" operation.
type blockedTxn struct {
	sess   *session
	d      *dbState
	id     json.RawMessage
	ops    []any
	timer  *time.Timer // fires when the wait's timeout expires
	since  time.Time   // when it first blocked
	queued bool        // in d.blocked, awaiting a commit
	done   bool
	// settle says that the caller of runLocked makes the commit durable
	// and replies (dbState.settle): runLocked leaves the reply in held
	// instead of queueing it.
	settle bool
	held   *pendingReply
	// raw is the request's params as received, which a clustered
	// database's follower forwards to the leader (cluster.go).
	raw json.RawMessage
}

func (s *session) hasLock(name string) bool { return s.srv.locks.owns(s, name) }

func (s *session) transact(id json.RawMessage, params []any, raw json.RawMessage) {
	d, errv := s.db("transact", params)
	if errv != nil {
		s.replyError(id, errv)
		return
	}
	b := &blockedTxn{sess: s, d: d, id: id, ops: params[1:], raw: raw, settle: true}
	d.mu.Lock()
	b.runLocked(false)
	held := b.held
	b.held, b.settle = nil, false // a retry after a wait is settled by the queue
	d.unlock()
	if held != nil {
		d.settle(held)
	}
}

// settle makes a commit durable and answers its transaction on the
// caller's goroutine when the log is idle, as it is for a lone client:
// the write, the fsync and the reply then need no other goroutine, and no
// other thread woken and waited for. Otherwise the log's writer and the
// reply queue take over.
func (d *dbState) settle(p *pendingReply) {
	if dl, ok := d.log.(deferringLog); ok {
		dl.FlushNow()
	}
	select {
	case <-p.commit.Done():
		p.send()
	default:
		d.replies.push(*p)
	}
}

// runLocked executes the transaction; when it blocks in "wait" it is queued
// to run again after the next commit. Callers hold b.d.mu.
func (b *blockedTxn) runLocked(expired bool) (blocked bool) {
	d := b.d
	opts := ovsdb.TxnOptions{HasLock: b.sess.hasLock, WaitExpired: expired, ReadOnly: d == d.srv.server, ReadOnlySession: b.sess.readOnly, Checker: b.sess.checker}
	if expired {
		opts.Waited = time.Since(b.since)
	}
	res := d.db.Transact(b.ops, opts)
	if res.Blocked {
		if !b.queued {
			// First time blocked: queue it; retries keep their place.
			b.queued = true
			b.since = time.Now()
			if res.WaitTimeout >= 0 {
				b.timer = time.AfterFunc(res.WaitTimeout, b.expire)
			}
			d.blocked = append(d.blocked, b)
			b.sess.mu.Lock()
			b.sess.pending[string(b.id)] = append(b.sess.pending[string(b.id)], b)
			b.sess.mu.Unlock()
		}
		return true
	}
	if b.timer != nil {
		b.timer.Stop()
	}
	b.done = true
	d.counters.transactions.Add(1)
	b.sess.mu.Lock()
	b.sess.removePendingLocked(b)
	b.sess.mu.Unlock()
	reply := json.RawMessage(res.Reply)
	if res.Changes == nil {
		b.sess.conn.Reply(b.id, reply)
		return false
	}
	if d.repl != nil && !d.repl.Writable() {
		// A follower: the leader executes the writes (cluster.go).
		go d.forward(b.sess.conn, b.id, b.raw, len(b.ops))
		return false
	}
	commit, err := d.commitDeferLocked(res.Changes, b.settle)
	switch {
	case err != nil:
		d.srv.log.Error("database log refused a commit", "db", d.name, "err", err)
		b.sess.conn.Reply(b.id, json.RawMessage(ioErrorReply(len(b.ops), err)))
	case commit == nil:
		b.sess.conn.Reply(b.id, reply)
	case b.settle:
		b.held = &pendingReply{commit: commit, conn: b.sess.conn, id: b.id, reply: reply, nOps: len(b.ops), d: d}
	default:
		d.replies.push(pendingReply{commit: commit, conn: b.sess.conn, id: b.id, reply: reply, nOps: len(b.ops), d: d})
	}
	return false
}

// pendingReply is a transact reply held until its commit is durable.
type pendingReply struct {
	commit Durable
	conn   *jsonrpc.Conn
	id     json.RawMessage
	reply  json.RawMessage
	nOps   int
	d      *dbState
}

// replyQueue sends replies in commit order once their commits are
// durable. One goroutine runs while the queue is not empty, so a burst of
// commits that share an fsync costs one wake-up, not one goroutine each.
type replyQueue struct {
	mu      sync.Mutex
	items   []pendingReply
	running bool
}

func (q *replyQueue) push(p pendingReply) {
	q.mu.Lock()
	q.items = append(q.items, p)
	if !q.running {
		q.running = true
		go q.run()
	}
	q.mu.Unlock()
}

func (q *replyQueue) run() {
	for {
		q.mu.Lock()
		items := q.items
		q.items = nil
		if len(items) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		for _, p := range items {
			p.send()
		}
	}
}

func (p *pendingReply) send() {
	if err := p.commit.Wait(p.conn.Context()); err != nil {
		if p.conn.Context().Err() == nil {
			p.d.srv.log.Error("committing to disk failed", "db", p.d.name, "err", err)
			p.conn.Reply(p.id, json.RawMessage(ioErrorReply(p.nOps, err)))
		}
		return
	}
	p.conn.Reply(p.id, p.reply)
}

// ioErrorReply is a transact result saying the commit could not be made
// durable.
func ioErrorReply(n int, err error) []byte {
	b := []byte{'['}
	for i := 0; i < n; i++ {
		b = append(b, "{},"...)
	}
	b = ovsdb.Errorf(ovsdb.ErrIOError, "%v", err).AppendJSON(b)
	return append(b, ']')
}

func (b *blockedTxn) expire() {
	d := b.d
	d.mu.Lock()
	defer d.unlock()
	if b.done {
		return
	}
	d.removeBlockedLocked(b)
	b.runLocked(true)
}

func (d *dbState) removeBlockedLocked(b *blockedTxn) {
	for i, x := range d.blocked {
		if x == b {
			d.blocked = append(d.blocked[:i], d.blocked[i+1:]...)
			return
		}
	}
}

// retryBlockedLocked re-runs transactions blocked in "wait" after a commit.
func (d *dbState) retryBlockedLocked() {
	if len(d.blocked) == 0 {
		return
	}
	list := d.blocked
	d.blocked = nil
	for _, b := range list {
		if b.done {
			continue
		}
		if b.runLocked(false) && !slices.Contains(d.blocked, b) {
			d.blocked = append(d.blocked, b)
		}
	}
}

// removePendingLocked forgets b among the session's blocked transactions.
// Callers hold s.mu.
func (s *session) removePendingLocked(b *blockedTxn) {
	key := string(b.id)
	list := slices.DeleteFunc(s.pending[key], func(x *blockedTxn) bool { return x == b })
	if len(list) == 0 {
		delete(s.pending, key)
	} else {
		s.pending[key] = list
	}
}

// cancel answers a blocked transact with "canceled".
func (s *session) cancel(idv any) {
	raw, err := json.Marshal(idv)
	if err != nil {
		return
	}
	s.mu.Lock()
	var b *blockedTxn
	if list := s.pending[string(raw)]; len(list) > 0 {
		b = list[0]
		s.removePendingLocked(b)
	}
	s.mu.Unlock()
	if b == nil {
		return
	}
	b.d.mu.Lock()
	defer b.d.unlock()
	if b.done {
		return
	}
	b.done = true
	if b.timer != nil {
		b.timer.Stop()
	}
	b.d.removeBlockedLocked(b)
	s.conn.ReplyError(b.id, errorJSON(ovsdb.ErrCanceled, "transaction canceled by request"))
}

// close releases what the session held: monitors, locks, blocked
// transactions.
func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	mons := s.monitors
	s.monitors = map[string]*monitor{}
	pend := s.pending
	s.pending = map[string][]*blockedTxn{}
	s.mu.Unlock()
	for _, m := range mons {
		m.d.mu.Lock()
		delete(m.d.monitors, m)
		m.d.monitorsChangedLocked()
		m.d.unwatchLocked(m)
		m.d.unlock()
	}
	for _, list := range pend {
		for _, b := range list {
			b.d.mu.Lock()
			b.done = true
			if b.timer != nil {
				b.timer.Stop()
			}
			b.d.removeBlockedLocked(b)
			b.d.unlock()
		}
	}
	s.srv.locks.releaseAll(s)
}

// probe sends "echo" when the peer has been silent for interval and closes
// the connection when no answer comes within another interval, as
// ovsdb-server's inactivity probe does.
func (s *session) probe(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.conn.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		idle := time.Since(s.lastRecv)
		s.mu.Unlock()
		if idle < interval {
			continue
		}
		ctx, cancel := context.WithTimeout(s.conn.Context(), interval)
		_, err := s.conn.CallRaw(ctx, "echo", []any{})
		cancel()
		if err != nil && s.conn.Context().Err() == nil {
			s.srv.log.Info("closing OVSDB session: no answer to inactivity probe", "peer", s.conn.RemoteAddr(), "idle", idle)
			s.conn.Close()
			return
		}
	}
}
