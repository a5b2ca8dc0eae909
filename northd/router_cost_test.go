package northd

import (
	"fmt"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// TestRouterChangeCost checks that a change to one NAT rule, static route,
// router load balancer VIP or router port network regenerates a bounded
// number of owners, however many routers, ports, NATs and routes there are:
// the router (whose generator writes its NATs and routes), the load
// balancer, the changed port, and the readers of memos whose value changed.
func TestRouterChangeCost(t *testing.T) {
	h := newHarness(t)
	lrs := make([]ovsdb.UUID, 5)
	var firstPort ovsdb.UUID
	for r := range lrs {
		lr := nb.LogicalRouter{Name: fmt.Sprintf("r%d", r), Options: map[string]string{"chassis": "hv1"}}
		for p := 0; p < 10; p++ {
			lrp := nb.LogicalRouterPort{Name: fmt.Sprintf("r%d-p%d", r, p), MAC: fmt.Sprintf("00:00:00:00:%02x:%02x", r, p), Networks: []string{fmt.Sprintf("10.%d.%d.1/24", r, p)}}
			id := h.nb.Insert(nb.LogicalRouterPortTable, lrp.Row())
			if r == 0 && p == 0 {
				firstPort = id
			}
			lr.Ports = append(lr.Ports, id)
		}
		for i := 0; i < 50; i++ {
			nat := nb.NAT{Type: "dnat_and_snat", ExternalIP: fmt.Sprintf("172.16.%d.%d", r, i+1), LogicalIP: fmt.Sprintf("10.%d.0.%d", r, i+10)}
			lr.NAT = append(lr.NAT, h.nb.Insert(nb.NATTable, nat.Row()))
			rt := nb.LogicalRouterStaticRoute{IPPrefix: fmt.Sprintf("192.%d.%d.0/24", r, i), Nexthop: fmt.Sprintf("10.%d.1.254", r)}
			lr.StaticRoutes = append(lr.StaticRoutes, h.nb.Insert(nb.LogicalRouterStaticRouteTable, rt.Row()))
		}
		lb := nb.LoadBalancer{Name: fmt.Sprintf("lb%d", r), VIPs: map[string]string{fmt.Sprintf("10.%d.9.100:80", r): fmt.Sprintf("10.%d.0.10:80", r)}}
		lr.LoadBalancer = []ovsdb.UUID{h.nb.Insert(nb.LoadBalancerTable, lb.Row())}
		lrs[r] = h.nb.Insert(nb.LogicalRouterTable, lr.Row())
	}
	h.nbCommit()
	h.s.Recompute()
	h.sync()
	// Inserted rows get their real UUIDs at commit: find them by name.
	byName := func(table, name string) ovsdb.UUID {
		for id, r := range h.nb.rows[table] {
			if r.Get(h.nb.schema.Tables[table].Column("name")).Keys[0].Str() == name {
				return id
			}
		}
		t.Fatalf("no %s %s", table, name)
		return ovsdb.UUID{}
	}
	for r := range lrs {
		lrs[r] = byName(nb.LogicalRouterTable, fmt.Sprintf("r%d", r))
	}
	firstPort = byName(nb.LogicalRouterPortTable, "r0-p0")

	cost := func(what string, change func()) uint64 {
		before := h.s.Stats().Generations
		change()
		h.nbCommit()
		h.sync()
		n := h.s.Stats().Generations - before
		t.Logf("%s: %d owners generated", what, n)
		return n
	}
	w := &nbWorld{t: t, h: h}
	tests := []struct {
		what   string
		max    uint64
		change func()
	}{
		{"add a NAT", 15, func() {
			nat := nb.NAT{Type: "snat", ExternalIP: "172.16.0.200", LogicalIP: "10.0.0.0/16"}
			w.addMember(nb.LogicalRouterTable, lrs[0], "nat", h.nb.Insert(nb.NATTable, nat.Row()))
		}},
		{"delete a NAT", 15, func() { dropFirst(w, lrs[0], "nat") }},
		{"add a static route", 3, func() {
			rt := nb.LogicalRouterStaticRoute{IPPrefix: "192.200.0.0/24", Nexthop: "10.0.1.254"}
			w.addMember(nb.LogicalRouterTable, lrs[0], "static_routes", h.nb.Insert(nb.LogicalRouterStaticRouteTable, rt.Row()))
		}},
		{"delete a static route", 3, func() { dropFirst(w, lrs[0], "static_routes") }},
		{"add a router VIP", 15, func() {
			lb := nb.LoadBalancer{Name: "new", VIPs: map[string]string{"10.0.9.101:80": "10.0.0.11:80"}}
			w.addMember(nb.LogicalRouterTable, lrs[0], "load_balancer", h.nb.Insert(nb.LoadBalancerTable, lb.Row()))
		}},
		{"change a port's networks", 20, func() {
			h.nb.Update(nb.LogicalRouterPortTable, firstPort, map[string]ovsdb.Datum{"networks": dStrings([]string{"10.0.0.1/16"})})
		}},
	}
	for _, tc := range tests {
		if n := cost(tc.what, tc.change); n > tc.max || n == 0 {
			t.Errorf("%s generated %d owners, want 1..%d", tc.what, n, tc.max)
		}
	}
}

// dropFirst removes the first member of a router's column.
func dropFirst(w *nbWorld, lr ovsdb.UUID, col string) {
	cur := w.col(nb.LogicalRouterTable, lr, col)
	w.h.nb.Update(nb.LogicalRouterTable, lr, map[string]ovsdb.Datum{col: cur.Difference(ovsdb.Set(cur.Keys[0]))})
}
