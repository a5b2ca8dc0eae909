package northd

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/govn/govn/bench/northdbench"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// loadOps inserts the rows of a transaction of insert operations (JSON,
// as northdbench makes them) into h's Northbound and commits; it returns
// the commit's events.
func loadOps(h *harness, ops northdbench.Ops) []Event {
	h.t.Helper()
	named := make(map[string]ovsdb.UUID)
	resolve := func(name string) (ovsdb.UUID, error) {
		id, ok := named[name]
		if !ok {
			return ovsdb.UUID{}, fmt.Errorf("no row named %s", name)
		}
		return id, nil
	}
	decode := func(ts *ovsdb.TableSchema, col string, val any) ovsdb.Datum {
		// Through JSON text into the form the decoder takes.
		b, err := json.Marshal(val)
		if err != nil {
			h.t.Fatal(err)
		}
		v, err := ovsdb.DecodeJSON(b)
		if err != nil {
			h.t.Fatal(err)
		}
		d, err := ovsdb.DecodeDatum(v, &ts.Column(col).Type, resolve)
		if err != nil {
			h.t.Fatalf("%s.%s: %v", ts.Name, col, err)
		}
		return d
	}
	for _, op := range ops {
		table := op["table"].(string)
		ts := h.nb.schema.Tables[table]
		if op["op"] == "delete" {
			continue // NB_Global of an empty database: none
		}
		if op["op"] == "mutate" {
			// Only what northdbench makes: inserts into a set column of
			// the row of a name.
			name := op["where"].([]any)[0].([]any)[2].(string)
			id := h.byName(table, name)
			m := op["mutations"].([]any)[0].([]any)
			col := m[0].(string)
			cur := h.nb.rows[table][id].Get(ts.Column(col))
			h.nb.Update(table, id, map[string]ovsdb.Datum{col: cur.Union(decode(ts, col, m[2]))})
			continue
		}
		row := make(map[string]ovsdb.Datum)
		for col, val := range op["row"].(map[string]any) {
			row[col] = decode(ts, col, val)
		}
		id := h.nb.Insert(table, row)
		if name, ok := op["uuid-name"].(string); ok {
			named[name] = id
		}
	}
	return h.nb.commit()
}

// k8sCluster is a harness with northdbench's cluster of n nodes, computed
// and written.
func k8sCluster(t testing.TB, n int) *harness {
	return k8sClusterOf(t, northdbench.Shape{Nodes: n})
}

// k8sClusterOf is k8sCluster of any shape.
func k8sClusterOf(t testing.TB, shape northdbench.Shape) *harness {
	h := &harness{t: t, nb: newMemDB(t, NB, "nb"), sb: newMemDB(t, SB, "sb")}
	h.s = New(h.nb.schema, h.sb.schema, Options{})
	h.s.Apply(loadOps(h, shape.Northbound()))
	h.s.Recompute()
	h.sync()
	return h
}

// byName finds a Northbound row by its name.
func (h *harness) byName(table, name string) ovsdb.UUID {
	h.t.Helper()
	col := h.nb.schema.Tables[table].Column("name")
	for id, r := range h.nb.rows[table] {
		if d := r.Get(col); len(d.Keys) > 0 && d.Keys[0].Str() == name {
			return id
		}
	}
	h.t.Fatalf("no %s named %s", table, name)
	return ovsdb.UUID{}
}

// k8sChange is one change of the kind govn bench northd makes, done on the
// memDB as ovn-nbctl would.
type k8sChange struct {
	kind string
	do   func(h *harness, w *nbWorld, i int)
}

