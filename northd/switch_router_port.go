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

// routerPeer is what a switch's router-type port needs to know of the
// router port it connects to (options:router-port) and of its router.
type routerPeer struct {
	lrp nb.LogicalRouterPort
	// addr is the router port's MAC with its networks' addresses and its
	// IPv6 link-local address, as a "router" address stands for.
	addr lspAddress
	// prefixes are the router port's networks.
	prefixes []netip.Prefix
	// gateway says the router port is a distributed gateway port: its
	// traffic goes through the chassisredirect port cr-NAME.
	gateway bool
	// nats are the router's NAT rules.
	nats []nb.NAT
	// chassis is the router's options:chassis: a gateway router's.
	chassis string
	// redirect is the chassisredirect port of the router's distributed
	// gateway port when this port has options:reside-on-redirect-chassis.
	redirect string
	// lbVIPs are the IPv4 VIPs of the router's load balancers; lbIPs
	// all their VIPs.
	lbVIPs []string
	lbIPs  []netip.Addr
}

// readRouterPeer reads the router port named name, its router and the
// router's NAT rules; nil when there is no such port.
func readRouterPeer(g *gen, name string) *routerPeer {
	if name == "" {
		return nil
	}
	ids := g.ByName(NB, nb.LogicalRouterPortTable, name)
	if len(ids) == 0 {
		return nil
	}
	lrp, ok := Read[nb.LogicalRouterPort](g, NB, ids[0])
	if !ok {
		return nil
	}
	mac, ok := normalizeMAC(lrp.MAC)
	if !ok {
		g.Warn("bad MAC on logical router port", "port", lrp.Name, "mac", lrp.MAC)
		return nil
	}
	p := &routerPeer{lrp: lrp, addr: lspAddress{mac: mac}}
	p.gateway = len(lrp.GatewayChassis) > 0 || lrp.HAChassisGroup != nil || lrp.Options["redirect-chassis"] != ""
	for _, n := range lrp.Networks {
		pfx, err := netip.ParsePrefix(n)
		if err != nil {
			g.Warn("bad network on logical router port", "port", lrp.Name, "network", n)
			continue
		}
		p.prefixes = append(p.prefixes, pfx)
		if pfx.Addr().Is4() {
			p.addr.ip4 = append(p.addr.ip4, pfx.Addr())
		} else {
			p.addr.ip6 = append(p.addr.ip6, pfx.Addr())
		}
	}
	hw := macBytes(mac)
	p.addr.ip6 = append(p.addr.ip6, linkLocal(net.HardwareAddr(hw[:])))
	for _, id := range g.Referrers(NB, nb.LogicalRouterTable, "ports", lrp.UUID) {
		lr, ok := Read[nb.LogicalRouter](g, NB, id)
		if !ok {
			continue
		}
		p.chassis = lr.Options["chassis"]
		if lrp.Options["reside-on-redirect-chassis"] == "true" && !p.gateway {
			for _, other := range ReadAll[nb.LogicalRouterPort](g, NB, g.Members(NB, nb.LogicalRouterTable, id, "ports")) {
				if len(other.GatewayChassis) > 0 || other.HAChassisGroup != nil || other.Options["redirect-chassis"] != "" {
					p.redirect = "cr-" + other.Name
					break
				}
			}
		}
		p.nats = ReadAll[nb.NAT](g, NB, g.Members(NB, nb.LogicalRouterTable, id, "nat"))
		ips := routerLBIPs(g, id)
		p.lbVIPs, p.lbIPs = ips.vips, ips.ips
		break
	}
	return p
}

// lbIPs are a router's load balancer IPs: the IPv4 VIPs as written (vips)
// and every VIP's address (ips), each sorted and once. A memo shares them
// (read-only) between the router's peers.
type lbIPs struct {
	vips []string
	ips  []netip.Addr
}

// routerLBIPs returns the load balancer IPs of router lr.
func routerLBIPs(g *gen, lr ovsdb.UUID) lbIPs {
	return g.Memo("router-lb-ips/"+lr.String(), func(g *gen) any {
		lbs := g.Members(NB, nb.LogicalRouterTable, lr, "load_balancer")
		grps := g.Members(NB, nb.LogicalRouterTable, lr, "load_balancer_group")
		if len(lbs) == 0 && len(grps) == 1 {
			// The group's, parsed once for all its routers rather
			// than once a router (ovn-kubernetes: every service on
			// every node's gateway router).
			return lbGroupIPs(g, grps[0])
		}
		return lbIPsOf(datapathLBFacts(g, nb.LogicalRouterTable, lr))
	}).(lbIPs)
}

