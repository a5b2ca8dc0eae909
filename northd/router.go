package northd

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// routerPort is what the router's generators share about one logical
// router port: its parsed addresses and its role.
type routerPort struct {
	nb     nb.LogicalRouterPort
	router ovsdb.UUID
	mac    string         // canonical, lower case
	nets   []netip.Prefix // networks, in the order the Northbound lists them
	lla    netip.Addr     // IPv6 link-local address derived from mac
	// gateway says the port is a distributed gateway port (gateway_chassis,
	// ha_chassis_group or options:redirect-chassis): it has a
	// chassisredirect port crName.
	gateway bool
	crName  string
}

// ipv4 and ipv6 return the port's networks of one family.
func (p *routerPort) ipv4() []netip.Prefix { return filterPrefixes(p.nets, true) }
func (p *routerPort) ipv6() []netip.Prefix { return filterPrefixes(p.nets, false) }

func filterPrefixes(ps []netip.Prefix, v4 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if p.Addr().Is4() == v4 {
			out = append(out, p)
		}
	}
	return out
}

// macString returns "MAC NET..." as Port_Binding.mac has it for a router
// port.
func (p *routerPort) macString() string {
	parts := []string{p.mac}
	for _, n := range p.nets {
		parts = append(parts, n.String())
	}
	return strings.Join(parts, " ")
}

// linkLocal returns the EUI-64 IPv6 link-local address for a MAC, as
// ovn-northd derives it for router ports.
func linkLocal(mac net.HardwareAddr) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0xfe, 0x80
	b[8] = mac[0] ^ 0x02
	b[9], b[10] = mac[1], mac[2]
	b[11], b[12] = 0xff, 0xfe
	b[13], b[14], b[15] = mac[3], mac[4], mac[5]
	return netip.AddrFrom16(b)
}

// readRouterPort reads and parses a logical router port; a port with a bad
// MAC or network is warned about and skipped.
func readRouterPort(g *gen, id ovsdb.UUID) (*routerPort, bool) {
	lrp, ok := Read[nb.LogicalRouterPort](g, NB, id)
	if !ok {
		return nil, false
	}
	routers := g.Referrers(NB, nb.LogicalRouterTable, "ports", id)
	if len(routers) != 1 {
		if len(routers) > 1 {
			g.Warn("logical router port is on several routers; skipping it", "port", lrp.Name)
		}
		return nil, false
	}
	mac, err := net.ParseMAC(lrp.MAC)
	if err != nil || len(mac) != 6 {
		g.Warn("bad MAC on logical router port; skipping it", "port", lrp.Name, "mac", lrp.MAC)
		return nil, false
	}
	p := &routerPort{nb: lrp, router: routers[0], mac: mac.String(), lla: linkLocal(mac)}
	for _, n := range lrp.Networks {
		pfx, err := netip.ParsePrefix(n)
		if err != nil {
			g.Warn("bad network on logical router port; skipping it", "port", lrp.Name, "network", n)
			return nil, false
		}
		p.nets = append(p.nets, pfx)
	}
	if len(lrp.GatewayChassis) > 0 || lrp.HAChassisGroup != nil || lrp.Options["redirect-chassis"] != "" {
		p.gateway = true
		p.crName = "cr-" + lrp.Name
	}
	return p, true
}

// logicalRouter is what the router's generators share about one router.
type logicalRouter struct {
	nb  nb.LogicalRouter
	dp  dpID
	key uint32
	// chassis is options:chassis of a gateway router ("" for a
	// distributed router).
	chassis string
}

// learnFromARPRequest says whether the router learns neighbors from every
// ARP request and neighbor solicitation it gets
// (options:always_learn_from_arp_request, true by default).
func (r *logicalRouter) learnFromARPRequest() bool {
	return r.nb.Options["always_learn_from_arp_request"] != "false"
}

