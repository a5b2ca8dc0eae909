package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/server"
)

// DefaultElectionTimer is ovsdb-server's default election timer.
const DefaultElectionTimer = time.Second

// Options configure a Node.
type Options struct {
	// Logger receives the node's logs (and raft's); nil means slog.Default().
	Logger *slog.Logger
	// SnapshotThreshold is how many log entries since the last snapshot
	// make the node take a new one; 0 means 1000.
	SnapshotThreshold uint64
	// SnapshotInterval is how often the threshold is checked; 0 means 10 s.
	SnapshotInterval time.Duration
	// TrailingLogs is how many entries a snapshot leaves in the log, for
	// followers slightly behind; 0 means 500.
	TrailingLogs uint64
	// TLS authenticates the peer connections of a member whose address
	// is ssl: (required then).
	TLS PeerTLS
}

// command is one raft log entry's data: a transaction (entries that
// earlier versions wrote may hold several) from the leader Origin in its
// term of leadership Epoch, or a change of the election timer.
type command struct {
	Origin string    `json:"o,omitempty"`
	Epoch  uint64    `json:"e,omitempty"`
	Txns   []txnData `json:"x,omitempty"`
	Timer  int64     `json:"timer,omitempty"`
}

// txnData is one transaction: its id (the transaction id monitors see on
// every member) and its changes as a storage record, ephemeral columns
// included.
type txnData struct {
	ID     ovsdb.UUID                            `json:"id"`
	Tables map[string]map[string]json.RawMessage `json:"r"`
}

// snapshotData is a snapshot's contents.
type snapshotData struct {
	Schema json.RawMessage                       `json:"schema"`
	Txn    ovsdb.UUID                            `json:"txn"`
	Timer  int64                                 `json:"timer,omitempty"`
	Tables map[string]map[string]json.RawMessage `json:"tables"`
}

// Create writes a new clustered database file at path for a cluster of
// one server, at address local (tcp:IP:PORT), holding an empty database
// with schema, as ovsdb-tool create-cluster does.
func Create(path string, schema []byte, local string) error {
	s, err := ovsdb.ParseSchema(schema)
	if err != nil {
		return err
	}
	addr, err := ParseAddress(local)
	if err != nil {
		return err
	}
	sid, cid := ovsdb.NewUUID(), ovsdb.NewUUID()
	data, err := json.Marshal(snapshotData{Schema: s.JSON(), Timer: DefaultElectionTimer.Milliseconds(), Tables: map[string]map[string]json.RawMessage{}})
	if err != nil {
		return err
	}
	snap := &snapRecord{Index: 1, Term: 1, Version: int(raft.SnapshotVersionMax), ConfIndex: 1, Created: time.Now(), Data: data,
		Servers: []member{{ID: sid.String(), Address: addr, Suffrage: int(raft.Voter)}}}
	return createFile(path, record{Name: s.Name, SID: sid.String(), CID: cid.String(), Local: local}, snap)
}

// Join writes a new clustered database file at path for a server at
// address local that is to join the cluster of database name whose
// members include remotes (each tcp:IP:PORT), as ovsdb-tool join-cluster
// does. The server joins when it first runs.
func Join(path, name, local string, remotes []string) error {
	if _, err := ParseAddress(local); err != nil {
		return err
	}
	if len(remotes) == 0 {
		return errors.New("join-cluster needs at least one remote")
	}
	if err := checkSchemes(local, remotes); err != nil {
		return err
	}
	if name == "" {
		return errors.New("join-cluster needs the database's name")
	}
	return createFile(path, record{Name: name, SID: ovsdb.NewUUID().String(), Local: local, Remotes: remotes}, nil)
}

