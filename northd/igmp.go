package northd

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
	"github.com/govn/govn/schema/sb"
)

// keyMcIGMPBase is the first tunnel key of the Multicast_Group rows of
// IGMP/MLD groups, after the fixed groups' keys.
const keyMcIGMPBase = 32774

// genIGMP writes a Multicast_Group for each multicast address some chassis
// reports members of on a snooping switch (the IGMP_Group rows chassis
// write, one per chassis), with the members of every chassis, and the
// switch's flow that sends traffic to the address to that group. It is one
// owner for all groups: groups change as seldom as hosts join and leave,
// and each change reads every IGMP_Group row once.
func genIGMP(g *gen) {
	type groupKey struct {
		ls   ovsdb.UUID
		addr netip.Addr
	}
	members := map[groupKey]map[string]bool{}
	for _, id := range g.All(SB, "IGMP_Group") {
		ig, ok := Read[sb.IGMPGroup](g, SB, id)
		if !ok || ig.Datapath == nil {
			continue
		}
		addr, err := netip.ParseAddr(ig.Address)
		if err != nil || !addr.IsMulticast() {
			continue
		}
		dp := g.Row(SB, "Datapath_Binding", *ig.Datapath)
		lsID, ok := datapathNBID(g.s.sb, dp)
		if !ok {
			continue
		}
		ls, ok := Read[nb.LogicalSwitch](g, NB, lsID)
		if !ok || ls.OtherConfig["mcast_snoop"] != "true" {
			continue
		}
		k := groupKey{lsID, addr}
		if members[k] == nil {
			members[k] = map[string]bool{}
		}
		for _, pb := range ig.Ports {
			if r := g.Row(SB, "Port_Binding", pb); r != nil {
				members[k][stringColumn(g.s.sb, "Port_Binding", r, "logical_port")] = true
			}
		}
	}
	keys := make([]groupKey, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c := keys[i].ls.Compare(keys[j].ls); c != 0 {
			return c < 0
		}
		return keys[i].addr.Less(keys[j].addr)
	})
	next := map[ovsdb.UUID]int64{}
	for _, k := range keys {
		if next[k.ls] == 0 {
			next[k.ls] = keyMcIGMPBase
		}
		var ports []string
		for p := range members[k] {
			ports = append(ports, p)
		}
		slices.Sort(ports)
		var refs []ovsdb.UUID
		for _, p := range ports {
			refs = append(refs, g.Ref("Port_Binding", p))
		}
		name := k.addr.String()
		g.Record("Multicast_Group", k.ls.String()+"/"+name, map[string]ovsdb.Datum{
			"datapath":   dUUID(g.Ref("Datapath_Binding", k.ls.String())),
			"name":       dString(name),
			"tunnel_key": dInt(next[k.ls]),
			"ports":      dUUIDs(refs),
		})
		next[k.ls]++
		ipf := ipFamily(k.addr)
		g.Flow(g.Datapath(k.ls), LSInL2Lkup, 90, fmt.Sprintf("eth.mcast && %s && %s.dst == %s ", ipf, ipf, k.addr),
			fmt.Sprintf("outport = %q; output; ", name))
	}
}