func genRouter(g *gen) {
	lr, ok := Read[nb.LogicalRouter](g, NB, g.ID())
	if !ok {
		return
	}
	if lr.Enabled != nil && !*lr.Enabled {
		return
	}
	r := &logicalRouter{nb: lr, dp: g.Datapath(lr.UUID), chassis: lr.Options["chassis"]}
	r.key = g.DatapathKey(lr.UUID, requestedKey(g, lr.Options))
	ext := map[string]string{"logical-router": lr.UUID.String(), "name": lr.Name}
	if n, ok := lr.ExternalIDs["neutron:router_name"]; ok {
		ext["name2"] = n
	}
	if !r.learnFromARPRequest() {
		ext["always_learn_from_arp_request"] = "false"
	}
	g.Record("Datapath_Binding", lr.UUID.String(), map[string]ovsdb.Datum{
		"tunnel_key":   dInt(int64(r.key)),
		"external_ids": dMap(ext),
	})
	routerPipeline(g, r)
	routerMulticast(g, r)
	routerLBFlows(g, r)
	if r.chassis != "" && routerHasNATOrLB(g, lr.UUID) {
		// A gateway router with NAT or load balancers un-DNATs and
		// commits all its traffic in its one conntrack zone.
		g.Flow(r.dp, LROutUndnat, 50, "ip", "flags.loopback = 1; ct_dnat;")
		g.Flow(r.dp, LROutUndnat, 100, "nd || nd_rs || nd_ra", "next;")
		g.Flow(r.dp, LROutPostUndnat, 50, "ip && ct.new", "ct_commit { } ; next; ")
	}
}

// genRouterRoutes writes a router's static routes and routing policies:
// an owner of its own, so that a route costs its router's routes, not its
// whole pipeline.
func genRouterRoutes(g *gen) {
	lr, ok := Read[nb.LogicalRouter](g, NB, g.ID())
	if !ok || (lr.Enabled != nil && !*lr.Enabled) {
		return
	}
	routerRoutes(g, &logicalRouter{nb: lr, dp: g.Datapath(lr.UUID), chassis: lr.Options["chassis"]})
}

func genRouterPort(g *gen) {
	p, ok := readRouterPort(g, g.ID())
	if !ok {
		return
	}
	if same := g.ByName(NB, nb.LogicalRouterPortTable, p.nb.Name); len(same) > 1 && same[0] != p.nb.UUID {
		g.Warn("duplicate logical router port name; skipping this port", "port", p.nb.Name)
		return
	}
	lr, ok := Read[nb.LogicalRouter](g, NB, p.router)
	if !ok || (lr.Enabled != nil && !*lr.Enabled) {
		return
	}
	r := &logicalRouter{nb: lr, dp: g.Datapath(lr.UUID), chassis: lr.Options["chassis"]}
	routerPortBindings(g, r, p)
	routerPortFlows(g, r, p)
	routerPortIPFlows(g, r, p, routerNATIPs(g, lr.UUID))
	routerPortLBFlows(g, r, p)
}

// peerOf returns the name of the port on the other side of a router port:
// the switch port whose options:router-port names it, or the router port
// its peer column names.
func peerOf(g *gen, p *routerPort) (string, bool) {
	if p.nb.Peer != nil && *p.nb.Peer != "" {
		return *p.nb.Peer, true
	}
	ids := g.ByName(NB, lspRouterPortIndex, p.nb.Name)
	lsps := ReadAll[nb.LogicalSwitchPort](g, NB, ids)
	for _, lsp := range lsps {
		if lsp.Type == "router" {
			return lsp.Name, true
		}
	}
	return "", false
}

// routerPortBindings writes a router port's Port_Binding and, for a
// distributed gateway port, its chassisredirect port and HA chassis group.
func routerPortBindings(g *gen, r *logicalRouter, p *routerPort) {
	opts := map[string]string{}
	typ := "patch"
	if r.chassis != "" {
		typ = "l3gateway"
		opts["l3gateway-chassis"] = r.chassis
	}
	// What ovn-northd 23.03 writes of a port's own options, only when it
	// is connected to a switch.
	if peer, ok := peerOf(g, p); ok {
		opts["peer"] = peer
		if p.gateway {
			opts["chassis-redirect-port"] = p.crName
		}
		if p.nb.Options["prefix_delegation"] == "true" {
			opts["ipv6_prefix_delegation"] = "true"
		}
		if p.nb.Options["prefix"] == "true" {
			opts["ipv6_prefix"] = "true"
		}
	}
	for k, v := range routerPortRAOptions(p) {
		opts[k] = v
	}
	key := g.PortKey(r.nb.UUID, p.nb.Name, requestedKey(g, p.nb.Options))
	g.Record("Port_Binding", p.nb.Name, map[string]ovsdb.Datum{
		"logical_port": dString(p.nb.Name),
		"datapath":     dUUID(g.Ref("Datapath_Binding", r.nb.UUID.String())),
		"tunnel_key":   dInt(int64(key)),
		"type":         dString(typ),
		"options":      dMap(opts),
		"mac":          dStrings([]string{p.macString()}),
		"external_ids": dMap(p.nb.ExternalIDs),
	})
	if !p.gateway {
		return
	}
	crKey := g.PortKey(r.nb.UUID, p.crName, 0)
	crOpts := map[string]string{"distributed-port": p.nb.Name}
	if !routerHasDistributedNAT(g, r.nb.UUID) {
		// All traffic through the port goes by the gateway chassis.
		crOpts["always-redirect"] = "true"
	}
	cols := map[string]ovsdb.Datum{
		"logical_port": dString(p.crName),
		"datapath":     dUUID(g.Ref("Datapath_Binding", r.nb.UUID.String())),
		"tunnel_key":   dInt(int64(crKey)),
		"type":         dString("chassisredirect"),
		"options":      dMap(crOpts),
		"mac":          dStrings([]string{p.macString()}),
	}
	if group, ok := gatewayHAGroup(g, p); ok {
		cols["ha_chassis_group"] = dUUID(g.Ref("HA_Chassis_Group", group))
	}
	g.Record("Port_Binding", p.crName, cols)
}

