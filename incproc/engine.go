package incproc

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure an Engine. The zero value is usable.
type Options struct {
	// Logger receives the engine's messages: one at debug level per
	// fallback to recompute (node, input, reason, duration), at info level
	// when a recompute or handler took SlowThreshold or longer, and one at
	// info level per cancelled run. Nil discards them.
	Logger *slog.Logger
	// Now is the clock for the time counters; nil means time.Now. Tests
	// pass a fake to make the durations deterministic.
	Now func() time.Time
	// SlowThreshold is how long a recompute or handler may take before its
	// log message is raised to info level; zero means 500ms, as
	// ovn-northd's inc-engine/compute-log-timeout defaults to.
	SlowThreshold time.Duration
}

// NodeFuncs are what a node does. All are optional: a node without inputs
// and without Compute is an input node, fed by the caller (MarkUpdated).
type NodeFuncs struct {
	// Compute rebuilds the node's data from all its inputs' data. It calls
	// r.SetUpdated if the data changed (or might have: a recompute that
	// cannot tell should say updated). A node with no inputs and a Compute
	// is a source: its Compute runs on every Run and decides by itself
	// whether it changed (a timer, say).
	Compute func(r *Run) error
	// ClearTracked drops the node's tracked data: the change set that it
	// exposes to the handlers of the nodes downstream. The engine calls it
	// once every node that reads this one has consumed the changes (at
	// the end of a Run, normally; later if the Run was cancelled first),
	// and for an output node (one no node reads) when the next Run starts
	// after a completed one, so that the caller can commit the changes in
	// between. Until then handlers and Computes add to the tracked data:
	// a Compute after a failed handler of the same run finds what the
	// handlers before it tracked, and a Compute or Handler after a
	// cancelled run finds what it tracked then. A Compute that rebuilds
	// from scratch typically replaces its tracked data with "everything
	// changed" (so that downstream handlers return false) or with the
	// difference from the data that its readers last saw.
	ClearTracked func()
}

// Handler is a node's change handler for one of its inputs: it brings the
// node's data up to date with that input's tracked changes, reading the
// other inputs' data as needed. It returns false when it cannot, and the
// engine then recomputes the node. A handler that returns false must leave
// the node's data as it found it or in a state that Compute repairs.
type Handler func(r *Run) (handled bool, err error)

// Input is one edge of the graph: the node read and the handler for its
// changes. A nil Handler means that a change of Node makes the node
// recompute.
type Input struct {
	Node    *Node
	Handler Handler
}

// Node is one vertex of an Engine's graph. Its data belongs to the caller
// (typically captured by its NodeFuncs' closures); the Node holds the
// engine's bookkeeping.
//
// The bookkeeping counts in runs: every Run has a generation, one more
// than the last. A node's tracked data holds the changes it made in the
// generations firstChange through lastChange; each edge remembers up to
// which generation its reader has consumed the input's changes. Tracked
// data is cleared once every reader has consumed all of it, and for an
// output node once a Run has completed after the change (the caller had
// it to commit).
type Node struct {
	name    string
	funcs   NodeFuncs
	inputs  []edge
	readers []reader

	// marked: an input node that the caller marked updated since it was
	// last visited.
	marked bool
	// firstChange and lastChange bound the generations of the changes in
	// the node's tracked data; firstChange is 0 when it holds none.
	firstChange, lastChange uint64
	// recompute is non-empty when the node must recompute when next
	// visited, whatever its inputs say, and says why.
	recompute string

	stats NodeStats // guarded by Engine.statsMu
}

type edge struct {
	node    *Node
	handler Handler
	// seen is the generation up to which the reader consumed node's
	// changes.
	seen uint64
}

// reader is an edge seen from its input: the node that reads and the
// index of the edge among its inputs.
type reader struct {
	node *Node
	i    int
}

// pending says whether the edge's input has changes its reader has not
// consumed.
func (e *edge) pending() bool { return e.node.lastChange > e.seen }

// isOutput says whether no node reads n: its changes are for the caller.
func (n *Node) isOutput() bool { return len(n.readers) == 0 }

// Name returns the node's name, as given to AddNode or AddInput.
func (n *Node) Name() string { return n.name }

// IsInput says whether n is an input node: no inputs and no Compute, so
// the caller feeds it.
func (n *Node) IsInput() bool { return len(n.inputs) == 0 && n.funcs.Compute == nil }

