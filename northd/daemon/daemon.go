package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/govn/govn/incproc"
	"github.com/govn/govn/northd"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema"
)

// LockName is the Southbound lock that makes one northd active.
const LockName = "ovn_northd"

// Config configures a Daemon.
type Config struct {
	// NB and SB are the endpoints of each database ("unix:PATH",
	// "tcp:IP:PORT", "ssl:IP:PORT"), tried in turn.
	NB, SB []string
	// TLS is for ssl: endpoints.
	TLS *tls.Config
	// ProbeInterval, if not zero, makes the clients probe a silent server.
	ProbeInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait before a failed
	// transaction is tried again (defaults 100ms and 4s).
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
	// OnWrite, if not nil, is told about every iteration that wrote the
	// Southbound (metrics), on Run's goroutine.
	OnWrite func(LastWrite)
}

// Daemon is one `govn northd`. New builds it, Run runs it; the other
// methods may be called from any goroutine (the control socket's).
type Daemon struct {
	cfg    Config
	log    *slog.Logger
	engine *incproc.Engine
	nb, sb *client.Client
	wake   chan struct{}

	mu sync.Mutex
	// queue holds the changes reported since the loop last took them.
	queue  changes
	paused bool
	// schemas are the schemas of the last change sets of each database;
	// rebuild says that a database's schema changed since the loop last
	// looked, and the queue holds its whole new contents.
	schemas [2]*ovsdb.Schema
	rebuild [2]bool
	// nbSince is when the oldest Northbound change in the queue arrived.
	nbSince time.Time
	// last is what the last iteration that wrote the Southbound took;
	// lastRun the last engine run.
	last    LastWrite
	lastRun lastRun

	// The rest belongs to the loop.
	state   *northd.State
	inputs  map[tableKey]*incproc.Node
	batch   changes // taken from queue, not yet applied to state
	bfd     *bfdStatus
	locked  bool // the loop asked for the lock (not paused)
	active  bool // the last iteration ran active
	ranOnce bool // the engine has run (the first run is a full compute)
	// batchSince is when the oldest Northbound change in batch arrived.
	batchSince time.Time
	backoff    time.Duration
}

