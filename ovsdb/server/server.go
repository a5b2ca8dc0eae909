package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/govn/govn/internal/readpoll"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
	"github.com/govn/govn/ovsdb/storage"
)

// Log is where a database's commits go for durability; *storage.Log
// satisfies it. Submit is called in commit order under the database's lock;
// the returned Commit is waited on outside it.
type Log interface {
	Submit(rec storage.Record) (*storage.Commit, error)
}

// Durable is the durability of a commit: a write and fsync of the local
// log (*storage.Commit) or a majority of a cluster's (package
// ovsdb/cluster).
type Durable interface {
	// Done is closed once Wait would return without waiting.
	Done() <-chan struct{}
	// Wait returns nil once the commit is durable, or the error that
	// kept it from becoming so, or ctx's error if ctx ends first.
	Wait(ctx context.Context) error
}

// Options configure a Server.
type Options struct {
	// Logger receives the server's logs; nil means slog.Default().
	Logger *slog.Logger
	// HistoryLength is how many recent commits each database keeps for
	// monitor_cond_since; 0 means 1000.
	HistoryLength int
	// HistoryRows bounds the row changes those commits may hold in total;
	// 0 means 100000.
	HistoryRows int
	// MaxMessageSize caps one incoming JSON-RPC message; 0 means
	// jsonrpc.DefaultMaxMessageSize (1 GiB).
	MaxMessageSize int
	// ProbeInterval is how long a connection may stay silent before the
	// server sends an "echo" to check that the peer is alive, and how long
	// the peer then has to answer; 0 means 5 s, negative disables probes.
	ProbeInterval time.Duration
	// LargeRequestBudget bounds the bytes of requests of 1 MiB or more
	// that sessions decode and execute at once (each may cost several
	// times its size); others wait their turn. 0 means 128 MiB.
	LargeRequestBudget int64
}

// Server serves OVSDB databases. Add databases with AddDatabase, then call
// Serve for each listener.
type Server struct {
	opts  Options
	log   *slog.Logger
	sid   ovsdb.UUID
	mu    sync.Mutex
	dbs   map[string]*dbState
	names []string
	// server is the _Server database.
	server *dbState
	locks  lockTable

	sessMu   sync.Mutex
	sessions map[*session]struct{}

	large *byteBudget // see Options.LargeRequestBudget
}

// New returns a Server serving only _Server.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HistoryLength == 0 {
		opts.HistoryLength = 1000
	}
	if opts.HistoryRows == 0 {
		opts.HistoryRows = 100000
	}
	if opts.ProbeInterval == 0 {
		opts.ProbeInterval = 5 * time.Second
	}
	if opts.LargeRequestBudget <= 0 {
		opts.LargeRequestBudget = 128 << 20
	}
	s := &Server{opts: opts, log: opts.Logger, sid: ovsdb.NewUUID(), dbs: map[string]*dbState{}, sessions: map[*session]struct{}{},
		large: newByteBudget(opts.LargeRequestBudget)}
	s.server = s.newDBState(ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(serverSchemaJSON))), nil)
	s.dbs[serverDBName] = s.server
	s.names = []string{serverDBName}
	if err := s.addServerRow(s.server); err != nil {
		panic(err) // the built-in schema and row are always valid
	}
	return s
}

// dbState is one served database and what hangs off it.
type dbState struct {
	srv  *Server
	name string
	log  Log
	// repl replicates a clustered database's commits (cluster.go); nil
	// for a standalone one.
	repl Replicator

	mu       sync.Mutex
	db       *ovsdb.Database
	monitors map[*monitor]struct{}
	// watch routes commits to monitors, per table (see watch.go).
	watch map[string]*tableWatch
	// history holds the last commits, oldest first, for monitor_cond_since.
	history     []commitEntry
	historyRows int
	lastTxn     ovsdb.UUID
	blocked     []*blockedTxn
	replies     replyQueue
	uuids       *ovsdb.UUIDSource
	// notified lists the connections holding queued monitor updates,
	// which unlock sends once the lock is released; with many monitors a
	// helper shares the writes (shared, helper; see queuedLocked).
	notified []*jsonrpc.Conn
	shared   *sharedWrites
	helper   *writeHelper // started once the database has many monitors
	// shapes holds the encodings monitors share, by monitor.shapeKey.
	shapes map[string]*sharedEnc
	// notifyGen counts notified commits; it tells a sharedEnc or monitor
	// whether it has seen the current one.
	notifyGen uint64
	// counters are read without d.mu (metrics scrapes).
	counters dbCounters
}