// Node is one member of a cluster serving one database on a
// server.Server: its raft instance, its file and the database's
// replication (it is the database's server.Replicator and raft's FSM).
type Node struct {
	log    *slog.Logger
	srv    *server.Server
	store  *store
	layer  *peerLayer
	trans  *raft.NetworkTransport
	dtrans *durableTransport
	// connEnded says that a connection a peer opened to this member
	// ended (watchLeader).
	connEnded chan struct{}
	// nudgeTimer fires nudgeDelay after this leader last applied an
	// entry (nudge).
	nudgeTimer *time.Timer
	raft       *raft.Raft
	ready      chan struct{} // closed once raft is set
	name       string
	sid        ovsdb.UUID
	local      string // tcp:IP:PORT
	origin     string // sid and a nonce for this run of the process

	cid     atomic.Pointer[ovsdb.UUID]
	rep     atomic.Pointer[server.Replica]
	schema  atomic.Pointer[ovsdb.Schema]
	timerMS atomic.Int64
	left    atomic.Bool

	// Under the database's lock (Replica.Do) or the FSM goroutine before
	// the database is served:
	writable     bool
	epoch        uint64
	pending      []pendingTxn // applied here, proposed, not yet applied by the FSM
	committedTxn ovsdb.UUID

	appliedMu sync.Mutex
	applied   uint64
	appliedCh chan struct{} // closed and replaced when applied grows

	// replayedTo is the last entry applied at start from this member's
	// own file (replayCommitted), which raft applies again later.
	replayedTo uint64

	barrier atomic.Bool // a barrier after winning an election is running
	wonAt   atomic.Int64
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type pendingTxn struct {
	id ovsdb.UUID
	cs *ovsdb.ChangeSet
	// data is the entry handed to raft, which hands the FSM the same
	// slice back (applyOwn).
	data []byte
}

// Start opens the clustered database file at path and runs its member:
// it serves the database on srv as soon as it has the database (at once
// if the file holds a snapshot; a joining server once the leader has
// sent it one), joins the cluster if it is new, and replicates until
// Close.
func Start(ctx context.Context, path string, srv *server.Server, opts Options) (*Node, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SnapshotThreshold == 0 {
		opts.SnapshotThreshold = 1000
	}
	if opts.SnapshotInterval == 0 {
		opts.SnapshotInterval = 10 * time.Second
	}
	if opts.TrailingLogs == 0 {
		opts.TrailingLogs = 500
	}
	st, err := openStore(path, opts.Logger)
	if err != nil {
		return nil, err
	}
	hdr := st.header()
	sid, err := ovsdb.ParseUUID(hdr.SID)
	if err != nil {
		st.close()
		return nil, fmt.Errorf("%s: bad server id: %w", path, err)
	}
	if _, err := ParseAddress(hdr.Local); err != nil {
		st.close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	n := &Node{log: opts.Logger.With("db", hdr.Name), srv: srv, store: st, name: hdr.Name, sid: sid, local: hdr.Local,
		origin: sid.String() + "/" + ovsdb.NewUUID().String()[:8], ready: make(chan struct{}), appliedCh: make(chan struct{}), connEnded: make(chan struct{}, 1)}
	n.timerMS.Store(DefaultElectionTimer.Milliseconds())
	if hdr.CID != "" {
		if u, err := ovsdb.ParseUUID(hdr.CID); err == nil {
			n.cid.Store(&u)
		}
	} else if v, err := st.Get([]byte(cidKey)); err == nil {
		if u, err := ovsdb.ParseUUID(string(v)); err == nil {
			n.cid.Store(&u)
		}
	}
	n.layer, err = listenPeers(hdr.Local, peerConfig{TLS: opts.TLS, Self: n.selfHello, Admit: n.admit, Log: n.log,
		Ctrl: func(c net.Conn, h hello, admit func() error) { serveCtrl(c, h, admit, n.handle) }})
	if err != nil {
		st.close()
		return nil, err
	}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Output: slogWriter{n.log}, Level: hclog.Info, DisableTime: true})
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: &watchedStream{StreamLayer: n.layer, ended: n.peerConnEnded}, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog})
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(sid.String())
	conf.Logger = hlog
	conf.MaxAppendEntries = 1024
	conf.BatchApplyCh = true
	conf.CommitTimeout = 10 * time.Millisecond
	conf.SnapshotThreshold = opts.SnapshotThreshold
	conf.SnapshotInterval = opts.SnapshotInterval
	conf.TrailingLogs = opts.TrailingLogs
	conf.NoLegacyTelemetry = true
	setTimer(conf, n.timerMS.Load())
	// raft restores the latest snapshot here (Restore), which serves the
	// database with the timer the snapshot holds: the timer is set
	// again below.
	// The leader's own entries are fsynced while raft replicates them
	// (one fsync's wait instead of two in a row); durableTransport and
	// complete keep what followers apply and what clients hear of on a
	// majority's disk all the same.
	st.deferSync = func() bool {
		select {
		case <-n.ready:
			return n.raft.State() == raft.Leader
		default:
			return false
		}
	}
	n.dtrans = &durableTransport{NetworkTransport: n.trans, store: st, localID: conf.LocalID, peers: map[raft.ServerAddress]*peerCommit{}}
	r, err := raft.NewRaft(conf, n, st, st, st, n.dtrans)
	if err != nil {
		n.trans.Close()
		st.close()
		return nil, fmt.Errorf("starting raft for %s: %w", path, err)
	}
	n.raft = r
	close(n.ready)
	n.applyTimer(n.timerMS.Load())
	ctx, n.cancel = context.WithCancel(ctx)
	n.nudgeTimer = time.AfterFunc(time.Hour, func() { n.nudge(ctx) })
	n.nudgeTimer.Stop()
	n.wg.Add(2)
	go func() { defer n.wg.Done(); n.watch(ctx) }()
	go func() { defer n.wg.Done(); n.watchLeader(ctx) }()
	if n.cid.Load() == nil {
		n.wg.Add(1)
		go func() { defer n.wg.Done(); n.join(ctx, hdr.Remotes) }()
	}
	return n, nil
}

// cidKey is the stable key under which a joined server keeps the
// cluster's id.
const cidKey = "govn_cid"

// setTimer makes raft's timeouts follow an OVSDB election timer: a
// follower that hears nothing from the leader for 0.6-1.2 times the timer
// starts an election (ovsdb-server waits the timer plus up to a second),
// and a candidate whose election failed tries again after as long. The
// leader sends heartbeats ten times as often, and steps down when it has
// not heard from a majority for half the timer.
func setTimer(c *raft.Config, ms int64) {
	t := time.Duration(ms) * time.Millisecond
	c.HeartbeatTimeout = t * 3 / 5
	c.ElectionTimeout = t * 3 / 5
	c.LeaderLeaseTimeout = t / 2
}

