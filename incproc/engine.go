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
	// before a recompute (so that changes tracked by handlers that ran
	// before the recompute was decided are dropped), when a Run starts for
	// the nodes updated by the previous Run, and at the end of a Run for
	// the input nodes it consumed.
	ClearTracked func()
}

// Handler is a node's change handler for one of its inputs: it brings the
// node's data up to date with that input's tracked changes, reading the
// other inputs' data as needed. It returns false when it cannot, and the
// engine then recomputes the node (calling ClearTracked first). A handler
// that returns false must leave the node's data as it found it or in a
// state that Compute repairs.
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
type Node struct {
	name    string
	funcs   NodeFuncs
	inputs  []edge
	outputs int // how many nodes read this one

	// marked: an input node that the caller marked updated since the
	// last Run.
	marked bool
	// updated: the node's data changed in the current or last Run.
	updated bool
	// recompute is non-empty when the node must recompute in the next
	// Run whatever its inputs say, and says why.
	recompute string
	// visited: the current Run has processed the node.
	visited bool

	stats NodeStats // guarded by Engine.statsMu
}

type edge struct {
	node    *Node
	handler Handler
}

// Name returns the node's name, as given to AddNode or AddInput.
func (n *Node) Name() string { return n.name }

// IsInput says whether n is an input node: no inputs and no Compute, so
// the caller feeds it.
func (n *Node) IsInput() bool { return len(n.inputs) == 0 && n.funcs.Compute == nil }

// Engine is a graph of nodes and the counters of its runs. Build the graph
// with AddInput and AddNode, then call Run whenever inputs changed. All
// methods but Stats, ShowStats, ClearStats and ForceRecompute must be
// called from one goroutine; those four are safe from any goroutine, so
// that a control socket can serve them while the caller runs the engine.
type Engine struct {
	log   *slog.Logger
	now   func() time.Time
	slow  time.Duration
	nodes []*Node // in the order added
	names map[string]*Node
	order []*Node // topological order; nil until needed
	run   Run
	// running guards against a handler calling back into Run.
	running bool

	forced  atomic.Bool // ForceRecompute was called
	statsMu sync.Mutex
}

// New returns an empty engine.
func New(opts Options) *Engine {
	e := &Engine{
		log:   opts.Logger,
		now:   opts.Now,
		slow:  opts.SlowThreshold,
		names: make(map[string]*Node),
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.slow == 0 {
		e.slow = 500 * time.Millisecond
	}
	e.run.e = e
	return e
}

// AddInput adds an input node: one the caller feeds by setting its data
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
	seen := make(map[*Node]bool, len(inputs))
	for _, in := range inputs {
		if in.Node == nil || e.names[in.Node.name] != in.Node {
			panic(fmt.Sprintf("incproc: node %q: input is not a node of this engine", name))
		}
		if seen[in.Node] {
			panic(fmt.Sprintf("incproc: node %q: input %q given twice", name, in.Node.name))
		}
		seen[in.Node] = true
		in.Node.outputs++
		n.inputs = append(n.inputs, edge{node: in.Node, handler: in.Handler})
		n.stats.Inputs = append(n.stats.Inputs, InputStats{Name: in.Node.name})
	}
	if !n.IsInput() {
		// A node starts without data: its first Run computes it.
		n.recompute = "initial"
	}
	e.nodes = append(e.nodes, n)
	e.names[name] = n
	e.order = nil
	return n
}

// Node returns the node called name, or nil.
func (e *Engine) Node(name string) *Node { return e.names[name] }

// Nodes returns the nodes in the order Run visits them.
func (e *Engine) Nodes() []*Node {
	return append([]*Node(nil), e.sorted()...)
}

// sorted returns the topological order: a depth-first walk from each node
// that no other node reads (in the order they were added), visiting each
// node's inputs in order before the node. That is the order in which
// ovn-northd lists its nodes in inc-engine/show-stats, so a graph declared
// with the same inputs in the same order lists the same way.
func (e *Engine) sorted() []*Node {
	if e.order != nil || len(e.nodes) == 0 {
		return e.order
	}
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
		if n.outputs == 0 {
			visit(n)
		}
	}
	e.order = order
	return order
}

// MarkUpdated tells the engine that the caller changed input node n's data
// (and set its tracked changes) since the last Run. Marking a node that is
// not an input node panics.
func (e *Engine) MarkUpdated(n *Node) {
	if !n.IsInput() {
		panic(fmt.Sprintf("incproc: MarkUpdated(%q): not an input node", n.name))
	}
	n.marked = true
}