// dbCounters count a database's work since the server started.
type dbCounters struct {
	transactions   atomic.Uint64 // transact requests answered
	commits        atomic.Uint64 // transactions that changed the database
	monitorUpdates atomic.Uint64 // update notifications queued for monitors
}

// unlock releases d.mu, then sends the monitor updates that commits made
// under it queued: the writes (one per monitoring connection) happen
// outside the lock, without waking a writer goroutine per connection.
// Every holder of d.mu releases it with unlock.
func (d *dbState) unlock() {
	conns, shared := d.notified, d.shared
	d.notified, d.shared = nil, nil
	d.mu.Unlock()
	if shared != nil {
		close(shared.complete)
		shared.write(nil)
	}
	for _, c := range conns {
		c.Flush()
	}
}

// shareFrom is how many monitors make it worth a second thread that
// shares the writes of a commit's updates: two CPUs then share the system
// calls, which are most of a large fan-out's cost. Below shareFrom/2 the
// thread stops.
const shareFrom = 32

// helperSpin is how long the write helper waits for more of a commit's
// updates to be queued before it sleeps instead.
const helperSpin = 5 * time.Millisecond

// sharedWrites is the list of connections with queued updates that the
// committer and the helper write, each taking the next one not yet taken.
// The committer publishes connections as it queues their updates, so the
// helper starts writing while the commit is still queueing, as a
// single-threaded server writes each update as it goes.
type sharedWrites struct {
	conns     []*jsonrpc.Conn // fixed length; entries below published are set
	published atomic.Int64
	next      atomic.Int64
	complete  chan struct{} // closed once nothing more is published
}

func newSharedWrites(capacity int) *sharedWrites {
	return &sharedWrites{conns: make([]*jsonrpc.Conn, capacity), complete: make(chan struct{})}
}

// add publishes c, or reports false when the list is full.
func (w *sharedWrites) add(c *jsonrpc.Conn) bool {
	n := w.published.Load()
	if int(n) == len(w.conns) {
		return false
	}
	w.conns[n] = c
	w.published.Store(n + 1)
	return true
}

// write writes published updates, the next not yet taken each time, until
// the list is complete and none is left. While more may come it waits by
// calling idle (the committer, which publishes, passes nil: it calls
// write only once the list is complete).
func (w *sharedWrites) write(idle func() bool) {
	for {
		i := w.next.Add(1) - 1
		for i >= w.published.Load() {
			select {
			case <-w.complete:
				if i >= w.published.Load() {
					return
				}
				continue
			default:
			}
			if idle == nil || !idle() {
				<-w.complete
			}
		}
		w.conns[i].Flush()
	}
}

// writeHelper is a goroutine that shares the writes of large fan-outs. It
// is woken when a commit starts queueing updates, so that its waking up
// overlaps the queueing, and it sleeps in a blocking read of an eventfd
// rather than on a channel: the kernel then wakes its own thread, where a
// readied goroutine would wait on the committer's run queue until another
// thread steals it, which (instrumented) sometimes did not happen before
// the committer had written all 200 updates alone.
type writeHelper struct {
	efd  int
	next atomic.Pointer[sharedWrites] // the work it is woken for; nil to stop
	done chan struct{}                // closed when run returns
}

// startWriteHelper starts a helper, or returns nil if there are no
// eventfds.
func startWriteHelper() *writeHelper {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil
	}
	h := &writeHelper{efd: efd, done: make(chan struct{})}
	go h.run()
	return h
}

func (h *writeHelper) run() {
	defer close(h.done)
	defer unix.Close(h.efd)
	var buf [8]byte
	for {
		if _, err := unix.Read(h.efd, buf[:]); err == unix.EINTR {
			continue
		} else if err != nil {
			return
		}
		w := h.next.Swap(nil)
		if w == nil {
			return // stopped
		}
		// Between updates queued, wait yielding both to goroutines and
		// to threads (if the committer's thread shares this CPU,
		// spinning would hold it up for a whole time slice), for as long
		// as queueing a few hundred updates takes; then sleep.
		deadline := time.Now().Add(helperSpin)
		w.write(func() bool {
			if time.Now().After(deadline) {
				return false
			}
			runtime.Gosched()
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			return true
		})
	}
}

