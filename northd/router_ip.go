package northd

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// routerPortsOf returns the parsed ports of a router, by name (a memo:
// owners that need a router's ports depend on what they are, not on every
// read that found them).
func routerPortsOf(g *gen, lr ovsdb.UUID) []routerPort {
	return g.Memo("router-ports/"+lr.String(), func(g *gen) any {
		var out []routerPort
		for _, id := range g.Members(NB, nb.LogicalRouterTable, lr, "ports") {
			if p, ok := readRouterPort(g, id); ok {
				out = append(out, *p)
			}
		}
		slices.SortFunc(out, func(a, b routerPort) int { return strings.Compare(a.nb.Name, b.nb.Name) })
		return out
	}).([]routerPort)
}

// routePriority is ovn-northd's priority for a route to a prefix of plen
// bits: longer prefixes first, and at equal length connected routes before
// static destination routes before source routes.
func routePriority(plen int, kind routeKind) int { return plen*3 + int(kind) }

type routeKind int

const (
	routeSource routeKind = iota
	routeStatic
	routeConnected
)

// solicitedNode returns the solicited-node multicast address of a.
func solicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 10: 0, 11: 0x01, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

// broadcast returns the broadcast address of an IPv4 prefix.
func broadcast(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// addrSet formats addresses as a match's right side: one alone, several
// in braces.
func addrSet(as []netip.Addr, braces bool) string {
	ss := make([]string, len(as))
	for i, a := range as {
		ss[i] = a.String()
	}
	if len(ss) == 1 && !braces {
		return ss[0]
	}
	return "{" + strings.Join(ss, ", ") + "}"
}

// routerPortIPFlows writes a router port's flows in the neighbor lookup,
// IP input, ND RA and routing stages.
func routerPortIPFlows(g *gen, r *logicalRouter, p *routerPort, natIPs map[netip.Addr]bool) {
	dp := r.dp
	id := p.nb.UUID
	name := p.nb.Name
	in := fmt.Sprintf("inport == %q", name)
	resident := ""
	if p.gateway {
		resident = fmt.Sprintf(" && is_chassis_resident(%q)", p.crName)
	}
	v4, v6 := p.ipv4(), p.ipv6()
	all6 := append([]netip.Addr{}, addrsOf(v6)...)
	all6 = append(all6, p.lla)

	// Neighbor lookup: learn only from ARP requests of the port's own
	// subnets.
	for _, n := range v4 {
		if r.learnFromARPRequest() {
			g.FlowHint(dp, LRInLookupNeighbor, 100, fmt.Sprintf("%s && arp.spa == %s && arp.op == 1%s", in, n.Masked(), resident),
				"reg9[2] = lookup_arp(inport, arp.spa, arp.sha); next;", id)
			continue
		}
		g.FlowHint(dp, LRInLookupNeighbor, 100, fmt.Sprintf("%s && arp.spa == %s && arp.op == 1%s", in, n.Masked(), resident),
			"reg9[2] = lookup_arp(inport, arp.spa, arp.sha); reg9[3] = lookup_arp_ip(inport, arp.spa); next;", id)
		g.FlowHint(dp, LRInLookupNeighbor, 110, fmt.Sprintf("%s && arp.spa == %s && arp.tpa == %s && arp.op == 1%s", in, n.Masked(), n.Addr(), resident),
			"reg9[2] = lookup_arp(inport, arp.spa, arp.sha); reg9[3] = 1; next;", id)
	}

	// IP input.
	if len(v4) > 0 {
		var own []netip.Addr
		for _, n := range v4 {
			own = append(own, n.Addr(), broadcast(n))
		}
		g.FlowHint(dp, LRInIPInput, 100, fmt.Sprintf("ip4.src == %s && reg9[0] == 0", addrSet(own, true)), "drop;", id)
		g.FlowHint(dp, LRInIPInput, 90, fmt.Sprintf("ip4.dst == %s && icmp4.type == 8 && icmp4.code == 0", addrSet(addrsOf(v4), false)),
			"ip4.dst <-> ip4.src; ip.ttl = 255; icmp4.type = 0; flags.loopback = 1; next; ", id)
		var local []netip.Addr
		for _, a := range addrsOf(v4) {
			if !natIPs[a] {
				local = append(local, a)
			}
		}
		if len(local) > 0 {
			g.FlowHint(dp, LRInIPInput, 60, fmt.Sprintf("ip4.dst == %s", addrSet(local, true)), "drop;", id)
		}
		arpResident := routerARPResident(g, r, p)
		for _, n := range v4 {
			g.FlowHint(dp, LRInIPInput, 90, fmt.Sprintf("%s && arp.op == 1 && arp.tpa == %s && arp.spa == %s%s", in, n.Addr(), n.Masked(), arpResident),
				"eth.dst = eth.src; eth.src = xreg0[0..47]; arp.op = 2; /* ARP reply */ arp.tha = arp.sha; arp.sha = xreg0[0..47]; arp.tpa <-> arp.spa; outport = inport; flags.loopback = 1; output;", id)
		}
		for _, n := range v4 {
			src := fmt.Sprintf("ip4.dst = ip4.src; ip4.src = %s", n.Addr())
			if p.gateway {
				src = "ip4.dst <-> ip4.src"
			}
			g.FlowHint(dp, LRInIPInput, 31, fmt.Sprintf("%s && ip4 && ip.ttl == {0, 1} && !ip.later_frag", in),
				fmt.Sprintf("icmp4 {eth.dst <-> eth.src; icmp4.type = 11; /* Time exceeded */ icmp4.code = 0; /* TTL exceeded in transit */ %s ; ip.ttl = 254; outport = %q; flags.loopback = 1; output; };", src, name), id)
		}
	}
	// A distributed router without a gateway port answers traffic to its
	// own addresses that it does not serve: TCP with a reset, UDP with a
	// port unreachable, SCTP with an abort, other IP with a protocol
	// unreachable.
	if r.chassis == "" && !routerHasGatewayPort(g, r.nb.UUID) {
		for _, a := range append(addrsOf(v4), all6...) {
			ipf, icmp, proto, port := "ip4", "icmp4", "icmp4.type = 3; icmp4.code = 2;", "icmp4.type = 3; icmp4.code = 3;"
			if a.Is6() {
				ipf, icmp, proto, port = "ip6", "icmp6", "icmp6.type = 1; icmp6.code = 3;", "icmp6.type = 1; icmp6.code = 4;"
			}
			base := fmt.Sprintf("%s && %s.dst == %s && !ip.later_frag", ipf, ipf, a)
			swap := fmt.Sprintf("eth.dst <-> eth.src; %s.dst <-> %s.src;", ipf, ipf)
			g.FlowHint(dp, LRInIPInput, 70, base, fmt.Sprintf("%s {%s ip.ttl = 255; %s next; };", icmp, swap, proto), id)
			g.FlowHint(dp, LRInIPInput, 80, base+" && tcp", fmt.Sprintf("tcp_reset {%s next; };", swap), id)
			g.FlowHint(dp, LRInIPInput, 80, base+" && udp", fmt.Sprintf("%s {%s ip.ttl = 255; %s next; };", icmp, swap, port), id)
			g.FlowHint(dp, LRInIPInput, 80, base+" && sctp", fmt.Sprintf("sctp_abort {%s next; };", swap), id)
		}
	}
	g.FlowHint(dp, LRInIPInput, 90, fmt.Sprintf("ip6.dst == %s && icmp6.type == 128 && icmp6.code == 0", addrSet(all6, false)),
		"ip6.dst <-> ip6.src; ip.ttl = 255; icmp6.type = 129; flags.loopback = 1; next; ", id)
	var local6 []netip.Addr
	for _, a := range all6 {
		if !natIPs[a] {
			local6 = append(local6, a)
		}
	}
	if len(local6) > 0 {
		g.FlowHint(dp, LRInIPInput, 60, fmt.Sprintf("ip6.dst == %s", addrSet(local6, true)), "drop;", id)
	}
	for _, a := range all6 {
		g.FlowHint(dp, LRInIPInput, 100, fmt.Sprintf("ip6.dst == %s && udp.src == 547 && udp.dst == 546", a), "reg0 = 0; handle_dhcpv6_reply;", id)
		g.FlowHint(dp, LRInIPInput, 90, fmt.Sprintf("%s && ip6.dst == {%s, %s} && nd_ns && nd.target == %s%s", in, a, solicitedNode(a), a, resident),
			"nd_na_router { eth.src = xreg0[0..47]; ip6.src = nd.target; nd.tll = xreg0[0..47]; outport = inport; flags.loopback = 1; output; };", id)
	}
	for _, n := range v6 {
		src := fmt.Sprintf("ip6.dst = ip6.src; ip6.src = %s", n.Addr())
		if p.gateway {
			src = "ip6.dst <-> ip6.src"
		}
		g.FlowHint(dp, LRInIPInput, 31, fmt.Sprintf("%s && ip6 && ip6.src == %s && ip.ttl == {0, 1} && !ip.later_frag", in, n.Masked()),
			fmt.Sprintf("icmp6 {eth.dst <-> eth.src; %s ; ip.ttl = 254; icmp6.type = 3; /* Time exceeded */ icmp6.code = 0; /* TTL exceeded in transit */ outport = %q; flags.loopback = 1; output; };", src, name), id)
	}

	// Router advertisements.
	if mode := p.nb.IPv6RAConfigs["address_mode"]; mode != "" && len(v6) > 0 {
		var opts []string
		opts = append(opts, fmt.Sprintf("addr_mode = %q", mode), "slla = "+p.mac)
		if mtu, ok := p.nb.IPv6RAConfigs["mtu"]; ok {
			opts = append(opts, "mtu = "+mtu)
		}
		if v, ok := p.nb.IPv6RAConfigs["rdnss"]; ok {
			opts = append(opts, "rdnss = "+v)
		}
		if v, ok := p.nb.IPv6RAConfigs["dnssl"]; ok {
			opts = append(opts, fmt.Sprintf("dnssl = %q", v))
		}
		if prf, ok := p.nb.IPv6RAConfigs["router_preference"]; ok && prf != "MEDIUM" {
			opts = append(opts, fmt.Sprintf("router_preference = %q", prf))
		}
		for _, n := range v6 {
			opts = append(opts, "prefix = "+n.Masked().String())
		}
		g.FlowHint(dp, LRInNDRAOptions, 50, fmt.Sprintf("%s && ip6.dst == ff02::2 && nd_rs", in),
			fmt.Sprintf("reg0[5] = put_nd_ra_opts(%s); next;", strings.Join(opts, ", ")), id)
		g.FlowHint(dp, LRInNDRAResponse, 50, fmt.Sprintf("%s && ip6.dst == ff02::2 && nd_ra && reg0[5]", in),
			fmt.Sprintf("eth.dst = eth.src; eth.src = %s; ip6.dst = ip6.src; ip6.src = %s; outport = inport; flags.loopback = 1; output;", p.mac, p.lla), id)
	}

	// Connected routes.
	for _, n := range v4 {
		g.FlowHint(dp, LRInIPRouting, routePriority(n.Bits(), routeConnected), fmt.Sprintf("ip4.dst == %s", n.Masked()),
			fmt.Sprintf("ip.ttl--; reg8[0..15] = 0; reg0 = ip4.dst; reg1 = %s; eth.src = %s; outport = %q; flags.loopback = 1; next;", n.Addr(), p.mac, name), id)
	}
	for _, n := range v6 {
		g.FlowHint(dp, LRInIPRouting, routePriority(n.Bits(), routeConnected), fmt.Sprintf("ip6.dst == %s", n.Masked()),
			fmt.Sprintf("ip.ttl--; reg8[0..15] = 0; xxreg0 = ip6.dst; xxreg1 = %s; eth.src = %s; outport = %q; flags.loopback = 1; next;", n.Addr(), p.mac, name), id)
	}
	g.FlowHint(dp, LRInIPRouting, routePriority(64, routeConnected), fmt.Sprintf("%s && ip6.dst == fe80::/64", in),
		fmt.Sprintf("ip.ttl--; reg8[0..15] = 0; xxreg0 = ip6.dst; xxreg1 = %s; eth.src = %s; outport = %q; flags.loopback = 1; next;", p.lla, p.mac, name), id)
}

func addrsOf(ps []netip.Prefix) []netip.Addr {
	out := make([]netip.Addr, len(ps))
	for i, p := range ps {
		out[i] = p.Addr()
	}
	return out
}

// routerNATIPs returns the external addresses of a router's NAT rules (a
// memo); traffic to them is the NAT stages', not the router's own.
func routerNATIPs(g *gen, lr ovsdb.UUID) map[netip.Addr]bool {
	return g.Memo("router-nat-ips/"+lr.String(), func(g *gen) any {
		out := map[netip.Addr]bool{}
		for _, nat := range ReadAll[nb.NAT](g, NB, g.Members(NB, nb.LogicalRouterTable, lr, "nat")) {
			if a, err := netip.ParseAddr(nat.ExternalIP); err == nil {
				out[a] = true
			}
		}
		router, _ := Read[nb.LogicalRouter](g, NB, lr)
		for _, opt := range []string{"dnat_force_snat_ip", "lb_force_snat_ip"} {
			for _, w := range strings.Fields(router.Options[opt]) {
				if a, err := netip.ParseAddr(w); err == nil {
					out[a] = true
				}
			}
		}
		if router.Options["lb_force_snat_ip"] == "router_ip" && router.Options["chassis"] != "" {
			// The router's own addresses are the SNAT addresses of its
			// load balancers.
			for _, p := range routerPortsOf(g, lr) {
				for _, a := range addrsOf(p.nets) {
					out[a] = true
				}
				out[p.lla] = true
			}
		}
		return out
	}).(map[netip.Addr]bool)
}

// routerHasNATOrLB says whether a router has NAT rules or load balancers
// (a memo).
func routerHasNATOrLB(g *gen, lr ovsdb.UUID) bool {
	return g.Memo("router-has-nat-lb/"+lr.String(), func(g *gen) any {
		return len(g.Members(NB, nb.LogicalRouterTable, lr, "nat")) > 0 ||
			len(g.Members(NB, nb.LogicalRouterTable, lr, "load_balancer")) > 0 ||
			len(g.Members(NB, nb.LogicalRouterTable, lr, "load_balancer_group")) > 0
	}).(bool)
}

// routerARPResident is the chassis condition of a router port's replies to
// ARP for its own addresses. Only where the peer switch has a localnet
// port do they come from one chassis: the gateway chassis, for a gateway
// port, or for a port with options:reside-on-redirect-chassis, so that
// the physical network learns the MAC there (and gets one reply).
func routerARPResident(g *gen, r *logicalRouter, p *routerPort) string {
	if !p.gateway && p.nb.Options["reside-on-redirect-chassis"] != "true" {
		return ""
	}
	cr := p.crName
	if !p.gateway {
		for _, q := range routerPortsOf(g, r.nb.UUID) {
			if q.gateway {
				cr = q.crName
				break
			}
		}
		if cr == "" {
			return ""
		}
	}
	if !peerSwitchHasLocalnet(g, p) {
		return ""
	}
	return fmt.Sprintf(" && is_chassis_resident(%q)", cr)
}

// peerSwitchHasLocalnet says whether the switch a router port is connected
// to has a localnet port.
func peerSwitchHasLocalnet(g *gen, p *routerPort) bool {
	for _, lsp := range ReadAll[nb.LogicalSwitchPort](g, NB, g.ByName(NB, lspRouterPortIndex, p.nb.Name)) {
		if lsp.Type != "router" {
			continue
		}
		for _, ls := range g.Referrers(NB, nb.LogicalSwitchTable, "ports", lsp.UUID) {
			if switchHasLocalnet(g, ls) {
				return true
			}
		}
	}
	return false
}

// switchHasLocalnet says whether a switch has a localnet port (a memo).
func switchHasLocalnet(g *gen, ls ovsdb.UUID) bool {
	return g.Memo("switch-localnet/"+ls.String(), func(g *gen) any {
		for _, lsp := range ReadAll[nb.LogicalSwitchPort](g, NB, g.Members(NB, nb.LogicalSwitchTable, ls, "ports")) {
			if lsp.Type == "localnet" {
				return true
			}
		}
		return false
	}).(bool)
}

// routerHasGatewayPort says whether a router has a distributed gateway
// port.
// It is a memo: every port of a router reads it, and a router with a
// port per node (ovn-kubernetes's cluster router) must not regenerate all
// of them when a port comes or goes.
func routerHasGatewayPort(g *gen, lr ovsdb.UUID) bool {
	return g.Memo("router-has-gw/"+lr.String(), func(g *gen) any {
		for _, p := range routerPortsOf(g, lr) {
			if p.gateway {
				return true
			}
		}
		return false
	}).(bool)
}

// routerHasDistributedNAT says whether a router has a dnat_and_snat rule
// that runs on its logical port's chassis (a memo).
func routerHasDistributedNAT(g *gen, lr ovsdb.UUID) bool {
	return g.Memo("router-dist-nat/"+lr.String(), func(g *gen) any {
		for _, n := range ReadAll[nb.NAT](g, NB, g.Members(NB, nb.LogicalRouterTable, lr, "nat")) {
			if n.Type == "dnat_and_snat" && n.LogicalPort != nil && *n.LogicalPort != "" && n.ExternalMAC != nil && *n.ExternalMAC != "" {
				return true
			}
		}
		return false
	}).(bool)
}

// ethHeaderLen is what check_pkt_larger adds to options:gateway_mtu: the
// limit is on whole Ethernet frames.
const ethHeaderLen = 14

// gatewayMTU is the port's options:gateway_mtu (0 when absent or bad).
func (p *routerPort) gatewayMTU() int {
	mtu, err := strconv.Atoi(p.nb.Options["gateway_mtu"])
	if err != nil || mtu <= 0 {
		return 0
	}
	return mtu
}

// firstIPv6 is the port's first IPv6 address: its first network's, or its
// link-local one.
func (p *routerPort) firstIPv6() netip.Addr {
	if v6 := p.ipv6(); len(v6) > 0 {
		return v6[0].Addr()
	}
	return p.lla
}

// routerPortMTUFlows writes the flows of a port with options:gateway_mtu:
// packets routed out of it (on a gateway router or through a gateway port)
// that are larger than the MTU are answered with ICMP "fragmentation
// needed" or ICMPv6 "packet too big" from the port they came in on.
func routerPortMTUFlows(g *gen, r *logicalRouter, p *routerPort) {
	mtu := p.gatewayMTU()
	if mtu == 0 || (r.chassis == "" && !p.gateway) {
		return
	}
	dp, id := r.dp, p.nb.UUID
	g.FlowHint(dp, LRInChkPktLen, 50, fmt.Sprintf("outport == %q", p.nb.Name), fmt.Sprintf("reg9[1] = check_pkt_larger(%d); next;", mtu+ethHeaderLen), id)
	errors := func(q *routerPort) (v4, v6 string) {
		if a := q.ipv4(); len(a) > 0 {
			v4 = fmt.Sprintf("icmp4_error {reg9[0] = 1; reg9[1] = 0; eth.dst = %s; ip4.dst = ip4.src; ip4.src = %s; ip.ttl = 255; icmp4.type = 3; /* Destination Unreachable. */ icmp4.code = 4; /* Frag Needed and DF was Set. */ icmp4.frag_mtu = %d; next(pipeline=ingress, table=%d); };",
				q.mac, a[0].Addr(), mtu, LRInAdmission.Table())
		}
		v6 = fmt.Sprintf("icmp6_error {reg9[0] = 1; reg9[1] = 0; eth.dst = %s; ip6.dst = ip6.src; ip6.src = %s; ip.ttl = 255; icmp6.type = 2; /* Packet Too Big. */ icmp6.code = 0; icmp6.frag_mtu = %d; next(pipeline=ingress, table=%d); };",
			q.mac, q.firstIPv6(), mtu, LRInAdmission.Table())
		return v4, v6
	}
	for _, q := range routerPortsOf(g, r.nb.UUID) {
		v4, v6 := errors(&q)
		if q.nb.Name == p.nb.Name {
			in := fmt.Sprintf("inport == %q", p.nb.Name)
			if v4 != "" {
				g.FlowHint(dp, LRInIPInput, 150, in+" && ip4 && reg9[1] && reg9[0] == 0", v4, id)
			}
			g.FlowHint(dp, LRInIPInput, 150, in+" && ip6 && reg9[1] && reg9[0] == 0", v6, id)
			continue
		}
		m := fmt.Sprintf("inport == %q && outport == %q", q.nb.Name, p.nb.Name)
		if v4 != "" {
			g.FlowHint(dp, LRInLargerPkts, 150, m+" && ip4 && reg9[1] && reg9[0] == 0", v4, id)
		}
		g.FlowHint(dp, LRInLargerPkts, 150, m+" && ip6 && reg9[1] && reg9[0] == 0", v6, id)
	}
}
