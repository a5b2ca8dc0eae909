package northd

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// nextHop is where a route or a policy sends a packet: the next hop's
// address, and the router port (and its address on the next hop's subnet)
// it leaves by.
type nextHop struct {
	ip   netip.Addr
	port *routerPort
	src  netip.Addr
}

// findNextHop finds the router port a next hop is reached by: the named
// port, or the one with a network that holds the address.
func findNextHop(ports []routerPort, ip netip.Addr, outPort string) (nextHop, bool) {
	for i := range ports {
		p := &ports[i]
		if outPort != "" && p.nb.Name != outPort {
			continue
		}
		for _, n := range p.nets {
			if n.Addr().Is4() == ip.Is4() && (n.Contains(ip) || outPort != "") {
				return nextHop{ip: ip, port: p, src: n.Addr()}, true
			}
		}
	}
	return nextHop{}, false
}

// regs returns the registers a family's next hop and source go in.
func regs(v4 bool) (nh, src string) {
	if v4 {
		return "reg0", "reg1"
	}
	return "xxreg0", "xxreg1"
}

// hopActions is the action text that sends to a next hop (without the
// final next;).
func (h nextHop) actions() string {
	nh, src := regs(h.ip.Is4())
	return fmt.Sprintf("%s = %s; %s = %s; eth.src = %s; outport = %q;", nh, h.ip, src, h.src, h.port.mac, h.port.nb.Name)
}

// staticRoute is one parsed Logical_Router_Static_Route.
type staticRoute struct {
	nb      nb.LogicalRouterStaticRoute
	prefix  netip.Prefix
	srcIP   bool
	discard bool
	hop     nextHop
}

