package northd

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/govn/govn/lflow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// dhcpOptionTables writes the Southbound DHCP_Options and DHCPv6_Options
// tables: the options ovn-controller's put_dhcp_opts and put_dhcpv6_opts
// take, with their codes and types (lflow has the list).
func dhcpOptionTables(g *gen) {
	for _, t := range []struct {
		table string
		opts  []lflow.Option
	}{{"DHCP_Options", lflow.DHCPv4Options()}, {"DHCPv6_Options", lflow.DHCPv6Options()}} {
		for _, o := range t.opts {
			g.Record(t.table, o.Name, map[string]ovsdb.Datum{
				"name": dString(o.Name),
				"code": dInt(int64(o.Code)),
				"type": dString(o.Type.String()),
			})
		}
	}
}

// dhcpv4Server is what a DHCP_Options row for IPv4 says of its server.
type dhcpv4Server struct {
	cidr     netip.Prefix
	serverID netip.Addr
	mac      string
	opts     map[string]string
}

func readDHCPv4(g *gen, id *ovsdb.UUID, port string) (*dhcpv4Server, bool) {
	if id == nil {
		return nil, false
	}
	o, ok := Read[nb.DHCPOptions](g, NB, *id)
	if !ok {
		return nil, false
	}
	cidr, err := netip.ParsePrefix(o.CIDR)
	sid, err2 := netip.ParseAddr(o.Options["server_id"])
	mac, okMAC := normalizeMAC(o.Options["server_mac"])
	_, hasLease := o.Options["lease_time"]
	if err != nil || !cidr.Addr().Is4() || err2 != nil || !sid.Is4() || !okMAC || !hasLease {
		g.Warn("DHCPv4 options without a valid cidr, server_id, server_mac and lease_time; ignoring them", "port", port)
		return nil, false
	}
	return &dhcpv4Server{cidr: cidr.Masked(), serverID: sid, mac: mac, opts: o.Options}, true
}

// dhcpv6Server is what a DHCP_Options row for IPv6 says of its server.
type dhcpv6Server struct {
	cidr      netip.Prefix
	mac       string
	lla       netip.Addr
	stateless bool
	opts      map[string]string
}

func readDHCPv6(g *gen, id *ovsdb.UUID, port string) (*dhcpv6Server, bool) {
	if id == nil {
		return nil, false
	}
	o, ok := Read[nb.DHCPOptions](g, NB, *id)
	if !ok {
		return nil, false
	}
	cidr, err := netip.ParsePrefix(o.CIDR)
	mac, okMAC := normalizeMAC(o.Options["server_id"])
	if err != nil || cidr.Addr().Is4() || !okMAC {
		g.Warn("DHCPv6 options without a valid cidr and server_id; ignoring them", "port", port)
		return nil, false
	}
	hw := macBytes(mac)
	return &dhcpv6Server{cidr: cidr.Masked(), mac: mac, lla: linkLocal(net.HardwareAddr(hw[:])),
		stateless: o.Options["dhcpv6_stateless"] == "true", opts: o.Options}, true
}

// netmask returns the IPv4 netmask of a prefix length.
func netmask(bits int) netip.Addr {
	m := ^uint32(0) << (32 - bits)
	if bits == 0 {
		m = 0
	}
	return netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)})
}

// sortedOptions renders options as "name = value, ..." sorted by name.
func sortedOptions(opts map[string]string) string {
	names := make([]string, 0, len(opts))
	for k := range opts {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = k + " = " + opts[k]
	}
	return strings.Join(parts, ", ")
}

