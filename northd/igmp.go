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

// mcastGroupKey names one multicast group: an address on a switch or a
// router.
type mcastGroupKey struct {
	dp   ovsdb.UUID // the Northbound switch or router
	addr netip.Addr
}

// igmpSwitch is what the IGMP groups of one snooping switch need to know
// about it.
type igmpSwitch struct {
	cfg switchMcastConfig
	// flooded names the ports with options:mcast_flood: they get all
	// multicast anyway, so groups leave them out.
	flooded   map[string]bool
	localnets []string
	// relay lists the router ports (the chassisredirect port of a
	// distributed gateway port) through which a multicast-relaying router
	// that does not already flood to this switch hears its groups.
	relay []relayPort
	// floodRelay and floodStatic: the switch also sends every group's
	// traffic to its relaying routers (_MC_mrouter_flood) and to its
	// mcast_flood ports (_MC_static).
	floodRelay, floodStatic bool
}

type relayPort struct {
	router ovsdb.UUID
	port   string
}

// genIGMP writes a Multicast_Group for each multicast address some chassis
// reports members of on a snooping switch (the IGMP_Group rows chassis
// write, one per chassis), with the members of every chassis and the
// switch's localnet ports, and the switch's flow that sends traffic to the
// address to that group. A router with options:mcast_relay gets the groups
// of the switches it is on, each a Multicast_Group of its ports towards
// them, routed to at lr_in_ip_routing. It is one owner for all groups:
// groups change as seldom as hosts join and leave, and each change reads
// every IGMP_Group row once.
func genIGMP(g *gen) {
	members := map[mcastGroupKey]map[string]bool{}
	switches := map[ovsdb.UUID]*igmpSwitch{}
	for _, id := range g.All(SB, "IGMP_Group") {
		ig, ok := Read[sb.IGMPGroup](g, SB, id)
		if !ok || ig.Datapath == nil {
			continue
		}
		addr, err := netip.ParseAddr(ig.Address)
		if addr = addr.Unmap(); err != nil || !addr.IsMulticast() {
			continue
		}
		dp := g.Row(SB, "Datapath_Binding", *ig.Datapath)
		lsID, ok := datapathNBID(g.s.sb, dp)
		if !ok {
			continue
		}
		sw, seen := switches[lsID]
		if !seen {
			sw = readIGMPSwitch(g, lsID)
			switches[lsID] = sw
		}
		if sw == nil {
			continue
		}
		k := mcastGroupKey{lsID, addr}
		if members[k] == nil {
			members[k] = map[string]bool{}
		}
		for _, pb := range ig.Ports {
			if r := g.Row(SB, "Port_Binding", pb); r != nil {
				if name := stringColumn(g.s.sb, "Port_Binding", r, "logical_port"); !sw.flooded[name] {
					members[k][name] = true
				}
			}
		}
	}
	// A relaying router's groups: the addresses of its switches' groups
	// (IPv6 ones only if routable), each with its ports towards them.
	routerMembers := map[mcastGroupKey]map[string]bool{}
	for k := range members {
		if k.addr.Is6() && !routableMulticast6(k.addr) {
			continue
		}
		for _, rp := range switches[k.dp].relay {
			rk := mcastGroupKey{rp.router, k.addr}
			if routerMembers[rk] == nil {
				routerMembers[rk] = map[string]bool{}
			}
			routerMembers[rk][rp.port] = true
		}
	}

	next := map[ovsdb.UUID]int64{}
	activeFlows := map[mcastGroupKey]int64{} // per switch and family (the zero address)
	for _, k := range sortedGroupKeys(members) {
		sw := switches[k.dp]
		ports := members[k]
		for _, ln := range sw.localnets {
			ports[ln] = true
		}
		writeMcastGroup(g, k, ports, next)
		if !snoopedAddress(k.addr) {
			continue
		}
		family := mcastGroupKey{k.dp, netip.IPv6Unspecified()}
		if k.addr.Is4() {
			family.addr = netip.IPv4Unspecified()
		}
		if activeFlows[family] >= sw.cfg.tableSize {
			continue
		}
		activeFlows[family]++
		ipf := ipFamily(k.addr)
		actions := ""
		if sw.floodRelay {
			actions += fmt.Sprintf("clone { outport = %q; output; };", mcMrouterFlood)
		}
		if sw.floodStatic {
			// Sic: no space after "outport =", as ovn-northd writes it.
			actions += fmt.Sprintf("clone { outport =%q; output; };", mcStatic)
		}
		actions += fmt.Sprintf("outport = %q; output; ", k.addr)
		g.Flow(g.Datapath(k.dp), LSInL2Lkup, 90, fmt.Sprintf("eth.mcast && %s && %s.dst == %s ", ipf, ipf, k.addr), actions)
	}

	floodStatic := map[ovsdb.UUID]bool{}
	for _, k := range sortedGroupKeys(routerMembers) {
		if _, ok := floodStatic[k.dp]; !ok {
			floodStatic[k.dp] = routerFloodsStatic(g, k.dp)
		}
		writeMcastGroup(g, k, routerMembers[k], next)
		ipf := ipFamily(k.addr)
		actions := ""
		if floodStatic[k.dp] {
			actions = fmt.Sprintf("clone { outport = %q; ip.ttl--; next; };", mcStatic)
		}
		actions += fmt.Sprintf("outport = %q; ip.ttl--; next;", k.addr)
		g.Flow(g.Datapath(k.dp), LRInIPRouting, 10500, fmt.Sprintf("%s && %s.dst == %s ", ipf, ipf, k.addr), actions)
	}
}