// routeTables numbers a router's route tables ("" is 0, the others from 1
// in name order).
func routeTables(ports []routerPort, routes []staticRoute) map[string]int {
	names := map[string]bool{}
	for _, p := range ports {
		if t := p.nb.Options["route_table"]; t != "" {
			names[t] = true
		}
	}
	for _, r := range routes {
		if r.nb.RouteTable != "" {
			names[r.nb.RouteTable] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	out := map[string]int{"": 0}
	for i, n := range sorted {
		out[n] = i + 1
	}
	return out
}

// parsePrefix parses a route's ip_prefix: a prefix or a bare address.
func parsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// routerStaticRoutes reads and parses a router's static routes, leaving
// out bad ones, and numbers its route tables.
func routerStaticRoutes(g *gen, r *logicalRouter, ports []routerPort) ([]staticRoute, map[string]int) {
	var routes []staticRoute
	for _, rt := range ReadAll[nb.LogicalRouterStaticRoute](g, NB, g.Members(NB, nb.LogicalRouterTable, r.nb.UUID, "static_routes")) {
		if s, ok := parseStaticRoute(g, r, ports, rt, false); ok {
			routes = append(routes, s)
		}
	}
	return routes, routeTables(ports, routes)
}

// parseStaticRoute parses a static route of router r; a bad one, or one
// whose BFD session is down, is skipped, a bad one with a warning if warn.
func parseStaticRoute(g *gen, r *logicalRouter, ports []routerPort, rt nb.LogicalRouterStaticRoute, warn bool) (staticRoute, bool) {
	skip := func(msg string, args ...any) (staticRoute, bool) {
		if warn {
			g.Warn(msg, append([]any{"router", r.nb.Name}, args...)...)
		}
		return staticRoute{}, false
	}
	pfx, err := parsePrefix(rt.IPPrefix)
	if err != nil {
		return skip("bad static route prefix; skipping the route", "prefix", rt.IPPrefix)
	}
	if rt.BFD != nil {
		// A route checked by BFD is used only while its session is not
		// known to be down.
		if b, ok := Read[nb.BFD](g, NB, *rt.BFD); ok && b.Status != nil && *b.Status == "down" {
			return staticRoute{}, false
		}
	}
	s := staticRoute{nb: rt, prefix: pfx, srcIP: rt.Policy != nil && *rt.Policy == nb.LogicalRouterStaticRoutePolicySrcIP}
	if rt.Nexthop == "discard" {
		s.discard = true
		return s, true
	}
	nh, err := netip.ParseAddr(rt.Nexthop)
	if err != nil || nh.Is4() != pfx.Addr().Is4() {
		return skip("bad static route next hop; skipping the route", "nexthop", rt.Nexthop)
	}
	out := ""
	if rt.OutputPort != nil {
		out = *rt.OutputPort
	}
	hop, ok := findNextHop(ports, nh, out)
	if !ok {
		return skip("no router port reaches the static route's next hop; skipping the route", "nexthop", rt.Nexthop)
	}
	s.hop = hop
	return s, true
}

// routeRole is what one static route writes: routes to the same prefix
// (in the same table, of the same policy) are one group, whose routing
// flow the group's first route writes; the members of an ECMP group each
// write their branch of it.
type routeRole struct {
	route staticRoute
	// lead says the route writes the group's flow: match, prio, actions.
	lead           bool
	match, actions string
	prio           int
	// ecmpID and ecmpIndex are the route's branch of an ECMP group (0
	// when it is not in one).
	ecmpID, ecmpIndex int
	table             int // the group's route table number
	// hop says the route is one the group uses (a discard route is not
	// when the group has next hops).
	hop bool
}

// routerRouteRoles returns what each static route of a router writes, by
// route, and the router's route table numbers (a memo).
func routerRouteRoles(g *gen, lr ovsdb.UUID) routeRoles {
	return g.Memo("router-route-roles/"+lr.String(), func(g *gen) any {
		out := routeRoles{roles: map[ovsdb.UUID]routeRole{}}
		router, ok := Read[nb.LogicalRouter](g, NB, lr)
		if !ok {
			return out
		}
		r := &logicalRouter{nb: router, chassis: router.Options["chassis"]}
		routes, tables := routerStaticRoutes(g, r, routerPortsOf(g, lr))
		out.tables = tables
		type groupKey struct {
			prefix netip.Prefix
			src    bool
			table  string
		}
		groups := map[groupKey][]staticRoute{}
		var order []groupKey
		for _, s := range routes {
			k := groupKey{s.prefix, s.srcIP, s.nb.RouteTable}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], s)
		}
		slices.SortFunc(order, func(a, b groupKey) int {
			if c := strings.Compare(a.table, b.table); c != 0 {
				return c
			}
			return strings.Compare(a.prefix.String()+fmt.Sprint(a.src), b.prefix.String()+fmt.Sprint(b.src))
		})
		ecmpID := 0
		for _, k := range order {
			members := groups[k]
			ipf := ipFamily(k.prefix.Addr())
			field := ipf + ".dst"
			kind := routeStatic
			if k.src {
				field, kind = ipf+".src", routeSource
			}
			match := fmt.Sprintf("%s == %s", field, k.prefix)
			if !k.src {
				match = fmt.Sprintf("reg7 == %d && %s", tables[k.table], match)
			}
			prio := routePriority(k.prefix.Bits(), kind)
			// A discard route drops only when no route of its group has
			// a next hop.
			var hops []staticRoute
			for _, m := range members {
				if !m.discard {
					hops = append(hops, m)
				}
			}
			for _, m := range members {
				out.roles[m.nb.UUID] = routeRole{route: m, table: tables[k.table]}
			}
			if len(hops) == 0 {
				out.roles[members[0].nb.UUID] = routeRole{route: members[0], table: tables[k.table], lead: true, match: match, prio: prio, actions: "drop;"}
				continue
			}
			if len(hops) == 1 {
				out.roles[hops[0].nb.UUID] = routeRole{route: hops[0], table: tables[k.table], hop: true, lead: true, match: match, prio: prio,
					actions: "ip.ttl--; reg8[0..15] = 0; " + hops[0].hop.actions() + " flags.loopback = 1; next;"}
				continue
			}
			ecmpID++
			sel := make([]string, len(hops))
			for i := range hops {
				sel[i] = fmt.Sprint(i + 1)
			}
			for i, m := range hops {
				role := routeRole{route: m, table: tables[k.table], hop: true, ecmpID: ecmpID, ecmpIndex: i + 1}
				if i == 0 {
					role.lead, role.match, role.prio = true, match, prio
					role.actions = fmt.Sprintf("ip.ttl--; flags.loopback = 1; reg8[0..15] = %d; reg8[16..31] = select(%s);", ecmpID, strings.Join(sel, ", "))
				}
				out.roles[m.nb.UUID] = role
			}
		}
		return out
	}).(routeRoles)
}

// routeRoles is the memo routerRouteRoles.
type routeRoles struct {
	roles  map[ovsdb.UUID]routeRole
	tables map[string]int
}

// routeRoleOf returns what static route id of router lr writes (a memo of
// its own, so that a route depends only on its own role); ok is false for
// a route that is not used.
func routeRoleOf(g *gen, lr, id ovsdb.UUID) (routeRole, bool) {
	res := g.Memo("router-route/"+lr.String()+"/"+id.String(), func(g *gen) any {
		role, ok := routerRouteRoles(g, lr).roles[id]
		return routeRoleResult{role, ok}
	}).(routeRoleResult)
	return res.role, res.ok
}

