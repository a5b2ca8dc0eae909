package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/govn/govn/incproc"
)

// Engine is a collector of an incremental engine's counters (what
// inc-engine/show-stats shows, and the handlers' times) under
// govn_COMPONENT_engine_*. stats is read on every scrape; incproc's
// Engine.Stats is safe to call from any goroutine.
func Engine(component string, stats func() []incproc.NodeStats) prometheus.Collector {
	var ds descs
	p := "govn_" + component + "_engine_"
	recompute := ds.add(p+"recompute_total", "Runs in which the node recomputed.", "node")
	compute := ds.add(p+"compute_total", "Runs in which the node's handlers alone brought it up to date.", "node")
	cancel := ds.add(p+"abort_total", "Runs cancelled at the node.", "node")
	recomputeTime := ds.add(p+"recompute_seconds_total", "Time spent recomputing the node.", "node")
	handleTime := ds.add(p+"handler_seconds_total", "Time spent in the node's change handlers.", "node")
	handled := ds.add(p+"input_handled_total", "Changes of an input that the node's handler handled.", "node", "input")
	unhandled := ds.add(p+"input_unhandled_total", "Changes of an input that made the node recompute.", "node", "input")
	inputTime := ds.add(p+"input_handler_seconds_total", "Time spent in the node's handler for an input.", "node", "input")
	return &collector{descs: ds, collect: func(ch chan<- prometheus.Metric) {
		for _, n := range stats() {
			counter(ch, recompute, n.Recompute, n.Name)
			counter(ch, compute, n.Compute, n.Name)
			counter(ch, cancel, n.Cancel, n.Name)
			seconds(ch, recomputeTime, n.RecomputeTime, n.Name)
			seconds(ch, handleTime, n.HandleTime, n.Name)
			for _, in := range n.Inputs {
				counter(ch, handled, in.Handled, n.Name, in.Name)
				counter(ch, unhandled, in.Unhandled, n.Name, in.Name)
				seconds(ch, inputTime, in.Time, n.Name, in.Name)
			}
		}
	}}
}