// New returns a Daemon for cfg; it connects when Run starts.
func New(cfg Config) (*Daemon, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(4*time.Second, cfg.MinBackoff)
	}
	d := &Daemon{
		cfg:    cfg,
		log:    cfg.Logger,
		wake:   make(chan struct{}, 1),
		queue:  make(changes),
		batch:  make(changes),
		inputs: make(map[tableKey]*incproc.Node),
		bfd:    newBFDStatus(),
	}
	// Both clients use only a cluster's leader, as the OVS IDL that
	// ovn-northd uses does by default: a lock is held on the server a
	// client is connected to, not replicated, so two northd on two
	// servers of a cluster could both hold ovn_northd.
	var err error
	d.nb, err = client.New(client.Options{
		LeaderOnly: true,
		Endpoints:  cfg.NB, TLS: cfg.TLS, Database: "OVN_Northbound",
		OnChange:      func(cs client.ChangeSet) { d.enqueue(northd.NB, d.nb, cs) },
		ProbeInterval: cfg.ProbeInterval,
		Logger:        cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("northbound: %w", err)
	}
	sbTables := make(map[string][]string)
	for _, t := range northd.SouthboundTables() {
		sbTables[t] = nil
	}
	d.sb, err = client.New(client.Options{
		LeaderOnly: true,
		Endpoints:  cfg.SB, TLS: cfg.TLS, Database: "OVN_Southbound",
		Tables:        sbTables,
		OnChange:      func(cs client.ChangeSet) { d.enqueue(northd.SB, d.sb, cs) },
		OnLock:        func(string, bool) { d.poke() },
		ProbeInterval: cfg.ProbeInterval,
		Logger:        cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("southbound: %w", err)
	}
	if err := d.buildEngine(); err != nil {
		return nil, err
	}
	return d, nil
}

// tableKey names one table of one database.
type tableKey struct {
	db    northd.DB
	table string
}

// nodeName is the engine's name for a table's input node, as ovn-northd
// names its own: "NB_logical_switch", "SB_logical_DP_group".
func nodeName(k tableKey) string {
	name := strings.ToLower(k.table)
	name = strings.ReplaceAll(name, "_dp_", "_DP_")
	return k.db.String() + "_" + name
}

// buildEngine makes the graph: an input node per table of each database
// (from govn's own copies of the schemas, so that the control socket can
// show the counters before the databases answer), the node "northd", and
// the output node "northd_output".
func (d *Daemon) buildEngine() error {
	d.engine = incproc.New(incproc.Options{Logger: d.log})
	var inputs []incproc.Input
	add := func(db northd.DB, tables []string) {
		slices.Sort(tables)
		for _, t := range tables {
			k := tableKey{db, t}
			n := d.engine.AddInput(nodeName(k))
			d.inputs[k] = n
			inputs = append(inputs, incproc.Input{Node: n, Handler: d.handler(k)})
		}
	}
	nbSchema, err := ovsdb.ParseSchema(schema.MustLookup("nb"))
	if err != nil {
		return fmt.Errorf("northbound schema: %w", err)
	}
	var nbTables []string
	for t := range nbSchema.Tables {
		nbTables = append(nbTables, t)
	}
	add(northd.NB, nbTables)
	add(northd.SB, northd.SouthboundTables())
	compute := d.engine.AddNode("northd", incproc.NodeFuncs{Compute: d.recompute}, inputs...)
	d.engine.AddNode("northd_output", incproc.NodeFuncs{
		Compute: func(r *incproc.Run) error { r.SetUpdated(); return nil },
	}, incproc.Input{Node: compute, Handler: func(r *incproc.Run) (bool, error) {
		r.SetUpdated()
		return true, nil
	}})
	return nil
}

// handler is the northd node's handler for one table's changes: it hands
// them to the state and, once every changed table's are in, regenerates
// what they made stale.
func (d *Daemon) handler(k tableKey) incproc.Handler {
	return func(r *incproc.Run) (bool, error) {
		d.state.Apply(d.batch.take(k))
		if d.batch.empty() {
			d.state.Process()
		}
		r.SetUpdated()
		return true, nil
	}
}

// recompute is the northd node's full compute.
func (d *Daemon) recompute(r *incproc.Run) error {
	d.state.Apply(d.batch.takeAll())
	d.state.Recompute()
	r.SetUpdated()
	return nil
}

// enqueue is the clients' OnChange: it queues a change set and wakes the
// loop. It runs on a client's reader goroutine, so it only queues.
//
// A change set after a reconnection to a server with another schema
// deletes every row and inserts the server's contents: then the queue
// starts afresh with those, and the loop builds a new State.
func (d *Daemon) enqueue(db northd.DB, c *client.Client, cs client.ChangeSet) {
	sch := c.Cache().Schema()
	d.mu.Lock()
	prev := d.schemas[db]
	d.schemas[db] = sch
	if prev != nil && prev != sch && string(prev.JSON()) != string(sch.JSON()) {
		d.log.Info("database schema changed; starting over from its new contents", "db", db.String(), "version", sch.Version)
		d.queue.drop(db)
		d.rebuild[db] = true
		for _, e := range cs.Events {
			if e.New != nil {
				d.queue.add(tableKey{db, e.Table}, nil, e.New)
			}
		}
	} else {
		for _, e := range cs.Events {
			d.queue.add(tableKey{db, e.Table}, e.Old, e.New)
		}
	}
	if db == northd.NB && d.nbSince.IsZero() {
		d.nbSince = time.Now()
	}
	d.mu.Unlock()
	d.poke()
}

// poke wakes the loop.
func (d *Daemon) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run connects to both databases and runs the loop until ctx ends.
func (d *Daemon) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, c := range []*client.Client{d.nb, d.sb} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Run(ctx) }()
	}
	if err := d.nb.WaitConnected(ctx); err != nil {
		return ignoreCancel(ctx, fmt.Errorf("northbound: %w", err))
	}
	if err := d.sb.WaitConnected(ctx); err != nil {
		return ignoreCancel(ctx, fmt.Errorf("southbound: %w", err))
	}
	d.state = northd.New(d.nb.Cache().Schema(), d.sb.Cache().Schema(), northd.Options{Logger: d.log})
	d.log.Info("connected to both databases", "nb", d.cfg.NB, "sb", d.cfg.SB)

	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		case <-retry.C:
		}
		if wait, again := d.safeIterate(ctx); again {
			retry.Reset(wait)
		}
	}
}

