package northd

import (
	"fmt"
	"strconv"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
	"github.com/govn/govn/schema/sb"
)

// The multicast groups every logical switch may have, with the fixed
// tunnel keys ovn-northd gives them (ovn-architecture(7)).
const (
	mcFlood         = "_MC_flood"   // every port
	mcUnknown       = "_MC_unknown" // ports with "unknown" addresses
	mcMrouterFlood  = "_MC_mrouter_flood"
	mcStatic        = "_MC_static"   // ports with options:mcast_flood
	mcFloodL2       = "_MC_flood_l2" // every port but router ports
	keyMcFlood      = mcastKeyBase
	keyMcUnknown    = mcastKeyBase + 1
	keyMcMrouter    = mcastKeyBase + 2
	keyMcStatic     = mcastKeyBase + 3
	keyMcFloodL2    = mcastKeyBase + 4
	defaultMcTable  = 2048
	defaultMcIdle   = 300
	minMcIdle       = 15
	maxMcIdle       = 3600
	defaultMcMaxRsp = 1
)

// switchMcastConfig is a switch's IGMP/MLD snooping configuration
// (other_config:mcast_*).
type switchMcastConfig struct {
	snoop, querier, floodUnregistered bool
	ethSrc, ip4Src, ip6Src            string
	tableSize, idleTimeout            int64
	queryInterval, queryMaxResp       int64
}

func readMcastConfig(ls *nb.LogicalSwitch) switchMcastConfig {
	oc := ls.OtherConfig
	num := func(key string, def int64) int64 {
		if v, err := strconv.ParseInt(oc[key], 10, 64); err == nil {
			return v
		}
		return def
	}
	c := switchMcastConfig{
		snoop:             oc["mcast_snoop"] == "true",
		querier:           oc["mcast_querier"] != "false",
		floodUnregistered: oc["mcast_flood_unregistered"] == "true",
		ethSrc:            oc["mcast_eth_src"],
		ip4Src:            oc["mcast_ip4_src"],
		ip6Src:            oc["mcast_ip6_src"],
		tableSize:         num("mcast_table_size", defaultMcTable),
		idleTimeout:       min(max(num("mcast_idle_timeout", defaultMcIdle), minMcIdle), maxMcIdle),
		queryMaxResp:      num("mcast_query_max_response", defaultMcMaxRsp),
	}
	c.queryInterval = num("mcast_query_interval", c.idleTimeout/2)
	c.queryInterval = min(max(c.queryInterval, 1), c.idleTimeout)
	return c
}

// switchMulticast writes a switch's Multicast_Group rows (the ports of
// each of its fixed groups) and its IP_Multicast row.
func switchMulticast(g *gen, sw *logicalSwitch) {
	c := readMcastConfig(&sw.nb)
	dp := g.Ref("Datapath_Binding", sw.nb.UUID.String())
	g.Record("IP_Multicast", sw.nb.UUID.String(), map[string]ovsdb.Datum{
		"datapath":       dUUID(dp),
		"enabled":        dBool(c.snoop),
		"querier":        dBool(c.querier),
		"eth_src":        dString(c.ethSrc),
		"ip4_src":        dString(c.ip4Src),
		"ip6_src":        dString(c.ip6Src),
		"table_size":     dInt(c.tableSize),
		"idle_timeout":   dInt(c.idleTimeout),
		"query_interval": dInt(c.queryInterval),
		"query_max_resp": dInt(c.queryMaxResp),
	})

	groups := map[string][]ovsdb.UUID{}
	var mrouters map[string]bool
	if c.snoop {
		mrouters = switchMrouterPorts(g, sw.nb.UUID)
	}
	for _, port := range ReadAll[nb.LogicalSwitchPort](g, NB, g.Members(NB, nb.LogicalSwitchTable, sw.nb.UUID, "ports")) {
		if !lspEnabled(&port) {
			continue
		}
		if same := g.ByName(NB, nb.LogicalSwitchPortTable, port.Name); len(same) > 1 && same[0] != port.UUID {
			continue
		}
		pb := g.Ref("Port_Binding", port.Name)
		add := func(name string) { groups[name] = append(groups[name], pb) }
		add(mcFlood)
		if port.Type != lspRouter {
			add(mcFloodL2)
		}
		if hasAddress(port.Addresses, "unknown") {
			add(mcUnknown)
		}
		if port.Options["mcast_flood_reports"] == "true" || relaysMulticast(g, &port) ||
			(mrouters[port.Name] && port.Options["mcast_flood"] != "true") {
			add(mcMrouterFlood)
		}
		if port.Options["mcast_flood"] == "true" {
			add(mcStatic)
		}
	}
	for _, mg := range []struct {
		name string
		key  int64
	}{{mcFlood, keyMcFlood}, {mcUnknown, keyMcUnknown}, {mcMrouterFlood, keyMcMrouter}, {mcStatic, keyMcStatic}, {mcFloodL2, keyMcFloodL2}} {
		ports := groups[mg.name]
		if len(ports) == 0 {
			continue
		}
		g.Record("Multicast_Group", sw.nb.UUID.String()+"/"+mg.name, map[string]ovsdb.Datum{
			"datapath":   dUUID(dp),
			"name":       dString(mg.name),
			"tunnel_key": dInt(mg.key),
			"ports":      dUUIDs(ports),
		})
	}
}

