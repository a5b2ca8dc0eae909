package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Northd is govn northd's event metrics: what each write of the
// Southbound cost and how long a Northbound change took to get there.
type Northd struct {
	latency    prometheus.Histogram
	writes     prometheus.Counter
	recomputed prometheus.Counter
	ops        prometheus.Counter
}

// NewNorthd registers govn northd's event metrics with reg.
func NewNorthd(reg prometheus.Registerer) *Northd {
	n := &Northd{
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "govn_northd_nb_to_sb_seconds",
			Help:    "From a Northbound change's arrival until the Southbound acknowledged the transaction that applied it.",
			Buckets: latencyBuckets,
		}),
		writes:     prometheus.NewCounter(prometheus.CounterOpts{Name: "govn_northd_sb_writes_total", Help: "Transactions that wrote the Southbound."}),
		recomputed: prometheus.NewCounter(prometheus.CounterOpts{Name: "govn_northd_sb_writes_recomputed_total", Help: "Southbound writes that followed a full recompute."}),
		ops:        prometheus.NewCounter(prometheus.CounterOpts{Name: "govn_northd_sb_ops_total", Help: "Operations in the transactions that wrote the Southbound."}),
	}
	reg.MustRegister(n.latency, n.writes, n.recomputed, n.ops)
	return n
}

// Wrote records one write of the Southbound: latency is from the oldest
// Northbound change it applied (zero when it applied none, as after a
// Southbound change alone).
func (n *Northd) Wrote(latency time.Duration, ops int, recomputed bool) {
	n.writes.Inc()
	n.ops.Add(float64(ops))
	if recomputed {
		n.recomputed.Inc()
	}
	if latency > 0 {
		n.latency.Observe(latency.Seconds())
	}
}

// Chassis is govn chassis' event metrics.
type Chassis struct {
	applied prometheus.Histogram
}

// NewChassis registers govn chassis' event metrics with reg.
func NewChassis(reg prometheus.Registerer) *Chassis {
	c := &Chassis{applied: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "govn_chassis_sb_to_flows_seconds",
		Help:    "From a Southbound change's arrival until its flows were installed in the datapath and the bindings written back.",
		Buckets: latencyBuckets,
	})}
	reg.MustRegister(c.applied)
	return c
}

// Applied records one batch of Southbound changes programmed.
func (c *Chassis) Applied(latency time.Duration) { c.applied.Observe(latency.Seconds()) }
