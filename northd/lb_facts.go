package northd

import (
	"fmt"
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
	// Into nothing, a copy (o's lists are a memo's, not to be changed):
	// one insertion at a time would move the list for each of a group's
	// hundreds of VIPs.
	if len(f.vipKeys) == 0 {
		f.vipKeys = slices.Clone(o.vipKeys)
	}
	if len(f.valid) == 0 {
		f.valid = slices.Clone(o.valid)
	}
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
// Its lists are read-only: with no load balancer of its own and one group
// (every node of ovn-kubernetes), they are the group's memo itself.
func datapathLBFacts(g *gen, table string, id ovsdb.UUID) lbFacts {
	lbs := g.Members(NB, table, id, "load_balancer")
	grps := g.Members(NB, table, id, "load_balancer_group")
	if len(lbs) == 0 && len(grps) == 1 {
		return lbGroupFactsOf(g, grps[0])
	}
	var f lbFacts
	for _, lb := range lbs {
		f.merge(lbFactsOf(g, lb))
	}
	for _, grp := range grps {
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

// lbRouterClass is a kind of router of a load balancer group on which the
// group's load balancers write the same flows: gateway routers or not,
// with lb_force_snat_ip or not, with no gateway port that load balancing
// happens on and no NAT address that is a VIP of the group. The routers of
// a class are a dpSet, so a gateway router joining the group (a node add)
// regenerates none of its load balancers.
type lbRouterClass struct {
	chassis, force bool
}

// lbGroupRouters is what the load balancers of a group need of its
// routers: the classes that have routers (sorted) and, one by one, the
// routers in no class, sorted.
type lbGroupRouters struct {
	classes []lbRouterClass
	others  []lbGroupRouter
}

// lbGroupRouterOf returns what a load balancer needs of router id of
// group grp, and whether the router belongs to a class.
func lbGroupRouterOf(g *gen, grp, id ovsdb.UUID) (lbGroupRouter, bool) {
	r := lbGroupRouter{id: id, target: routerLBTargetOf(g, id)}
	if !r.target.enabled || r.target.dgp != nil {
		return r, false
	}
	if r.target.chassis {
		r.nat = routerNATIPs(g, id)
		for _, a := range lbGroupFactsOf(g, grp).valid {
			if r.nat[a] {
				return r, false
			}
		}
	}
	return r, true
}

// lbGroupRoutersOf returns the routers of a load balancer group by class
// (a memo: it changes when a class appears or goes, not when a router of
// an existing class comes).
func lbGroupRoutersOf(g *gen, grp ovsdb.UUID) lbGroupRouters {
	return g.Memo("lbgroup-routers/"+grp.String(), func(g *gen) any {
		ids := g.Referrers(NB, nb.LogicalRouterTable, "load_balancer_group", grp)
		sortUUIDs(ids)
		var out lbGroupRouters
		for _, id := range ids {
			r, inClass := lbGroupRouterOf(g, grp, id)
			if !inClass {
				out.others = append(out.others, r)
				continue
			}
			c := lbRouterClass{chassis: r.target.chassis, force: r.target.force}
			if !slices.Contains(out.classes, c) {
				out.classes = append(out.classes, c)
			}
		}
		slices.SortFunc(out.classes, func(a, b lbRouterClass) int {
			return cmpBool(a.chassis, b.chassis)*2 + cmpBool(a.force, b.force)
		})
		return out
	}).(lbGroupRouters)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// lbGroupClassRouters returns the set of the routers of class c of group
// grp.
func lbGroupClassRouters(g *gen, grp ovsdb.UUID, c lbRouterClass) *dpSet {
	key := fmt.Sprintf("lbgroup-routers/%s/%t/%t", grp, c.chassis, c.force)
	return g.DatapathSet(key, func(g *gen) []dpID {
		var out []dpID
		for _, id := range g.Referrers(NB, nb.LogicalRouterTable, "load_balancer_group", grp) {
			r, inClass := lbGroupRouterOf(g, grp, id)
			if inClass && r.target.chassis == c.chassis && r.target.force == c.force {
				out = append(out, g.Datapath(id))
			}
		}
		return out
	})
}

// lbClassSet is a class of routers of a load balancer's group and the set
// of its routers.
type lbClassSet struct {
	class lbRouterClass
	set   *dpSet
}

// lbRouterList returns the routers a load balancer is on: one by one,
// those that list it and those of its groups in no class, each once; and
// the classes of routers of its groups.
func lbRouterList(g *gen, lb ovsdb.UUID) ([]lbGroupRouter, []lbClassSet) {
	seen := map[ovsdb.UUID]bool{}
	var out []lbGroupRouter
	var classes []lbClassSet
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
		rs := lbGroupRoutersOf(g, grp)
		for _, r := range rs.others {
			if !seen[r.id] {
				seen[r.id] = true
				out = append(out, r)
			}
		}
		for _, c := range rs.classes {
			classes = append(classes, lbClassSet{c, lbGroupClassRouters(g, grp, c)})
		}
	}
	return out, classes
}