func ignoreCancel(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// safeIterate is iterate that survives a panic in the state machine (a
// generator's bug on input nobody foresaw): the panic is logged, the next
// run recomputes everything and the Southbound is compared in full.
func (d *Daemon) safeIterate(ctx context.Context) (wait time.Duration, again bool) {
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("northd iteration failed; recomputing everything after a backoff",
				"panic", p, "stack", string(debug.Stack()))
			d.engine.ForceRecompute()
			d.state.Resync()
			wait, again = d.failed()
		}
	}()
	return d.iterate(ctx)
}

// iterate runs one iteration of the loop (see the package documentation).
// again asks for another iteration after wait, whatever happens meanwhile
// (a transaction failed).
func (d *Daemon) iterate(ctx context.Context) (wait time.Duration, again bool) {
	d.mu.Lock()
	rebuild := d.rebuild
	d.rebuild = [2]bool{}
	for db, r := range rebuild {
		if r {
			// What was not applied yet is about rows that are gone.
			d.batch.drop(northd.DB(db))
		}
	}
	d.batch.merge(d.queue)
	d.queue = make(changes)
	if d.batchSince.IsZero() {
		d.batchSince = d.nbSince
	}
	d.nbSince = time.Time{}
	paused := d.paused
	d.mu.Unlock()
	if rebuild[northd.NB] || rebuild[northd.SB] {
		d.rebuildState(rebuild)
	}

	d.followLock(ctx, paused)
	active := !paused && d.sb.HasLock(LockName)
	if active != d.active {
		switch {
		case active:
			d.log.Info("holding the southbound lock: this northd is now active", "lock", LockName)
		case paused:
			d.log.Info("paused: this northd writes nothing until resumed")
		default:
			d.log.Info("without the southbound lock: this northd is now standby", "lock", LockName)
		}
		if active && d.ranOnce {
			// Another northd wrote meanwhile: compare everything once.
			d.state.Resync()
			d.bfd.resync()
		}
		d.active = active
	}
	if !active {
		return 0, false
	}

	d.bfd.note(d.batch, d.nb.Cache(), d.sb.Cache())
	for k := range d.batch {
		if n := d.inputs[k]; n != nil {
			d.engine.MarkUpdated(n)
		}
	}
	// Tables no input node stands for (a newer server schema) still
	// reach the state.
	unnoded := false
	for k := range d.batch {
		if d.inputs[k] == nil {
			d.state.Apply(d.batch.take(k))
			unnoded = true
		}
	}
	started := time.Now()
	res, err := d.engine.Run(ctx, incproc.RunOptions{AllowRecompute: true})
	if err != nil {
		if ctx.Err() != nil {
			return 0, false
		}
		d.log.Error("engine run failed", "err", err)
		return d.failed()
	}
	if unnoded {
		d.state.Process()
	}
	d.ranOnce = true
	computed := time.Now()
	d.mu.Lock()
	d.lastRun = lastRun{took: computed.Sub(started), recomputed: res.Recomputed > 0}
	d.mu.Unlock()

	txn := d.sb.Txn()
	txn.Add(client.Operation{Op: "assert", Lock: LockName})
	if n := d.state.WriteSB(txn); n > 0 {
		built := time.Now()
		committed, err := txn.Commit(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return 0, false
			}
			d.log.Warn("southbound transaction failed; comparing everything in the next one", "ops", n, "err", err)
			d.state.Resync()
			return d.failed()
		}
		d.state.Committed(committed.UUID)
		d.log.Debug("southbound updated", "ops", n)
		d.noteWrite(LastWrite{Since: d.batchSince, Engine: computed.Sub(started), Build: built.Sub(computed),
			Commit: time.Since(built), Ops: n, Recomputed: res.Recomputed > 0})
	}
	d.batchSince = time.Time{}

	nbTxn := d.nb.Txn()
	if n := d.state.WriteNB(nbTxn); n > 0 {
		if _, err := nbTxn.Commit(ctx); err != nil {
			if ctx.Err() != nil {
				return 0, false
			}
			d.log.Warn("northbound transaction failed", "ops", n, "err", err)
			d.state.ResyncNB()
			return d.failed()
		}
	}
	if _, err := d.bfd.sync(ctx, d.nb, d.sb); err != nil {
		if ctx.Err() != nil {
			return 0, false
		}
		d.log.Warn("BFD status transaction failed; looking at every session in the next one", "err", err)
		return d.failed()
	}
	d.backoff = 0
	return 0, false
}