func (n *Node) applyTimer(ms int64) {
	<-n.ready
	rc := n.raft.ReloadableConfig()
	var c raft.Config
	setTimer(&c, ms)
	rc.HeartbeatTimeout, rc.ElectionTimeout = c.HeartbeatTimeout, c.ElectionTimeout
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("changing the election timer failed", "ms", ms, "err", err)
	}
}

// watchedStream is the peer layer as raft's transport sees it, telling
// the node when a connection that a peer opened to it ends: when the
// leader's process dies, the connections it replicated on end at once.
type watchedStream struct {
	raft.StreamLayer
	ended func()
}

func (s *watchedStream) Accept() (net.Conn, error) {
	c, err := s.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, ended: s.ended}, nil
}

type watchedConn struct {
	net.Conn
	ended func()
	once  sync.Once
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.once.Do(c.ended)
	}
	return n, err
}

func (n *Node) peerConnEnded() {
	select {
	case n.connEnded <- struct{}{}:
	default:
	}
}

// watchLeader calls an election sooner when the leader's process is
// gone: after a connection from a peer ended, a follower dials the
// leader, and if its address refuses connections (nothing listens there:
// the process died; a host that died refuses nothing and is left to the
// election timer) it waits only half the election timer for the leader
// instead of 0.6-1.2 timers, until the election is over. Calling an
// election early is always safe in Raft; ovsdb-server waits the timer.
func (n *Node) watchLeader(ctx context.Context) {
	var restore *time.Timer
	for {
		select {
		case <-ctx.Done():
			if restore != nil {
				restore.Stop()
			}
			return
		case <-n.connEnded:
		}
		if n.raft.State() != raft.Follower {
			continue
		}
		addr, _ := n.raft.LeaderWithID()
		if addr == "" {
			continue
		}
		c, err := n.layer.Dial(addr, time.Second)
		if err == nil {
			c.Close()
			continue
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			continue
		}
		ms := n.timerMS.Load()
		var short raft.Config
		setTimer(&short, ms)
		rc := n.raft.ReloadableConfig()
		// raft allows no heartbeat timeout below the leader lease.
		rc.HeartbeatTimeout = short.LeaderLeaseTimeout
		if err := n.raft.ReloadConfig(rc); err != nil {
			n.log.Warn("shortening the wait for the leader", "err", err)
			continue
		}
		n.log.Info("the leader's address refuses connections: calling an election after half the election timer", "leader", addr)
		if restore != nil {
			restore.Stop()
		}
		restore = time.AfterFunc(2*time.Duration(ms)*time.Millisecond, func() { n.applyTimer(n.timerMS.Load()) })
	}
}

// Name is the database's name.
func (n *Node) Name() string { return n.name }

// Close stops the member: raft shuts down, proposals not yet committed
// fail, and the file is closed.
func (n *Node) Close() error {
	n.cancel()
	n.nudgeTimer.Stop()
	err := n.raft.Shutdown().Error()
	n.wg.Wait()
	n.trans.Close()
	n.layer.Close()
	if cerr := n.store.close(); err == nil {
		err = cerr
	}
	return err
}

// Writable is server.Replicator's: this member leads and has applied all
// that came before its leadership.
func (n *Node) Writable() bool { return n.writable && !n.left.Load() }

// proposal is a transaction handed to raft; it is the server's Durable.
// Its raft future is waited for by Wait alone (a future has one
// waiter), on the goroutine that replies: no goroutine in between.
type proposal struct {
	n     *Node
	f     raft.ApplyFuture
	once  sync.Once
	done  chan struct{}
	err   error
	index uint64
}

// Done is closed once Wait has returned.
func (p *proposal) Done() <-chan struct{} { return p.done }

// Wait waits until raft has committed the transaction and it is on this
// leader's disk too (raft counts the leader's entry as stored once it
// is written; see store.deferSync). A raft future cannot be abandoned,
// so ctx only bounds the wait for this member's fsync; raft itself
// fails the future if this member loses its leadership or stops.
func (p *proposal) Wait(ctx context.Context) error {
	p.once.Do(func() {
		err := p.f.Error()
		if err == nil {
			p.index = p.f.Index()
			err = p.n.store.waitDurable(ctx, p.index)
		}
		p.err = err
		close(p.done)
	})
	<-p.done
	return p.err
}

// Propose is server.Replicator's: it hands the transaction to raft as
// one log entry. Callers hold the database's lock, so entries are
// proposed in commit order; raft writes all the entries queued while it
// wrote the previous ones with one write and one fsync, and replicates
// them in one round (Config.BatchApplyCh).
func (n *Node) Propose(id ovsdb.UUID, cs *ovsdb.ChangeSet) (server.Durable, error) {
	if !n.writable {
		return nil, server.ErrNotLeader
	}
	data := appendCommand(nil, n.origin, n.epoch, id, cs.RecordAll(n.schema.Load()))
	n.pending = append(n.pending, pendingTxn{id: id, cs: cs, data: data})
	return &proposal{n: n, f: n.raft.Apply(data, 0), done: make(chan struct{})}, nil
}