var k8sChanges = []k8sChange{
	{northdbench.PodAdd, func(h *harness, w *nbWorld, i int) {
		ls := h.byName(nb.LogicalSwitchTable, "node1")
		addr := fmt.Sprintf("0a:58:0a:80:01:%02x 10.128.1.%d", 200+i%50, 200+i%50)
		p := nb.LogicalSwitchPort{Name: fmt.Sprintf("ns0_newpod-%d", i), Addresses: []string{addr}, PortSecurity: []string{addr},
			Options: map[string]string{"requested-chassis": "chassis-node1"}}
		w.addMember(nb.LogicalSwitchTable, ls, "ports", h.nb.Insert(nb.LogicalSwitchPortTable, p.Row()))
		as := h.byName(nb.AddressSetTable, "as_ns0")
		cur := w.col(nb.AddressSetTable, as, "addresses")
		h.nb.Update(nb.AddressSetTable, as, map[string]ovsdb.Datum{"addresses": cur.Union(ovsdb.Set(ovsdb.String(fmt.Sprintf("10.128.1.%d", 200+i%50))))})
	}},
	{northdbench.PodDelete, func(h *harness, w *nbWorld, i int) {
		ls := h.byName(nb.LogicalSwitchTable, "node1")
		p := h.byName(nb.LogicalSwitchPortTable, fmt.Sprintf("ns0_newpod-%d", i))
		cur := w.col(nb.LogicalSwitchTable, ls, "ports")
		h.nb.Update(nb.LogicalSwitchTable, ls, map[string]ovsdb.Datum{"ports": cur.Difference(ovsdb.Set(ovsdb.UUIDAtom(p)))})
		as := h.byName(nb.AddressSetTable, "as_ns0")
		addrs := w.col(nb.AddressSetTable, as, "addresses")
		h.nb.Update(nb.AddressSetTable, as, map[string]ovsdb.Datum{"addresses": addrs.Difference(ovsdb.Set(ovsdb.String(fmt.Sprintf("10.128.1.%d", 200+i%50))))})
	}},
	{northdbench.BackendAdd, func(h *harness, w *nbWorld, i int) {
		lb := h.byName(nb.LoadBalancerTable, "Service_default/svc3_TCP_cluster")
		vips := w.col(nb.LoadBalancerTable, lb, "vips")
		m := make(map[string]string)
		for j, k := range vips.Keys {
			m[k.Str()] = vips.Values[j].Str()
		}
		for k := range m {
			m[k] += fmt.Sprintf(",10.128.2.%d:8080", 100+i)
		}
		h.nb.Update(nb.LoadBalancerTable, lb, map[string]ovsdb.Datum{"vips": dMap(m)})
	}},
	{northdbench.PolicyAdd, func(h *harness, w *nbWorld, i int) {
		pg, as := fmt.Sprintf("pg_pol%d", i), fmt.Sprintf("as_pol%d", i)
		h.nb.Insert(nb.AddressSetTable, (&nb.AddressSet{Name: as, Addresses: []string{"10.128.3.3", "10.128.3.4"}}).Row())
		var ports []ovsdb.UUID
		for p := 0; p < 5; p++ {
			ports = append(ports, h.byName(nb.LogicalSwitchPortTable, fmt.Sprintf("ns%d_pod-2-%d", (2*30+p)%10, p)))
		}
		a1 := h.nb.Insert(nb.ACLTable, (&nb.ACL{Direction: "to-lport", Priority: 1001, Match: "outport == @" + pg + " && ip4.src == $" + as, Action: "allow-related"}).Row())
		a2 := h.nb.Insert(nb.ACLTable, (&nb.ACL{Direction: "to-lport", Priority: 1000, Match: "outport == @" + pg + " && ip", Action: "drop"}).Row())
		h.nb.Insert(nb.PortGroupTable, (&nb.PortGroup{Name: pg, Ports: ports, ACLs: []ovsdb.UUID{a1, a2}}).Row())
	}},
	{northdbench.NodeAdd, func(h *harness, w *nbWorld, i int) {
		grp := h.byName(nb.LoadBalancerGroupTable, "clusterLBGroup")
		for _, ev := range loadOps(h, northdbench.Shape{Nodes: 1}.NodeAdd(500+i, grp.String())) {
			h.s.Apply([]Event{ev})
		}
	}},
	{northdbench.NodeDelete, func(h *harness, w *nbWorld, i int) {
		k := 500 + i
		node, gr := fmt.Sprintf("node%d", k), fmt.Sprintf("GR_node%d", k)
		for _, ls := range []string{node, "ext_" + node} {
			h.nb.Delete(nb.LogicalSwitchTable, h.byName(nb.LogicalSwitchTable, ls))
		}
		h.nb.Delete(nb.LogicalRouterTable, h.byName(nb.LogicalRouterTable, gr))
		cr := h.byName(nb.LogicalRouterTable, "ovn_cluster_router")
		ports := w.col(nb.LogicalRouterTable, cr, "ports")
		routes := w.col(nb.LogicalRouterTable, cr, "static_routes")
		var route ovsdb.UUID
		for _, id := range routes.Keys {
			var rt nb.LogicalRouterStaticRoute
			rt.LoadRow(h.nb.schema.Tables[nb.LogicalRouterStaticRouteTable], h.nb.rows[nb.LogicalRouterStaticRouteTable][id.UUID()])
			if rt.IPPrefix == fmt.Sprintf("10.%d.%d.0/24", 128+k/256, k%256) {
				route = rt.UUID
			}
		}
		h.nb.Update(nb.LogicalRouterTable, cr, map[string]ovsdb.Datum{
			"ports":         ports.Difference(ovsdb.Set(ovsdb.UUIDAtom(h.byName(nb.LogicalRouterPortTable, "rtos-"+node)))),
			"static_routes": routes.Difference(ovsdb.Set(ovsdb.UUIDAtom(route)))})
		join := h.byName(nb.LogicalSwitchTable, "join")
		jp := w.col(nb.LogicalSwitchTable, join, "ports")
		h.nb.Update(nb.LogicalSwitchTable, join, map[string]ovsdb.Datum{
			"ports": jp.Difference(ovsdb.Set(ovsdb.UUIDAtom(h.byName(nb.LogicalSwitchPortTable, "jtor-"+gr))))})
	}},
}