// gatewayHAGroup writes the HA_Chassis_Group of a distributed gateway
// port, from its Gateway_Chassis rows (or its NB HA_Chassis_Group), and
// returns the group's name.
func gatewayHAGroup(g *gen, p *routerPort) (string, bool) {
	type member struct {
		chassis  string
		priority int64
	}
	var members []member
	name := p.nb.Name
	if p.nb.HAChassisGroup != nil {
		grp, ok := Read[nb.HAChassisGroup](g, NB, *p.nb.HAChassisGroup)
		if !ok {
			return "", false
		}
		name = grp.Name
		for _, hc := range ReadAll[nb.HAChassis](g, NB, grp.HAChassis) {
			members = append(members, member{hc.ChassisName, hc.Priority})
		}
	} else {
		for _, gc := range ReadAll[nb.GatewayChassis](g, NB, p.nb.GatewayChassis) {
			members = append(members, member{gc.ChassisName, gc.Priority})
		}
		if c := p.nb.Options["redirect-chassis"]; c != "" && len(members) == 0 {
			members = append(members, member{c, 0})
		}
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.chassis, b.chassis) })
	var rows []map[string]ovsdb.Datum
	for _, m := range members {
		row := map[string]ovsdb.Datum{
			"priority":     dInt(m.priority),
			"external_ids": dMap(map[string]string{"chassis-name": m.chassis}),
		}
		if ids := g.ByName(SB, "Chassis", m.chassis); len(ids) > 0 {
			row["chassis"] = dUUID(ids[0])
		}
		rows = append(rows, row)
	}
	g.RecordWithChildren("HA_Chassis_Group", name, map[string]ovsdb.Datum{
		"name": dString(name),
	}, map[string]childRows{"ha_chassis": {table: "HA_Chassis", rows: rows}})
	return name, true
}

// routerPortRAOptions are the ipv6_ra_* options ovn-northd copies into a
// router port's Port_Binding for ovn-controller's periodic router
// advertisements.
func routerPortRAOptions(p *routerPort) map[string]string {
	ra := p.nb.IPv6RAConfigs
	if ra["send_periodic"] != "true" || len(p.ipv6()) == 0 {
		return nil
	}
	mode := ra["address_mode"]
	if mode == "" {
		return nil
	}
	var prefixes []string
	for _, n := range p.ipv6() {
		if !n.Addr().IsLinkLocalUnicast() {
			prefixes = append(prefixes, n.Masked().String())
		}
	}
	opt := func(k, def string) string {
		if v, ok := ra[k]; ok {
			return v
		}
		return def
	}
	out := map[string]string{
		"ipv6_ra_send_periodic": "true",
		"ipv6_ra_address_mode":  mode,
		"ipv6_ra_max_interval":  opt("max_interval", "600"),
		"ipv6_ra_min_interval":  opt("min_interval", "200"),
		"ipv6_ra_src_eth":       p.mac,
		"ipv6_ra_src_addr":      p.lla.String(),
		"ipv6_ra_prefixes":      strings.Join(prefixes, " "),
		"ipv6_ra_prf":           strings.ToUpper(opt("router_preference", "MEDIUM")),
	}
	if mtu, ok := ra["mtu"]; ok {
		out["ipv6_ra_mtu"] = mtu
	}
	return out
}