// durableTransport is raft's transport with the commit index a leader
// sends its followers held back to the entries on its own disk: the
// leader's entries are fsynced while they are replicated
// (store.deferSync), so raft may count one as committed when it is
// written here and on one follower's disk; followers apply it only once
// it is on a majority's.
//
// It also remembers, per follower, the commit index last sent and the
// leader's term, for nudge.
type durableTransport struct {
	*raft.NetworkTransport
	store   *store
	localID raft.ServerID

	mu    sync.Mutex
	peers map[raft.ServerAddress]*peerCommit
}

// peerCommit is what a follower was last told.
type peerCommit struct {
	id     raft.ServerID
	term   uint64 // of the leader that sent it
	commit uint64
	sent   uint64 // the last entry sent
	busy   bool   // a nudge is on its way
}

func (t *durableTransport) clamp(id raft.ServerID, target raft.ServerAddress, a *raft.AppendEntriesRequest) {
	if d := t.store.durableIndex(); a.LeaderCommitIndex > d {
		a.LeaderCommitIndex = d
	}
	t.mu.Lock()
	p := t.peers[target]
	if p == nil || p.term != a.Term {
		p = &peerCommit{id: id, term: a.Term}
		t.peers[target] = p
	}
	p.id, p.commit = id, max(p.commit, a.LeaderCommitIndex)
	if k := len(a.Entries); k > 0 {
		p.sent = max(p.sent, a.Entries[k-1].Index)
	}
	t.mu.Unlock()
}

func (t *durableTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	t.clamp(id, target, args)
	return t.NetworkTransport.AppendEntries(id, target, args, resp)
}

func (t *durableTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &durablePipeline{AppendPipeline: p, t: t, id: id, target: target}, nil
}

type durablePipeline struct {
	raft.AppendPipeline
	t      *durableTransport
	id     raft.ServerID
	target raft.ServerAddress
}

func (p *durablePipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.t.clamp(p.id, p.target, args)
	return p.AppendPipeline.AppendEntries(args, resp)
}

// nudge tells every follower of the leader in term that has not heard
// it yet that entry c (committed, on this leader's disk) is committed:
// an AppendEntries with no entries whose previous entry is c, as raft's
// own replication sends when commits stop (but only after
// Config.CommitTimeout). Followers then apply c and tell their monitors
// without waiting for that timer. A follower that does not have c yet
// refuses it and learns c from the leader's next append.
func (t *durableTransport) nudge(term, c uint64) {
	local := t.LocalAddr()
	t.mu.Lock()
	defer t.mu.Unlock()
	for addr, p := range t.peers {
		// A follower is told no more than it was sent.
		c := min(c, p.sent)
		if p.term != term || p.commit >= c || p.busy {
			continue
		}
		var l raft.Log
		if err := t.store.GetLog(c, &l); err != nil {
			continue
		}
		p.busy = true
		req := &raft.AppendEntriesRequest{
			RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(t.localID), Addr: t.EncodePeer(t.localID, local)},
			Term:              term,
			Leader:            t.EncodePeer(t.localID, local),
			PrevLogEntry:      c,
			PrevLogTerm:       l.Term,
			LeaderCommitIndex: c,
		}
		id := p.id // clamp may change p.id meanwhile, under t.mu
		go func() {
			var resp raft.AppendEntriesResponse
			err := t.NetworkTransport.AppendEntries(id, addr, req, &resp)
			t.mu.Lock()
			p.busy = false
			if err == nil && resp.Success {
				p.commit = max(p.commit, c)
			}
			t.mu.Unlock()
		}()
	}
}

// nudgeDelay is how long a leader waits after it last applied an entry
// before it nudges the followers: under load the next append, moments
// later, carries the commit index anyway.
const nudgeDelay = time.Millisecond

// nudge tells the followers the commit index (durableTransport.nudge)
// once this leader has applied nothing for nudgeDelay.
func (n *Node) nudge(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	term := n.raft.CurrentTerm()
	if n.raft.State() != raft.Leader {
		return
	}
	n.dtrans.nudge(term, min(n.appliedIndex(), n.store.durableIndex()))
}

