package northd

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// natRule is one parsed NAT row of a router.
type natRule struct {
	nb        nb.NAT
	ext       netip.Addr
	logical   netip.Prefix // logical_ip: a host for dnat types, a subnet for snat
	stateless bool
	// distributed says a dnat_and_snat with logical_port and external_mac
	// runs on the chassis of that port rather than the gateway chassis.
	distributed bool
	extMAC      string
	allowed     string // "$name" of allowed_ext_ips, or ""
	exempted    string // "$name" of exempted_ext_ips, or ""
	// dgp is the distributed gateway port the rule happens on (on a
	// distributed router).
	dgp *routerPort
}

func (n *natRule) snat() bool { return n.nb.Type == "snat" || n.nb.Type == "dnat_and_snat" }
func (n *natRule) dnat() bool { return n.nb.Type == "dnat" || n.nb.Type == "dnat_and_snat" }

// parseNAT parses a NAT rule of router r; a bad one is skipped, with a
// warning if warn.
func parseNAT(g *gen, r *logicalRouter, n nb.NAT, warn bool) (natRule, bool) {
	bad := func(msg string, args ...any) (natRule, bool) {
		if warn {
			g.Warn(msg, append([]any{"router", r.nb.Name}, args...)...)
		}
		return natRule{}, false
	}
	ext, err := netip.ParseAddr(n.ExternalIP)
	if err != nil {
		return bad("bad NAT external_ip; skipping the NAT", "external_ip", n.ExternalIP)
	}
	logical, err := parsePrefix(n.LogicalIP)
	if err != nil || logical.Addr().Is4() != ext.Is4() {
		return bad("bad NAT logical_ip; skipping the NAT", "logical_ip", n.LogicalIP)
	}
	if n.Type != "snat" && logical.Bits() != logical.Addr().BitLen() {
		return bad("NAT logical_ip of a dnat must be one address; skipping the NAT", "logical_ip", n.LogicalIP)
	}
	rule := natRule{nb: n, ext: ext, logical: logical, stateless: n.Options["stateless"] == "true" && n.Type == "dnat_and_snat"}
	if n.Type == "dnat_and_snat" && n.LogicalPort != nil && n.ExternalMAC != nil && *n.LogicalPort != "" && *n.ExternalMAC != "" {
		rule.distributed = true
		rule.extMAC = *n.ExternalMAC
	}
	if n.AllowedExtIPs != nil {
		if as, ok := Read[nb.AddressSet](g, NB, *n.AllowedExtIPs); ok {
			rule.allowed = "$" + as.Name
		}
	}
	if n.ExemptedExtIPs != nil {
		if as, ok := Read[nb.AddressSet](g, NB, *n.ExemptedExtIPs); ok {
			rule.exempted = "$" + as.Name
		}
	}
	return rule, true
}

// placeNAT finds the gateway port a rule of a distributed router happens
// on; a rule with none is skipped, with a warning if warn (the router's
// NAT owner warns of a router without any).
func placeNAT(g *gen, r *logicalRouter, rule *natRule, warn bool) bool {
	if r.chassis != "" {
		return true
	}
	dgps := routerGatewayPorts(g, r.nb.UUID)
	if len(dgps) == 0 {
		return false
	}
	if rule.dgp = natGatewayPort(rule, dgps); rule.dgp == nil {
		if warn {
			g.Warn("NAT on a router with several gateway ports names none of them (gateway_port) and none is in its external address's network; ignoring it",
				"router", r.nb.Name, "external_ip", rule.nb.ExternalIP)
		}
		return false
	}
	return true
}

// routerGatewayPorts returns a router's distributed gateway ports, by name
// (a memo).
func routerGatewayPorts(g *gen, lr ovsdb.UUID) []*routerPort {
	return g.Memo("router-gateway-ports/"+lr.String(), func(g *gen) any {
		var out []*routerPort
		for _, p := range routerPortsOf(g, lr) {
			if p.gateway {
				out = append(out, &p)
			}
		}
		return out
	}).([]*routerPort)
}