// LastWrite is what the last iteration that wrote the Southbound took.
type LastWrite struct {
	// Seq counts the iterations that wrote the Southbound.
	Seq int
	// Since is when the oldest Northbound change it applied arrived (zero
	// if none did), so Since until the commit's reply is the latency of a
	// Northbound change to the Southbound inside northd.
	Since time.Time
	// Engine, Build and Commit are the engine run, building the
	// transaction and waiting for its reply.
	Engine, Build, Commit time.Duration
	Ops                   int
	Recomputed            bool
	// Latency is from Since until the commit's reply.
	Latency time.Duration
}

func (d *Daemon) noteWrite(w LastWrite) {
	if !w.Since.IsZero() {
		w.Latency = time.Since(w.Since)
	}
	d.mu.Lock()
	w.Seq = d.last.Seq + 1
	d.last = w
	d.mu.Unlock()
	if d.cfg.OnWrite != nil {
		d.cfg.OnWrite(w)
	}
}

// lastRun is how long the last engine run took and whether it recomputed.
type lastRun struct {
	took       time.Duration
	recomputed bool
}

// Last returns what the last iteration that wrote the Southbound took.
func (d *Daemon) Last() LastWrite {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// showLast is the answer to northd/last-write: LastWrite's fields, and
// the last engine run's (which may have written nothing), one "name:
// value" a line, durations in microseconds.
func (d *Daemon) showLast() string {
	d.mu.Lock()
	w, r := d.last, d.lastRun
	d.mu.Unlock()
	return fmt.Sprintf("seq: %d\nnb-to-sb-usec: %d\nengine-usec: %d\nbuild-usec: %d\ncommit-usec: %d\nops: %d\nrecomputed: %t\n"+
		"last-run-engine-usec: %d\nlast-run-recomputed: %t\n",
		w.Seq, w.Latency.Microseconds(), w.Engine.Microseconds(), w.Build.Microseconds(), w.Commit.Microseconds(), w.Ops, w.Recomputed,
		r.took.Microseconds(), r.recomputed)
}

// rebuildState replaces the State by a new one for the current schemas:
// the databases whose schema changed start from the batch (which holds
// their whole contents), the others from the old State's snapshot. The
// next run is a full recompute.
func (d *Daemon) rebuildState(rebuild [2]bool) {
	old := d.state
	d.state = northd.New(d.nb.Cache().Schema(), d.sb.Cache().Schema(), northd.Options{Logger: d.log})
	for _, db := range []northd.DB{northd.NB, northd.SB} {
		if !rebuild[db] {
			d.state.Apply(old.Snapshot(db))
		}
	}
	d.engine.ForceRecompute()
	d.bfd.resync()
}

// failed returns the wait before the next attempt, doubling it each time.
func (d *Daemon) failed() (time.Duration, bool) {
	d.backoff = min(max(2*d.backoff, d.cfg.MinBackoff), d.cfg.MaxBackoff)
	return d.backoff, true
}

// followLock asks for the lock when running and gives it up when paused,
// as ovn-northd does, so that a paused northd lets a standby take over.
func (d *Daemon) followLock(ctx context.Context, paused bool) {
	switch {
	case !paused && !d.locked:
		if _, err := d.sb.Lock(ctx, LockName); err != nil && ctx.Err() == nil {
			// The client asks again when it reconnects.
			d.log.Warn("asking for the southbound lock", "lock", LockName, "err", err)
		}
		d.locked = true
	case paused && d.locked:
		if err := d.sb.Unlock(ctx, LockName); err != nil && ctx.Err() == nil {
			d.log.Warn("giving the southbound lock up", "lock", LockName, "err", err)
		}
		d.locked = false
	}
}

func statusWord(paused, active bool) string {
	switch {
	case paused:
		return "paused"
	case active:
		return "active"
	}
	return "standby"
}

// Status is the answer to "status", as ovn-northd words it.
func (d *Daemon) Status() string {
	d.mu.Lock()
	paused := d.paused
	d.mu.Unlock()
	return "Status: " + statusWord(paused, d.sb.HasLock(LockName)) + "\n"
}

// SetPaused pauses or resumes the daemon.
func (d *Daemon) SetPaused(p bool) {
	d.mu.Lock()
	d.paused = p
	d.mu.Unlock()
	d.poke()
}

// Paused says whether the daemon is paused.
func (d *Daemon) Paused() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.paused
}