type routeRoleResult struct {
	role routeRole
	ok   bool
}

// routerRouteTables returns a router's route table numbers (a memo).
func routerRouteTables(g *gen, lr ovsdb.UUID) map[string]int {
	return g.Memo("router-route-tables/"+lr.String(), func(g *gen) any {
		return routerRouteRoles(g, lr).tables
	}).(map[string]int)
}

// genStaticRoute writes one static route's flows on its router.
func genStaticRoute(g *gen) {
	routers := g.Referrers(NB, nb.LogicalRouterTable, "static_routes", g.ID())
	if len(routers) != 1 {
		return
	}
	lr, ok := Read[nb.LogicalRouter](g, NB, routers[0])
	if !ok || (lr.Enabled != nil && !*lr.Enabled) {
		return
	}
	r := &logicalRouter{nb: lr, dp: g.Datapath(lr.UUID), chassis: lr.Options["chassis"]}
	role, ok := routeRoleOf(g, lr.UUID, g.ID())
	if !ok {
		// Say why, if it is bad.
		if rt, ok := Read[nb.LogicalRouterStaticRoute](g, NB, g.ID()); ok {
			parseStaticRoute(g, r, routerPortsOf(g, lr.UUID), rt, true)
		}
		return
	}
	m := &role.route
	if role.lead {
		g.FlowHint(r.dp, LRInIPRouting, role.prio, role.match, role.actions, m.nb.UUID)
	}
	if !role.hop {
		return
	}
	if !m.prefix.Addr().Is4() {
		// A static IPv6 next hop is solicited directly, not through the
		// all-nodes group.
		sn := solicitedNode(m.hop.ip)
		b := sn.As16()
		g.FlowHint(r.dp, LRInARPRequest, 200, fmt.Sprintf("eth.dst == 00:00:00:00:00:00 && ip6 && xxreg0 == %s", m.hop.ip),
			fmt.Sprintf("nd_ns { eth.dst = 33:33:%02x:%02x:%02x:%02x; ip6.dst = %s; nd.target = %s; output; };", b[12], b[13], b[14], b[15], sn, m.hop.ip), m.nb.UUID)
	}
	if role.ecmpID == 0 {
		return
	}
	g.FlowHint(r.dp, LRInIPRoutingECMP, 100, fmt.Sprintf("reg8[0..15] == %d && reg8[16..31] == %d", role.ecmpID, role.ecmpIndex), m.hop.actions()+" next;", m.nb.UUID)
	if r.chassis != "" && !m.srcIP && m.nb.Options["ecmp_symmetric_reply"] == "true" {
		symmetricReplyFlows(g, r, m.prefix, role.table, m)
	}
}

// routerRoutes writes what a router's routes make of the router as a
// whole (a port's route table), warns of its bad routes, and writes its
// routing policies; each route writes its own flows (genStaticRoute).
func routerRoutes(g *gen, r *logicalRouter) {
	ports := routerPortsOf(g, r.nb.UUID)
	tables := routerRouteTables(g, r.nb.UUID)
	for _, p := range ports {
		if t := p.nb.Options["route_table"]; t != "" {
			g.FlowHint(r.dp, LRInIPRoutingPre, 100, fmt.Sprintf("inport == %q", p.nb.Name), fmt.Sprintf("reg7 = %d; next;", tables[t]), p.nb.UUID)
		}
	}
	routerPolicies(g, r, ports)
}