// bumpNBCfg increments NB_Global's nb_cfg, as ovn-nbctl --wait=sb does
// in the transaction of every change.
func bumpNBCfg(h *harness, w *nbWorld) {
	ids := w.rows(nb.NBGlobalTable)
	cur := w.col(nb.NBGlobalTable, ids[0], "nb_cfg")
	h.nb.Update(nb.NBGlobalTable, ids[0], map[string]ovsdb.Datum{"nb_cfg": ovsdb.Scalar(ovsdb.Integer(cur.Keys[0].Int() + 1))})
}

// TestK8sChangeCost checks that each change govn bench northd makes costs
// govn northd no full recompute and regenerates as many owners on a
// 10-node cluster as on a 4-node one: work that does not grow with the
// cluster. Services grow with the nodes (3 a node), so that a node add
// that regenerated the load balancers of its group would show.
func TestK8sChangeCost(t *testing.T) {
	costs := make(map[string][2]uint64)
	flows := make(map[string][2]uint64)
	sbOps := make(map[string][2]uint64)
	for si, nodes := range []int{4, 10} {
		h := k8sClusterOf(t, northdbench.Shape{Nodes: nodes, Services: 3 * nodes})
		w := &nbWorld{t: t, h: h}
		for _, c := range k8sChanges {
			for i := 0; i < 2; i++ {
				before := h.s.Stats()
				c.do(h, w, i)
				bumpNBCfg(h, w)
				h.nbCommit()
				ops := h.sync()
				after := h.s.Stats()
				if after.Recomputes != before.Recomputes {
					t.Errorf("%d nodes: %s recomputed everything", nodes, c.kind)
				}
				n := after.Generations - before.Generations
				if n == 0 {
					t.Errorf("%d nodes: %s regenerated nothing", nodes, c.kind)
				}
				cs := costs[c.kind]
				cs[si] = max(cs[si], n)
				costs[c.kind] = cs
				fs := flows[c.kind]
				fs[si] = max(fs[si], after.Flows-before.Flows)
				flows[c.kind] = fs
				os := sbOps[c.kind]
				os[si] = max(os[si], uint64(ops))
				sbOps[c.kind] = os
			}
		}
	}
	for kind, cs := range costs {
		t.Logf("%s: %d owners on 4 nodes, %d on 10; %d flows generated on 4, %d on 10; %d Southbound operations on 4, %d on 10",
			kind, cs[0], cs[1], flows[kind][0], flows[kind][1], sbOps[kind][0], sbOps[kind][1])
		if sbOps[kind][1] > sbOps[kind][0] {
			t.Errorf("%s writes %d Southbound operations on 10 nodes, %d on 4: its cost grows with the cluster", kind, sbOps[kind][1], sbOps[kind][0])
		}
		if cs[1] > cs[0] {
			t.Errorf("%s regenerates %d owners on 10 nodes, %d on 4: its cost grows with the cluster", kind, cs[1], cs[0])
		}
	}
}

