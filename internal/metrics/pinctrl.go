package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/govn/govn/pinctrl"
)

// Pinctrl is a collector of a chassis's packet-in handling, per kind of
// packet: answered, dropped by the rate limit, failed; and the rows it
// learned and wrote (MAC_Binding, FDB, virtual port bindings,
// Controller_Event).
func Pinctrl(stats func() pinctrl.Stats) prometheus.Collector {
	var ds descs
	packets := ds.add("govn_pinctrl_packets_total", "Packets sent to the controller, by kind and what became of them.", "kind", "result")
	learned := ds.add("govn_pinctrl_learned_total", "Rows learned for the Southbound (MAC bindings, FDB entries, virtual port bindings, controller events), by table and what became of them.", "table", "result")
	return &collector{descs: ds, collect: func(ch chan<- prometheus.Metric) {
		st := stats()
		kinds := make([]string, 0, len(st.Kinds))
		for k := range st.Kinds {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			ks := st.Kinds[k]
			counter(ch, packets, ks.Handled, k, "handled")
			counter(ch, packets, ks.RateDropped, k, "rate_dropped")
			counter(ch, packets, ks.Errors, k, "error")
		}
		for table, s := range map[string]pinctrl.MACBindingStats{"MAC_Binding": st.MACBindings, "FDB": st.FDB,
			"Port_Binding_virtual": st.VPorts, "Controller_Event": st.Events} {
			counter(ch, learned, s.Learned, table, "learned")
			counter(ch, learned, s.Duplicates, table, "duplicate")
			counter(ch, learned, s.QueueDrops, table, "queue_dropped")
			counter(ch, learned, s.Written, table, "written")
			counter(ch, learned, s.WriteFails, table, "write_failed")
		}
	}}
}