// sortedGroupKeys returns the groups of m by datapath, then address.
func sortedGroupKeys(m map[mcastGroupKey]map[string]bool) []mcastGroupKey {
	keys := make([]mcastGroupKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c := keys[i].dp.Compare(keys[j].dp); c != 0 {
			return c < 0
		}
		return keys[i].addr.Less(keys[j].addr)
	})
	return keys
}

// writeMcastGroup writes the Multicast_Group of group k with the named
// ports, and its tunnel key: the next of its datapath's from
// keyMcIGMPBase (next holds them). The caller writes each datapath's
// groups in address order.
func writeMcastGroup(g *gen, k mcastGroupKey, ports map[string]bool, next map[ovsdb.UUID]int64) {
	key := max(next[k.dp], keyMcIGMPBase)
	next[k.dp] = key + 1
	names := make([]string, 0, len(ports))
	for p := range ports {
		names = append(names, p)
	}
	slices.Sort(names)
	refs := make([]ovsdb.UUID, 0, len(names))
	for _, p := range names {
		refs = append(refs, g.Ref("Port_Binding", p))
	}
	g.Record("Multicast_Group", k.dp.String()+"/"+k.addr.String(), map[string]ovsdb.Datum{
		"datapath":   dUUID(g.Ref("Datapath_Binding", k.dp.String())),
		"name":       dString(k.addr.String()),
		"tunnel_key": dInt(key),
		"ports":      dUUIDs(refs),
	})
}

// readIGMPSwitch reads what the groups of switch id need; nil unless it
// snoops (other_config:mcast_snoop).
func readIGMPSwitch(g *gen, id ovsdb.UUID) *igmpSwitch {
	ls, ok := Read[nb.LogicalSwitch](g, NB, id)
	if !ok || ls.OtherConfig["mcast_snoop"] != "true" {
		return nil
	}
	sw := &igmpSwitch{cfg: readMcastConfig(&ls), flooded: map[string]bool{}}
	for _, port := range ReadAll[nb.LogicalSwitchPort](g, NB, g.Members(NB, nb.LogicalSwitchTable, id, "ports")) {
		if !lspEnabled(&port) {
			continue
		}
		if port.Options["mcast_flood"] == "true" {
			sw.flooded[port.Name] = true
			sw.floodStatic = true
		}
		switch port.Type {
		case "localnet":
			sw.localnets = append(sw.localnets, port.Name)
		case lspRouter:
			lrp, router, ok := relayingRouterPort(g, &port)
			if !ok {
				continue
			}
			sw.floodRelay = true
			if lrp.Options["mcast_flood"] == "true" {
				continue
			}
			name := lrp.Name
			if len(lrp.GatewayChassis) > 0 || lrp.HAChassisGroup != nil {
				name = "cr-" + lrp.Name
			}
			sw.relay = append(sw.relay, relayPort{router, name})
		}
	}
	return sw
}

// routerFloodsStatic says whether a router has ports with
// options:mcast_flood, to which it sends all multicast it relays.
func routerFloodsStatic(g *gen, id ovsdb.UUID) bool {
	for _, lrp := range ReadAll[nb.LogicalRouterPort](g, NB, g.Members(NB, nb.LogicalRouterTable, id, "ports")) {
		if (lrp.Enabled == nil || *lrp.Enabled) && lrp.Options["mcast_flood"] == "true" {
			return true
		}
	}
	return false
}

// snoopedAddress says whether a switch forwards a group's traffic to its
// members only: IPv4's local network control block 224.0.0.0/24 (RFC 4541
// 2.1.2) and IPv6's all-hosts, all-routers and all-site-routers groups go
// everywhere.
func snoopedAddress(a netip.Addr) bool {
	if a.Is4() {
		return !netip.MustParsePrefix("224.0.0.0/24").Contains(a)
	}
	switch a {
	case netip.MustParseAddr("ff02::1"), netip.MustParseAddr("ff02::2"), netip.MustParseAddr("ff05::2"):
		return false
	}
	return true
}

// routableMulticast6 says whether an IPv6 multicast address's scope (RFC
// 4291 2.7) reaches beyond the link: a router relays only those.
func routableMulticast6(a netip.Addr) bool {
	switch a.As16()[1] & 0x0f {
	case 0x0, 0x1, 0x2, 0x3, 0xf:
		return false
	}
	return true
}