// routerPipeline writes a router's flows that belong to no one port,
// route, NAT or load balancer.
func routerPipeline(g *gen, r *logicalRouter) {
	dp := r.dp
	for _, st := range []Stage{LRInIPInput, LRInUnsnat, LRInDefrag, LRInLBAffCheck, LRInDNAT, LRInLBAffLearn, LRInECMPStateful,
		LRInNDRAOptions, LRInNDRAResponse, LRInChkPktLen, LRInLargerPkts, LRInGWRedirect,
		LROutUndnat, LROutPostUndnat, LROutSnat, LROutPostSnat, LROutEgrLoop} {
		g.Flow(dp, st, 0, "1", "next;")
	}
	g.Flow(dp, LRInAdmission, 0, "1", "drop;")
	g.Flow(dp, LRInAdmission, 100, "vlan.present || eth.src[40]", "drop;")

	g.Flow(dp, LRInLookupNeighbor, 0, "1", "reg9[2] = 1; next;")
	if r.learnFromARPRequest() {
		g.Flow(dp, LRInLookupNeighbor, 100, "arp.op == 2", "reg9[2] = lookup_arp(inport, arp.spa, arp.sha); next;")
		g.Flow(dp, LRInLookupNeighbor, 100, "nd_na", "reg9[2] = lookup_nd(inport, nd.target, nd.tll); next;")
		g.Flow(dp, LRInLookupNeighbor, 100, "nd_ns", "reg9[2] = lookup_nd(inport, ip6.src, nd.sll); next;")
		g.Flow(dp, LRInLearnNeighbor, 100, "reg9[2] == 1", "next;")
	} else {
		// reg9[3] says whether a neighbor may be learned: from replies,
		// from requests for the router's own addresses, and otherwise
		// only to refresh a neighbor already known.
		g.Flow(dp, LRInLookupNeighbor, 100, "arp.op == 2", "reg9[2] = lookup_arp(inport, arp.spa, arp.sha); reg9[3] = 1; next;")
		g.Flow(dp, LRInLookupNeighbor, 100, "nd_na", "reg9[2] = lookup_nd(inport, nd.target, nd.tll); reg9[3] = 1; next;")
		g.Flow(dp, LRInLookupNeighbor, 100, "nd_ns", "reg9[2] = lookup_nd(inport, ip6.src, nd.sll); reg9[3] = lookup_nd_ip(inport, ip6.src); next;")
		g.Flow(dp, LRInLookupNeighbor, 110, "nd_na && ip6.src == fe80::/10 && ip6.dst == ff00::/8", "reg9[2] = lookup_nd(inport, ip6.src, nd.tll); reg9[3] = lookup_nd_ip(inport, ip6.src); next;")
		g.Flow(dp, LRInLearnNeighbor, 100, "reg9[2] == 1 || reg9[3] == 0", "next;")
	}
	g.Flow(dp, LRInLearnNeighbor, 0, "1", "drop;")
	g.Flow(dp, LRInLearnNeighbor, 95, "nd_na && nd.tll == 0", "put_nd(inport, nd.target, eth.src); next;")
	g.Flow(dp, LRInLearnNeighbor, 95, "nd_ns && (ip6.src == 0 || nd.sll == 0)", "next;")
	g.Flow(dp, LRInLearnNeighbor, 90, "arp", "put_arp(inport, arp.spa, arp.sha); next;")
	g.Flow(dp, LRInLearnNeighbor, 90, "nd_na", "put_nd(inport, nd.target, nd.tll); next;")
	g.Flow(dp, LRInLearnNeighbor, 90, "nd_ns", "put_nd(inport, ip6.src, nd.sll); next;")

	g.Flow(dp, LRInIPInput, 100, "ip4.src_mcast ||ip4.src == 255.255.255.255 || ip4.src == 127.0.0.0/8 || ip4.dst == 127.0.0.0/8 || ip4.src == 0.0.0.0/8 || ip4.dst == 0.0.0.0/8", "drop;")
	g.Flow(dp, LRInIPInput, 85, "arp || nd", "drop;")
	g.Flow(dp, LRInIPInput, 84, "nd_rs || nd_ra", "next;")
	g.Flow(dp, LRInIPInput, 83, "ip6.mcast_rsvd", "drop;")
	g.Flow(dp, LRInIPInput, 50, "eth.bcast", "drop;")
	g.Flow(dp, LRInIPInput, 32, "ip.ttl == {0, 1} && !ip.later_frag && (ip4.mcast || ip6.mcast)", "drop;")
	g.Flow(dp, LRInIPInput, 30, "ip.ttl == {0, 1}", "drop;")

	g.Flow(dp, LRInIPRoutingPre, 0, "1", "reg7 = 0; next;")
	g.Flow(dp, LRInIPRouting, 0, "1", "drop;")
	g.Flow(dp, LRInIPRouting, 10550, "nd_rs || nd_ra", "drop;")
	g.Flow(dp, LRInIPRoutingECMP, 0, "1", "drop;")
	g.Flow(dp, LRInIPRoutingECMP, 150, "reg8[0..15] == 0", "next;")
	g.Flow(dp, LRInPolicy, 0, "1", "reg8[0..15] = 0; next;")
	g.Flow(dp, LRInPolicyECMP, 0, "1", "drop;")
	g.Flow(dp, LRInPolicyECMP, 150, "reg8[0..15] == 0", "next;")
	g.Flow(dp, LRInARPResolve, 0, "1", "drop;")
	g.Flow(dp, LRInARPResolve, 1, "ip4", "get_arp(outport, reg0); next;")
	g.Flow(dp, LRInARPResolve, 1, "ip6", "get_nd(outport, xxreg0); next;")
	g.Flow(dp, LRInARPResolve, 500, "ip4.mcast || ip6.mcast", "next;")
	g.Flow(dp, LRInARPRequest, 0, "1", "output;")
	g.Flow(dp, LRInARPRequest, 100, "eth.dst == 00:00:00:00:00:00 && ip4", "arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.spa = reg1; arp.tpa = reg0; arp.op = 1; output; };")
	g.Flow(dp, LRInARPRequest, 100, "eth.dst == 00:00:00:00:00:00 && ip6", "nd_ns { nd.target = xxreg0; output; };")

	g.Flow(dp, LROutChkDNATLocal, 0, "1", "reg9[4] = 0; next;")
	g.Flow(dp, LROutSnat, 120, "nd_ns", "next;")
	g.Flow(dp, LROutDelivery, 0, "1", "drop;")
}