// natIndex is what a router's NAT rules make of the router as a whole (a
// memo, routerNATIndex): the rules are owners of their own, and the flows
// of an external address that several rules share are written once, by
// the first of them in the router's nat column.
type natIndex struct {
	rules     int                       // the rules that parse
	first     map[netip.Addr]ovsdb.UUID // the first rule of each external address
	firstSNAT map[netip.Addr]ovsdb.UUID // ... of those that SNAT
	snatIPs   []netip.Addr              // the external addresses of snat rules
	// extPort is, on a distributed router, the gateway port of each
	// external address's first rule.
	extPort map[netip.Addr]string
}

// routerNATIndex returns a router's natIndex (a memo).
func routerNATIndex(g *gen, lr ovsdb.UUID) natIndex {
	return g.Memo("router-nat-index/"+lr.String(), func(g *gen) any {
		x := natIndex{first: map[netip.Addr]ovsdb.UUID{}, firstSNAT: map[netip.Addr]ovsdb.UUID{}, extPort: map[netip.Addr]string{}}
		router, ok := Read[nb.LogicalRouter](g, NB, lr)
		if !ok {
			return x
		}
		r := &logicalRouter{nb: router, chassis: router.Options["chassis"]}
		for _, n := range ReadAll[nb.NAT](g, NB, g.Members(NB, nb.LogicalRouterTable, lr, "nat")) {
			rule, ok := parseNAT(g, r, n, false)
			if !ok {
				continue
			}
			x.rules++
			if !placeNAT(g, r, &rule, false) {
				continue
			}
			if _, seen := x.first[rule.ext]; !seen {
				x.first[rule.ext] = n.UUID
				if rule.dgp != nil {
					x.extPort[rule.ext] = rule.dgp.nb.Name
				}
			}
			if _, seen := x.firstSNAT[rule.ext]; !seen && rule.snat() {
				x.firstSNAT[rule.ext] = n.UUID
			}
			if n.Type == "snat" {
				x.snatIPs = append(x.snatIPs, rule.ext)
			}
		}
		slices.SortFunc(x.snatIPs, netip.Addr.Compare)
		x.snatIPs = slices.Compact(x.snatIPs)
		return x
	}).(natIndex)
}

// natFirsts names the first rule of a router's external address, and the
// first that SNATs.
type natFirsts struct{ any, snat ovsdb.UUID }

// natFirstsOf returns the first rules of external address ext on router
// lr (a memo of its own, so that a rule depends only on its address's).
func natFirstsOf(g *gen, lr ovsdb.UUID, ext netip.Addr) natFirsts {
	return g.Memo("router-nat-ext/"+lr.String()+"/"+ext.String(), func(g *gen) any {
		x := routerNATIndex(g, lr)
		return natFirsts{x.first[ext], x.firstSNAT[ext]}
	}).(natFirsts)
}

// genNAT writes one NAT rule's flows on its router.
func genNAT(g *gen) {
	n, ok := Read[nb.NAT](g, NB, g.ID())
	if !ok {
		return
	}
	routers := g.Referrers(NB, nb.LogicalRouterTable, "nat", n.UUID)
	if len(routers) != 1 {
		return
	}
	lr, ok := Read[nb.LogicalRouter](g, NB, routers[0])
	if !ok || (lr.Enabled != nil && !*lr.Enabled) {
		return
	}
	r := &logicalRouter{nb: lr, dp: g.Datapath(lr.UUID), chassis: lr.Options["chassis"]}
	rule, ok := parseNAT(g, r, n, true)
	if !ok || !placeNAT(g, r, &rule, true) {
		return
	}
	first := natFirstsOf(g, lr.UUID, rule.ext)
	if r.chassis != "" {
		gatewayRouterNAT(g, r, &rule, first)
		return
	}
	distributedNAT(g, r, &rule, first.any == n.UUID)
}

