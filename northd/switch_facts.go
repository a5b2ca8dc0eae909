package northd

import (
	"slices"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// switchFacts are what a switch's ACLs and load balancers make of its
// pipeline as a whole: ovn-northd writes the switch-wide flows of the ACL
// and load-balancer stages differently with and without them.
type switchFacts struct {
	hasACLs         bool // some ACL applies, on the switch or a port group of its ports
	hasStatefulACL  bool // one of them is allow-related
	hasLBVIP        bool // a load balancer with a VIP is on the switch (directly or in a group)
	hasStatelessACL bool
}

// stateful says whether the switch's traffic goes through conntrack for
// ACLs or load balancing.
func (f switchFacts) stateful() bool { return f.hasStatefulACL || f.hasLBVIP }

// switchACLs returns the ACLs that apply to a switch: its own and those of
// the port groups its ports are in, each once, in UUID order.
func switchACLs(g *gen, ls *nb.LogicalSwitch) []nb.ACL {
	seen := map[ovsdb.UUID]bool{}
	var ids []ovsdb.UUID
	add := func(acls []ovsdb.UUID) {
		for _, id := range acls {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	add(g.Members(NB, nb.LogicalSwitchTable, ls.UUID, "acls"))
	pgs := map[ovsdb.UUID]bool{}
	for _, port := range g.Members(NB, nb.LogicalSwitchTable, ls.UUID, "ports") {
		for _, pg := range g.Referrers(NB, nb.PortGroupTable, "ports", port) {
			if !pgs[pg] {
				pgs[pg] = true
				add(g.Members(NB, nb.PortGroupTable, pg, "acls"))
			}
		}
	}
	sortUUIDs(ids)
	return ReadAll[nb.ACL](g, NB, ids)
}

// readSwitchFacts computes a switch's facts, recording what it read.
func readSwitchFacts(g *gen, ls *nb.LogicalSwitch) switchFacts {
	var f switchFacts
	for _, acl := range switchACLs(g, ls) {
		f.hasACLs = true
		switch acl.Action {
		case nb.ACLActionAllowRelated:
			f.hasStatefulACL = true
		case nb.ACLActionAllowStateless:
			f.hasStatelessACL = true
		}
	}
	f.hasLBVIP = datapathLBFacts(g, nb.LogicalSwitchTable, ls.UUID).anyVIP
	return f
}

func sortUUIDs(ids []ovsdb.UUID) { slices.SortFunc(ids, ovsdb.UUID.Compare) }

// factsOf returns the facts of the switch with Northbound row id, as a
// memo: an owner that reads them is regenerated only when they change.
func factsOf(g *gen, id ovsdb.UUID) switchFacts {
	return g.Memo("switch-facts/"+id.String(), func(g *gen) any {
		ls, ok := Read[nb.LogicalSwitch](g, NB, id)
		if !ok {
			return switchFacts{}
		}
		return readSwitchFacts(g, &ls)
	}).(switchFacts)
}
