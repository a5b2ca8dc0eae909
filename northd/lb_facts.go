package northd

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// lbFacts are what the datapaths a load balancer is on need of it: its
// VIPs but not their backends. It is a memo per load balancer, so adding
// or removing a backend (the commonest change a Kubernetes cluster makes
// to a service) regenerates the load balancer alone, not every switch
// and router its group is on.
type lbFacts struct {
	anyVIP   bool     // the vips column is not empty
	skipSNAT bool     // options:skip_snat=true (merged: of one with valid VIPs)
	vipKeys  []string // the vips column's keys, sorted
	// valid are the addresses of the VIPs whose backends parse, each
	// once, sorted.
	valid []netip.Addr
}

// lbFactsOf returns a load balancer's lbFacts (a memo).
func lbFactsOf(g *gen, id ovsdb.UUID) lbFacts {
	return g.Memo("lb-facts/"+id.String(), func(g *gen) any {
		lb, ok := Read[nb.LoadBalancer](g, NB, id)
		if !ok {
			return lbFacts{}
		}
		f := lbFacts{anyVIP: len(lb.VIPs) > 0, skipSNAT: lb.Options["skip_snat"] == "true",
			vipKeys: slices.Sorted(maps.Keys(lb.VIPs))}
		for _, v := range parseVIPsQuiet(&lb) {
			if !slices.Contains(f.valid, v.vip.ip) {
				f.valid = append(f.valid, v.vip.ip)
			}
		}
		slices.SortFunc(f.valid, netip.Addr.Compare)
		return f
	}).(lbFacts)
}

// merge adds another load balancer's (or group's) facts to f: the union of
// their VIPs; skipSNAT only from load balancers with valid VIPs (those
// the router's load balancing applies to).
func (f *lbFacts) merge(o lbFacts) {
	f.anyVIP = f.anyVIP || o.anyVIP
	f.skipSNAT = f.skipSNAT || (o.skipSNAT && len(o.valid) > 0)
	for _, k := range o.vipKeys {
		if i, found := slices.BinarySearch(f.vipKeys, k); !found {
			f.vipKeys = slices.Insert(f.vipKeys, i, k)
		}
	}
	for _, a := range o.valid {
		if i, found := slices.BinarySearchFunc(f.valid, a, netip.Addr.Compare); !found {
			f.valid = slices.Insert(f.valid, i, a)
		}
	}
}

// lbGroupFactsOf returns the merged lbFacts of a load balancer group's
// members (a memo): a datapath reads one memo per group instead of one
// per load balancer, which with every service in one group on every node
// (ovn-kubernetes) keeps dependencies to nodes plus services, not their
// product.
func lbGroupFactsOf(g *gen, grp ovsdb.UUID) lbFacts {
	return g.Memo("lbgroup-facts/"+grp.String(), func(g *gen) any {
		var f lbFacts
		for _, lb := range g.Members(NB, nb.LoadBalancerGroupTable, grp, "load_balancer") {
			f.merge(lbFactsOf(g, lb))
		}
		return f
	}).(lbFacts)
}

// datapathLBFacts returns the merged lbFacts of the load balancers on a
// switch or router (table), directly or through its groups.
func datapathLBFacts(g *gen, table string, id ovsdb.UUID) lbFacts {
	var f lbFacts
	for _, lb := range g.Members(NB, table, id, "load_balancer") {
		f.merge(lbFactsOf(g, lb))
	}
	for _, grp := range g.Members(NB, table, id, "load_balancer_group") {
		f.merge(lbGroupFactsOf(g, grp))
	}
	return f
}

// lbGroupRouter is one router of a load balancer group, as the flows of
// the group's load balancers need it.
type lbGroupRouter struct {
	id     ovsdb.UUID
	target routerLBTarget
	nat    map[netip.Addr]bool // routerNATIPs, of a gateway router
}

// lbGroupRoutersOf returns the routers of a load balancer group (a memo,
// for the same reason as lbGroupFactsOf), sorted.
func lbGroupRoutersOf(g *gen, grp ovsdb.UUID) []lbGroupRouter {
	return g.Memo("lbgroup-routers/"+grp.String(), func(g *gen) any {
		ids := g.Referrers(NB, nb.LogicalRouterTable, "load_balancer_group", grp)
		sortUUIDs(ids)
		var out []lbGroupRouter
		for _, id := range ids {
			r := lbGroupRouter{id: id, target: routerLBTargetOf(g, id)}
			if r.target.chassis {
				r.nat = routerNATIPs(g, id)
			}
			out = append(out, r)
		}
		return out
	}).([]lbGroupRouter)
}

// lbRouterList returns the routers a load balancer is on, directly or
// through its groups, each once.
func lbRouterList(g *gen, lb ovsdb.UUID) []lbGroupRouter {
	seen := map[ovsdb.UUID]bool{}
	var out []lbGroupRouter
	direct := g.Referrers(NB, nb.LogicalRouterTable, "load_balancer", lb)
	sortUUIDs(direct)
	for _, id := range direct {
		seen[id] = true
		r := lbGroupRouter{id: id, target: routerLBTargetOf(g, id)}
		if r.target.chassis {
			r.nat = routerNATIPs(g, id)
		}
		out = append(out, r)
	}
	for _, grp := range g.Referrers(NB, nb.LoadBalancerGroupTable, "load_balancer", lb) {
		for _, r := range lbGroupRoutersOf(g, grp) {
			if !seen[r.id] {
				seen[r.id] = true
				out = append(out, r)
			}
		}
	}
	return out
}
