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
	skipSNAT bool     // options:skip_snat=true
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

// lbFactsAll returns the lbFacts of each load balancer of ids.
func lbFactsAll(g *gen, ids []ovsdb.UUID) []lbFacts {
	out := make([]lbFacts, 0, len(ids))
	for _, id := range ids {
		out = append(out, lbFactsOf(g, id))
	}
	return out
}
