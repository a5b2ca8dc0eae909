package northd

import (
	"fmt"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// TestRouterChangeCost checks that a change to one NAT rule, static route,
// router load balancer VIP or router port network regenerates a bounded
// number of owners, however many routers, ports, NATs and routes there are
// (the NAT or route, its router's NAT or routes owner, the load balancer,
// the changed port, and the readers of memos whose value changed), and
// that a NAT, route, VIP or port network change costs the same flows
// whether its router has 10 NATs and 10 routes or 50 (unless it moves the
// routes' next hop).
func TestRouterChangeCost(t *testing.T) {
	small, large := routerChangeCosts(t, 10), routerChangeCosts(t, 50)
	for _, c := range []struct {
		what      string
		maxOwners uint64
		sameFlows bool // the flows generated do not grow with the NATs and routes
	}{
		{"add a NAT", 15, true},
		{"delete a NAT", 15, true},
		{"add a static route", 3, true},
		{"delete a static route", 3, true},
		{"add a router VIP", 15, true},
		{"change a port's networks", 20, true},
		// The port's new network holds the routes' next hop, which
		// moves every route of the router to it.
		{"widen a port's network over the routes' next hop", 60, false},
	} {
		s, l := small[c.what], large[c.what]
		t.Logf("%s: %d owners and %d flows generated with 10 NATs and routes per router, %d and %d with 50", c.what, s.owners, s.flows, l.owners, l.flows)
		if l.owners == 0 || l.owners > c.maxOwners {
			t.Errorf("%s generated %d owners, want 1..%d", c.what, l.owners, c.maxOwners)
		}
		if c.sameFlows && s.flows != l.flows {
			t.Errorf("%s generated %d flows with 10 NATs and routes per router, %d with 50; want the same", c.what, s.flows, l.flows)
		}
	}
}

type changeCost struct{ owners, flows uint64 }

// routerChangeCosts builds 5 gateway routers with 10 ports and n NATs and
// n static routes each, and measures what each change of
// TestRouterChangeCost costs.
func routerChangeCosts(t *testing.T, n int) map[string]changeCost {
	h := newHarness(t)
	lrs := make([]ovsdb.UUID, 5)
	for r := range lrs {
		lr := nb.LogicalRouter{Name: fmt.Sprintf("r%d", r), Options: map[string]string{"chassis": "hv1"}}
		for p := 0; p < 10; p++ {
			lrp := nb.LogicalRouterPort{Name: fmt.Sprintf("r%d-p%d", r, p), MAC: fmt.Sprintf("00:00:00:00:%02x:%02x", r, p), Networks: []string{fmt.Sprintf("10.%d.%d.1/24", r, p)}}
			lr.Ports = append(lr.Ports, h.nb.Insert(nb.LogicalRouterPortTable, lrp.Row()))
		}
		for i := 0; i < n; i++ {
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
	firstPort := byName(nb.LogicalRouterPortTable, "r0-p0")

	w := &nbWorld{t: t, h: h}
	out := map[string]changeCost{}
	for _, c := range []struct {
		what   string
		change func()
	}{
		{"add a NAT", func() {
			nat := nb.NAT{Type: "snat", ExternalIP: "172.16.0.200", LogicalIP: "10.0.0.0/16"}
			w.addMember(nb.LogicalRouterTable, lrs[0], "nat", h.nb.Insert(nb.NATTable, nat.Row()))
		}},
		{"delete a NAT", func() { dropFirst(w, lrs[0], "nat") }},
		{"add a static route", func() {
			rt := nb.LogicalRouterStaticRoute{IPPrefix: "192.200.0.0/24", Nexthop: "10.0.1.254"}
			w.addMember(nb.LogicalRouterTable, lrs[0], "static_routes", h.nb.Insert(nb.LogicalRouterStaticRouteTable, rt.Row()))
		}},
		{"delete a static route", func() { dropFirst(w, lrs[0], "static_routes") }},
		{"add a router VIP", func() {
			lb := nb.LoadBalancer{Name: "new", VIPs: map[string]string{"10.0.9.101:80": "10.0.0.11:80"}}
			w.addMember(nb.LogicalRouterTable, lrs[0], "load_balancer", h.nb.Insert(nb.LoadBalancerTable, lb.Row()))
		}},
		{"change a port's networks", func() {
			h.nb.Update(nb.LogicalRouterPortTable, firstPort, map[string]ovsdb.Datum{"networks": dStrings([]string{"10.0.0.1/24", "10.0.100.1/24"})})
		}},
		{"widen a port's network over the routes' next hop", func() {
			h.nb.Update(nb.LogicalRouterPortTable, firstPort, map[string]ovsdb.Datum{"networks": dStrings([]string{"10.0.0.1/16"})})
		}},
	} {
		before := h.s.Stats()
		c.change()
		h.nbCommit()
		h.sync()
		after := h.s.Stats()
		out[c.what] = changeCost{after.Generations - before.Generations, after.Flows - before.Flows}
	}
	if r := h.s.Stats().Recomputes; r != 1 {
		t.Errorf("%d full recomputes, want only the first", r)
	}
	return out
}

// dropFirst removes the first member of a router's column.
func dropFirst(w *nbWorld, lr ovsdb.UUID, col string) {
	cur := w.col(nb.LogicalRouterTable, lr, col)
	w.h.nb.Update(nb.LogicalRouterTable, lr, map[string]ovsdb.Datum{col: cur.Difference(ovsdb.Set(cur.Keys[0]))})
}

// TestNATOwnersIncremental checks, against a fresh full compute after each
// step, the flows that NAT rules sharing an external address write once
// (by the first rule of the address): on a gateway router and on a
// distributed router with a gateway port, as rules come, take another's
// address, and go.
func TestNATOwnersIncremental(t *testing.T) {
	h := newHarness(t)
	gc := h.nb.Insert(nb.GatewayChassisTable, (&nb.GatewayChassis{Name: "gc", ChassisName: "hv2", Priority: 10}).Row())
	dgp := h.nb.Insert(nb.LogicalRouterPortTable, (&nb.LogicalRouterPort{Name: "d-ext", MAC: "00:00:00:00:0e:01", Networks: []string{"172.30.0.1/24"}, GatewayChassis: []ovsdb.UUID{gc}}).Row())
	gwp := h.nb.Insert(nb.LogicalRouterPortTable, (&nb.LogicalRouterPort{Name: "g-ext", MAC: "00:00:00:00:0e:02", Networks: []string{"172.31.0.1/24"}}).Row())
	h.nb.Insert(nb.LogicalRouterTable, (&nb.LogicalRouter{Name: "d", Ports: []ovsdb.UUID{dgp}}).Row())
	h.nb.Insert(nb.LogicalRouterTable, (&nb.LogicalRouter{Name: "g", Ports: []ovsdb.UUID{gwp}, Options: map[string]string{"chassis": "hv1"}}).Row())
	h.nbCommit()
	h.s.Recompute()
	h.sync()
	w := &nbWorld{t: t, h: h}
	router := func(name string) ovsdb.UUID {
		for id, r := range h.nb.rows[nb.LogicalRouterTable] {
			if r.Get(h.nb.schema.Tables[nb.LogicalRouterTable].Column("name")).Keys[0].Str() == name {
				return id
			}
		}
		t.Fatalf("no router %s", name)
		return ovsdb.UUID{}
	}
	nats := func(lr ovsdb.UUID) []ovsdb.UUID {
		var out []ovsdb.UUID
		for _, a := range w.col(nb.LogicalRouterTable, lr, "nat").Keys {
			out = append(out, a.UUID())
		}
		return out
	}
	check := func(step string) {
		t.Helper()
		h.nbCommit()
		h.sync()
		if n := freshWrites(t, h); n != 0 {
			t.Fatalf("after %s, a fresh full compute changes %d Southbound rows", step, n)
		}
	}
	for _, name := range []string{"d", "g"} {
		lr := router(name)
		prefix := map[string]string{"d": "172.30.0.", "g": "172.31.0."}[name]
		for i, typ := range []string{"snat", "dnat_and_snat", "dnat", "snat"} {
			logical := fmt.Sprintf("10.9.%d.0/24", i)
			if typ != "snat" {
				logical = fmt.Sprintf("10.9.0.%d", 10+i)
			}
			nat := nb.NAT{Type: typ, ExternalIP: fmt.Sprintf("%s%d", prefix, 10+i), LogicalIP: logical}
			w.addMember(nb.LogicalRouterTable, lr, "nat", h.nb.Insert(nb.NATTable, nat.Row()))
			check(name + ": add a NAT")
		}
		ids := nats(lr)
		if len(ids) != 4 {
			t.Fatalf("%s has %d NATs, want 4", name, len(ids))
		}
		for i := 1; i < len(ids); i++ {
			h.nb.Update(nb.NATTable, ids[i], map[string]ovsdb.Datum{"external_ip": w.col(nb.NATTable, ids[0], "external_ip")})
			check(fmt.Sprintf("%s: NAT %d takes the first one's address", name, i))
		}
		for len(nats(lr)) > 0 {
			dropFirst(w, lr, "nat")
			check(name + ": drop the first NAT")
		}
	}
}
