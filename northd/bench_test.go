package northd

import (
	"fmt"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// buildCluster fills h's Northbound with an ovn-kubernetes-like cluster:
// per node a switch with pods, port security and a management port; a
// cluster-wide port group with ACLs over an address set; load balancers in
// a group on every node switch.
func buildCluster(h *harness, nodes, pods int) {
	var lbs []ovsdb.UUID
	for i := 0; i < 20; i++ {
		lb := nb.LoadBalancer{Name: fmt.Sprintf("svc%d", i), Protocol: ptr("tcp"),
			VIPs: map[string]string{fmt.Sprintf("172.30.0.%d:80", i+1): "10.128.0.10:8080,10.128.1.10:8080,10.128.2.10:8080"}}
		lbs = append(lbs, h.nb.Insert(nb.LoadBalancerTable, lb.Row()))
	}
	grp := h.nb.Insert(nb.LoadBalancerGroupTable, (&nb.LoadBalancerGroup{Name: "cluster", LoadBalancer: lbs}).Row())
	var pgPorts []ovsdb.UUID
	for n := 0; n < nodes; n++ {
		var ports []ovsdb.UUID
		for p := 0; p < pods; p++ {
			mac := fmt.Sprintf("0a:58:0a:%02x:%02x:%02x", n>>8, n&0xff, p+10)
			ip := fmt.Sprintf("10.%d.%d.%d", 128+n/256, n%256, p+10)
			lsp := nb.LogicalSwitchPort{Name: fmt.Sprintf("ns_pod-%d-%d", n, p), Addresses: []string{mac + " " + ip}, PortSecurity: []string{mac + " " + ip},
				Options: map[string]string{"requested-chassis": fmt.Sprintf("node%d", n)}}
			id := h.nb.Insert(nb.LogicalSwitchPortTable, lsp.Row())
			ports = append(ports, id)
			if p%3 == 0 {
				pgPorts = append(pgPorts, id)
			}
		}
		h.nb.Insert(nb.LogicalSwitchTable, (&nb.LogicalSwitch{Name: fmt.Sprintf("node%d", n), Ports: ports,
			LoadBalancerGroup: []ovsdb.UUID{grp}, OtherConfig: map[string]string{"subnet": fmt.Sprintf("10.%d.%d.0/24", 128+n/256, n%256)}}).Row())
	}
	as := h.nb.Insert(nb.AddressSetTable, (&nb.AddressSet{Name: "ns_allowed", Addresses: []string{"10.128.0.10", "10.128.1.10"}}).Row())
	_ = as
	a1 := h.nb.Insert(nb.ACLTable, (&nb.ACL{Direction: "to-lport", Priority: 1001, Match: "outport == @pg_np && ip4.src == $ns_allowed", Action: "allow-related"}).Row())
	a2 := h.nb.Insert(nb.ACLTable, (&nb.ACL{Direction: "to-lport", Priority: 1000, Match: "outport == @pg_np && ip", Action: "drop"}).Row())
	h.nb.Insert(nb.PortGroupTable, (&nb.PortGroup{Name: "pg_np", Ports: pgPorts, ACLs: []ovsdb.UUID{a1, a2}}).Row())
	h.nb.Insert(nb.NBGlobalTable, (&nb.NBGlobal{Options: map[string]string{"svc_monitor_mac": "0a:58:0a:00:00:fe"}}).Row())
	h.nbCommit()
}

func ptr[T any](v T) *T { return &v }

// BenchmarkCluster measures a full compute, its Southbound writes and a
// pod add on a 100-node cluster (run with -benchtime=1x: the setup
// dominates). issue 13's `govn bench northd` is the side-by-side figure;
// this one is for profiling the state machine alone.
func BenchmarkCluster(b *testing.B) {
	for i := 0; i < b.N; i++ {
		h := &harness{t: b, nb: newMemDB(b, NB, "nb"), sb: newMemDB(b, SB, "sb")}
		h.s = New(h.nb.schema, h.sb.schema, Options{})
		buildCluster(h, 100, 30)
		start := time.Now()
		h.s.Recompute()
		compute := time.Since(start)
		start = time.Now()
		ops := h.s.WriteSB(h.sb)
		write := time.Since(start)
		h.s.Apply(h.sb.commit())
		h.s.Process()
		b.ReportMetric(float64(compute.Milliseconds()), "ms-compute")
		b.ReportMetric(float64(write.Milliseconds()), "ms-writesb")
		b.ReportMetric(float64(ops), "sb-ops")
		b.ReportMetric(float64(len(h.s.flows.entries)), "lflows")

		// A pod add.
		var ls ovsdb.UUID
		for id, r := range h.nb.rows[nb.LogicalSwitchTable] {
			var m nb.LogicalSwitch
			m.LoadRow(h.nb.schema.Tables[nb.LogicalSwitchTable], r)
			if m.Name == "node7" {
				ls = id
			}
		}
		start = time.Now()
		p := h.nb.Insert(nb.LogicalSwitchPortTable, (&nb.LogicalSwitchPort{Name: "newpod", Addresses: []string{"0a:58:0a:80:07:ff 10.128.7.250"}}).Row())
		cur := h.nb.rows[nb.LogicalSwitchTable][ls].Get(h.nb.schema.Tables[nb.LogicalSwitchTable].Column("ports"))
		h.nb.Update(nb.LogicalSwitchTable, ls, map[string]ovsdb.Datum{"ports": cur.Union(ovsdb.Set(ovsdb.UUIDAtom(p)))})
		evs := h.nb.commit()
		start = time.Now()
		h.s.Apply(evs)
		gens := h.s.Process()
		n := h.s.WriteSB(h.sb)
		b.ReportMetric(float64(time.Since(start).Microseconds()), "us-podadd")
		b.ReportMetric(float64(gens), "podadd-owners")
		b.ReportMetric(float64(n), "podadd-ops")
	}
}