// Updated says whether n's data changed in the last Run. It is how the
// caller learns that an output node has something to commit.
func (e *Engine) Updated(n *Node) bool { return n.updated }

// ForceRecompute makes the next Run recompute every node. It is what
// inc-engine/recompute asks for, and what a caller does when it lost track
// of changes (a database reconnected without monitor_cond_since).
func (e *Engine) ForceRecompute() { e.forced.Store(true) }

// NeedsRun says whether a Run has anything to do: an input node was
// marked, a node must recompute (after a cancelled run, a forced
// recompute, or before the first run). Source nodes (no inputs, with a
// Compute) do not count: the caller knows when their clock moved.
func (e *Engine) NeedsRun() bool {
	if e.forced.Load() {
		return true
	}
	for _, n := range e.nodes {
		if n.marked || n.recompute != "" {
			return true
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
	// committed; the nodes that did not finish will recompute in a later
	// run. Node and Reason say where and why.
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
// done between two nodes; the run is then cancelled as by Run.Cancel. The
// changes of input nodes are consumed by every Run, completed or not:
// feed only new changes before the next.
func (e *Engine) Run(ctx context.Context, opts RunOptions) (Result, error) {
	if e.running {
		panic("incproc: Run called from inside a Run")
	}
	e.running = true
	defer func() { e.running = false }()

	order := e.sorted()
	// The tracked data of the last run lived until now.
	for _, n := range order {
		if n.updated && !n.IsInput() && n.funcs.ClearTracked != nil {
			n.funcs.ClearTracked()
		}
		n.updated = false
		n.visited = false
	}
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
		var ok bool
		if ok, err = e.runNode(n, opts.AllowRecompute, &res); !ok {
			break
		}
		n.visited = true
	}
	// The input nodes' changes are consumed, whatever happened.
	for _, n := range order {
		if n.IsInput() && n.marked {
			n.marked = false
			if n.funcs.ClearTracked != nil {
				n.funcs.ClearTracked()
			}
		}
	}
	return res, err
}

// runNode brings n up to date. It returns false, and the error if any,
// when n cancelled the run.
func (e *Engine) runNode(n *Node, allowRecompute bool, res *Result) (bool, error) {
	if n.IsInput() {
		// Counted as a recompute, as ovn-northd counts each refresh of an
		// input node from its database.
		n.updated = n.marked
		e.statsMu.Lock()
		n.stats.Recompute++
		e.statsMu.Unlock()
		return true, nil
	}
	if len(n.inputs) == 0 {
		n.recompute = ""
		return e.recompute(n, "source", allowRecompute, res)
	}
	if n.recompute != "" {
		return e.recompute(n, n.recompute, allowRecompute, res)
	}
	changed := false
	for i, in := range n.inputs {
		if !in.node.updated {
			continue
		}
		changed = true
		if in.handler == nil {
			e.countInput(n, i, false, 0)
			return e.recompute(n, "missing handler for input "+in.node.name, allowRecompute, res)
		}
	}
	if !changed {
		return true, nil
	}
	r := e.begin(n, false, allowRecompute)
	for i, in := range n.inputs {
		if !in.node.updated {
			continue
		}
		start := e.now()
		handled, err := in.handler(r)
		took := e.now().Sub(start)
		e.logSlow(n, "handler for input "+in.node.name, took)
		if err != nil {
			e.countInput(n, i, false, took)
			e.cancel(n, res, fmt.Sprintf("handler for input %s: %v", in.node.name, err), true)
			return false, fmt.Errorf("incproc: node %s: handler for input %s: %w", n.name, in.node.name, err)
		}
		if r.cancelReason != "" {
			e.countInput(n, i, handled, took)
			e.cancel(n, res, r.cancelReason, true)
			return false, nil
		}
		e.countInput(n, i, handled, took)
		if !handled {
			return e.recompute(n, "failed handler for input "+in.node.name, allowRecompute, res)
		}
	}
	n.updated = r.updated
	res.Handled++
	e.statsMu.Lock()
	n.stats.Compute++
	e.statsMu.Unlock()
	return true, nil
}

// recompute runs n's Compute, or cancels the run if recomputing is not
// allowed now.
func (e *Engine) recompute(n *Node, reason string, allowed bool, res *Result) (bool, error) {
	if !allowed {
		e.cancel(n, res, "recompute not allowed ("+reason+")", true)
		return false, nil
	}
	if n.funcs.ClearTracked != nil {
		n.funcs.ClearTracked()
	}
	r := e.begin(n, true, allowed)
	start := e.now()
	err := n.funcs.Compute(r)
	took := e.now().Sub(start)
	if err != nil {
		e.cancel(n, res, fmt.Sprintf("recompute (%s): %v", reason, err), true)
		return false, fmt.Errorf("incproc: node %s: recompute (%s): %w", n.name, reason, err)
	}
	if r.cancelReason != "" {
		e.cancel(n, res, r.cancelReason, true)
		return false, nil
	}
	e.statsMu.Lock()
	n.stats.Recompute++
	n.stats.RecomputeTime += took
	e.statsMu.Unlock()
	if reason != "source" {
		level := slog.LevelDebug
		if took >= e.slow {
			level = slog.LevelInfo
		}
		e.log.Log(context.Background(), level, "recompute", "node", n.name, "reason", reason, "took", took)
	}
	n.recompute = ""
	n.updated = r.updated
	res.Recomputed++
	return true, nil
}

func (e *Engine) logSlow(n *Node, what string, took time.Duration) {
	if took >= e.slow {
		e.log.Info("slow "+what, "node", n.name, "took", took)
	}
}

func (e *Engine) countInput(n *Node, i int, handled bool, took time.Duration) {
	e.statsMu.Lock()
	s := &n.stats.Inputs[i]
	if handled {
		s.Handled++
	} else {
		s.Unhandled++
	}
	s.Time += took
	n.stats.HandleTime += took
	e.statsMu.Unlock()
}

// cancel stops the run at n and leaves the graph so that the next Run is
// correct. When n was being run (started), it recomputes next time, and
// the cancel counts in its stats. Every node not yet visited that reads a
// node changed in this run, or an input node whose changes this run
// consumed, recomputes next time: those changes are gone. So does every
// output node (one no node reads) changed in this run: its result was not
// committed. The other nodes keep their data, which is up to date with
// their inputs.
func (e *Engine) cancel(n *Node, res *Result, reason string, started bool) {
	res.Cancelled, res.Node, res.Reason = true, n.name, reason
	e.log.Info("run cancelled", "node", n.name, "reason", reason)
	if started {
		e.statsMu.Lock()
		n.stats.Cancel++
		e.statsMu.Unlock()
		if n.recompute == "" {
			n.recompute = "cancelled run"
		}
		// Whatever its handlers tracked before the cancel is not to be
		// read.
		if n.funcs.ClearTracked != nil {
			n.funcs.ClearTracked()
		}
		n.updated = false
		n.visited = true
	}
	for _, m := range e.sorted() {
		if m.IsInput() || m.recompute != "" {
			continue
		}
		if m.visited {
			if m.updated && m.outputs == 0 {
				m.recompute = "output not committed in a cancelled run"
			}
			continue
		}
		for _, in := range m.inputs {
			if in.node.updated || in.node.marked {
				m.recompute = "input " + in.node.name + " changed in a cancelled run"
				break
			}
		}
	}
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

func (e *Engine) begin(n *Node, recomputing, allowRecompute bool) *Run {
	e.run = Run{e: e, node: n, recomputing: recomputing, allowRecompute: allowRecompute}
	return &e.run
}

// Node returns the node being run.
func (r *Run) Node() *Node { return r.node }

// SetUpdated says that the node's data changed, so that the nodes that
// read it run.
func (r *Run) SetUpdated() { r.updated = true }

// Updated says whether node n (an input of the node being run, typically)
// changed in this run. A handler uses it to look at another changed input.
func (r *Run) Updated(n *Node) bool { return n.updated }

// Recomputing says whether the call is a Compute (as opposed to a
// Handler).
func (r *Run) Recomputing() bool { return r.recomputing }

// AllowRecompute reports the run's RunOptions.AllowRecompute: a handler
// that needs what only a recompute may do (a transaction, say) must return
// false or cancel when it is false.
func (r *Run) AllowRecompute() bool { return r.allowRecompute }

// Cancel stops the run after the current Compute or Handler returns: its
// results must not be committed (the node cannot finish now, e.g. it has
// no transaction to write to). The node, and the nodes after it that had
// changes to process, recompute in a later Run. The cancel is counted in
// the node's stats.
func (r *Run) Cancel(reason string) {
	if reason == "" {
		reason = "cancelled by node"
	}
	r.cancelReason = reason
}
