package difftrace

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Packet is one microflow to trace: ovn-trace's DATAPATH and MICROFLOW
// arguments, and the conntrack states (--ct flags) to trace it with.
type Packet struct {
	Name     string   // what the packet is for, unique within a battery
	Datapath string   // the logical switch it enters
	Flow     string   // the microflow expression
	CT       []string // one trace per entry, e.g. "new", "est", "est,rpl"
}

// Conntrack states the battery traces with. ovn-trace has no connection
// tracker: each ct_next, ct_lb and ct_nat reports the state given with --ct.
const (
	ctFresh = "new est"              // IP traffic: a new and an established connection
	ctOnce  = "new"                  // ARP, ND, DHCP, IGMP: conntrack plays no part
	ctReply = "est,rpl est,rpl,dnat" // replies of load-balanced connections
)

// Well-known addresses of the battery.
const (
	macBroadcast = "ff:ff:ff:ff:ff:ff"
	macUnknown   = "00:00:5e:00:53:99" // a MAC no port has (documentation range)
	macWrong     = "00:00:5e:00:53:66" // a source MAC that port security must refuse
)

var (
	ipWrong4     = netip.MustParseAddr("192.0.2.66")   // a source address port security must refuse
	ipWrong6     = netip.MustParseAddr("2001:db8::66") // ditto, IPv6
	ipNowhere4   = netip.MustParseAddr("198.51.100.9") // a destination no route may cover
	ipNowhere6   = netip.MustParseAddr("2001:db8:ffff::9")
	ipDNS4       = netip.MustParseAddr("8.8.8.8")
	ipDNS6       = netip.MustParseAddr("2001:4860:4860::8888")
	mcastGroup4  = netip.MustParseAddr("239.1.1.1")
	mcastLocal4  = netip.MustParseAddr("224.0.0.251")
	mcastGroup6  = netip.MustParseAddr("ff0e::1:1")
	mcastLocal6  = netip.MustParseAddr("ff02::fb")
	mldReports6  = netip.MustParseAddr("ff02::16")
	allRouters6  = netip.MustParseAddr("ff02::2")
	dhcp6Servers = netip.MustParseAddr("ff02::1:2")
)

// battery collects packets, skipping duplicates (by name).
type battery struct {
	pkts  []Packet
	names map[string]bool
}

func (b *battery) add(name, dp, flow string, ct string) {
	if b.names[name] {
		return
	}
	b.names[name] = true
	b.pkts = append(b.pkts, Packet{Name: name, Datapath: dp, Flow: flow, CT: strings.Fields(ct)})
}

// source is a port that packets enter from, with the addresses it sends
// with: its own, or made up in its switch's subnets when it has none (a
// localnet port or a port with only "unknown").
type source struct {
	port *lport
	ep   endpoint
}

// Generate builds the packet battery for a Northbound: from every switch
// port that can send (VIF, localport, localnet, external, virtual) to
// every address the Northbound mentions, with the protocols and port
// numbers its ACLs and load balancers name. The result depends only on the
// Northbound's contents.
func generate(t *topology) []Packet {
	b := &battery{names: map[string]bool{}}
	routedDone := map[*lswitch]bool{} // the first source of a switch sends more
	for _, sw := range t.switches {
		for i, p := range sw.ports {
			switch p.typ {
			case "", "localport", "localnet", "external", "virtual", "l2gateway":
			default:
				continue
			}
			s := source{port: p, ep: sourceEndpoint(p, i)}
			genLocal(b, t, s)
			genRouted(b, t, s, !routedDone[sw])
			routedDone[sw] = true
		}
	}
	return b.pkts
}

// sourceEndpoint is the port's first address, or one made up from the
// switch's first subnets (host 180+i).
func sourceEndpoint(p *lport, i int) endpoint {
	for _, ep := range p.addrs {
		if len(ep.ip4)+len(ep.ip6) > 0 {
			return ep
		}
	}
	ep := endpoint{mac: fmt.Sprintf("02:00:5e:00:%02x:%02x", i/256, i%256)}
	if len(p.addrs) > 0 {
		ep.mac = p.addrs[0].mac
	}
	for _, pfx := range p.sw.prefixes {
		if pfx.Addr().Is4() && len(ep.ip4) == 0 {
			ep.ip4 = append(ep.ip4, nthHost(pfx, 180+i))
		} else if pfx.Addr().Is6() && len(ep.ip6) == 0 {
			ep.ip6 = append(ep.ip6, nthHost(pfx, 180+i))
		}
	}
	return ep
}