// routerPortFlows writes a router port's own flows: admission and
// delivery.
func routerPortFlows(g *gen, r *logicalRouter, p *routerPort) {
	dp := r.dp
	id := p.nb.UUID
	resident := ""
	if p.gateway {
		resident = fmt.Sprintf(" && is_chassis_resident(%q)", p.crName)
	}
	in := fmt.Sprintf("inport == %q", p.nb.Name)
	set := fmt.Sprintf("xreg0[0..47] = %s; next;", p.mac)
	if mtu := p.gatewayMTU(); mtu > 0 {
		set = fmt.Sprintf("reg9[1] = check_pkt_larger(%d); %s", mtu+ethHeaderLen, set)
	}
	g.FlowHint(dp, LRInAdmission, 50, fmt.Sprintf("eth.mcast && %s", in), set, id)
	g.FlowHint(dp, LRInAdmission, 50, fmt.Sprintf("eth.dst == %s && %s%s", p.mac, in, resident), set, id)
	g.FlowHint(dp, LROutDelivery, 100, fmt.Sprintf("outport == %q", p.nb.Name), "output;", id)
	if r.nb.Options["mcast_relay"] == "true" {
		g.FlowHint(dp, LROutDelivery, 110, fmt.Sprintf("(ip4.mcast || ip6.mcast) && outport == %q", p.nb.Name), fmt.Sprintf("eth.src = %s; output;", p.mac), id)
	}
	routerPortMTUFlows(g, r, p)
	routerPeerResolve(g, r, p)
	routerPortBFDFlows(g, r, p)
	if p.gateway {
		// Traffic routed out of a gateway port that nothing else
		// redirects goes to the gateway chassis.
		g.FlowHint(dp, LRInGWRedirect, 50, fmt.Sprintf("outport == %q", p.nb.Name), fmt.Sprintf("outport = %q; next;", p.crName), id)
	}
}

// routerPeerResolve writes the neighbor resolution of a router port joined
// directly to another router's port (its peer column): the peer's
// addresses resolve to the peer's MAC.
func routerPeerResolve(g *gen, r *logicalRouter, p *routerPort) {
	if p.nb.Peer == nil || *p.nb.Peer == "" {
		return
	}
	ids := g.ByName(NB, nb.LogicalRouterPortTable, *p.nb.Peer)
	if len(ids) == 0 {
		return
	}
	peer, ok := readRouterPort(g, ids[0])
	if !ok {
		return
	}
	out := fmt.Sprintf("outport == %q", p.nb.Name)
	act := fmt.Sprintf("eth.dst = %s; next;", peer.mac)
	for _, a := range addrsOf(peer.ipv4()) {
		g.FlowHint(r.dp, LRInARPResolve, 100, fmt.Sprintf("%s && reg0== %s", out, a), act, p.nb.UUID)
	}
	for _, a := range append(addrsOf(peer.ipv6()), peer.lla) {
		g.FlowHint(r.dp, LRInARPResolve, 100, fmt.Sprintf("%s && xxreg0 == %s", out, a), act, p.nb.UUID)
	}
}