// Apply is raft.FSM's: it applies one committed entry.
func (n *Node) Apply(l *raft.Log) any {
	defer n.setApplied(l.Index)
	select {
	case <-n.ready:
		if n.raft.State() == raft.Leader {
			n.nudgeTimer.Reset(nudgeDelay) // Apply runs on raft's FSM goroutine alone
		}
	default: // raft is starting
	}
	if l.Type != raft.LogCommand || l.Index <= n.replayedTo {
		return nil // replayed at start (see replayCommitted)
	}
	rep := n.rep.Load()
	if rep != nil && n.applyOwn(rep, l.Data) {
		return nil
	}
	c, err := decodeCommand(l.Data)
	if err != nil {
		n.log.Error("undecodable raft entry", "index", l.Index, "err", err)
		return err
	}
	if c.Timer > 0 {
		n.timerMS.Store(c.Timer)
		go n.applyTimer(c.Timer)
	}
	if len(c.Txns) == 0 {
		return nil
	}
	if rep == nil {
		n.log.Error("raft entry with transactions before the database's snapshot", "index", l.Index)
		return nil
	}
	rep.Do(func() {
		last := c.Txns[len(c.Txns)-1].ID
		if n.writable && c.Origin == n.origin && c.Epoch == n.epoch && len(n.pending) >= len(c.Txns) && n.pending[len(c.Txns)-1].id == last {
			// This leader's own entry, which applyOwn missed
			// (raft handed over a copy of its data): applied
			// when it was proposed.
			clear(n.pending[:len(c.Txns)])
			n.pending = n.pending[len(c.Txns):]
			n.committedTxn = last
			return
		}
		if n.writable || len(n.pending) > 0 {
			// Someone else's entry: this member no longer leads,
			// whatever it thought.
			n.writable = false
			n.rollbackLocked(rep)
		}
		db := rep.DatabaseLocked()
		for _, t := range c.Txns {
			cs, err := db.DecodeRecord(t.Tables, false)
			if err != nil {
				n.log.Error("a replicated transaction does not apply; this member's copy now differs", "index", l.Index, "txn", t.ID, "err", err)
				continue
			}
			rep.ApplyLocked(t.ID, cs)
		}
		n.committedTxn = last
	})
	return nil
}

// applyOwn reports whether the committed entry data is the oldest of the
// transactions this leader proposed and applied at once (pending): raft
// hands the FSM the very slice that Propose gave it, so the entry is
// known by its memory, not decoded again. It is then done with.
func (n *Node) applyOwn(rep *server.Replica, data []byte) (own bool) {
	rep.Do(func() {
		if !n.writable || len(n.pending) == 0 {
			return
		}
		p := n.pending[0]
		if len(p.data) == 0 || len(p.data) != len(data) || &p.data[0] != &data[0] {
			return
		}
		n.committedTxn = p.id
		n.pending[0] = pendingTxn{}
		n.pending = n.pending[1:]
		own = true
	})
	return own
}

// appendCommand appends the raft entry of one transaction (a command
// with one txnData) as json.Marshal would encode it, but without
// reflection or re-checking the rows' JSON, which the ovsdb package
// encoded.
func appendCommand(b []byte, origin string, epoch uint64, id ovsdb.UUID, tables map[string]map[string]json.RawMessage) []byte {
	b = append(b, `{"o":`...)
	b = ovsdb.AppendJSONString(b, origin)
	b = append(b, `,"e":`...)
	b = strconv.AppendUint(b, epoch, 10)
	b = append(b, `,"x":[{"id":"`...)
	b = append(b, id.String()...)
	b = append(b, `","r":{`...)
	first := true
	for tn, rows := range tables {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = ovsdb.AppendJSONString(b, tn)
		b = append(b, ":{"...)
		firstRow := true
		for u, row := range rows {
			if !firstRow {
				b = append(b, ',')
			}
			firstRow = false
			b = ovsdb.AppendJSONString(b, u)
			b = append(b, ':')
			if row == nil {
				b = append(b, "null"...)
			} else {
				b = append(b, row...)
			}
		}
		b = append(b, '}')
	}
	return append(b, "}}]}"...)
}

// rollbackLocked undoes the transactions applied here that raft has not
// committed (this member lost its leadership meanwhile), as one commit
// that monitors see. The cluster may still commit them; then they are
// applied again like any other member's. Callers hold the database lock.
func (n *Node) rollbackLocked(rep *server.Replica) {
	if len(n.pending) == 0 {
		return
	}
	db := rep.DatabaseLocked()
	revert := &ovsdb.ChangeSet{Tables: map[string]map[ovsdb.UUID]*ovsdb.RowChange{}}
	for _, p := range n.pending {
		for tn, rows := range p.cs.Tables {
			rt := revert.Tables[tn]
			if rt == nil {
				rt = map[ovsdb.UUID]*ovsdb.RowChange{}
				revert.Tables[tn] = rt
			}
			for u, ch := range rows {
				if _, ok := rt[u]; !ok {
					rt[u] = &ovsdb.RowChange{Old: db.Table(tn).Rows[u], New: ch.Old}
				}
			}
		}
	}
	for tn, rows := range revert.Tables {
		for u, ch := range rows {
			if ch.Old == nil && ch.New == nil {
				delete(rows, u)
			}
		}
		if len(rows) == 0 {
			delete(revert.Tables, tn)
		}
	}
	n.log.Warn("rolling back transactions the cluster did not commit", "count", len(n.pending))
	clear(n.pending)
	n.pending = nil
	rep.ForgetHistoryLocked()
	rep.ApplyLocked(n.committedTxn, revert)
}

func (n *Node) setApplied(idx uint64) {
	// What is applied is committed: the file learns it with the next
	// entries it stores.
	n.store.StageCommitIndex(idx)
	n.appliedMu.Lock()
	if idx > n.applied {
		n.applied = idx
		close(n.appliedCh)
		n.appliedCh = make(chan struct{})
	}
	n.appliedMu.Unlock()
}