// routerPolicies writes a router's routing policies.
func routerPolicies(g *gen, r *logicalRouter, ports []routerPort) {
	policies := ReadAll[nb.LogicalRouterPolicy](g, NB, g.Members(NB, nb.LogicalRouterTable, r.nb.UUID, "policies"))
	ecmpID := 0
	for _, p := range policies {
		if err := g.CheckMatch(p.Match); err != nil {
			g.Warn("routing policy match does not parse; skipping the policy", "router", r.nb.Name, "match", p.Match, "error", err)
			continue
		}
		mark := ""
		if m, ok := p.Options["pkt_mark"]; ok {
			mark = "pkt.mark = " + m + "; "
		}
		switch p.Action {
		case nb.LogicalRouterPolicyActionDrop:
			g.FlowHint(r.dp, LRInPolicy, int(p.Priority), p.Match, "drop;", p.UUID)
		case nb.LogicalRouterPolicyActionAllow:
			g.FlowHint(r.dp, LRInPolicy, int(p.Priority), p.Match, mark+"reg8[0..15] = 0; next;", p.UUID)
		case nb.LogicalRouterPolicyActionReroute:
			nhs := slices.Clone(p.Nexthops)
			if len(nhs) == 0 && p.Nexthop != nil {
				nhs = []string{*p.Nexthop}
			}
			var hops []nextHop
			for _, s := range nhs {
				ip, err := netip.ParseAddr(s)
				if err != nil {
					g.Warn("bad policy next hop; skipping the policy", "router", r.nb.Name, "nexthop", s)
					hops = nil
					break
				}
				hop, ok := findNextHop(ports, ip, "")
				if !ok {
					g.Warn("no router port reaches the policy's next hop; skipping the policy", "router", r.nb.Name, "nexthop", s)
					hops = nil
					break
				}
				hops = append(hops, hop)
			}
			switch {
			case len(hops) == 1:
				g.FlowHint(r.dp, LRInPolicy, int(p.Priority), p.Match, mark+hops[0].actions()+" flags.loopback = 1; reg8[0..15] = 0; next;", p.UUID)
			case len(hops) > 1:
				ecmpID++
				sel := make([]string, len(hops))
				for i := range hops {
					sel[i] = fmt.Sprint(i + 1)
				}
				g.FlowHint(r.dp, LRInPolicy, int(p.Priority), p.Match,
					fmt.Sprintf("%sreg8[0..15] = %d; reg8[16..31] = select(%s);", mark, ecmpID, strings.Join(sel, ", ")), p.UUID)
				for i, h := range hops {
					g.FlowHint(r.dp, LRInPolicyECMP, 100, fmt.Sprintf("reg8[0..15] == %d && reg8[16..31] == %d", ecmpID, i+1), h.actions()+" flags.loopback = 1; next;", p.UUID)
				}
			}
		default:
			g.Warn("routing policy with unknown action; skipping it", "router", r.nb.Name, "action", p.Action)
		}
	}
}

// symmetricReplyFlows writes the flows of an ECMP route with
// options:ecmp_symmetric_reply on a gateway router: connections that come
// in through the route's port are committed with the port (its tunnel
// key) and the MAC they came from, and their replies go back the same way
// rather than through the ECMP selection.
func symmetricReplyFlows(g *gen, r *logicalRouter, prefix netip.Prefix, table int, m *staticRoute) {
	p := m.hop.port
	// Every route of the group through the port writes the same flows,
	// hinted by the port so that they are one.
	dp, id := r.dp, p.nb.UUID
	key := g.PortKeyOf(r.nb.UUID, p.nb.Name)
	ipf, v6 := "ip4", "false"
	_, src := regs(true)
	if !prefix.Addr().Is4() {
		ipf, v6 = "ip6", "true"
		_, src = regs(false)
	}
	in := fmt.Sprintf("inport == %q && %s.src == %s", p.nb.Name, ipf, prefix)
	g.FlowHint(dp, LRInDefrag, 100, in, "reg9[5] = chk_ecmp_nh_mac(); ct_next;", id)
	g.FlowHint(dp, LRInDefrag, 100, fmt.Sprintf("reg7 == %d && %s.dst == %s", table, ipf, prefix), "reg9[5] = chk_ecmp_nh(); ct_next;", id)
	for _, proto := range []string{"tcp", "udp", "sctp"} {
		act := fmt.Sprintf("ct_commit { ct_label.ecmp_reply_eth = eth.src;  ct_mark.ecmp_reply_port = %d;}; commit_ecmp_nh(ipv6 = %s, proto = %s); next;", key, v6, proto)
		g.FlowHint(dp, LRInECMPStateful, 100, fmt.Sprintf("%s && (ct.new && !ct.est) && %s", in, proto), act, id)
		g.FlowHint(dp, LRInECMPStateful, 100, fmt.Sprintf("%s && (!ct.rpl && ct.est) && %s && reg9[5] == 0", in, proto), act, id)
	}
	reply := fmt.Sprintf("ct.rpl && reg9[5] == 1 && ct_mark.ecmp_reply_port == %d", key)
	g.FlowHint(dp, LRInIPRouting, 10300, fmt.Sprintf("%s && reg7 == %d && %s.dst == %s", reply, table, ipf, prefix),
		fmt.Sprintf("ip.ttl--; flags.loopback = 1; eth.src = %s; %s = %s; outport = %q; next;", p.mac, src, m.hop.src, p.nb.Name), id)
	g.FlowHint(dp, LRInPolicy, 65535, reply, "next;", id)
	g.FlowHint(dp, LRInARPResolve, 200, reply, "push(xxreg1); xxreg1 = ct_label; eth.dst = xxreg1[32..79]; pop(xxreg1); next;", id)
}