// genRouterNAT writes what a router's NAT rules make of the router as a
// whole.
func genRouterNAT(g *gen) {
	lr, ok := Read[nb.LogicalRouter](g, NB, g.ID())
	if !ok || (lr.Enabled != nil && !*lr.Enabled) {
		return
	}
	r := &logicalRouter{nb: lr, dp: g.Datapath(lr.UUID), chassis: lr.Options["chassis"]}
	x := routerNATIndex(g, lr.UUID)
	if x.rules == 0 {
		return
	}
	ct := ctNamesFor(g.Features())
	natted := "ct_mark.natted"
	if !ct.masks() {
		natted = "ct_label.natted"
	}
	dp := r.dp
	g.Flow(dp, LROutChkDNATLocal, 50, "ip && "+natted+" == 1", "reg9[4] = 1; next;")
	if r.chassis == "" && len(routerGatewayPorts(g, lr.UUID)) == 0 {
		g.Warn("NAT on a distributed router without a gateway port; ignoring its NAT rules", "router", r.nb.Name)
		return
	}
	if r.chassis != "" {
		if a, err := netip.ParseAddr(r.nb.Options["dnat_force_snat_ip"]); err == nil {
			ipf := ipFamily(a)
			g.Flow(dp, LRInUnsnat, 110, fmt.Sprintf("%s && %s.dst == %s", ipf, ipf, a), "ct_snat;")
			g.Flow(dp, LROutSnat, 100, fmt.Sprintf("flags.force_snat_for_dnat == 1 && %s", ipf), fmt.Sprintf("ct_snat(%s);", a))
		}
	} else {
		// A gateway port's own address that is a NAT address lets
		// traffic from it in.
		for _, dgp := range routerGatewayPorts(g, lr.UUID) {
			for _, a := range addrsOf(dgp.nets) {
				if x.extPort[a] == dgp.nb.Name {
					g.Flow(dp, LRInIPInput, 120, fmt.Sprintf("inport == %q && %s.src == %s", dgp.nb.Name, ipFamily(a), a), "next;")
				}
			}
		}
	}
	snatDrops(g, dp, slices.Clone(x.snatIPs))
}

// natGatewayPort returns the distributed gateway port a NAT rule of a
// distributed router happens on (ovn-nb(5), NAT gateway_port): the one
// gateway_port names, the router's only one, or the one whose networks
// hold the external address; nil if none.
func natGatewayPort(n *natRule, dgps []*routerPort) *routerPort {
	if n.nb.GatewayPort != nil {
		for _, p := range dgps {
			if p.nb.UUID == *n.nb.GatewayPort {
				return p
			}
		}
		return nil
	}
	if len(dgps) == 1 {
		return dgps[0]
	}
	for _, p := range dgps {
		for _, pfx := range p.nets {
			if pfx.Contains(n.ext) {
				return p
			}
		}
	}
	return nil
}

// masks says whether conntrack marks are in ct_mark (every chassis can
// match ct_label without masks) rather than ct_label.
func (c ctNames) masks() bool { return c.blocked == "ct_mark.blocked" }

func ipFamily(a netip.Addr) string {
	if a.Is4() {
		return "ip4"
	}
	return "ip6"
}

