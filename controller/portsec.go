package controller

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"

	"github.com/govn/govn/schema/sb"
)

// Port security (ovn-nb(5), Logical_Switch_Port port_security), as
// ovn-controller 23.03 programs it for the ports bound here: northd's
// flows ask check_in_port_sec() and check_out_port_sec(), which answer 1
// (drop) in flags bit 12.
//
// In (table 73, ARP and ND continuing in 74): a port with port security
// sends only from its MACs, and, when addresses follow the MAC, IPv4 only
// from them (or DHCP discovery from 0.0.0.0), ARP only with that MAC and
// those addresses as sender, IPv6 only from them or the MAC's link-local
// address (or the unspecified address to MLD and DAD), NA only for them.
// Out (table 75): unicast to the port only to its MACs and, with
// addresses, IP only to them, their subnet broadcast and multicast.

// portSecAddrs is one entry of port_security: a MAC and its addresses.
type portSecAddrs struct {
	mac  net.HardwareAddr
	ip4  []netip.Prefix // a /32 for an address, else the subnet
	ip6  []netip.Prefix
	host map[netip.Prefix]netip.Addr // addresses given with a prefix: ADDR/PLEN
}

// parsePortSec reads one port_security entry, "MAC [IP[/PLEN]]...".
func parsePortSec(s string) (portSecAddrs, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return portSecAddrs{}, fmt.Errorf("no MAC")
	}
	mac, err := net.ParseMAC(f[0])
	if err != nil || len(mac) != 6 {
		return portSecAddrs{}, fmt.Errorf("bad MAC %q", f[0])
	}
	ps := portSecAddrs{mac: mac, host: map[netip.Prefix]netip.Addr{}}
	for _, a := range f[1:] {
		var p netip.Prefix
		if strings.Contains(a, "/") {
			if p, err = netip.ParsePrefix(a); err != nil {
				return portSecAddrs{}, fmt.Errorf("bad address %q", a)
			}
		} else {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				return portSecAddrs{}, fmt.Errorf("bad address %q", a)
			}
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		if p.Addr() != p.Masked().Addr() {
			// Host bits set: this one address, in that subnet.
			addr := p.Addr()
			p = p.Masked()
			ps.host[p] = addr
		}
		if p.Addr().Is4() {
			ps.ip4 = append(ps.ip4, p)
		} else {
			ps.ip6 = append(ps.ip6, p)
		}
	}
	return ps, nil
}

// exact is the match value for a port security address: the address
// itself for a host or an address given with its prefix, else the subnet.
func (ps *portSecAddrs) exact(p netip.Prefix) string {
	if a, ok := ps.host[p]; ok {
		return a.String()
	}
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// lla is the IPv6 link-local address of a MAC (modified EUI-64).
func lla(mac net.HardwareAddr) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0xfe, 0x80
	b[8], b[9], b[10] = mac[0]^0x02, mac[1], mac[2]
	b[11], b[12] = 0xff, 0xfe
	b[13], b[14], b[15] = mac[3], mac[4], mac[5]
	return netip.AddrFrom16(b)
}

// broadcast is the last address of p.
func broadcast(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := ^uint32(0) >> p.Bits()
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// portSecurity writes tables 73-75 for the VIFs bound here.
func (tr *translation) portSecurity() {
	ports := make([]*sb.PortBinding, 0)
	for i := range tr.in.Ports {
		p := &tr.in.Ports[i]
		if len(p.PortSecurity) > 0 && isVIF(p) && tr.resident[p.LogicalPort] && tr.dps[p.Datapath] != nil {
			ports = append(ports, p)
		}
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].LogicalPort < ports[j].LogicalPort })
	for _, p := range ports {
		var all []portSecAddrs
		for _, s := range p.PortSecurity {
			ps, err := parsePortSec(s)
			if err != nil {
				tr.problem("port %s: port_security %q: %v", p.LogicalPort, s, err)
				continue
			}
			all = append(all, ps)
		}
		if len(all) > 0 {
			tr.portSecRules(p, all)
		}
	}
}