// switchMrouterPorts returns the ports of a snooping switch that chassis
// report multicast routers on (IGMP_Group rows with address "mrouters"):
// IGMP and MLD reports go to them too (a memo, so that the switch depends
// only on that set, not on every group).
func switchMrouterPorts(g *gen, ls ovsdb.UUID) map[string]bool {
	return g.Memo("switch-mrouters/"+ls.String(), func(g *gen) any {
		out := map[string]bool{}
		for _, id := range g.All(SB, "IGMP_Group") {
			ig, ok := Read[sb.IGMPGroup](g, SB, id)
			if !ok || ig.Address != "mrouters" || ig.Datapath == nil {
				continue
			}
			if nbID, ok := datapathNBID(g.s.sb, g.Row(SB, "Datapath_Binding", *ig.Datapath)); !ok || nbID != ls {
				continue
			}
			for _, pb := range ig.Ports {
				if r := g.Row(SB, "Port_Binding", pb); r != nil {
					out[stringColumn(g.s.sb, "Port_Binding", r, "logical_port")] = true
				}
			}
		}
		return out
	}).(map[string]bool)
}

// relaysMulticast says whether a switch port is a router port whose
// router relays multicast (options:mcast_relay): the switch then sends its
// unregistered multicast there too.
func relaysMulticast(g *gen, port *nb.LogicalSwitchPort) bool {
	_, _, ok := relayingRouterPort(g, port)
	return ok
}

// relayingRouterPort returns the enabled router port a switch's router
// port connects to, and its router, if that router relays multicast.
func relayingRouterPort(g *gen, port *nb.LogicalSwitchPort) (nb.LogicalRouterPort, ovsdb.UUID, bool) {
	if port.Type != lspRouter || port.Options["router-port"] == "" {
		return nb.LogicalRouterPort{}, ovsdb.UUID{}, false
	}
	ids := g.ByName(NB, nb.LogicalRouterPortTable, port.Options["router-port"])
	if len(ids) == 0 {
		return nb.LogicalRouterPort{}, ovsdb.UUID{}, false
	}
	lrp, ok := Read[nb.LogicalRouterPort](g, NB, ids[0])
	if !ok || (lrp.Enabled != nil && !*lrp.Enabled) {
		return nb.LogicalRouterPort{}, ovsdb.UUID{}, false
	}
	routers := g.Referrers(NB, nb.LogicalRouterTable, "ports", ids[0])
	if len(routers) != 1 {
		return nb.LogicalRouterPort{}, ovsdb.UUID{}, false
	}
	lr, ok := Read[nb.LogicalRouter](g, NB, routers[0])
	if !ok || (lr.Enabled != nil && !*lr.Enabled) || lr.Options["mcast_relay"] != "true" {
		return nb.LogicalRouterPort{}, ovsdb.UUID{}, false
	}
	return lrp, routers[0], true
}