// gatewayRouterNAT writes a NAT rule's flows on a gateway router, which
// does all its NAT in one conntrack zone on its chassis; the first rule of
// an external address (first) writes the address's own flows.
func gatewayRouterNAT(g *gen, r *logicalRouter, n *natRule, first natFirsts) {
	dp := r.dp
	forceDNAT := r.nb.Options["dnat_force_snat_ip"]
	ipf := ipFamily(n.ext)
	id := n.nb.UUID
	if first.any == id && n.ext.Is4() {
		g.FlowHint(dp, LRInIPInput, 90, fmt.Sprintf("arp.op == 1 && arp.tpa == %s", n.ext),
			"eth.dst = eth.src; eth.src = xreg0[0..47]; arp.op = 2; /* ARP reply */ arp.tha = arp.sha; arp.sha = xreg0[0..47]; arp.tpa <-> arp.spa; outport = inport; flags.loopback = 1; output;", id)
	}
	if n.snat() && first.snat == id {
		act := "ct_snat;"
		if n.stateless {
			act = "next;"
		}
		g.FlowHint(dp, LRInUnsnat, 90, fmt.Sprintf("ip && %s.dst == %s", ipf, n.ext), act, id)
	}
	if n.dnat() {
		match := fmt.Sprintf("ip && %s.dst == %s", ipf, n.ext)
		if n.allowed != "" {
			match += fmt.Sprintf(" && %s.src == %s", ipf, n.allowed)
		}
		pre := "flags.loopback = 1; "
		if forceDNAT != "" {
			pre = "flags.force_snat_for_dnat = 1; " + pre
		}
		act := fmt.Sprintf("%sct_dnat(%s);", pre, n.logical.Addr())
		if n.stateless {
			act = fmt.Sprintf("%s%s.dst=%s; next;", pre, ipf, n.logical.Addr())
		}
		g.FlowHint(dp, LRInDNAT, 100, match, act, id)
		if n.exempted != "" {
			g.FlowHint(dp, LRInDNAT, 102, fmt.Sprintf("ip && %s.dst == %s && %s.src == %s", ipf, n.ext, ipf, n.exempted), "next;", id)
		}
	}
	if n.snat() {
		prio := n.logical.Bits() + 1
		match := fmt.Sprintf("ip && %s.src == %s", ipf, prefixOrHost(n.logical))
		if n.stateless {
			g.FlowHint(dp, LROutSnat, prio, match, fmt.Sprintf("%s.src=%s; next;", ipf, n.ext), id)
			return
		}
		if n.allowed != "" {
			match += fmt.Sprintf(" && %s.dst == %s", ipf, n.allowed)
		}
		g.FlowHint(dp, LROutSnat, prio, match+" && (!ct.trk || !ct.rpl)", fmt.Sprintf("ct_snat(%s);", n.ext), id)
		if n.exempted != "" {
			g.FlowHint(dp, LROutSnat, prio+2, fmt.Sprintf("ip && %s.src == %s && %s.dst == %s", ipf, prefixOrHost(n.logical), ipf, n.exempted), "next;", id)
		}
	}
}

// prefixOrHost formats a NAT's logical address: a host as an address, a
// subnet as a prefix.
func prefixOrHost(p netip.Prefix) string {
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}

