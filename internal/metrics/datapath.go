package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/datapath/switchd"
)

// Datapath is a collector of a switch's datapath: its packet and upcall
// counters and megaflows (govn_datapath_*), the rules in each flow table,
// connections per conntrack zone (govn_conntrack_*) and every port's
// counters (govn_port_*).
func Datapath(sw *switchd.Switch) prometheus.Collector {
	var ds descs
	type dpCounter struct {
		d   *prometheus.Desc
		get func(st *dp.Stats) uint64
	}
	p := "govn_datapath_"
	var counters []dpCounter
	add := func(name, help string, get func(st *dp.Stats) uint64) {
		counters = append(counters, dpCounter{ds.add(p+name, help), get})
	}
	add("packets_total", "Packets received from ports, before recirculation.", func(s *dp.Stats) uint64 { return s.Packets })
	add("emc_hits_total", "Packets found in the exact-match cache.", func(s *dp.Stats) uint64 { return s.EMCHits })
	add("megaflow_hits_total", "Packets found in the megaflow cache.", func(s *dp.Stats) uint64 { return s.MegaflowHits })
	add("upcalls_total", "Cache misses sent to the slow path.", func(s *dp.Stats) uint64 { return s.Upcalls })
	add("upcall_errors_total", "Translations that failed (packet dropped).", func(s *dp.Stats) uint64 { return s.UpcallErrors })
	add("megaflows_installed_total", "Megaflows installed.", func(s *dp.Stats) uint64 { return s.Installed })
	add("megaflows_expired_total", "Megaflows removed for idleness.", func(s *dp.Stats) uint64 { return s.Expired })
	add("megaflows_revalidated_total", "Megaflows checked after a flow-table change.", func(s *dp.Stats) uint64 { return s.Revalidated })
	add("megaflows_invalidated_total", "Megaflows removed or changed by revalidation.", func(s *dp.Stats) uint64 { return s.Invalidated })
	add("recirculations_total", "Recirculations.", func(s *dp.Stats) uint64 { return s.Recirculated })
	add("packet_ins_total", "Packets sent to the controller.", func(s *dp.Stats) uint64 { return s.PacketIns })
	add("packet_outs_total", "Packets the controller injected.", func(s *dp.Stats) uint64 { return s.PacketOuts })
	add("flow_limit_hits_total", "Upcalls that installed no megaflow because the flow limit was reached (the packet was still forwarded).", func(s *dp.Stats) uint64 { return s.FlowLimitHits })
	add("megaflows_evicted_total", "Megaflows removed to get under a lowered flow limit.", func(s *dp.Stats) uint64 { return s.Evicted })
	drops := ds.add(p+"drops_total", "Packets dropped by the datapath, by reason.", "reason")
	megaflows := ds.add(p+"megaflows", "Megaflows installed now.")
	flowLimit := ds.add(p+"flow_limit", "The cap on megaflows.")
	rules := ds.add(p+"rules", "Rules in a flow table.", "table")
	ctEntries := ds.add("govn_conntrack_entries", "Committed connections in a conntrack zone.", "zone")
	ctTotal := ds.add("govn_conntrack_connections", "Committed connections in all live zones (and flushed zones not yet reclaimed).")
	ctZones := ds.add("govn_conntrack_zones", "Conntrack zones with a table.")
	ctExpired := ds.add("govn_conntrack_expired_total", "Connections expired.")
	ctReclaimed := ds.add("govn_conntrack_reclaimed_total", "Connections reclaimed after zone flushes.")
	type portCounter struct {
		d   *prometheus.Desc
		get func(s *port.Stats) uint64
	}
	var portCounters []portCounter
	addPort := func(name, help string, get func(s *port.Stats) uint64) {
		portCounters = append(portCounters, portCounter{ds.add("govn_port_"+name, help, "port", "name"), get})
	}
	addPort("rx_packets_total", "Packets received.", func(s *port.Stats) uint64 { return s.RxPackets })
	addPort("rx_bytes_total", "Bytes received.", func(s *port.Stats) uint64 { return s.RxBytes })
	addPort("rx_dropped_total", "Received packets dropped.", func(s *port.Stats) uint64 { return s.RxDropped })
	addPort("rx_errors_total", "Receive errors.", func(s *port.Stats) uint64 { return s.RxErrors })
	addPort("tx_packets_total", "Packets sent.", func(s *port.Stats) uint64 { return s.TxPackets })
	addPort("tx_bytes_total", "Bytes sent.", func(s *port.Stats) uint64 { return s.TxBytes })
	addPort("tx_dropped_total", "Packets dropped on send.", func(s *port.Stats) uint64 { return s.TxDropped })
	addPort("tx_errors_total", "Send errors.", func(s *port.Stats) uint64 { return s.TxErrors })

	return &collector{descs: ds, collect: func(ch chan<- prometheus.Metric) {
		st := sw.Datapath().Stats()
		for _, c := range counters {
			counter(ch, c.d, c.get(&st))
		}
		for reason, n := range map[string]uint64{
			"no_port": st.NoPortDrops, "loop": st.LoopDrops, "conntrack": st.CTDrops, "meter": st.MeterDrops,
			"bad_offload": st.BadOffloads, "packet_in": st.PacketInDrops, "fragment": st.FragDrops,
		} {
			counter(ch, drops, n, reason)
		}
		gauge(ch, megaflows, float64(st.Megaflows))
		gauge(ch, flowLimit, float64(st.FlowLimit))
		counts := sw.Pipeline().Tables().RuleCounts()
		for t := range flow.NumTables {
			if counts[t] > 0 {
				gauge(ch, rules, float64(counts[t]), strconv.Itoa(t))
			}
		}
		ct := sw.Conntrack()
		ct.ZoneCounts(func(zone uint16, n int) {
			gauge(ch, ctEntries, float64(n), strconv.Itoa(int(zone)))
		})
		cst := ct.Stats()
		gauge(ch, ctTotal, float64(cst.Entries))
		gauge(ch, ctZones, float64(cst.Zones))
		counter(ch, ctExpired, uint64(cst.Expired))
		counter(ch, ctReclaimed, uint64(cst.Reclaimed))
		for _, pc := range sw.Datapath().Ports() {
			no := strconv.FormatUint(uint64(pc.No), 10)
			for _, c := range portCounters {
				counter(ch, c.d, c.get(&pc.Stats), no, pc.Name)
			}
		}
	}}
}