// nthHost is the n-th address of a prefix.
func nthHost(p netip.Prefix, n int) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := len(b) - 1; i >= 0 && n > 0; i-- {
		v := int(b[i]) + n
		b[i] = byte(v)
		n = v >> 8
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// flow builds a microflow expression from its terms.
func flow(terms ...string) string { return strings.Join(terms, " && ") }

func eth(in, src, dst string) string {
	return fmt.Sprintf("inport == %q && eth.src == %s && eth.dst == %s", in, src, dst)
}

func ipHdr(src, dst netip.Addr, ttl int) string {
	if src.Is4() {
		return fmt.Sprintf("ip4 && ip4.src == %s && ip4.dst == %s && ip.ttl == %d", src, dst, ttl)
	}
	return fmt.Sprintf("ip6 && ip6.src == %s && ip6.dst == %s && ip.ttl == %d", src, dst, ttl)
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "4"
	}
	return "6"
}

// l4 is a transport header: "tcp", "udp", "sctp" with ports, or "icmp"
// (an echo request).
func l4(proto string, v6 bool, sport, dport int) string {
	switch proto {
	case "icmp":
		if v6 {
			return "icmp6 && icmp6.type == 128 && icmp6.code == 0"
		}
		return "icmp4 && icmp4.type == 8 && icmp4.code == 0"
	default:
		return fmt.Sprintf("%s && %s.src == %d && %s.dst == %d", proto, proto, sport, proto, dport)
	}
}

// sameFamily pairs each address of src's family with dst.
func pick(ep endpoint, like netip.Addr) (netip.Addr, bool) {
	if like.Is4() && len(ep.ip4) > 0 {
		return ep.ip4[0], true
	}
	if like.Is6() && len(ep.ip6) > 0 {
		return ep.ip6[0], true
	}
	return netip.Addr{}, false
}

// unicast adds TCP, UDP and ICMP from s to ip at MAC dstMAC.
func unicast(b *battery, s source, what, dstMAC string, ip netip.Addr, ttl int, ct string) {
	src, ok := pick(s.ep, ip)
	if !ok {
		return
	}
	for _, proto := range []string{"tcp", "udp", "icmp"} {
		b.add(fmt.Sprintf("%s %s %s%s ttl%d", s.port.name, what, proto, family(ip), ttl), s.port.sw.name,
			flow(eth(s.port.name, s.ep.mac, dstMAC), ipHdr(src, ip, ttl), l4(proto, ip.Is6(), 33000, 80)), ct)
	}
}