// Engine is a graph of nodes and the counters of its runs. Build the graph
// with AddInput and AddNode, then call Run whenever inputs changed. All
// methods but Stats, ShowStats, ClearStats, ForceRecompute,
// SetSlowThreshold and the Commands must be called from one goroutine;
// those are safe from any goroutine, so that a control socket can serve
// them while the caller runs the engine.
type Engine struct {
	log   *slog.Logger
	now   func() time.Time
	nodes []*Node // in the order added
	names map[string]*Node
	// order is the topological order, recomputed by AddNode. It is
	// replaced, never modified, and written under statsMu, so that Stats
	// can read it from another goroutine.
	order []*Node
	run   Run
	// gen is the generation of the current or last Run.
	gen uint64
	// completed: the last Run completed, so the caller had the output
	// nodes' changes to commit.
	completed bool
	// running guards against a handler calling back into Run.
	running bool

	forced  atomic.Bool  // ForceRecompute was called
	slow    atomic.Int64 // SlowThreshold, as a time.Duration
	statsMu sync.Mutex
}

// New returns an empty engine.
func New(opts Options) *Engine {
	e := &Engine{
		log:   opts.Logger,
		now:   opts.Now,
		names: make(map[string]*Node),
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	if opts.SlowThreshold == 0 {
		opts.SlowThreshold = 500 * time.Millisecond
	}
	e.SetSlowThreshold(opts.SlowThreshold)
	e.run.e = e
	return e
}

// AddInput adds an input node: one the caller feeds by changing its data
// and tracked changes and calling MarkUpdated. It is AddNode with no
// inputs and no Compute; use AddNode to give an input node ClearTracked.
func (e *Engine) AddInput(name string) *Node {
	return e.AddNode(name, NodeFuncs{})
}

// AddNode adds a node that reads inputs, which must already be in the
// engine, so the graph stays acyclic by construction. Duplicate names,
// foreign or repeated inputs, a node with inputs but no Compute, and
// adding while a Run is in progress are programming errors and panic.
func (e *Engine) AddNode(name string, funcs NodeFuncs, inputs ...Input) *Node {
	if e.running {
		panic("incproc: AddNode during Run")
	}
	if _, dup := e.names[name]; dup {
		panic(fmt.Sprintf("incproc: duplicate node %q", name))
	}
	if len(inputs) > 0 && funcs.Compute == nil {
		panic(fmt.Sprintf("incproc: node %q has inputs but no Compute", name))
	}
	n := &Node{name: name, funcs: funcs}
	n.stats.Name = name
	for i, in := range inputs {
		if in.Node == nil || e.names[in.Node.name] != in.Node {
			panic(fmt.Sprintf("incproc: node %q: input %d is not a node of this engine", name, i))
		}
		for _, prev := range inputs[:i] {
			if prev.Node == in.Node {
				panic(fmt.Sprintf("incproc: node %q: input %q given twice", name, in.Node.name))
			}
		}
		n.inputs = append(n.inputs, edge{node: in.Node, handler: in.Handler})
		n.stats.Inputs = append(n.stats.Inputs, InputStats{Name: in.Node.name})
	}
	for i, in := range n.inputs {
		in.node.readers = append(in.node.readers, reader{node: n, i: i})
	}
	if !n.IsInput() {
		// A node starts without data: its first Run computes it.
		n.recompute = "initial"
	}
	e.nodes = append(e.nodes, n)
	e.names[name] = n
	order := e.sort()
	e.statsMu.Lock()
	e.order = order
	e.statsMu.Unlock()
	return n
}

// Node returns the node called name, or nil.
func (e *Engine) Node(name string) *Node { return e.names[name] }

// Nodes returns the nodes in the order Run visits them.
func (e *Engine) Nodes() []*Node {
	return append([]*Node(nil), e.order...)
}

// sort returns the topological order: a depth-first walk from each node
// that no other node reads (in the order they were added), visiting each
// node's inputs in order before the node. That is the order in which
// ovn-northd lists its nodes in inc-engine/show-stats, so a graph declared
// with the same inputs in the same order lists the same way.
func (e *Engine) sort() []*Node {
	order := make([]*Node, 0, len(e.nodes))
	done := make(map[*Node]bool, len(e.nodes))
	var visit func(n *Node)
	visit = func(n *Node) {
		if done[n] {
			return
		}
		done[n] = true
		for _, in := range n.inputs {
			visit(in.node)
		}
		order = append(order, n)
	}
	for _, n := range e.nodes {
		if n.isOutput() {
			visit(n)
		}
	}
	return order
}

// MarkUpdated tells the engine that the caller changed input node n's data
// and added the changes to its tracked data. Marking a node that is not an
// input node panics.
func (e *Engine) MarkUpdated(n *Node) {
	if !n.IsInput() {
		panic(fmt.Sprintf("incproc: MarkUpdated(%q): not an input node", n.name))
	}
	n.marked = true
}

// Updated says whether n's data changed in the last Run. For an output
// node (one no node reads) it says whether the node has changes for the
// caller: made in the last Run or in cancelled Runs since the last
// completed one, whose tracked data it still holds. It is how the caller
// learns, after a completed Run, that an output node has something to
// commit.
func (e *Engine) Updated(n *Node) bool {
	if n.isOutput() && !n.IsInput() {
		return n.firstChange != 0
	}
	return n.lastChange == e.gen && e.gen != 0
}

// SetSlowThreshold changes Options.SlowThreshold
// (inc-engine/compute-log-timeout).
func (e *Engine) SetSlowThreshold(d time.Duration) { e.slow.Store(int64(d)) }

// ForceRecompute makes the next Run recompute every node. It is what
// inc-engine/recompute asks for, and what a caller does when it lost track
// of changes (a database reconnected without monitor_cond_since).
func (e *Engine) ForceRecompute() { e.forced.Store(true) }

// NeedsRun says whether a Run has anything to do: an input node was
// marked, a node must recompute (before the first run, after a forced
// recompute or a failure), or a cancelled run left changes to process.
// Source nodes (no inputs, with a Compute) do not count: the caller knows
// when their clock moved.
func (e *Engine) NeedsRun() bool {
	if e.forced.Load() {
		return true
	}
	for _, n := range e.nodes {
		if n.marked || n.recompute != "" {
			return true
		}
		for i := range n.inputs {
			if n.inputs[i].pending() {
				return true
			}
		}
	}
	return false
}

// RunOptions are the choices of one Run.
type RunOptions struct {
	// Recompute recomputes every node in this run, as after
	// ForceRecompute.
	Recompute bool
	// AllowRecompute lets nodes recompute. When false (the caller cannot
	// commit a recompute's result now, e.g. a transaction is in flight) a
	// node that would recompute cancels the run instead; changes that
	// handlers can handle are still processed.
	AllowRecompute bool
}

// Result is what one Run did.
type Result struct {
	// Cancelled: the run stopped before the end. Its results must not be
	// committed; a later Run carries on from where it stopped. Node and
	// Reason say where and why.
	Cancelled bool
	Node      string
	Reason    string
	// Recomputed and Handled count the nodes that recomputed, and that
	// were brought up to date by handlers alone, in this run.
	Recomputed, Handled int
}

// Run brings every node up to date with its inputs. It visits the nodes in
// topological order: a node none of whose inputs changed is not run; a
// node whose changed inputs all have handlers that handle them is updated
// incrementally; any other node with a changed input recomputes. A node
// reports a change of its data with Run.SetUpdated, which makes the nodes
// that read it run in turn.
//
// Run returns an error when a Compute or Handler failed, or when ctx is
// done between two nodes; the run is then cancelled.
func (e *Engine) Run(ctx context.Context, opts RunOptions) (Result, error) {
	if e.running {
		panic("incproc: Run called from inside a Run")
	}
	e.running = true
	defer func() { e.running = false }()

	order := e.order
	if e.completed {
		// The caller had the output nodes' changes to commit.
		for _, n := range order {
			if n.isOutput() {
				e.clearTracked(n)
			}
		}
	}
	e.gen++
	if e.forced.Swap(false) || opts.Recompute {
		for _, n := range order {
			if !n.IsInput() {
				n.recompute = "forced"
			}
		}
	}

	var res Result
	var err error
	for _, n := range order {
		if err = ctx.Err(); err != nil {
			e.cancel(n, &res, fmt.Sprintf("context: %v", err), false)
			err = fmt.Errorf("incproc: run stopped before node %s: %w", n.name, err)
			break
		}
		if err = e.runNode(n, opts.AllowRecompute, &res); res.Cancelled {
			break
		}
	}
	// Drop the changes every reader has consumed.
	for _, n := range order {
		if n.firstChange == 0 || n.isOutput() {
			continue
		}
		consumed := true
		for _, r := range n.readers {
			if r.node.inputs[r.i].seen < n.lastChange {
				consumed = false
				break
			}
		}
		if consumed {
			e.clearTracked(n)
		}
	}
	e.completed = !res.Cancelled
	return res, err
}

func (e *Engine) clearTracked(n *Node) {
	if n.firstChange == 0 {
		return
	}
	n.firstChange = 0
	if n.funcs.ClearTracked != nil {
		n.funcs.ClearTracked()
	}
}

// changed records that n's data changed in the current generation.
func (e *Engine) changed(n *Node) {
	n.lastChange = e.gen
	if n.firstChange == 0 {
		n.firstChange = e.gen
	}
}

// runNode brings n up to date, or cancels the run (res.Cancelled).
func (e *Engine) runNode(n *Node, allowRecompute bool, res *Result) error {
	if n.IsInput() {
		// Counted as a recompute, as ovn-northd counts each refresh of an
		// input node from its database.
		if n.marked {
			n.marked = false
			e.changed(n)
		}
		e.statsMu.Lock()
		n.stats.Recompute++
		e.statsMu.Unlock()
		return nil
	}
	r := e.begin(n, allowRecompute)
	if len(n.inputs) == 0 {
		n.recompute = ""
		return e.recompute(r, "source", res)
	}
	if n.recompute != "" {
		return e.recompute(r, n.recompute, res)
	}
	changed := false
	for i := range n.inputs {
		in := &n.inputs[i]
		if !in.pending() {
			continue
		}
		changed = true
		switch {
		case in.handler == nil:
			e.countInput(n, i, unhandled, 0)
			return e.recompute(r, "missing handler for input "+in.node.name, res)
		case in.node.firstChange <= in.seen:
			// The input's tracked data holds changes this node has
			// consumed (in a run cancelled after it) along with new ones:
			// handling it would apply the old ones twice.
			e.countInput(n, i, unhandled, 0)
			return e.recompute(r, "input "+in.node.name+" has changes handled in a cancelled run", res)
		}
	}
	if !changed {
		e.consumed(n)
		return nil
	}
	for i := range n.inputs {
		in := &n.inputs[i]
		if !in.pending() {
			continue
		}
		start := e.now()
		ok, err := in.handler(r)
		took := e.now().Sub(start)
		e.logSlow(n, "handler for input "+in.node.name, took)
		switch {
		case r.cancelReason != "" && err == nil:
			e.countInput(n, i, retried, took)
		case ok && err == nil:
			e.countInput(n, i, handled, took)
		default:
			e.countInput(n, i, unhandled, took)
		}
		switch {
		case err != nil:
			n.recompute = "failed handler in an earlier run"
			e.cancel(n, res, fmt.Sprintf("handler for input %s: %v", in.node.name, err), true)
			return fmt.Errorf("incproc: node %s: handler for input %s: %w", n.name, in.node.name, err)
		case r.cancelReason != "":
			e.cancel(n, res, r.cancelReason, true)
			return nil
		case !ok:
			return e.recompute(r, "failed handler for input "+in.node.name, res)
		}
		in.seen = e.gen
		if r.updated {
			e.changed(n)
		}
	}
	e.consumed(n)
	res.Handled++
	e.statsMu.Lock()
	n.stats.Compute++
	e.statsMu.Unlock()
	return nil
}

// consumed records that n is up to date with all its inputs.
func (e *Engine) consumed(n *Node) {
	for i := range n.inputs {
		n.inputs[i].seen = e.gen
	}
}

// recompute runs n's Compute, or cancels the run if recomputing is not
// allowed now.
func (e *Engine) recompute(r *Run, reason string, res *Result) error {
	n := r.node
	if !r.allowRecompute && reason != "source" {
		n.recompute = reason
		e.cancel(n, res, "recompute not allowed ("+reason+")", true)
		return nil
	}
	r.recomputing = true
	start := e.now()
	err := n.funcs.Compute(r)
	took := e.now().Sub(start)
	if err != nil {
		n.recompute = "failed recompute in an earlier run"
		e.cancel(n, res, fmt.Sprintf("recompute (%s): %v", reason, err), true)
		return fmt.Errorf("incproc: node %s: recompute (%s): %w", n.name, reason, err)
	}
	if r.cancelReason != "" {
		n.recompute = reason
		e.cancel(n, res, r.cancelReason, true)
		return nil
	}
	e.statsMu.Lock()
	n.stats.Recompute++
	n.stats.RecomputeTime += took
	e.statsMu.Unlock()
	if reason != "source" {
		level := slog.LevelDebug
		if took >= time.Duration(e.slow.Load()) {
			level = slog.LevelInfo
		}
		// Enabled first: building the attributes allocates.
		if e.log.Enabled(context.Background(), level) {
			e.log.Log(context.Background(), level, "recompute", "node", n.name, "reason", reason, "took", took)
		}
	}
	n.recompute = ""
	if r.updated {
		e.changed(n)
	}
	e.consumed(n)
	res.Recomputed++
	return nil
}

func (e *Engine) logSlow(n *Node, what string, took time.Duration) {
	if took >= time.Duration(e.slow.Load()) {
		e.log.Info("slow "+what, "node", n.name, "took", took)
	}
}

// What became of one input's changes at a node, for its counters.
const (
	handled   = iota
	unhandled // no handler, the handler returned false, or failed
	retried   // the handler cancelled the run
)

func (e *Engine) countInput(n *Node, i int, outcome int, took time.Duration) {
	e.statsMu.Lock()
	s := &n.stats.Inputs[i]
	switch outcome {
	case handled:
		s.Handled++
	case unhandled:
		s.Unhandled++
	}
	s.Time += took
	n.stats.HandleTime += took
	e.statsMu.Unlock()
}

// cancel stops the run at n, counted as n's cancel if n had started. Nothing
// else is needed for the next Run to be correct: the inputs whose changes
// n and the nodes after it did not consume keep their tracked data, and
// those nodes handle it (or recompute) when next visited.
func (e *Engine) cancel(n *Node, res *Result, reason string, started bool) {
	res.Cancelled, res.Node, res.Reason = true, n.name, reason
	if started {
		e.statsMu.Lock()
		n.stats.Cancel++
		e.statsMu.Unlock()
	}
	e.log.Info("run cancelled", "node", n.name, "reason", reason)
}

// Run is what a Compute or Handler is given: the node being run and the
// means to report on it. It is valid only during that call.
type Run struct {
	e              *Engine
	node           *Node
	recomputing    bool
	allowRecompute bool
	updated        bool
	cancelReason   string
}

func (e *Engine) begin(n *Node, allowRecompute bool) *Run {
	e.run = Run{e: e, node: n, allowRecompute: allowRecompute}
	return &e.run
}

// Node returns the node being run.
func (r *Run) Node() *Node { return r.node }

// SetUpdated says that the node's data changed, so that the nodes that
// read it run. It holds for the rest of the run, even if a later handler
// fails and the node recomputes.
func (r *Run) SetUpdated() { r.updated = true }

// Updated says whether input n of the node being run has changes the node
// has not consumed: the changes its handler is given. For a node that is
// not an input of this one, it says whether n changed in this run.
func (r *Run) Updated(n *Node) bool {
	for i := range r.node.inputs {
		if r.node.inputs[i].node == n {
			return r.node.inputs[i].pending()
		}
	}
	return n.lastChange == r.e.gen
}

// Recomputing says whether the call is a Compute (as opposed to a
// Handler).
func (r *Run) Recomputing() bool { return r.recomputing }

// AllowRecompute reports the run's RunOptions.AllowRecompute: a handler
// that needs what only a recompute may do (a transaction, say) must return
// false or cancel when it is false.
func (r *Run) AllowRecompute() bool { return r.allowRecompute }

// Cancel stops the run after the current Compute or Handler returns: its
// results must not be committed (the node cannot finish now, e.g. it has
// no transaction to write to). A Handler that cancels must leave the
// node's data as it found it: the next Run calls it again, with the same
// changes and any new ones. A Compute that cancels runs again in the next
// Run. The cancel is counted in the node's stats.
func (r *Run) Cancel(reason string) {
	if reason == "" {
		reason = "cancelled by node"
	}
	r.cancelReason = reason
}