// lbGroupIPs returns the lbIPs of a load balancer group's members (a memo).
func lbGroupIPs(g *gen, grp ovsdb.UUID) lbIPs {
	return g.Memo("lbgroup-lb-ips/"+grp.String(), func(g *gen) any {
		return lbIPsOf(lbGroupFactsOf(g, grp))
	}).(lbIPs)
}

// lbIPsOf returns the lbIPs of the VIPs of lb.
func lbIPsOf(lb lbFacts) lbIPs {
	var out lbIPs
	for _, vip := range lb.vipKeys {
		ip := vip
		if ap, err := netip.ParseAddrPort(vip); err == nil {
			ip = ap.Addr().String()
		}
		a, err := netip.ParseAddr(strings.Trim(ip, "[]"))
		if err != nil {
			continue
		}
		out.ips = append(out.ips, a)
		if a.Is4() {
			out.vips = append(out.vips, ip)
		}
	}
	// Sorted and without duplicates (a router has hundreds of VIPs:
	// no search of the list for each).
	slices.Sort(out.vips)
	out.vips = slices.Compact(out.vips)
	slices.SortFunc(out.ips, netip.Addr.Compare)
	out.ips = slices.Compact(out.ips)
	return out
}

// distributed says whether a NAT rule is handled on the chassis of its
// logical port (dnat_and_snat with external_mac and logical_port).
func natDistributed(n *nb.NAT) bool {
	return n.Type == "dnat_and_snat" && n.ExternalMAC != nil && n.LogicalPort != nil
}

// reachable says whether ip is in one of the router port's networks.
func (p *routerPeer) reachable(ip netip.Addr) bool {
	for _, pfx := range p.prefixes {
		if pfx.Contains(ip) {
			return true
		}
	}
	return false
}

// routerPortL2 writes the destination lookup flows of a router-type port.
func routerPortL2(g *gen, p *switchPortInfo, flow func(Stage, int, string, string)) {
	lsp, peer := p.lsp, p.peer
	out := fmt.Sprintf("outport = %q; output;", lsp.Name)
	cr := fmt.Sprintf("is_chassis_resident(%q)", "cr-"+peer.lrp.Name)
	kinds := portKindsOf(g, p.sw.nb.UUID)
	// Only on a switch with a localnet port does the gateway's MAC belong
	// to the chassis that has the gateway.
	resident := peer.gateway && peer.chassis == "" && kinds.hasLocalnet
	for _, e := range lsp.Addresses {
		if strings.TrimSpace(e) == "router" {
			m := "eth.dst == " + peer.addr.mac
			if resident {
				m += " && " + cr
			}
			flow(LSInL2Lkup, 50, m, out)
			continue
		}
		if a, ok := parseLSPAddress(e); ok {
			flow(LSInL2Lkup, 50, "eth.dst == "+a.mac, out)
		}
	}
	if resident {
		for i := range peer.nats {
			n := &peer.nats[i]
			if natDistributed(n) {
				if mac, ok := normalizeMAC(*n.ExternalMAC); ok {
					flow(LSInL2Lkup, 50, fmt.Sprintf("eth.dst == %s && is_chassis_resident(%q)", mac, *n.LogicalPort), out)
				}
			}
		}
	}

	// ARP and ND requests for the router's addresses go to the router
	// port (and, flooded, to the rest of the switch).
	// On a switch of router ports only, nothing else needs the flood.
	clone := fmt.Sprintf("clone {outport = %q; output; }; outport = \"_MC_flood_l2\"; output;", lsp.Name)
	if kinds.onlyRouters {
		clone = out
	}
	var ips []netip.Addr
	add := func(ip netip.Addr) {
		if !slices.Contains(ips, ip) {
			ips = append(ips, ip)
		}
	}
	for _, ip := range peer.addr.ip4 {
		add(ip)
	}
	for _, ip := range peer.addr.ip6 {
		add(ip)
	}
	macs := []string{peer.addr.mac}
	for i := range peer.nats {
		n := &peer.nats[i]
		ip, err := netip.ParseAddr(n.ExternalIP)
		if err != nil {
			continue
		}
		if n.Type != "snat" || peer.reachable(ip) {
			add(ip)
		}
		if n.Type == "dnat_and_snat" && n.ExternalMAC != nil {
			if mac, ok := normalizeMAC(*n.ExternalMAC); ok && !slices.Contains(macs, mac) {
				macs = append(macs, mac)
			}
		}
	}
	for _, ip := range peer.lbIPs {
		if peer.reachable(ip) {
			add(ip)
		}
	}
	for _, ip := range ips {
		if ip.Is4() {
			flow(LSInL2Lkup, 80, fmt.Sprintf("flags[1] == 0 && arp.op == 1 && arp.tpa == %s", ip), clone)
		} else {
			flow(LSInL2Lkup, 80, fmt.Sprintf("flags[1] == 0 && nd_ns && nd.target == %s", ip), clone)
		}
	}
	if kinds.onlyRouters {
		return
	}
	// ovn-northd lists these MACs in the order of its hash set; here the
	// router port's comes first.
	flow(LSInL2Lkup, 75, fmt.Sprintf("eth.src == {%s} && (arp.op == 1 || rarp.op == 3 || nd_ns)", strings.Join(macs, ", ")), `outport = "_MC_flood_l2"; output;`)
}