// genLocal adds the packets that stay on the source's switch (or are
// answered on it): unicast to every other port, ARP and ND for every
// address, broadcast, multicast, DHCP, DNS, port-security violations, ACL
// hits and load-balancer VIPs.
func genLocal(b *battery, t *topology, s source) {
	sw, in := s.port.sw, s.port.name
	gw := gatewayMAC(sw)
	// Unicast to each other port's addresses.
	for _, d := range sw.ports {
		if d == s.port {
			continue
		}
		for _, ep := range d.addrs {
			for _, ip := range append(slices.Clone(ep.ip4), ep.ip6...) {
				unicast(b, s, "to "+d.name+" "+ip.String(), ep.mac, ip, 64, ctFresh)
			}
			if len(ep.ip4)+len(ep.ip6) == 0 {
				unicast(b, s, "to "+d.name+" l2", ep.mac, hostIn(sw, true, 77), 64, ctFresh)
			}
		}
	}
	// Unknown MAC, broadcast and multicast.
	for _, v6 := range []bool{false, true} {
		dst := hostIn(sw, v6, 250)
		if dst.IsValid() {
			unicast(b, s, "to unknown mac", macUnknown, dst, 64, ctFresh)
		}
	}
	if src, ok := pick(s.ep, ipDNS4); ok {
		b.add(in+" udp4 broadcast", sw.name, flow(eth(in, s.ep.mac, macBroadcast), ipHdr(src, netip.MustParseAddr("255.255.255.255"), 64), l4("udp", false, 33000, 9)), ctFresh)
		for _, g := range []netip.Addr{mcastGroup4, mcastLocal4} {
			b.add(in+" udp4 multicast "+g.String(), sw.name, flow(eth(in, s.ep.mac, mcastMAC(g)), ipHdr(src, g, 1), l4("udp", false, 33000, 5353)), ctFresh)
		}
		b.add(in+" igmp report", sw.name, flow(eth(in, s.ep.mac, mcastMAC(mcastGroup4)), ipHdr(src, mcastGroup4, 1), "ip.proto == 2"), ctOnce)
		b.add(in+" igmp query", sw.name, flow(eth(in, s.ep.mac, "01:00:5e:00:00:01"), ipHdr(src, netip.MustParseAddr("224.0.0.1"), 1), "ip.proto == 2"), ctOnce)
	}
	if len(s.ep.ip6) > 0 {
		lla := linkLocal(s.ep.mac)
		for _, g := range []netip.Addr{mcastGroup6, mcastLocal6} {
			b.add(in+" udp6 multicast "+g.String(), sw.name, flow(eth(in, s.ep.mac, mcastMAC(g)), ipHdr(s.ep.ip6[0], g, 1), l4("udp", true, 33000, 5353)), ctFresh)
		}
		for _, mld := range []int{131, 132, 143} { // MLDv1 report, done, MLDv2 report
			b.add(fmt.Sprintf("%s mld type %d", in, mld), sw.name,
				flow(eth(in, s.ep.mac, mcastMAC(mldReports6)), ipHdr(lla, mldReports6, 1), fmt.Sprintf("icmp6 && icmp6.type == %d && icmp6.code == 0", mld)), ctOnce)
		}
		b.add(in+" ping6 all-nodes", sw.name, flow(eth(in, s.ep.mac, "33:33:00:00:00:01"), ipHdr(lla, netip.MustParseAddr("ff02::1"), 1), l4("icmp", true, 0, 0)), ctOnce)
		b.add(in+" router solicitation", sw.name, flow(eth(in, s.ep.mac, mcastMAC(allRouters6)), ipHdr(lla, allRouters6, 255), "icmp6 && icmp6.type == 133 && icmp6.code == 0"), ctOnce)
	}
	// ARP and ND for every address the Northbound mentions.
	for _, ip := range targets(t, sw) {
		if ip.Is4() {
			if src, ok := pick(s.ep, ip); ok {
				b.add(in+" arp who-has "+ip.String(), sw.name, arpRequest(in, s.ep.mac, s.ep.mac, src, ip), ctOnce)
			}
		} else if src, ok := pick(s.ep, ip); ok {
			b.add(in+" nd ns "+ip.String(), sw.name, neighborSolicit(in, s.ep.mac, src, ip), ctOnce)
		}
	}
	if src, ok := pick(s.ep, ipDNS4); ok {
		b.add(in+" gratuitous arp", sw.name, arpRequest(in, s.ep.mac, s.ep.mac, src, src), ctOnce)
	}
	// DHCP and DNS.
	b.add(in+" dhcpv4 discover", sw.name, flow(eth(in, s.ep.mac, macBroadcast),
		ipHdr(netip.IPv4Unspecified(), netip.MustParseAddr("255.255.255.255"), 64), l4("udp", false, 68, 67)), ctOnce)
	if src, ok := pick(s.ep, ipDNS4); ok && s.port.dhcp4 {
		b.add(in+" dhcpv4 request unicast", sw.name, flow(eth(in, s.ep.mac, gwOr(gw, macBroadcast)),
			ipHdr(src, netip.MustParseAddr("255.255.255.255"), 64), l4("udp", false, 68, 67)), ctOnce)
	}
	b.add(in+" dhcpv6 solicit", sw.name, flow(eth(in, s.ep.mac, mcastMAC(dhcp6Servers)),
		ipHdr(linkLocal(s.ep.mac), dhcp6Servers, 1), l4("udp", true, 546, 547)), ctOnce)
	if sw.dns {
		for _, srv := range []netip.Addr{ipDNS4, ipDNS6} {
			if src, ok := pick(s.ep, srv); ok {
				b.add(in+" dns query "+srv.String(), sw.name, flow(eth(in, s.ep.mac, gwOr(gw, macUnknown)), ipHdr(src, srv, 64), l4("udp", srv.Is6(), 33000, 53)), ctFresh)
			}
		}
	}
	// Port security: a wrong source MAC, IPv4 and IPv6 address, ARP.
	if d, ip, ok := firstPeer(s); ok {
		dmac := macOf(d, ip)
		src, _ := pick(s.ep, ip)
		b.add(in+" ps wrong eth.src", sw.name, flow(eth(in, macWrong, dmac), ipHdr(src, ip, 64), l4("udp", ip.Is6(), 33000, 80)), ctFresh)
		wrong := ipWrong4
		if ip.Is6() {
			wrong = ipWrong6
		}
		b.add(in+" ps wrong ip.src", sw.name, flow(eth(in, s.ep.mac, dmac), ipHdr(wrong, ip, 64), l4("udp", ip.Is6(), 33000, 80)), ctFresh)
		if src4, ok := pick(s.ep, ipDNS4); ok {
			b.add(in+" ps wrong arp.sha", sw.name, arpRequest(in, s.ep.mac, macWrong, src4, hostIn(sw, false, 250)), ctOnce)
			b.add(in+" ps wrong arp.spa", sw.name, arpRequest(in, s.ep.mac, s.ep.mac, ipWrong4, hostIn(sw, false, 250)), ctOnce)
		}
		if len(s.ep.ip6) > 0 {
			b.add(in+" ps wrong nd.sll", sw.name, strings.Replace(neighborSolicit(in, s.ep.mac, s.ep.ip6[0], hostIn(sw, true, 250)), "nd.sll == "+s.ep.mac, "nd.sll == "+macWrong, 1), ctOnce)
		}
	}
	// Egress port security: the right MAC of a secured port, a wrong IP.
	for _, d := range sw.ports {
		if d == s.port || !d.secured || len(d.addrs) == 0 {
			continue
		}
		for _, like := range []netip.Addr{ipDNS4, ipDNS6} {
			if src, ok := pick(s.ep, like); ok {
				wrong := hostIn(sw, like.Is6(), 77)
				if wrong.IsValid() {
					b.add(fmt.Sprintf("%s egress ps %s wrong ip%s", in, d.name, family(like)), sw.name,
						flow(eth(in, s.ep.mac, d.addrs[0].mac), ipHdr(src, wrong, 64), l4("udp", like.Is6(), 33000, 80)), ctFresh)
				}
			}
		}
	}
	// ACL hits: every protocol and port, and every address, ACL matches name.
	hits := aclHits(t, sw)
	for _, d := range sw.ports {
		if d == s.port || len(d.addrs) == 0 || d.typ == "router" {
			continue
		}
		for _, h := range hits.l4 {
			for _, ip := range append(slices.Clone(d.addrs[0].ip4), d.addrs[0].ip6...) {
				if h.v6only && ip.Is4() || !h.v6 && ip.Is6() {
					continue
				}
				if src, ok := pick(s.ep, ip); ok {
					b.add(fmt.Sprintf("%s acl %s.dst=%d to %s %s", in, h.proto, h.port, d.name, ip), sw.name,
						flow(eth(in, s.ep.mac, d.addrs[0].mac), ipHdr(src, ip, 64), l4(h.proto, ip.Is6(), 33000, h.port)), ctFresh)
				}
			}
		}
	}
	for _, ip := range hits.ips {
		if _, ok := pick(s.ep, ip); ok {
			unicast(b, s, "acl addr "+ip.String(), gwOr(gw, macUnknown), ip, 64, ctFresh)
		}
	}
	// Load balancers of the switch: each VIP with its protocol and port,
	// a port the VIP does not serve, and replies from the backends that
	// are ports of this switch.
	for _, lb := range sw.lbs {
		genVIPs(b, s, lb.Name, lbProto(lb.Protocol), lb.VIPs, gwOr(gw, macUnknown))
		for vip, backends := range sortedMap(lb.VIPs) {
			_ = vip
			for _, be := range strings.Split(backends, ",") {
				ip, port, ok := splitHostPort(be)
				if !ok || !s.ep.has(ip) {
					continue
				}
				// s is this backend: reply to every other port of the switch.
				for _, d := range sw.ports {
					if d == s.port || len(d.addrs) == 0 || d.typ == "router" {
						continue
					}
					if dip, ok := pick(d.addrs[0], ip); ok {
						if port == 0 {
							port = 80
						}
						b.add(fmt.Sprintf("%s lb %s reply %s:%d to %s", in, lb.Name, ip, port, d.name), sw.name,
							flow(eth(in, s.ep.mac, d.addrs[0].mac), ipHdr(ip, dip, 64), l4(lbProto(lb.Protocol), ip.Is6(), port, 33000)), ctReply)
					}
				}
			}
		}
	}
}