func (n *Node) appliedIndex() uint64 {
	n.appliedMu.Lock()
	defer n.appliedMu.Unlock()
	return n.applied
}

// waitApplied waits until this member has applied entry idx.
func (n *Node) waitApplied(ctx context.Context, idx uint64) error {
	for {
		n.appliedMu.Lock()
		a, ch := n.applied, n.appliedCh
		n.appliedMu.Unlock()
		if a >= idx {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Snapshot is raft.FSM's: it captures the committed contents (without the
// transactions applied here but not yet committed).
func (n *Node) Snapshot() (raft.FSMSnapshot, error) {
	rep := n.rep.Load()
	if rep == nil {
		return nil, errors.New("no database yet")
	}
	snap := &fsmSnapshot{schema: n.schema.Load(), timer: n.timerMS.Load(), rows: map[string]map[ovsdb.UUID]*ovsdb.Row{}}
	rep.Do(func() {
		db := rep.DatabaseLocked()
		for _, tn := range db.Schema.TableNames {
			m := make(map[ovsdb.UUID]*ovsdb.Row, len(db.Table(tn).Rows))
			for u, r := range db.Table(tn).Rows {
				m[u] = r
			}
			snap.rows[tn] = m
		}
		for i := len(n.pending) - 1; i >= 0; i-- {
			for tn, rows := range n.pending[i].cs.Tables {
				for u, ch := range rows {
					if ch.Old == nil {
						delete(snap.rows[tn], u)
					} else {
						snap.rows[tn][u] = ch.Old
					}
				}
			}
		}
		snap.txn = n.committedTxn
	})
	return snap, nil
}

type fsmSnapshot struct {
	schema *ovsdb.Schema
	txn    ovsdb.UUID
	timer  int64
	rows   map[string]map[ovsdb.UUID]*ovsdb.Row
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	cs := &ovsdb.ChangeSet{Tables: map[string]map[ovsdb.UUID]*ovsdb.RowChange{}}
	for tn, rows := range s.rows {
		m := make(map[ovsdb.UUID]*ovsdb.RowChange, len(rows))
		for u, r := range rows {
			m[u] = &ovsdb.RowChange{New: r}
		}
		cs.Tables[tn] = m
	}
	data, err := json.Marshal(snapshotData{Schema: s.schema.JSON(), Txn: s.txn, Timer: s.timer, Tables: cs.RecordAll(s.schema)})
	if err == nil {
		_, err = sink.Write(data)
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("writing snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// Restore is raft.FSM's: it replaces the contents with a snapshot's, at
// start (then the database starts being served) or when the leader sent
// one because this member was too far behind (then monitors see the
// difference as one commit).
func (n *Node) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("reading snapshot: %w", err)
	}
	var sd snapshotData
	if err := json.Unmarshal(b, &sd); err != nil {
		return fmt.Errorf("decoding snapshot: %w", err)
	}
	schema, err := ovsdb.ParseSchema(sd.Schema)
	if err != nil {
		return fmt.Errorf("snapshot's schema: %w", err)
	}
	db := ovsdb.NewDatabase(schema)
	if err := db.ApplyRecord(sd.Tables, false); err != nil {
		return fmt.Errorf("snapshot's data: %w", err)
	}
	if sd.Timer > 0 {
		n.timerMS.Store(sd.Timer)
		select {
		case <-n.ready:
			go n.applyTimer(sd.Timer)
		default: // Start applies it
		}
	}
	rep := n.rep.Load()
	if rep == nil {
		n.schema.Store(schema)
		n.committedTxn = sd.Txn
		select {
		case <-n.ready:
		default:
			n.replayCommitted(db)
		}
		rep, err := n.srv.AddClusteredDatabase(db, n, n.status(), n.committedTxn)
		if err != nil {
			return err
		}
		n.rep.Store(rep)
		n.log.Info("serving clustered database")
		return nil
	}
	rep.Do(func() {
		n.writable = false
		n.rollbackLocked(rep)
		rep.ApplyLocked(sd.Txn, diff(rep.DatabaseLocked(), db))
		n.committedTxn = sd.Txn
	})
	return nil
}

// replayCommitted applies to db, restored at start from this member's
// latest snapshot, the entries after it that its file says were committed,
// so that a restarted member serves what it had before it hears from a
// leader. raft applies them again once it learns the commit index; Apply
// skips them. (raft's own RestoreCommittedLogs would do this but then
// misses the configuration changes among those entries.)
func (n *Node) replayCommitted(db *ovsdb.Database) {
	st := n.store
	st.mu.Lock()
	var from uint64
	if st.snap != nil {
		from = st.snap.Index + 1
	}
	var logs []raft.Log
	if len(st.entries) > 0 {
		upTo := min(st.commit, st.entries[len(st.entries)-1].Index)
		for _, l := range st.entries {
			if l.Index >= from && l.Index <= upTo {
				logs = append(logs, l)
			}
		}
	}
	st.mu.Unlock()
	for _, l := range logs {
		n.replayedTo = l.Index
		if l.Type != raft.LogCommand {
			continue
		}
		var c command
		if err := json.Unmarshal(l.Data, &c); err != nil {
			n.log.Error("undecodable raft entry", "index", l.Index, "err", err)
			continue
		}
		if c.Timer > 0 {
			n.timerMS.Store(c.Timer)
		}
		for _, t := range c.Txns {
			if err := db.ApplyRecord(t.Tables, false); err != nil {
				n.log.Error("a committed transaction in the file does not apply", "index", l.Index, "txn", t.ID, "err", err)
				continue
			}
			n.committedTxn = t.ID
		}
	}
	if len(logs) > 0 {
		n.log.Info("applied the committed entries of the file", "from", logs[0].Index, "to", n.replayedTo)
	}
}

// diff is the change set that turns a's contents into b's (same schema).
func diff(a, b *ovsdb.Database) *ovsdb.ChangeSet {
	cs := &ovsdb.ChangeSet{Tables: map[string]map[ovsdb.UUID]*ovsdb.RowChange{}}
	for _, tn := range a.Schema.TableNames {
		ta, tb := a.Table(tn), b.Table(tn)
		if tb == nil {
			continue
		}
		m := map[ovsdb.UUID]*ovsdb.RowChange{}
		for u, r := range ta.Rows {
			if nr, ok := tb.Rows[u]; !ok {
				m[u] = &ovsdb.RowChange{Old: r}
			} else if !nr.SameData(r) {
				m[u] = &ovsdb.RowChange{Old: r, New: nr}
			}
		}
		for u, r := range tb.Rows {
			if _, ok := ta.Rows[u]; !ok {
				m[u] = &ovsdb.RowChange{New: r}
			}
		}
		if len(m) > 0 {
			cs.Tables[tn] = m
		}
	}
	return cs
}

// watch follows this member's role: after winning an election it waits
// until everything before is applied (a barrier) and then takes writes;
// on losing leadership it stops taking them and rolls back what raft did
// not commit. It keeps _Server.Database up to date.
func (n *Node) watch(ctx context.Context) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.raft.LeaderCh():
		case <-t.C:
		}
		n.checkRole()
		if rep := n.rep.Load(); rep != nil {
			if err := rep.SetStatus(n.status()); err != nil {
				n.log.Warn("updating _Server", "err", err)
			}
		}
	}
}

func (n *Node) checkRole() {
	rep := n.rep.Load()
	if rep == nil {
		return
	}
	leading := n.raft.State() == raft.Leader
	var writable bool
	rep.Do(func() {
		writable = n.writable
		if writable && !leading {
			n.writable = false
			n.rollbackLocked(rep)
			n.log.Info("no longer the leader; not taking writes")
		}
	})
	if leading && !writable && n.barrier.CompareAndSwap(false, true) {
		go func() {
			defer n.barrier.Store(false)
			if err := n.raft.Barrier(0).Error(); err != nil {
				return
			}
			if n.raft.State() != raft.Leader {
				return
			}
			rep.Do(func() {
				n.rollbackLocked(rep)
				n.epoch++
				n.writable = true
			})
			n.wonAt.Store(time.Now().UnixMilli())
			n.log.Info("leader: taking writes", "term", n.raft.CurrentTerm())
		}()
	}
}

// status is what _Server.Database shows.
func (n *Node) status() server.ClusterStatus {
	st := server.ClusterStatus{SID: n.sid, Index: int64(n.appliedIndex())}
	select {
	case <-n.ready:
		// Raft's configuration entries, which the FSM does not see,
		// count too.
		st.Index = int64(max(n.appliedIndex(), n.raft.AppliedIndex()))
	default:
	}
	if c := n.cid.Load(); c != nil {
		st.CID = *c
	}
	select {
	case <-n.ready:
	default:
		return st
	}
	if n.left.Load() {
		return st
	}
	addr, _ := n.raft.LeaderWithID()
	st.Connected = addr != "" && st.CID != ovsdb.UUID{}
	if rep := n.rep.Load(); rep != nil {
		rep.Do(func() { st.Leader = n.writable })
	}
	return st
}

// leaderAddr returns the leader's peer address, or "".
func (n *Node) leaderAddr() string {
	addr, _ := n.raft.LeaderWithID()
	return string(addr)
}

// handle answers another member's (or a joining server's) request.
func (n *Node) handle(req *request) *response {
	<-n.ready
	if n.raft.State() != raft.Leader {
		return &response{NotLeader: true, Leader: n.leaderAddr()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch req.Op {
	case "txn":
		rep := n.rep.Load()
		if rep == nil {
			return &response{NotLeader: true}
		}
		reply, dur, err := rep.Transact(req.Params)
		if errors.Is(err, server.ErrNotLeader) {
			return &response{NotLeader: true, Leader: n.leaderAddr()}
		}
		if err != nil {
			return &response{Error: err.Error()}
		}
		resp := &response{Reply: reply, Index: n.appliedIndex()}
		if dur != nil {
			if err := dur.Wait(ctx); err != nil {
				return &response{Error: fmt.Sprintf("commit outcome unknown: %v", err)}
			}
			if p, ok := dur.(*proposal); ok {
				resp.Index = p.index
			}
		}
		return resp
	case "join":
		if req.Name != n.name {
			return &response{Error: fmt.Sprintf("this cluster serves %s, not %s", n.name, req.Name)}
		}
		if _, err := ovsdb.ParseUUID(req.SID); err != nil {
			return &response{Error: "bad server id"}
		}
		if _, _, err := net.SplitHostPort(req.Addr); err != nil {
			return &response{Error: "bad address"}
		}
		if err := n.raft.AddVoter(raft.ServerID(req.SID), raft.ServerAddress(req.Addr), 0, 20*time.Second).Error(); err != nil {
			return &response{Error: fmt.Sprintf("adding server: %v", err)}
		}
		n.log.Info("server joined the cluster", "sid", req.SID, "addr", req.Addr)
		cid := n.cid.Load()
		if cid == nil {
			return &response{Error: "this member does not know the cluster's id"}
		}
		return &response{CID: cid.String()}
	case "remove":
		if err := n.raft.RemoveServer(raft.ServerID(req.SID), 0, 20*time.Second).Error(); err != nil {
			return &response{Error: fmt.Sprintf("removing server: %v", err)}
		}
		n.log.Info("server removed from the cluster", "sid", req.SID)
		return &response{}
	case "timer":
		data, _ := json.Marshal(command{Timer: req.MS})
		if err := n.raft.Apply(data, 10*time.Second).Error(); err != nil {
			return &response{Error: fmt.Sprintf("changing the election timer: %v", err)}
		}
		return &response{}
	}
	return &response{Error: fmt.Sprintf("unknown request %q", req.Op)}
}

// toLeader sends req to the leader, following redirections and waiting
// for an election for up to wait. A request that reached a leader is
// not sent again (a transaction could commit twice).
func (n *Node) toLeader(ctx context.Context, req *request, wait time.Duration) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		addr := n.leaderAddr()
		if addr != "" {
			resp, err := n.layer.call(ctx, addr, req)
			var oe *net.OpError
			switch {
			case err == nil && !resp.NotLeader:
				if resp.Error != "" {
					return nil, errors.New(resp.Error)
				}
				return resp, nil
			case err != nil && !(errors.As(err, &oe) && oe.Op == "dial"):
				return nil, err
			}
		}
		// Polled often: after a failover the new leader takes writes
		// moments after it is known, and a forwarded write waits on
		// this.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no leader answered: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Forward is server.Replicator's: the leader executes a transaction that
// came to this follower.
func (n *Node) Forward(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	resp, err := n.toLeader(ctx, &request{Op: "txn", Params: params}, 2*time.Duration(n.timerMS.Load())*time.Millisecond+time.Second)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.waitApplied(wctx, resp.Index); err != nil {
		return nil, fmt.Errorf("waiting to apply the forwarded transaction: %w", err)
	}
	return resp.Reply, nil
}

// join asks the remotes to add this server until one (the leader) does.
func (n *Node) join(ctx context.Context, remotes []string) {
	addr, _ := ParseAddress(n.local)
	req := &request{Op: "join", SID: n.sid.String(), Addr: addr, Name: n.name}
	for attempt := 0; ; attempt++ {
		for _, r := range remotes {
			ra, err := ParseAddress(r)
			if err != nil {
				continue
			}
			resp, err := n.layer.call(ctx, ra, req)
			if err == nil && resp.NotLeader && resp.Leader != "" {
				resp, err = n.layer.call(ctx, resp.Leader, req)
			}
			if err != nil || resp.NotLeader || resp.Error != "" {
				if attempt%20 == 0 {
					n.log.Info("joining the cluster: not yet", "remote", r, "err", err, "resp", resp)
				}
				continue
			}
			cid, err := ovsdb.ParseUUID(resp.CID)
			if err != nil {
				continue
			}
			if err := n.store.Set([]byte(cidKey), []byte(cid.String())); err != nil {
				n.log.Error("recording the cluster id", "err", err)
			}
			n.cid.Store(&cid)
			n.log.Info("joined the cluster", "cid", cid)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// slogWriter passes raft's log lines to slog.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	switch {
	case strings.HasPrefix(line, "[ERROR]"):
		w.log.Error(strings.TrimSpace(strings.TrimPrefix(line, "[ERROR]")))
	case strings.HasPrefix(line, "[WARN]") && (strings.Contains(line, "failed to get previous log") || strings.Contains(line, "previous log term mis-match")):
		// A follower refusing an append whose previous entry it does
		// not have yet (the leader guessed ahead, or a nudge came
		// before the entry): raft sends older entries; nothing is
		// wrong.
		w.log.Debug(strings.TrimSpace(strings.TrimPrefix(line, "[WARN]")))
	case strings.HasPrefix(line, "[WARN]"):
		w.log.Warn(strings.TrimSpace(strings.TrimPrefix(line, "[WARN]")))
	case strings.HasPrefix(line, "[DEBUG]"), strings.HasPrefix(line, "[TRACE]"):
		w.log.Debug(line)
	default:
		w.log.Info(strings.TrimSpace(strings.TrimPrefix(line, "[INFO]")))
	}
	return len(p), nil
}