// natAddresses returns a router-type port's Port_Binding nat_addresses,
// the addresses the chassis that has the router's gateway announces with
// gratuitous ARPs: those options:nat-addresses gives ("router": its
// router's NAT and load balancer addresses), and the router port's own if
// it is a distributed gateway port or a gateway router's port on a switch
// with a localnet port.
func natAddresses(g *gen, p *switchPortInfo) []string {
	peer := p.peer
	if p.lsp.Type != lspRouter || peer == nil {
		return nil
	}
	resident := ""
	if peer.gateway {
		resident = fmt.Sprintf(" is_chassis_resident(%q)", "cr-"+peer.lrp.Name)
	}
	var out []string
	v, ok := p.lsp.Options["nat-addresses"]
	switch {
	case ok && v == "router":
		if peer.gateway || peer.chassis != "" {
			out = append(out, routerNATAddresses(peer, resident)...)
		}
	case ok:
		if _, valid := parseLSPAddress(strings.TrimSuffix(strings.TrimSpace(v), "")); valid {
			out = append(out, v)
		} else {
			g.Warn("bad nat-addresses on logical switch port", "port", p.lsp.Name, "value", v)
		}
	}
	if peer.redirect != "" {
		resident = fmt.Sprintf(" is_chassis_resident(%q)", peer.redirect)
	}
	if peer.gateway || peer.redirect != "" || (peer.chassis != "" && switchHasLocalnet(g, p.sw.nb.UUID)) {
		words := []string{peer.addr.mac}
		for _, ip := range peer.addr.ip4 {
			words = append(words, ip.String())
		}
		if len(words) > 1 {
			out = append(out, strings.Join(words, " ")+resident)
		}
	}
	return out
}

// routerNATAddresses is what nat-addresses=router stands for: the router
// port's MAC with the external IPs of its centralized NAT rules and its
// load balancers' VIPs, and one entry for each distributed NAT rule.
func routerNATAddresses(peer *routerPeer, resident string) []string {
	words := []string{peer.addr.mac}
	var out []string
	seen := map[string]bool{}
	for _, ip := range peer.addr.ip4 {
		seen[ip.String()] = true
	}
	for i := range peer.nats {
		n := &peer.nats[i]
		if peer.gateway && natDistributed(n) {
			if mac, ok := normalizeMAC(*n.ExternalMAC); ok {
				out = append(out, fmt.Sprintf("%s %s is_chassis_resident(%q)", mac, n.ExternalIP, *n.LogicalPort))
			}
			continue
		}
		if a, err := netip.ParseAddr(n.ExternalIP); err == nil && a.Is6() {
			// Gratuitous announcements are ARP: IPv4 only.
			continue
		}
		if !seen[n.ExternalIP] {
			seen[n.ExternalIP] = true
			words = append(words, n.ExternalIP)
		}
	}
	for _, vip := range peer.lbVIPs {
		if !seen[vip] {
			seen[vip] = true
			words = append(words, vip)
		}
	}
	if len(words) > 1 {
		out = append([]string{strings.Join(words, " ") + resident}, out...)
	}
	return out
}

// switchPortKinds is what a switch's router ports need to know of the
// switch's other ports.
type switchPortKinds struct {
	hasLocalnet bool // a localnet port
	onlyRouters bool // every port is a router port
}

// portKindsOf returns a switch's switchPortKinds, as a memo so that a port
// reading them is not regenerated by every port change on the switch.
func portKindsOf(g *gen, id ovsdb.UUID) switchPortKinds {
	return g.Memo("switch-port-kinds/"+id.String(), func(g *gen) any {
		k := switchPortKinds{onlyRouters: true}
		for _, port := range ReadAll[nb.LogicalSwitchPort](g, NB, g.Members(NB, nb.LogicalSwitchTable, id, "ports")) {
			k.hasLocalnet = k.hasLocalnet || port.Type == lspLocalnet
			k.onlyRouters = k.onlyRouters && port.Type == lspRouter
		}
		return k
	}).(switchPortKinds)
}