// BenchmarkK8sCluster is northdbench's cluster in memory: the full
// compute, bytes of heap per logical flow, and a pod add (run with
// -benchtime=1x). state-bytes/lflow is the State's heap after the full
// compute; synced-bytes/lflow is the heap after the Southbound is written
// and its rows are back in the State, the Southbound's rows included (what
// a client's cache holds of them), the Northbound's not.
func BenchmarkK8sCluster(b *testing.B) {
	for _, nodes := range []int{20, 100} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				h := &harness{t: b, nb: newMemDB(b, NB, "nb"), sb: newMemDB(b, SB, "sb")}
				evs := loadOps(h, northdbench.Shape{Nodes: nodes}.Northbound())
				runtime.GC()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				h.s = New(h.nb.schema, h.sb.schema, Options{})
				h.s.Apply(evs)
				start := time.Now()
				h.s.Recompute()
				compute := time.Since(start)
				runtime.GC()
				runtime.ReadMemStats(&m1)
				flows := len(h.s.flows.entries)
				b.ReportMetric(float64(compute.Milliseconds()), "ms-compute")
				b.ReportMetric(float64(flows), "lflows")
				b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/float64(flows), "state-bytes/lflow")
				h.s.WriteSB(h.sb)
				h.s.Apply(h.sb.commit())
				h.s.Process()
				runtime.GC()
				var m2 runtime.MemStats
				runtime.ReadMemStats(&m2)
				b.ReportMetric(float64(m2.HeapAlloc-m0.HeapAlloc)/float64(flows), "synced-bytes/lflow")

				w := &nbWorld{h: h}
				before := h.s.Stats().Generations
				start = time.Now()
				k8sChanges[0].do(h, w, 0)
				h.nbCommit()
				h.s.Process()
				h.s.WriteSB(h.sb)
				b.ReportMetric(float64(time.Since(start).Microseconds()), "us-podadd")
				b.ReportMetric(float64(h.s.Stats().Generations-before), "podadd-owners")
			}
		})
	}
}

// BenchmarkK8sChange is one change of each kind on a 50-node cluster (a
// pod or node added is deleted again in the same iteration), for
// profiling what a change costs. us-northd is the state machine's share
// (Apply, Process, WriteSB) of one change, without the test database's.
func BenchmarkK8sChange(b *testing.B) {
	h := k8sCluster(b, 50)
	w := &nbWorld{h: h}
	var northd time.Duration
	step := func(do func()) {
		do()
		bumpNBCfg(h, w)
		evs := h.nb.commit()
		start := time.Now()
		h.s.Apply(evs)
		h.s.Process()
		h.s.WriteSB(h.sb)
		northd += time.Since(start)
		evs = h.sb.commit()
		start = time.Now()
		h.s.Apply(evs)
		h.s.Process()
		northd += time.Since(start)
	}
	undo := map[string]k8sChange{northdbench.PodAdd: k8sChanges[1], northdbench.NodeAdd: k8sChanges[5]}
	n := 0 // changes made, so that each policy and node is new
	for _, c := range k8sChanges {
		if c.kind == northdbench.PodDelete || c.kind == northdbench.NodeDelete {
			continue // with each add
		}
		b.Run(c.kind, func(b *testing.B) {
			northd = 0
			for i := 0; i < b.N; i++ {
				n++
				step(func() { c.do(h, w, n) })
				if u, ok := undo[c.kind]; ok {
					step(func() { u.do(h, w, n) })
				}
			}
			b.ReportMetric(float64(northd.Microseconds())/float64(b.N), "us-northd")
		})
	}
}

// TestK8sGroupsShared: the load balancers of a group and the flows on the
// same datapaths share one Logical_DP_Group (each load balancer had its
// own), before and after changes. A set of datapaths (dpSet) has a group
// of its own besides, which it changes in place: at most one of those per
// set of datapaths too.
func TestK8sGroupsShared(t *testing.T) {
	h := k8sCluster(t, 4)
	check := func(when string) {
		t.Helper()
		ts := h.sb.schema.Tables["Logical_DP_Group"]
		seen := make(map[string]bool)
		for id, r := range h.sb.rows["Logical_DP_Group"] {
			k := groupKey(r.Get(ts.Column("datapaths")))
			if h.s.ownedGroups[id] != nil {
				k = "owned " + k
			}
			if seen[k] {
				t.Errorf("%s: two Logical_DP_Group rows of datapaths %s", when, k)
			}
			seen[k] = true
		}
		if len(seen) == 0 {
			t.Fatalf("%s: no groups", when)
		}
	}
	check("after the cold start")
	w := &nbWorld{t: t, h: h}
	for _, c := range k8sChanges {
		c.do(h, w, 0)
		h.nbCommit()
		h.sync()
		check("after " + c.kind)
	}
}