// dhcpFlows writes a port's DHCPv4 and DHCPv6 responder flows and the
// egress ACL bypass of the replies. An external port's requests arrive
// through the switch's localnet ports, so its responders match those, and
// only on the chassis the external port is on, which alone answers; its
// replies leave through the localnet port and need no ACL bypass.
func dhcpFlows(g *gen, p *switchPortInfo, flow func(Stage, int, string, string)) {
	lsp := p.lsp
	ins := []string{fmt.Sprintf("inport == %q", lsp.Name)}
	suffix := ""
	bypass := true
	if lsp.Type == lspExternal {
		ins, suffix, bypass = nil, fmt.Sprintf(" && is_chassis_resident(%q)", lsp.Name), false
		for _, ln := range switchLocalnets(g, p.sw) {
			ins = append(ins, fmt.Sprintf("inport == %q", ln))
		}
	}
	stateful := factsOf(g, p.sw.nb.UUID).stateful()
	if s, ok := readDHCPv4(g, lsp.DHCPv4Options, lsp.Name); ok {
		opts := map[string]string{}
		for k, v := range s.opts {
			if k != "server_mac" {
				opts[k] = v
			}
		}
		opts["netmask"] = netmask(s.cidr.Bits()).String()
		for _, a := range p.addrs {
			i := slices.IndexFunc(a.ip4, s.cidr.Contains)
			if i < 0 {
				continue
			}
			ip := a.ip4[i]
			put := fmt.Sprintf("reg0[3] = put_dhcp_opts(offerip = %s, %s); next;", ip, sortedOptions(opts))
			for _, in := range ins {
				base := fmt.Sprintf("%s && eth.src == %s", in, a.mac)
				flow(LSInDHCPOptions, 100, base+" && ip4.src == 0.0.0.0 && ip4.dst == 255.255.255.255 && udp.src == 68 && udp.dst == 67"+suffix, put)
				flow(LSInDHCPOptions, 100, fmt.Sprintf("%s && ip4.src == %s && ip4.dst == {%s, 255.255.255.255} && udp.src == 68 && udp.dst == 67%s", base, ip, s.serverID, suffix), put)
				flow(LSInDHCPResponse, 100, base+" && ip4 && udp.src == 68 && udp.dst == 67 && reg0[3]"+suffix,
					fmt.Sprintf("eth.dst = eth.src; eth.src = %s; ip4.src = %s; udp.src = 67; udp.dst = 68; outport = inport; flags.loopback = 1; output;", s.mac, s.serverID))
			}
		}
		if bypass {
			flow(LSOutACL, 34000, fmt.Sprintf("outport == %q && eth.src == %s && ip4.src == %s && udp && udp.src == 67 && udp.dst == 68", lsp.Name, s.mac, s.serverID), aclBypassAction(stateful))
		}
	}
	if s, ok := readDHCPv6(g, lsp.DHCPv6Options, lsp.Name); ok {
		opts := map[string]string{}
		for k, v := range s.opts {
			if k != "dhcpv6_stateless" {
				opts[k] = v
			}
		}
		for _, a := range p.addrs {
			i := slices.IndexFunc(a.ip6, s.cidr.Contains)
			if i < 0 {
				continue
			}
			args := sortedOptions(opts)
			if !s.stateless {
				args = fmt.Sprintf("ia_addr = %s, %s", a.ip6[i], args)
			}
			for _, in := range ins {
				m := fmt.Sprintf("%s && eth.src == %s && ip6.dst == ff02::1:2 && udp.src == 546 && udp.dst == 547", in, a.mac)
				flow(LSInDHCPOptions, 100, m+suffix, fmt.Sprintf("reg0[3] = put_dhcpv6_opts(%s); next;", args))
				flow(LSInDHCPResponse, 100, m+" && reg0[3]"+suffix,
					fmt.Sprintf("eth.dst = eth.src; eth.src = %s; ip6.dst = ip6.src; ip6.src = %s; udp.src = 547; udp.dst = 546; outport = inport; flags.loopback = 1; output;", s.mac, s.lla))
			}
		}
		if bypass {
			flow(LSOutACL, 34000, fmt.Sprintf("outport == %q && eth.src == %s && ip6.src == %s && udp && udp.src == 547 && udp.dst == 546", lsp.Name, s.mac, s.lla), aclBypassAction(stateful))
		}
	}
}