// help wakes the helper to share w.
func (h *writeHelper) help(w *sharedWrites) {
	h.next.Store(w)
	one := [8]byte{1}
	unix.Write(h.efd, one[:])
}

// stop ends the helper.
func (h *writeHelper) stop() {
	h.next.Store(nil)
	one := [8]byte{1}
	unix.Write(h.efd, one[:])
}

// monitorsChangedLocked stops the write helper once few monitors are left.
// Callers hold d.mu and call it after removing monitors.
func (d *dbState) monitorsChangedLocked() {
	if d.helper != nil && len(d.monitors) < shareFrom/2 {
		d.helper.stop()
		d.helper = nil
	}
}

// queuedLocked records that c holds a queued update. Callers hold d.mu.
func (d *dbState) queuedLocked(c *jsonrpc.Conn) {
	if d.shared == nil && len(d.monitors) >= shareFrom && runtime.NumCPU() >= 2 {
		if d.helper == nil {
			d.helper = startWriteHelper()
		}
		if d.helper != nil {
			// Room for every monitor of a commit; beyond that
			// (commits retried after a wait) notified takes over.
			d.shared = newSharedWrites(len(d.monitors))
			d.helper.help(d.shared)
		}
	}
	if d.shared != nil && d.shared.add(c) {
		return
	}
	d.notified = append(d.notified, c)
}

type commitEntry struct {
	id   ovsdb.UUID
	cs   *ovsdb.ChangeSet
	rows int // rows changed, for bounding the history's memory
}

// appendHistoryLocked records a commit and drops the oldest ones beyond
// Options.HistoryLength commits or Options.HistoryRows changed rows (old
// row versions stay alive while the history holds them).
func (d *dbState) appendHistoryLocked(e commitEntry) {
	d.history = append(d.history, e)
	d.historyRows += e.rows
	drop := 0
	for drop < len(d.history) && (len(d.history)-drop > d.srv.opts.HistoryLength || d.historyRows > d.srv.opts.HistoryRows) {
		d.historyRows -= d.history[drop].rows
		drop++
	}
	if drop > 0 {
		// Reslicing instead of copying the survivors down keeps a commit
		// O(1) when the history is full; append moves them when the
		// array runs out. The dropped entries are cleared so that their
		// old rows are not kept alive meanwhile.
		clear(d.history[:drop])
		d.history = d.history[drop:]
	}
}

func (s *Server) newDBState(db *ovsdb.Database, log Log) *dbState {
	return &dbState{srv: s, name: db.Schema.Name, log: log, db: db, monitors: map[*monitor]struct{}{}, uuids: ovsdb.NewUUIDSource()}
}

// AddDatabase starts serving db. When log is not nil, every commit is
// submitted to it and acknowledged only once durable. db must not be used
// by the caller afterwards.
func (s *Server) AddDatabase(db *ovsdb.Database, log Log) error {
	name := db.Schema.Name
	s.mu.Lock()
	if _, ok := s.dbs[name]; ok {
		s.mu.Unlock()
		return fmt.Errorf("database %s is already served", name)
	}
	st := s.newDBState(db, log)
	s.dbs[name] = st
	s.names = append(s.names, name)
	sort.Strings(s.names)
	s.mu.Unlock()
	return s.addServerRow(st)
}

// database returns the state of the served database name, or nil.
func (s *Server) database(name string) *dbState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dbs[name]
}

func (s *Server) databaseNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.names...)
}

// Serve accepts connections on l until ctx ends or l fails. It closes l
// when it returns.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	return s.serveListener(ctx, l, connOptions{probe: s.opts.ProbeInterval})
}

// connOptions are what a remote sets for the sessions it accepts.
type connOptions struct {
	// probe is the inactivity probe interval (zero or negative: none).
	probe time.Duration
	// readOnly refuses transactions that write, as a Connection row with
	// read_only=true asks.
	readOnly bool
	// role is an RBAC role (Connection.role): non-empty, the session's
	// writes are checked against the database's RBAC tables (rbac.go).
	role string
}