// switchMcastFlows writes the destination lookup flows of IGMP/MLD
// snooping on a switch with other_config:mcast_snoop. Unregistered
// multicast goes to the ports with options:mcast_flood (hasStatic) and to
// the multicast-relaying routers (hasRelay), or is dropped.
func switchMcastFlows(g *gen, sw *logicalSwitch, hasStatic, hasRelay bool) {
	c := readMcastConfig(&sw.nb)
	if !c.snoop {
		return
	}
	dp := sw.dp
	g.Flow(dp, LSInL2Lkup, 100, "igmp", "igmp;")
	g.Flow(dp, LSInL2Lkup, 100, "mldv1 || mldv2", "igmp;")
	g.Flow(dp, LSInL2Lkup, 85, "ip4.mcast && ip4.dst == 224.0.0.0/24", fmt.Sprintf("outport = %q; output;", mcFloodL2))
	g.Flow(dp, LSInL2Lkup, 85, "ip6.mcast_flood", fmt.Sprintf("outport = %q; output;", mcFlood))
	if c.floodUnregistered {
		return
	}
	// Sic: ovn-northd writes a space after the clone even when nothing
	// follows it, and none after "outport =".
	actions := ""
	if hasRelay {
		actions += fmt.Sprintf("clone { outport = %q; output; }; ", mcMrouterFlood)
	}
	if hasStatic {
		actions += fmt.Sprintf("outport =%q; output;", mcStatic)
	}
	if actions == "" {
		actions = "drop;"
	}
	g.Flow(dp, LSInL2Lkup, 80, "ip4.mcast || ip6.mcast", actions)
}

// routerMulticast writes a multicast-relaying router's flows
// (options:mcast_relay) and its group of the ports with
// options:mcast_flood, to which it floods unregistered multicast; IGMP
// and MLD reports go there unrouted, except the router's own, which
// would loop.
func routerMulticast(g *gen, r *logicalRouter) {
	var ports []nb.LogicalRouterPort
	for _, lrp := range ReadAll[nb.LogicalRouterPort](g, NB, g.Members(NB, nb.LogicalRouterTable, r.nb.UUID, "ports")) {
		if lrp.Enabled == nil || *lrp.Enabled {
			ports = append(ports, lrp)
		}
	}
	var static []ovsdb.UUID
	for _, lrp := range ports {
		if lrp.Options["mcast_flood"] == "true" {
			static = append(static, g.Ref("Port_Binding", lrp.Name))
		}
	}
	dp := r.dp
	if len(static) > 0 {
		g.Record("Multicast_Group", r.nb.UUID.String()+"/"+mcStatic, map[string]ovsdb.Datum{
			"datapath":   dUUID(g.Ref("Datapath_Binding", r.nb.UUID.String())),
			"name":       dString(mcStatic),
			"tunnel_key": dInt(keyMcStatic),
			"ports":      dUUIDs(static),
		})
		g.Flow(dp, LRInIPInput, 120, "igmp && ip.ttl == 1", "next;")
		g.Flow(dp, LRInIPInput, 120, "(mldv1 || mldv2) && ip.ttl == 1", "next;")
	}
	relay := r.nb.Options["mcast_relay"] == "true"
	if !relay {
		g.Flow(dp, LRInIPInput, 82, "ip4.mcast || ip6.mcast", "drop;")
		return
	}
	g.Flow(dp, LRInIPInput, 82, "ip4.mcast || ip6.mcast", "next;")
	// Each port's delivery of multicast with its own MAC is in
	// routerPortFlows.
	if len(static) > 0 {
		for _, lrp := range ports {
			if mac, ok := normalizeMAC(lrp.MAC); ok {
				g.Flow(dp, LRInIPRouting, 10550, fmt.Sprintf("eth.src == %s && igmp", mac), "drop;")
				g.Flow(dp, LRInIPRouting, 10550, fmt.Sprintf("eth.src == %s && (mldv1 || mldv2)", mac), "drop;")
			}
		}
	}
	if len(static) == 0 {
		g.Flow(dp, LRInIPRouting, 10450, "ip4.mcast || ip6.mcast", "drop;")
		return
	}
	g.Flow(dp, LRInIPRouting, 10460, "igmp", fmt.Sprintf("clone { outport = %q; next; };", mcStatic))
	g.Flow(dp, LRInIPRouting, 10460, "mldv1 || mldv2", fmt.Sprintf("clone { outport = %q; next; };", mcStatic))
	g.Flow(dp, LRInIPRouting, 10450, "ip4.mcast || ip6.mcast", fmt.Sprintf("clone { outport = %q; ip.ttl--; next; };", mcStatic))
}
