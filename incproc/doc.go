// Package incproc is govn's incremental-processing engine: the core that
// govn northd (and the chassis controller) use to keep derived state up to
// date with their inputs without recomputing everything on every change.
//
// It is a small, generic, synchronous core in the manner of
// go.etcd.io/raft's: it does no I/O, starts no goroutines, keeps no
// package-level state and advances only when the caller calls Run. The
// caller turns database updates into changes of input nodes, runs the
// engine, and applies what the output nodes yield (Southbound
// transactions, OpenFlow bundles).
//
// # Why
//
// Recomputing the Southbound from the whole Northbound on every change is
// simple and correct, and takes seconds at scale. Writing change-driven
// code for every input of every intermediate result is fast, and hard to
// get right ad hoc. The engine splits the problem: the graph of
// dependencies is declared once; each node has a full compute, which is
// always correct; handlers for the frequent changes are added one by one,
// and a change without a handler is still processed correctly, by
// recomputing that node only. Correctness first, speed where it matters,
// and the counters show where it does.
//
// # Nodes
//
// A node is a materialized view: data (owned by the caller, usually
// captured by the node's closures) that is a function of its inputs' data.
// It has
//
//   - Compute, which rebuilds the data from all inputs' data;
//   - for each input, optionally a Handler, which brings the data up to
//     date with that input's changes;
//   - optionally ClearTracked, which drops its tracked data: the change
//     set (rows added, changed, deleted) that it exposes to the handlers
//     of the nodes downstream, until they have all consumed it.
//
// An input node (AddInput) has no inputs and no Compute: the caller feeds
// it. A source node has no inputs and a Compute, which runs on every Run
// (a clock, say) and decides itself whether it changed.
//
// Inputs must exist before the node that reads them, so the graph is
// acyclic by construction. Run visits the nodes in a topological order:
// a depth-first walk from each node that nothing reads, inputs in the
// order declared. That is the order in which ovn-northd lists its nodes in
// inc-engine/show-stats.
//
// # A run
//
// For each node, in order:
//
//   - a node none of whose inputs changed in this run is not run;
//   - otherwise, for each changed input, in order, its handler is called;
//     when all return true the node was computed incrementally;
//   - a changed input without a handler, or a handler that returns false,
//     makes the node recompute; the other nodes are not affected by that
//     decision;
//   - a node that must recompute for another reason (the first run, a
//     forced recompute, a failure in an earlier run) recomputes.
//
// A Compute or Handler calls Run.SetUpdated when the node's data changed;
// only then do the nodes that read it run. Each fallback to recompute is
// logged with the node and the input (or reason) that caused it.
//
// # Tracked data
//
// A node's tracked data is the set of changes it made that its readers
// have not all consumed yet. Handlers and Computes add to it; the engine
// clears it (ClearTracked) once every node that reads the node has
// consumed it, which is at the end of the Run that made the changes
// unless that Run was cancelled first. An output node's (one no node
// reads) tracked data is for the caller: it is cleared when the next Run
// starts after a completed one. A Compute that runs after a handler of the
// same node failed, or after a cancelled run, finds the tracked data that
// is already there and must leave it describing every change since the
// readers last saw the node: a Compute that rebuilds from scratch
// typically replaces it with "everything changed" (so that the readers'
// handlers return false and they recompute too) or with the difference
// from what the readers last saw.
//
// So changes arrive on top of changes not yet consumed. ChangeSet is a
// typed tracked-data set that merges them: it holds each key's net change
// (inserted, updated, deleted) since it was last cleared.
//
// # The caller's contract
//
// Between runs, for each input node whose data changed, the caller
// updates the data, adds the changes to its tracked data (merging them
// with those already there: the engine may not have cleared them yet; a
// ChangeSet does it), and calls MarkUpdated. Then:
//
//	res, err := e.Run(ctx, incproc.RunOptions{AllowRecompute: canCommit})
//	switch {
//	case err != nil:
//		// a Compute or Handler failed (or ctx is done): log it; the run
//		// was cancelled, and the next Run recomputes the failed node.
//	case res.Cancelled:
//		// do not commit; run again later (NeedsRun is true).
//	default:
//		// for each output node with e.Updated(out), commit its tracked
//		// data (or its data).
//	}
//
// Handlers must treat input data as read-only, and must not call Run,
// AddNode or MarkUpdated.
//
// # Cancelling
//
// A run is cancelled, and stops at the node concerned, when
//
//   - a node cannot finish now and says so with Run.Cancel (it has no
//     transaction to write to, say): its result must not be committed. A
//     Handler that cancels must leave the node's data as it found it;
//   - a node would recompute but RunOptions.AllowRecompute is false: the
//     caller cannot use a recompute's result now, e.g. because a
//     transaction is in flight. Changes that handlers can handle are still
//     processed up to that node;
//   - a Compute or Handler returns an error, or ctx is done.
//
// A cancel counts in the node's Cancel counter (shown as "abort" by
// inc-engine/show-stats, as ovn-northd 23.03 names it), except for ctx.
//
// A cancelled run needs nothing from the caller but running again later:
// the next Run carries on where it stopped. Each node remembers, per
// input, up to which run it consumed the input's changes, and tracked data
// stays until every reader has consumed it. So the nodes that finished
// keep their data, and are not given the same changes again; the cancelled
// handler, and the nodes not reached, are given the changes they missed,
// along with any new ones; an output node keeps the changes it made for
// the caller until a run completes. The one case that needs more is a node
// that consumed an input's changes in a cancelled run when that input
// (whose tracked data could not be cleared, another reader had not
// consumed it) then changes again: its tracked data now mixes changes the
// node handled with new ones, so the node recomputes rather than handle
// the old ones twice. This costs less than ovn-northd's answer to a
// cancelled run, a recompute of every node.
//
// # Forced recompute
//
// ForceRecompute (inc-engine/recompute) or RunOptions.Recompute makes the
// next Run recompute every node. A caller that lost track of its inputs'
// changes (a database reconnected without monitor_cond_since) uses it.
//
// # Counters
//
// Per node: Recompute (completed Computes; one per Run for an input node,
// as ovn-northd counts each refresh of an input from its database),
// Compute (runs brought up to date by handlers alone) and Cancel; as govn
// additions, handled and unhandled counts per input, and the time spent in
// Compute and in handlers. Stats returns them as data, ShowStats as the
// text of ovn-northd 23.03's inc-engine/show-stats, byte for byte, and
// Commands gives the inc-engine/ control socket commands (show-stats,
// clear-stats, recompute, compute-log-timeout), answered as ovn-northd
// answers them. Stats, ShowStats, ClearStats, ForceRecompute and
// SetSlowThreshold are safe to call from any goroutine; the rest of the
// API belongs to the goroutine that runs the engine.
//
// # Tests
//
// The scenarios in testdata/ are text transcripts: commands that build a
// graph, feed inputs, run and show counters, each followed by the output it
// must produce ("go test ./incproc -args -rewrite" regenerates them). The
// test nodes maintain a real view (keys merged from their inputs) so that
// every transcript can check that the incrementally maintained data equals
// a fresh full compute.
package incproc