// genVIPs adds traffic from s to each VIP (hairpin when s is a backend),
// and to a port next to the VIP's.
func genVIPs(b *battery, s source, lbName, proto string, vips map[string]string, dmac string) {
	for vip := range sortedMap(vips) {
		ip, port, ok := splitHostPort(vip)
		if !ok {
			continue
		}
		src, ok := pick(s.ep, ip)
		if !ok {
			continue
		}
		ports := []int{port, port + 1}
		if port == 0 {
			ports = []int{80}
			b.add(fmt.Sprintf("%s lb %s vip %s icmp", s.port.name, lbName, ip), s.port.sw.name,
				flow(eth(s.port.name, s.ep.mac, dmac), ipHdr(src, ip, 64), l4("icmp", ip.Is6(), 0, 0)), ctFresh)
		}
		for _, p := range ports {
			b.add(fmt.Sprintf("%s lb %s vip %s %s.dst=%d", s.port.name, lbName, ip, proto, p), s.port.sw.name,
				flow(eth(s.port.name, s.ep.mac, dmac), ipHdr(src, ip, 64), l4(proto, ip.Is6(), 33000, p)), ctFresh)
		}
	}
}

// genRouted adds the packets that leave the source's switch through a
// router port on it: to every address elsewhere in the Northbound (other
// switches' ports, router ports, NAT addresses, VIPs of routers, static
// route and policy destinations, an address nothing routes), with TTL 64
// and TTL 1.
func genRouted(b *battery, t *topology, s source, first bool) {
	for _, gp := range s.port.sw.ports {
		if gp.rp == nil {
			continue
		}
		rp := gp.rp
		what := "via " + rp.name + " "
		// The router's own addresses: ping from every source, TCP and UDP
		// (reset and port unreachable) from the first.
		for _, p := range rp.router.ports {
			for _, n := range p.nets {
				if first {
					unicast(b, s, what+"router ip "+n.Addr().String(), rp.mac, n.Addr(), 64, ctFresh)
				} else if src, ok := pick(s.ep, n.Addr()); ok {
					b.add(fmt.Sprintf("%s %srouter ip %s ping", s.port.name, what, n.Addr()), s.port.sw.name,
						flow(eth(s.port.name, s.ep.mac, rp.mac), ipHdr(src, n.Addr(), 64), l4("icmp", n.Addr().Is6(), 0, 0)), ctFresh)
				}
			}
		}
		// Everything beyond: one protocol per destination, in turn, and
		// TTL 1 from the first source.
		for k, dst := range routedTargets(t, s.port.sw) {
			src, ok := pick(s.ep, dst)
			if !ok {
				continue
			}
			proto := []string{"tcp", "udp", "icmp"}[k%3]
			b.add(fmt.Sprintf("%s %sto %s %s", s.port.name, what, dst, proto), s.port.sw.name,
				flow(eth(s.port.name, s.ep.mac, rp.mac), ipHdr(src, dst, 64), l4(proto, dst.Is6(), 33000, 80)), ctFresh)
			if first {
				b.add(fmt.Sprintf("%s %sto %s ttl1", s.port.name, what, dst), s.port.sw.name,
					flow(eth(s.port.name, s.ep.mac, rp.mac), ipHdr(src, dst, 1), l4("icmp", dst.Is6(), 0, 0)), ctOnce)
			}
		}
		for _, lb := range rp.router.lbs {
			genVIPs(b, s, lb.Name, lbProto(lb.Protocol), lb.VIPs, rp.mac)
		}
		// NAT addresses with the external MAC of distributed NAT too.
		for _, n := range rp.router.nats {
			if n.ExternalMAC == nil {
				continue
			}
			if ip, err := netip.ParseAddr(n.ExternalIP); err == nil {
				unicast(b, s, what+"nat mac "+*n.ExternalMAC, *n.ExternalMAC, ip, 64, ctFresh)
			}
		}
	}
}

