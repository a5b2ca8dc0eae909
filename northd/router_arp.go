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

// routerAttachment is a router port plugged into a switch through a switch
// port of type router.
type routerAttachment struct {
	lsp    string     // the switch port
	port   routerPort // the router port it peers with
	router ovsdb.UUID
	// dynamicNeigh is the router's options:dynamic_neigh_routers: it
	// learns the other routers on its switches by ARP instead.
	dynamicNeigh bool
}

// switchRouters returns the router ports plugged into a switch, by switch
// port name (a memo: a switch port's owner depends on the switch's routers,
// not on all its ports).
func switchRouters(g *gen, ls ovsdb.UUID) []routerAttachment {
	return g.Memo("switch-routers/"+ls.String(), func(g *gen) any {
		var out []routerAttachment
		for _, lsp := range ReadAll[nb.LogicalSwitchPort](g, NB, g.Members(NB, nb.LogicalSwitchTable, ls, "ports")) {
			if lsp.Type != "router" {
				continue
			}
			if a, ok := attachmentOf(g, &lsp); ok {
				out = append(out, a)
			}
		}
		slices.SortFunc(out, func(a, b routerAttachment) int { return strings.Compare(a.lsp, b.lsp) })
		return out
	}).([]routerAttachment)
}

// switchStaticRouters returns the router ports plugged into a switch whose
// routers resolve their neighbours without ARP (no
// options:dynamic_neigh_routers): all that a router port on the switch
// needs (a memo, which stays the same when a router that learns its
// neighbours joins, so a switch joining every gateway router, as
// ovn-kubernetes's join switch does, does not regenerate all its ports
// for each new one).
func switchStaticRouters(g *gen, ls ovsdb.UUID) []routerAttachment {
	return g.Memo("switch-static-routers/"+ls.String(), func(g *gen) any {
		var out []routerAttachment
		for _, a := range switchRouters(g, ls) {
			if !a.dynamicNeigh {
				out = append(out, a)
			}
		}
		return out
	}).([]routerAttachment)
}

// attachmentOf returns the router port a switch port of type router peers
// with (options:router-port).
func attachmentOf(g *gen, lsp *nb.LogicalSwitchPort) (routerAttachment, bool) {
	name := lsp.Options["router-port"]
	if name == "" {
		return routerAttachment{}, false
	}
	ids := g.ByName(NB, nb.LogicalRouterPortTable, name)
	if len(ids) == 0 {
		return routerAttachment{}, false
	}
	p, ok := readRouterPort(g, ids[0])
	if !ok {
		return routerAttachment{}, false
	}
	lr, _ := Read[nb.LogicalRouter](g, NB, p.router)
	return routerAttachment{lsp: lsp.Name, port: *p, router: p.router, dynamicNeigh: lr.Options["dynamic_neigh_routers"] == "true"}, true
}

// portNeighbors returns the MAC and IP addresses a switch port has in its
// addresses column (dynamic ones from dynamic_addresses).
func portNeighbors(lsp *nb.LogicalSwitchPort) (macs []string, ips [][]netip.Addr) {
	entries := slices.Clone(lsp.Addresses)
	if hasAddress(lsp.Addresses, "dynamic") && lsp.DynamicAddresses != nil {
		entries = append(entries, *lsp.DynamicAddresses)
	}
	for _, e := range entries {
		f := strings.Fields(e)
		if len(f) == 0 {
			continue
		}
		mac, err := net.ParseMAC(f[0])
		if err != nil || len(mac) != 6 {
			continue
		}
		var as []netip.Addr
		for _, w := range f[1:] {
			if a, err := netip.ParseAddr(w); err == nil {
				as = append(as, a)
			}
		}
		macs = append(macs, mac.String())
		ips = append(ips, as)
	}
	return macs, ips
}

// switchPortRouterFlows writes a switch port's share of the routers on its
// switch: every router port there resolves the port's addresses to its MAC
// without ARP (lr_in_arp_resolve). A router port's addresses are resolved
// the same way by the other routers on the switch.
func switchPortRouterFlows(g *gen, sw *logicalSwitch, lsp *nb.LogicalSwitchPort) {
	var routers []routerAttachment
	if lsp.Type == "router" {
		routers = switchStaticRouters(g, sw.nb.UUID)
	} else {
		routers = switchRouters(g, sw.nb.UUID)
	}
	if len(routers) == 0 {
		return
	}
	type neighbor struct {
		mac string
		v4  []netip.Addr
		v6  []netip.Addr
		set bool // IPv6 addresses as one set (a router port's, with its link-local)
	}
	var ns []neighbor
	self := ""
	switch lsp.Type {
	case "router":
		a, ok := attachmentOf(g, lsp)
		if !ok {
			return
		}
		self = a.port.nb.Name
		v6 := addrsOf(a.port.ipv6())
		v6 = append(v6, a.port.lla)
		ns = append(ns, neighbor{mac: a.port.mac, v4: addrsOf(a.port.ipv4()), v6: v6, set: true})
	case "", "virtual", "localport", "l2gateway", "external", "remote":
		macs, ips := portNeighbors(lsp)
		for i, mac := range macs {
			n := neighbor{mac: mac}
			for _, a := range ips[i] {
				if a.Is4() {
					n.v4 = append(n.v4, a)
				} else {
					n.v6 = append(n.v6, a)
				}
			}
			ns = append(ns, n)
		}
		if lsp.Type == "virtual" {
			// A virtual port's MAC is learned when a parent claims it.
			if vip, err := netip.ParseAddr(lsp.Options["virtual-ip"]); err == nil && vip.Is4() {
				ns = []neighbor{{mac: "00:00:00:00:00:00", v4: []netip.Addr{vip}}}
			}
		}
	default:
		return
	}
	linkLocal := netip.MustParsePrefix("fe80::/64")
	for _, r := range routers {
		if r.port.nb.Name == self || (lsp.Type == "router" && r.dynamicNeigh) {
			continue
		}
		dp := g.Datapath(r.router)
		out := fmt.Sprintf("outport == %q", r.port.nb.Name)
		// A port's own address is resolved on the router port whose
		// networks (its link-local one included) hold it.
		onLink := func(a netip.Addr) bool {
			if a.Is6() && linkLocal.Contains(a) {
				return true
			}
			for _, n := range r.port.nets {
				if n.Contains(a) {
					return true
				}
			}
			return false
		}
		for _, n := range ns {
			for _, a := range n.v4 {
				if n.set || onLink(a) {
					g.FlowHint(dp, LRInARPResolve, 100, fmt.Sprintf("%s && reg0 == %s", out, a), fmt.Sprintf("eth.dst = %s; next;", n.mac), lsp.UUID)
				}
			}
			if n.set && len(n.v6) > 0 {
				g.FlowHint(dp, LRInARPResolve, 100, fmt.Sprintf("%s && xxreg0 == %s", out, addrSet(n.v6, false)), fmt.Sprintf("eth.dst = %s; next;", n.mac), lsp.UUID)
				continue
			}
			for _, a := range n.v6 {
				if onLink(a) {
					g.FlowHint(dp, LRInARPResolve, 100, fmt.Sprintf("%s && xxreg0 == %s", out, a), fmt.Sprintf("eth.dst = %s; next;", n.mac), lsp.UUID)
				}
			}
		}
	}
}