// serveListener is Serve with the listener's own session options.
func (s *Server) serveListener(ctx context.Context, l net.Listener, opts connOptions) error {
	if ul, ok := l.(*net.UnixListener); ok {
		// Go's poller would wake on every read of a unix session's
		// peer (see package readpoll): with many monitors, once per
		// monitor per commit.
		if rl, err := readpoll.Listen(ul); err == nil {
			l = rl
		} else {
			s.log.Warn("serving unix sessions through Go's poller", "err", err)
		}
	}
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	defer l.Close()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !acceptErrorPasses(err) {
				return fmt.Errorf("accepting OVSDB connections: %w", err)
			}
			// Running out of descriptors must not stop serving the
			// sessions that will close and free some.
			s.log.Warn("accepting an OVSDB connection failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		s.serveConn(ctx, c, opts)
	}
}

// acceptErrorPasses reports whether err from Accept is a passing condition
// (a timeout, a shortage of descriptors or memory, a connection aborted
// before it was accepted) after which accepting again can succeed.
func acceptErrorPasses(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// ServeConn starts a session on rwc and returns at once; the session ends
// when the peer hangs up, misbehaves, or ctx ends.
func (s *Server) ServeConn(ctx context.Context, rwc io.ReadWriteCloser) {
	s.serveConn(ctx, rwc, connOptions{probe: s.opts.ProbeInterval})
}

// serveConn is ServeConn with the connection's own probe interval (zero or
// negative: none); the returned channel is closed when the session ends.
func (s *Server) serveConn(ctx context.Context, rwc io.ReadWriteCloser, opts connOptions) <-chan struct{} {
	probe := opts.probe
	sess := &session{srv: s, readOnly: opts.readOnly, checker: newRBAC(opts.role, rwc), lastRecv: time.Now(), monitors: map[string]*monitor{}, locks: map[string]bool{}, pending: map[string][]*blockedTxn{}}
	// The session must hold its Conn before the first request arrives.
	sess.conn = jsonrpc.New(ctx, rwc, jsonrpc.Options{
		Handler:        sess.handle,
		MaxMessageSize: s.opts.MaxMessageSize,
		Logger:         s.log,
		InlineWrites:   true,
	})
	s.sessMu.Lock()
	s.sessions[sess] = struct{}{}
	s.sessMu.Unlock()
	go func() {
		<-sess.conn.Done()
		sess.close()
		s.sessMu.Lock()
		delete(s.sessions, sess)
		s.sessMu.Unlock()
	}()
	sess.conn.Start()
	if probe > 0 {
		go sess.probe(probe)
	}
	return sess.conn.Done()
}

// Stats describes the server for memory/show and metrics.
type Stats struct {
	Sessions int
	Monitors int
	Rows     map[string]int
	// Databases has each database's counters, by name.
	Databases map[string]DBStats
}

// DBStats are one database's sizes and counters since the server started.
type DBStats struct {
	Rows, Monitors int
	// Transactions counts the transact requests answered; Commits those
	// that changed the database; MonitorUpdates the update notifications
	// queued for monitors (a commit's fan-out).
	Transactions, Commits, MonitorUpdates uint64
}

// Stats returns counts of sessions, monitors and rows per database.
func (s *Server) Stats() Stats {
	st := Stats{Rows: map[string]int{}, Databases: map[string]DBStats{}}
	s.sessMu.Lock()
	st.Sessions = len(s.sessions)
	s.sessMu.Unlock()
	for _, name := range s.databaseNames() {
		d := s.database(name)
		d.mu.Lock()
		st.Monitors += len(d.monitors)
		n := 0
		for _, tn := range d.db.Schema.TableNames {
			n += len(d.db.Table(tn).Rows)
		}
		st.Rows[name] = n
		st.Databases[name] = DBStats{Rows: n, Monitors: len(d.monitors),
			Transactions: d.counters.transactions.Load(), Commits: d.counters.commits.Load(),
			MonitorUpdates: d.counters.monitorUpdates.Load()}
		d.unlock()
	}
	return st
}

// commitLocked applies cs (a successful transaction's changes), records it
// in the history, notifies monitors and submits it to the log. It returns
// the log's Commit to wait on (nil without a log). Callers hold d.mu.
func (d *dbState) commitLocked(cs *ovsdb.ChangeSet) (Durable, error) {
	return d.commitDeferLocked(cs, false)
}

// concurrentRecordRows is the number of rows from which a transaction's
// log record is encoded on a goroutine of its own.
const concurrentRecordRows = 1000

// deferringLog is a Log whose writing a committer can do itself, after
// releasing the database lock (see storage.Log.SubmitDeferred).
type deferringLog interface {
	SubmitDeferred(rec storage.Record) (*storage.Commit, error)
	FlushNow()
}

// commitDeferLocked is commitLocked; with deferred, and a log that allows
// it, the caller must call settle after releasing d.mu.
func (d *dbState) commitDeferLocked(cs *ovsdb.ChangeSet, deferred bool) (Durable, error) {
	// A large transaction's record is encoded while the transaction is
	// applied and its monitors' updates are: all three only read cs,
	// whose rows are immutable, and the machine has more than one core.
	var encoded chan []byte
	if d.log != nil && d.repl == nil && cs.Len() >= concurrentRecordRows {
		encoded = make(chan []byte, 1)
		go func() { encoded <- cs.AppendRecord([]byte{}, d.db.Schema) }()
	}
	d.db.Apply(cs)
	d.counters.commits.Add(1)
	id := d.uuids.New()
	d.lastTxn = id
	d.appendHistoryLocked(commitEntry{id: id, cs: cs, rows: cs.Len()})
	d.notifyLocked(cs, id)
	if d.repl != nil {
		dur, err := d.repl.Propose(id, cs)
		d.retryBlockedLocked()
		return dur, err
	}
	var c *storage.Commit
	var err error
	if d.log != nil {
		rec := storage.Record{Date: time.Now(), Comment: cs.Comment}
		if encoded != nil {
			rec.Encoded = <-encoded
		} else {
			rec.Encoded = cs.AppendRecord([]byte{}, d.db.Schema)
		}
		if len(rec.Encoded) > 0 {
			if dl, ok := d.log.(deferringLog); ok && deferred {
				c, err = dl.SubmitDeferred(rec)
			} else {
				c, err = d.log.Submit(rec)
			}
		}
	}
	d.retryBlockedLocked()
	if c == nil {
		return nil, err // no typed nil in the interface
	}
	return c, err
}

// snapshotLocked captures every row, for compaction. Rows are immutable,
// so the caller may encode the result after releasing d.mu.
func (d *dbState) snapshotLocked() *ovsdb.ChangeSet {
	cs := &ovsdb.ChangeSet{Tables: map[string]map[ovsdb.UUID]*ovsdb.RowChange{}}
	for _, tn := range d.db.Schema.TableNames {
		rows := map[ovsdb.UUID]*ovsdb.RowChange{}
		for u, r := range d.db.Table(tn).Rows {
			rows[u] = &ovsdb.RowChange{New: r}
		}
		cs.Tables[tn] = rows
	}
	return cs
}

// Compactor is a Log that can also be compacted; *storage.Log is one.
type Compactor interface {
	ShouldCompact() bool
	StartCompaction() (*storage.Compaction, error)
}

// maybeCompact compacts the database's log when it has grown enough. The
// snapshot is taken under the lock; writing it happens outside.
func (d *dbState) maybeCompact(ctx context.Context) {
	cp, ok := d.log.(Compactor)
	if !ok {
		return
	}
	d.mu.Lock()
	if !cp.ShouldCompact() {
		d.unlock()
		return
	}
	c, err := cp.StartCompaction()
	if err != nil {
		d.unlock()
		return
	}
	snap := d.snapshotLocked()
	d.unlock()
	rec := storage.Record{Date: time.Now(), Tables: snap.Record(d.db.Schema)}
	if err := c.Finish(ctx, rec); err != nil {
		d.srv.log.Warn("compacting database failed", "db", d.name, "err", err)
		return
	}
	d.srv.log.Info("compacted database", "db", d.name)
}

// RunCompaction checks every database's log for compaction every interval
// until ctx ends.
func (s *Server) RunCompaction(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, name := range s.databaseNames() {
			if d := s.database(name); d != nil && d.log != nil {
				d.maybeCompact(ctx)
			}
		}
	}
}

// errorJSON renders an OVSDB error object.
func errorJSON(tag, format string, args ...any) json.RawMessage {
	return ovsdb.Errorf(tag, format, args...).AppendJSON(nil)
}

// errorAtJSON renders an OVSDB error object whose "syntax" member is v,
// the JSON that was wrong, as ovsdb-server does for bad parameters.
func errorAtJSON(v any, tag, format string, args ...any) json.RawMessage {
	return ovsdb.ErrorAt(v, tag, format, args...).AppendJSON(nil)
}