// targets are the addresses ARP and ND ask for on a switch: every port's,
// every router port's and NAT address in the Northbound, the switch's
// VIPs and a free address of the switch.
func targets(t *topology, sw *lswitch) []netip.Addr {
	var out []netip.Addr
	add := func(a netip.Addr) {
		if a.IsValid() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, p := range sw.ports {
		for _, ep := range p.addrs {
			for _, ip := range append(slices.Clone(ep.ip4), ep.ip6...) {
				add(ip)
			}
		}
		if p.rp != nil {
			for _, n := range p.rp.router.nats {
				if ip, err := netip.ParseAddr(n.ExternalIP); err == nil {
					add(ip)
				}
			}
			for _, lb := range p.rp.router.lbs {
				for vip := range sortedMap(lb.VIPs) {
					if ip, _, ok := splitHostPort(vip); ok {
						add(ip)
					}
				}
			}
		}
	}
	for _, lb := range sw.lbs {
		for vip := range sortedMap(lb.VIPs) {
			if ip, _, ok := splitHostPort(vip); ok {
				add(ip)
			}
		}
	}
	add(hostIn(sw, false, 250))
	add(hostIn(sw, true, 250))
	return out
}

// routedTargets are the destinations beyond a switch: the addresses of
// ports on other switches, router port networks' free hosts, NAT external
// and logical addresses, static route prefixes and next hops, addresses
// in routing policies, and addresses nothing routes.
func routedTargets(t *topology, from *lswitch) []netip.Addr {
	var out []netip.Addr
	add := func(a netip.Addr) {
		if a.IsValid() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, sw := range t.switches {
		if sw == from {
			continue
		}
		for _, p := range sw.ports {
			if p.typ == "router" {
				continue
			}
			for _, ep := range p.addrs {
				for _, ip := range append(slices.Clone(ep.ip4), ep.ip6...) {
					add(ip)
				}
			}
		}
		add(hostIn(sw, false, 250))
		add(hostIn(sw, true, 250))
	}
	for _, r := range t.routers {
		for _, n := range r.nats {
			if ip, err := netip.ParseAddr(n.ExternalIP); err == nil {
				add(ip)
			}
		}
		for _, s := range r.routes {
			if p, err := netip.ParsePrefix(s.IPPrefix); err == nil {
				add(nthHost(p, 5))
			}
			if ip, err := netip.ParseAddr(s.Nexthop); err == nil {
				add(ip)
			}
		}
		for _, p := range r.policies {
			for _, ip := range addressesIn(p.Match) {
				add(ip)
			}
			for _, nh := range p.Nexthops {
				if ip, err := netip.ParseAddr(nh); err == nil {
					add(ip)
				}
			}
		}
	}
	add(ipNowhere4)
	add(ipNowhere6)
	return out
}

var (
	ipLiteral = regexp.MustCompile(`\b(\d+\.\d+\.\d+\.\d+(/\d+)?|[0-9a-fA-F]*:[0-9a-fA-F:]*:[0-9a-fA-F]*(/\d+)?)`)
	l4Term    = regexp.MustCompile(`\b(tcp|udp|sctp)\.dst\s*(==|>=|<=|!=|>|<)\s*(\{[^}]*\}|\d+)`)
)

// addressesIn are the IP addresses a match names: literals (a host inside
// each prefix).
func addressesIn(match string) []netip.Addr {
	var out []netip.Addr
	for _, m := range ipLiteral.FindAllString(match, -1) {
		if p, err := netip.ParsePrefix(m); err == nil {
			if p.Bits() == p.Addr().BitLen() {
				out = append(out, p.Addr())
			} else {
				out = append(out, nthHost(p, 5))
			}
		} else if a, err := netip.ParseAddr(m); err == nil {
			out = append(out, a)
		}
	}
	return out
}

type l4Hit struct {
	proto  string
	port   int
	v6     bool // also over IPv6
	v6only bool
}

type hits struct {
	l4  []l4Hit
	ips []netip.Addr
}

// aclHits are the transport ports ACL matches on a switch compare with
// (each value, and the values just outside each range), and the addresses
// they name, literally or through address sets.
func aclHits(t *topology, sw *lswitch) hits {
	var h hits
	addL4 := func(x l4Hit) {
		if x.port > 0 && x.port < 65536 && !slices.Contains(h.l4, x) {
			h.l4 = append(h.l4, x)
		}
	}
	for _, a := range sw.acls {
		v6 := strings.Contains(a.Match, "ip6") || !strings.Contains(a.Match, "ip4")
		v6only := strings.Contains(a.Match, "ip6") && !strings.Contains(a.Match, "ip4")
		for _, m := range l4Term.FindAllStringSubmatch(a.Match, -1) {
			var nums []int
			for _, f := range strings.FieldsFunc(m[3], func(r rune) bool { return r == '{' || r == '}' || r == ',' || r == ' ' }) {
				if n, err := strconv.Atoi(f); err == nil {
					nums = append(nums, n)
				}
			}
			for _, n := range nums {
				switch m[2] {
				case ">=", ">":
					addL4(l4Hit{m[1], n - 1, v6, v6only})
				case "<=", "<":
					addL4(l4Hit{m[1], n + 1, v6, v6only})
				}
				addL4(l4Hit{m[1], n, v6, v6only})
			}
		}
		for _, ip := range addressesIn(a.Match) {
			if !slices.Contains(h.ips, ip) {
				h.ips = append(h.ips, ip)
			}
		}
	}
	return h
}

// hostIn is the n-th host of the switch's first subnet of a family
// (invalid if it has none).
func hostIn(sw *lswitch, v6 bool, n int) netip.Addr {
	for _, p := range sw.prefixes {
		if p.Addr().Is6() == v6 {
			return nthHost(p, n)
		}
	}
	return netip.Addr{}
}

// gatewayMAC is the MAC of the switch's first router port ("" if none).
func gatewayMAC(sw *lswitch) string {
	for _, p := range sw.ports {
		if p.rp != nil {
			return p.rp.mac
		}
	}
	return ""
}

func gwOr(gw, def string) string {
	if gw != "" {
		return gw
	}
	return def
}

// firstPeer is the first other port on the source's switch with an
// address of the source's first family.
func firstPeer(s source) (*lport, netip.Addr, bool) {
	for _, d := range s.port.sw.ports {
		if d == s.port {
			continue
		}
		for _, ep := range d.addrs {
			for _, like := range []netip.Addr{ipDNS4, ipDNS6} {
				if _, ok := pick(s.ep, like); !ok {
					continue
				}
				if ip, ok := pick(ep, like); ok {
					return d, ip, true
				}
			}
		}
	}
	return nil, netip.Addr{}, false
}

func macOf(p *lport, ip netip.Addr) string {
	for _, ep := range p.addrs {
		if ep.has(ip) {
			return ep.mac
		}
	}
	return p.addrs[0].mac
}

func (ep endpoint) has(ip netip.Addr) bool {
	return slices.Contains(ep.ip4, ip) || slices.Contains(ep.ip6, ip)
}

func arpRequest(in, ethSrc, sha string, spa, tpa netip.Addr) string {
	return flow(eth(in, ethSrc, macBroadcast), fmt.Sprintf("arp.op == 1 && arp.sha == %s && arp.spa == %s && arp.tha == 00:00:00:00:00:00 && arp.tpa == %s", sha, spa, tpa))
}

func neighborSolicit(in, mac string, src, target netip.Addr) string {
	sn := solicitedNode(target)
	return flow(eth(in, mac, mcastMAC(sn)), ipHdr(src, sn, 255),
		fmt.Sprintf("icmp6 && icmp6.type == 135 && icmp6.code == 0 && nd.target == %s && nd.sll == %s", target, mac))
}

// solicitedNode is the solicited-node multicast address of a (RFC 4291).
func solicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 11: 0x01, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

// mcastMAC is the Ethernet multicast address of an IP multicast group.
func mcastMAC(g netip.Addr) string {
	b := g.AsSlice()
	if g.Is4() {
		return fmt.Sprintf("01:00:5e:%02x:%02x:%02x", b[1]&0x7f, b[2], b[3])
	}
	return fmt.Sprintf("33:33:%02x:%02x:%02x:%02x", b[12], b[13], b[14], b[15])
}

// linkLocal is the EUI-64 link-local address of a MAC.
func linkLocal(mac string) netip.Addr {
	var m [6]byte
	fmt.Sscanf(mac, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5])
	return netip.AddrFrom16([16]byte{0xfe, 0x80, 8: m[0] ^ 2, 9: m[1], 10: m[2], 11: 0xff, 12: 0xfe, 13: m[3], 14: m[4], 15: m[5]})
}

// splitHostPort parses a load balancer VIP or backend: "IP", "IP:PORT"
// or "[IPv6]:PORT".
func splitHostPort(s string) (netip.Addr, int, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), int(ap.Port()), true
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return a, 0, err == nil
}

func lbProto(p *string) string {
	if p == nil || *p == "" {
		return "tcp"
	}
	return *p
}

// sortedMap iterates a map in key order.
func sortedMap(m map[string]string) func(func(string, string) bool) {
	return func(yield func(string, string) bool) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}