// Engine returns the incremental-processing engine, for its counters and
// commands.
func (d *Daemon) Engine() *incproc.Engine { return d.engine }

// connected says whether c has a session up now.
func connected(c *client.Client) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return c.WaitConnected(ctx) == nil
}

// Commands returns the control socket commands ovn-northd answers, but
// exit (which the caller owns): status, pause, resume, is-paused,
// nb-connection-status, sb-connection-status and the inc-engine/ ones;
// and govn's northd/last-write (LastWrite).
func (d *Daemon) Commands() map[string]func(args []string) (string, error) {
	noArgs := func(name string, f func() string) func([]string) (string, error) {
		return func(args []string) (string, error) {
			if len(args) > 0 {
				return "", fmt.Errorf("%q command takes at most 0 arguments", name)
			}
			return f(), nil
		}
	}
	connStatus := func(c *client.Client) func() string {
		return func() string {
			if connected(c) {
				return "connected\n"
			}
			return "not connected\n"
		}
	}
	cmds := map[string]func([]string) (string, error){
		"status":               noArgs("status", d.Status),
		"pause":                noArgs("pause", func() string { d.SetPaused(true); return "" }),
		"resume":               noArgs("resume", func() string { d.SetPaused(false); return "" }),
		"is-paused":            noArgs("is-paused", func() string { return fmt.Sprintf("%t\n", d.Paused()) }),
		"nb-connection-status": noArgs("nb-connection-status", connStatus(d.nb)),
		"sb-connection-status": noArgs("sb-connection-status", connStatus(d.sb)),
		// govn's own: what the last Southbound write took, for govn
		// bench northd.
		"northd/last-write": noArgs("northd/last-write", d.showLast),
	}
	for name, f := range d.engine.Commands(d.poke) {
		cmds[name] = f
	}
	return cmds
}