func (tr *translation) portSecRules(p *sb.PortBinding, all []portSecAddrs) {
	in, nd, out := lookupTable("check_in_port_sec"), lookupTable("check_in_port_sec")+1, lookupTable("check_out_port_sec")
	bit := lookupFlag("check_in_port_sec")
	deny, allow := fmt.Sprintf("load:1->reg10[%d]", bit), fmt.Sprintf("load:0->reg10[%d]", bit)
	toND := fmt.Sprintf("resubmit(,%d)", nd)
	inPort := fmt.Sprintf("metadata=%d,reg14=%d", tr.dps[p.Datapath].TunnelKey, p.TunnelKey)
	outPort := fmt.Sprintf("metadata=%d,reg15=%d", tr.dps[p.Datapath].TunnelKey, p.TunnelKey)
	seen := map[string]bool{}
	add := func(table uint8, prio int, match, acts string) {
		key := fmt.Sprintf("%d/%d/%s", table, prio, match)
		if seen[key] {
			return
		}
		seen[key] = true
		tr.rowRule("port "+p.LogicalPort+" port_security", "table=%d,priority=%d,%s actions=%s", table, prio, match, acts)
	}
	// Defaults: everything from the port is denied; ARP and ND are
	// judged in the next table, where ARP and NA are denied and NS is
	// allowed (as ovn-controller 23.03 does).
	add(in, 80, inPort, deny)
	add(in, 95, "arp,"+inPort, toND)
	add(nd, 80, "arp,"+inPort, deny)
	add(nd, 80, "icmp6,"+inPort+",nw_ttl=255,icmp_type=136", deny)
	add(nd, 80, "icmp6,"+inPort+",nw_ttl=255,icmp_type=135", allow)
	add(out, 80, outPort, deny)
	for _, ps := range all {
		mac := ps.mac.String()
		src := inPort + ",dl_src=" + mac
		if len(ps.ip4) == 0 && len(ps.ip6) == 0 {
			add(in, 90, src, toND)
			add(out, 85, outPort+",dl_dst="+mac, allow)
		}
		if len(ps.ip4) > 0 {
			for _, p4 := range ps.ip4 {
				add(in, 90, "ip,"+src+",nw_src="+ps.exact(p4), allow)
			}
			add(in, 90, "udp,"+src+",nw_src=0.0.0.0,nw_dst=255.255.255.255,tp_src=68,tp_dst=67", allow)
		}
		// ARP: unless only IPv6 addresses are given.
		if len(ps.ip4) > 0 || len(ps.ip6) == 0 {
			if len(ps.ip4) == 0 {
				add(nd, 90, "arp,"+src+",arp_sha="+mac, allow)
			}
			for _, p4 := range ps.ip4 {
				add(nd, 90, "arp,"+src+",arp_sha="+mac+",arp_spa="+ps.exact(p4), allow)
			}
		}
		if len(ps.ip6) > 0 {
			for _, p6 := range ps.ip6 {
				add(in, 90, "ipv6,"+src+",ipv6_src="+ps.exact(p6), toND)
			}
			add(in, 90, "ipv6,"+src+",ipv6_src="+lla(ps.mac).String(), toND)
			unspec := "icmp6," + src + ",ipv6_src=::,ipv6_dst=ff02::/16"
			add(in, 90, unspec+",icmp_type=131,icmp_code=0", allow)
			add(in, 90, unspec+",icmp_type=143,icmp_code=0", allow)
			add(in, 90, unspec+",icmp_type=135,icmp_code=0", toND)
		}
		// ND: NS with no or this source link-layer address; NA with no or
		// this target link-layer address, for its addresses.
		ns := "icmp6," + inPort + ",nw_ttl=255,icmp_type=135,icmp_code=0"
		add(nd, 90, ns+",nd_sll=00:00:00:00:00:00", allow)
		add(nd, 90, ns+",nd_sll="+mac, allow)
		na := "icmp6," + inPort + ",nw_ttl=255,icmp_type=136,icmp_code=0"
		if len(ps.ip6) > 0 {
			targets := []string{lla(ps.mac).String()}
			for _, p6 := range ps.ip6 {
				targets = append(targets, ps.exact(p6))
			}
			for _, tgt := range targets {
				add(nd, 90, na+",nd_target="+tgt+",nd_tll=00:00:00:00:00:00", allow)
				add(nd, 90, na+",nd_target="+tgt+",nd_tll="+mac, allow)
			}
		} else {
			add(nd, 90, na+",nd_tll=00:00:00:00:00:00", allow)
			add(nd, 90, na+",nd_tll="+mac, allow)
		}
		// Out: with addresses, IP to the MAC is denied but for them.
		if len(ps.ip4) == 0 && len(ps.ip6) == 0 {
			continue
		}
		dst := outPort + ",dl_dst=" + mac
		// Non-IP traffic (ARP) to the MAC is delivered.
		add(out, 85, dst, allow)
		add(out, 90, "ip,"+dst, deny)
		add(out, 90, "ipv6,"+dst, deny)
		if len(ps.ip4) > 0 {
			for _, p4 := range ps.ip4 {
				if _, host := ps.host[p4]; host {
					add(out, 95, "ip,"+dst+",nw_dst="+broadcast(p4).String(), allow)
				}
				add(out, 95, "ip,"+dst+",nw_dst="+ps.exact(p4), allow)
			}
			add(out, 95, "ip,"+dst+",nw_dst=255.255.255.255", allow)
			add(out, 95, "ip,"+dst+",nw_dst=224.0.0.0/4", allow)
		}
		if len(ps.ip6) > 0 {
			for _, p6 := range ps.ip6 {
				add(out, 95, "ipv6,"+dst+",ipv6_dst="+ps.exact(p6), allow)
			}
			add(out, 95, "ipv6,"+dst+",ipv6_dst="+lla(ps.mac).String(), allow)
			add(out, 95, "ipv6,"+dst+",ipv6_dst=ff00::/8", allow)
		}
	}
}