// distributedNAT writes a NAT rule's flows on a distributed router, whose
// NAT happens on its gateway port's chassis (or, for distributed
// dnat_and_snat, on the chassis of the logical port); the first rule of an
// external address (firstOfExt) writes the address's own flows.
func distributedNAT(g *gen, r *logicalRouter, n *natRule, firstOfExt bool) {
	dp := r.dp
	dgp := n.dgp
	out := fmt.Sprintf("outport == %q", dgp.nb.Name)
	in := fmt.Sprintf("inport == %q", dgp.nb.Name)
	crResident := fmt.Sprintf("is_chassis_resident(%q)", dgp.crName)
	ipf := ipFamily(n.ext)
	id := n.nb.UUID
	resident := crResident
	if n.distributed {
		resident = fmt.Sprintf("is_chassis_resident(%q)", *n.nb.LogicalPort)
	}
	if firstOfExt {
		mac := dgp.mac
		replyMAC := "xreg0[0..47]"
		if n.distributed {
			mac, replyMAC = n.extMAC, n.extMAC
		}
		if n.ext.Is4() {
			g.FlowHint(dp, LRInIPInput, 90, fmt.Sprintf("arp.op == 1 && arp.tpa == %s", n.ext),
				"eth.dst = eth.src; eth.src = xreg0[0..47]; arp.op = 2; /* ARP reply */ arp.tha = arp.sha; arp.sha = xreg0[0..47]; arp.tpa <-> arp.spa; outport = inport; flags.loopback = 1; output;", id)
			g.FlowHint(dp, LRInIPInput, 91, fmt.Sprintf("%s && arp.op == 1 && arp.tpa == %s", in, n.ext), "drop;", id)
			g.FlowHint(dp, LRInIPInput, 92, fmt.Sprintf("%s && arp.op == 1 && arp.tpa == %s && %s", in, n.ext, resident),
				fmt.Sprintf("eth.dst = eth.src; eth.src = %s; arp.op = 2; /* ARP reply */ arp.tha = arp.sha; arp.sha = %s; arp.tpa <-> arp.spa; outport = inport; flags.loopback = 1; output;", replyMAC, replyMAC), id)
			g.FlowHint(dp, LRInARPResolve, 100, fmt.Sprintf("%s && reg0 == %s", out, n.ext), fmt.Sprintf("eth.dst = %s; next;", mac), id)
		}
		if n.ext.Is6() {
			sn := solicitedNode(n.ext)
			ns := fmt.Sprintf("ip6.dst == {%s, %s} && nd_ns && nd.target == %s", n.ext, sn, n.ext)
			na := fmt.Sprintf("nd_na { eth.src = %s; ip6.src = nd.target; nd.tll = %s; outport = inport; flags.loopback = 1; output; };", replyMAC, replyMAC)
			g.FlowHint(dp, LRInIPInput, 90, ns, "nd_na { eth.src = xreg0[0..47]; ip6.src = nd.target; nd.tll = xreg0[0..47]; outport = inport; flags.loopback = 1; output; };", id)
			g.FlowHint(dp, LRInIPInput, 91, fmt.Sprintf("%s && %s", in, ns), "drop;", id)
			g.FlowHint(dp, LRInIPInput, 92, fmt.Sprintf("%s && %s && %s", in, ns, resident), na, id)
			g.FlowHint(dp, LRInARPResolve, 100, fmt.Sprintf("%s && xxreg0 == %s", out, n.ext), fmt.Sprintf("eth.dst = %s; next;", mac), id)
		}
		g.FlowHint(dp, LRInARPResolve, 150, fmt.Sprintf("%s && %s && %s.dst == %s", in, out, ipf, n.ext), "drop;", id)
		g.FlowHint(dp, LROutChkDNATLocal, 50, fmt.Sprintf("ip && %s.dst == %s && %s", ipf, n.ext, resident), "reg9[4] = 1; next;", id)
		g.FlowHint(dp, LROutEgrLoop, 100, fmt.Sprintf("%s.dst == %s && %s && %s", ipf, n.ext, out, resident),
			"clone { ct_clear; inport = outport; outport = \"\"; eth.dst <-> eth.src; flags = 0; flags.loopback = 1; flags.use_snat_zone = reg9[4]; reg0 = 0; reg1 = 0; reg2 = 0; reg3 = 0; reg4 = 0; reg5 = 0; reg6 = 0; reg7 = 0; reg8 = 0; reg9 = 0; reg9[0] = 1; next(pipeline=ingress, table=0); };", id)
		if n.snat() {
			res := " && " + resident
			if n.distributed {
				res = ""
			}
			base := fmt.Sprintf("ip && %s.dst == %s && %s", ipf, n.ext, in)
			g.FlowHint(dp, LRInUnsnat, 100, base+" && flags.loopback == 0"+res, "ct_snat_in_czone;", id)
			g.FlowHint(dp, LRInUnsnat, 100, base+" && flags.loopback == 1 && flags.use_snat_zone == 1"+res, "ct_snat;", id)
		}
	}
	if n.dnat() {
		res := " && " + resident
		if n.distributed {
			res = ""
		}
		g.FlowHint(dp, LRInDNAT, 100, fmt.Sprintf("ip && %s.dst == %s && %s%s", ipf, n.ext, in, res), fmt.Sprintf("ct_dnat_in_czone(%s);", n.logical.Addr()), id)
		if n.exempted != "" {
			g.FlowHint(dp, LRInDNAT, 102, fmt.Sprintf("ip && %s.dst == %s && %s%s && %s.src == %s", ipf, n.ext, in, res, ipf, n.exempted), "next;", id)
		}
		eth := ""
		undnatRes := res
		if n.distributed {
			eth = "eth.src = " + n.extMAC + "; "
			undnatRes = ""
		}
		g.FlowHint(dp, LROutUndnat, 100, fmt.Sprintf("ip && %s.src == %s && %s%s", ipf, n.logical.Addr(), out, undnatRes), eth+"ct_dnat_in_czone;", id)
	}
	if n.snat() {
		prio := n.logical.Bits() + 129
		eth := ""
		if n.distributed {
			eth = "eth.src = " + n.extMAC + "; "
		}
		match := fmt.Sprintf("ip && %s.src == %s && %s && %s", ipf, prefixOrHost(n.logical), out, resident)
		if n.allowed != "" {
			match += fmt.Sprintf(" && %s.dst == %s", ipf, n.allowed)
		}
		g.FlowHint(dp, LROutSnat, prio, match, fmt.Sprintf("%sct_snat_in_czone(%s);", eth, n.ext), id)
		g.FlowHint(dp, LROutSnat, prio+1, match+" && reg9[4] == 1", fmt.Sprintf("%sreg9[4] = 0; ct_snat(%s);", eth, n.ext), id)
		if n.exempted != "" {
			g.FlowHint(dp, LROutSnat, prio+2, fmt.Sprintf("ip && %s.src == %s && %s && %s && %s.dst == %s", ipf, prefixOrHost(n.logical), out, resident, ipf, n.exempted), "next;", id)
		}
	}
	if n.distributed {
		admit := fmt.Sprintf("xreg0[0..47] = %s; next;", dgp.mac)
		if mtu := dgp.gatewayMTU(); mtu > 0 {
			// Too big for the gateway port's MTU, on the way in to
			// the rule's own chassis: answered from the external
			// address and MAC.
			admit = fmt.Sprintf("reg9[1] = check_pkt_larger(%d); %s", mtu+ethHeaderLen, admit)
			icmp := fmt.Sprintf("icmp4_error {reg9[0] = 1; reg9[1] = 0; eth.dst = eth.src; eth.src = %s; ip4.dst = ip4.src; ip4.src = %s; ip.ttl = 254; icmp4.type = 3; /* Destination Unreachable. */ icmp4.code = 4; /* Frag Needed and DF was Set. */ icmp4.frag_mtu = %d; outport = %q; flags.loopback = 1; output; };",
				n.extMAC, n.ext, mtu, dgp.nb.Name)
			if n.ext.Is6() {
				icmp = fmt.Sprintf("icmp6_error {reg9[0] = 1; reg9[1] = 0; eth.dst = eth.src; eth.src = %s; ip6.dst = ip6.src; ip6.src = %s; ip.ttl = 254; icmp6.type = 2; /* Packet Too Big. */ icmp6.code = 0; icmp6.frag_mtu = %d; outport = %q; flags.loopback = 1; output; };",
					n.extMAC, n.ext, mtu, dgp.nb.Name)
			}
			g.FlowHint(dp, LRInIPInput, 160, fmt.Sprintf("%s && reg9[1] && reg9[0] == 0 && %s && %s.dst == %s", in, ipf, ipf, n.ext), icmp, id)
		}
		g.FlowHint(dp, LRInAdmission, 50, fmt.Sprintf("eth.dst == %s && %s && %s", n.extMAC, in, resident), admit, id)
		g.FlowHint(dp, LRInGWRedirect, 100, fmt.Sprintf("%s.src == %s && %s && %s", ipf, n.logical.Addr(), out, resident),
			fmt.Sprintf("eth.src = %s; reg1 = %s; next;", n.extMAC, n.ext), id)
	}
}

// snatDrops drops, before ARP resolution, traffic routed to the router's
// own SNAT addresses, one flow per address family.
func snatDrops(g *gen, dp dpID, ips []netip.Addr) {
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	var v4, v6 []netip.Addr
	for _, a := range ips {
		if a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	if len(v4) > 0 {
		g.Flow(dp, LRInARPResolve, 2, fmt.Sprintf("ip4.dst == %s", addrSet(v4, true)), "drop;")
	}
	if len(v6) > 0 {
		g.Flow(dp, LRInARPResolve, 2, fmt.Sprintf("ip6.dst == %s", addrSet(v6, true)), "drop;")
	}
}
