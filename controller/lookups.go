package controller

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/govn/govn/lflow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// The lookup tables (lflow.Layout.Lookups) that actions such as get_arp,
// lookup_fdb or chk_lb_hairpin resubmit to, filled from the Southbound as
// ovn-controller 23.03 fills them:
//
//	66 get_arp/get_nd      MAC_Binding, Static_MAC_Binding: outport (reg15)
//	                       and IP (reg0 or xxreg0) → eth.dst; a miss leaves
//	                       eth.dst 00:00:00:00:00:00, which northd's flows
//	                       take as "send an ARP/ND request"
//	67 lookup_arp/_nd      the same rows: inport (reg14), IP and eth.src
//	                       known → flags bit 6
//	68 chk_lb_hairpin      a load-balanced packet (ct_mark.natted) from a
//	                       backend to itself through the VIP (reg1 and
//	                       reg2[0..15] hold the VIP and port northd saved)
//	                       → flags bit 7, and learns table 69's rule for
//	                       the replies
//	70 ct_snat_to_vip      SNAT such a packet to the VIP in the SNAT zone
//	71 get_fdb             FDB: eth.dst → outport (0: none)
//	72 lookup_fdb          FDB: inport and eth.src known → flags bit 8
//	73, 74 and 75          port security (portsec.go)

// lookupTable is the datapath table of a lookup action.
func lookupTable(action string) uint8 { return lflow.DefaultLayout().Lookups[action].Table }

// lookupFlag is the flags (reg10) bit a lookup action's table sets.
func lookupFlag(action string) int { return lflow.DefaultLayout().Lookups[action].Flag }

// lookups writes tables 66-72 for the local datapaths.
func (tr *translation) lookups() {
	tr.rule("table=%d,priority=0 actions=set_field:00:00:00:00:00:00->eth_dst", lookupTable("get_arp"))
	tr.rule("table=%d,priority=0 actions=set_field:0->reg15", lookupTable("get_fdb"))
	tr.neighbors()
	tr.fdbs()
	tr.hairpins()
	tr.portSecurity()
}

// macBinding is one MAC_Binding or Static_MAC_Binding row.
type macBinding struct {
	what, port, ip, mac string
	dp                  ovsdb.UUID
	priority            int
}

// neighbors writes the MAC bindings of the local datapaths' ports.
func (tr *translation) neighbors() {
	var all []macBinding
	for _, b := range tr.in.MACBindings {
		all = append(all, macBinding{"MAC_Binding " + b.UUID.String(), b.LogicalPort, b.IP, b.MAC, b.Datapath, 100})
	}
	for _, b := range tr.in.StaticMACBindings {
		prio := 50
		if b.OverrideDynamicMAC {
			prio = 150
		}
		all = append(all, macBinding{"Static_MAC_Binding " + b.UUID.String(), b.LogicalPort, b.IP, b.MAC, b.Datapath, prio})
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		if a.port != b.port {
			return a.port < b.port
		}
		return a.ip < b.ip
	})
	seen := map[string]bool{}
	getARP, lookupARP, flag := lookupTable("get_arp"), lookupTable("lookup_arp"), lookupFlag("lookup_arp")
	for _, b := range all {
		p := tr.byName[b.port]
		if p == nil || !tr.local[p.Datapath] || tr.dps[p.Datapath] == nil {
			continue
		}
		mac, err := net.ParseMAC(b.mac)
		if err != nil || len(mac) != 6 {
			tr.problem("%s: bad MAC %q", b.what, b.mac)
			continue
		}
		ip, err := netip.ParseAddr(b.ip)
		if err != nil {
			tr.problem("%s: bad IP %q", b.what, b.ip)
			continue
		}
		ip = ip.Unmap()
		// Two rows for one port and address (a learned and a static
		// binding of one priority): the first, in the order above, wins.
		key := fmt.Sprintf("%d/%s/%s", b.priority, b.port, ip)
		if seen[key] {
			continue
		}
		seen[key] = true
		dk, pk := tr.dps[p.Datapath].TunnelKey, p.TunnelKey
		var ipMatch, proto string
		if ip.Is4() {
			ipMatch, proto = fmt.Sprintf("reg0=0x%x", ip4Uint(ip)), "arp"
		} else {
			ipMatch, proto = fmt.Sprintf("xxreg0=0x%x", ip.As16()), "icmp6,icmp_code=0"
		}
		tr.rowRule(b.what, "table=%d,priority=%d,metadata=%d,reg15=%d,%s actions=set_field:%s->eth_dst,load:1->reg10[%d]",
			getARP, b.priority, dk, pk, ipMatch, mac, flag)
		tr.rowRule(b.what, "table=%d,priority=%d,%s,metadata=%d,reg14=%d,%s,dl_src=%s actions=load:1->reg10[%d]",
			lookupARP, b.priority, proto, dk, pk, ipMatch, mac, flag)
	}
}

func ip4Uint(ip netip.Addr) uint32 {
	b := ip.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// fdbs writes the learned MACs of the local datapaths.
func (tr *translation) fdbs() {
	byKey := map[int64]*sb.DatapathBinding{}
	for id, d := range tr.dps {
		if tr.local[id] {
			byKey[d.TunnelKey] = d
		}
	}
	rows := append([]sb.FDB(nil), tr.in.FDBs...)
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.DPKey != b.DPKey {
			return a.DPKey < b.DPKey
		}
		return a.MAC < b.MAC
	})
	seen := map[string]bool{}
	getFDB, lookupFDB, flag := lookupTable("get_fdb"), lookupTable("lookup_fdb"), lookupFlag("lookup_fdb")
	for _, f := range rows {
		if byKey[f.DPKey] == nil {
			continue
		}
		mac, err := net.ParseMAC(f.MAC)
		if err != nil || len(mac) != 6 {
			tr.problem("FDB %s: bad MAC %q", f.UUID, f.MAC)
			continue
		}
		if f.PortKey < 0 || f.PortKey > 0xffff {
			tr.problem("FDB %s: bad port key %d", f.UUID, f.PortKey)
			continue
		}
		key := fmt.Sprintf("%d/%s", f.DPKey, mac)
		if seen[key] {
			continue // one MAC, two ports: the lower-sorted row wins
		}
		seen[key] = true
		what := "FDB " + f.UUID.String()
		tr.rowRule(what, "table=%d,priority=100,metadata=%d,dl_dst=%s actions=set_field:%d->reg15", getFDB, f.DPKey, mac, f.PortKey)
		tr.rowRule(what, "table=%d,priority=100,metadata=%d,reg14=%d,dl_src=%s actions=load:1->reg10[%d]", lookupFDB, f.DPKey, f.PortKey, mac, flag)
	}
}

// lbVIP is one VIP of a load balancer and its backends.
type lbVIP struct {
	vip      netip.AddrPort // port 0: any
	backends []netip.AddrPort
}

// parseVIPs reads a Load_Balancer's vips column: "VIP[:PORT]" (IPv6 in
// brackets with a port) to "BACKEND[:PORT],...".
func parseVIPs(vips map[string]string) ([]lbVIP, error) {
	keys := make([]string, 0, len(vips))
	for k := range vips {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []lbVIP
	for _, k := range keys {
		vip, err := parseEndpoint(k)
		if err != nil {
			return nil, fmt.Errorf("VIP %q: %w", k, err)
		}
		v := lbVIP{vip: vip}
		for _, b := range strings.Split(vips[k], ",") {
			b = strings.TrimSpace(b)
			if b == "" {
				continue
			}
			be, err := parseEndpoint(b)
			if err != nil {
				return nil, fmt.Errorf("VIP %q: backend %q: %w", k, b, err)
			}
			if be.Addr().Is4() != vip.Addr().Is4() {
				return nil, fmt.Errorf("VIP %q: backend %q: another address family", k, b)
			}
			v.backends = append(v.backends, be)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseEndpoint reads "IP", "IP:PORT", "IPv6" or "[IPv6]:PORT".
func parseEndpoint(s string) (netip.AddrPort, error) {
	if ip, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return netip.AddrPortFrom(ip.Unmap(), 0), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return netip.AddrPort{}, fmt.Errorf("bad port %q", port)
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(n)), nil
}

// lbProtocols are the IP protocol numbers of Load_Balancer.protocol.
var lbProtocols = map[string]int{"tcp": 6, "udp": 17, "sctp": 132}

// hairpins writes tables 68-70 for the load balancers of local datapaths.
func (tr *translation) hairpins() {
	groups := map[ovsdb.UUID][]ovsdb.UUID{}
	for _, g := range tr.in.DPGroups {
		groups[g.UUID] = g.Datapaths
	}
	lbs := append([]sb.LoadBalancer(nil), tr.in.LoadBalancers...)
	sort.Slice(lbs, func(i, j int) bool { return lbs[i].UUID.String() < lbs[j].UUID.String() })
	chk, reply, snat := lookupTable("chk_lb_hairpin"), lookupTable("chk_lb_hairpin_reply"), lookupTable("ct_snat_to_vip")
	flag := lookupFlag("chk_lb_hairpin")
	snatSeen, chkSeen := map[string]bool{}, map[string]bool{}
	for _, lb := range lbs {
		dps := append([]ovsdb.UUID(nil), lb.Datapaths...)
		if lb.DatapathGroup != nil {
			dps = append(dps, groups[*lb.DatapathGroup]...)
		}
		local := false
		for _, dp := range dps {
			local = local || tr.local[dp]
		}
		if !local {
			continue
		}
		proto := 6
		if lb.Protocol != nil {
			p, ok := lbProtocols[*lb.Protocol]
			if !ok {
				tr.problem("Load_Balancer %s: protocol %q", lb.Name, *lb.Protocol)
				continue
			}
			proto = p
		}
		vips, err := parseVIPs(lb.VIPs)
		if err != nil {
			tr.problem("Load_Balancer %s: %v", lb.Name, err)
			continue
		}
		// hairpin_orig_tuple: northd saved the VIP in reg1 (xxreg1 for
		// IPv6) and its port in reg2[0..15]; without it, the conntrack
		// entry's original destination tells.
		orig := lb.Options["hairpin_orig_tuple"] == "true"
		var snatIP netip.Addr
		if s := lb.Options["hairpin_snat_ip"]; s != "" {
			snatIP, _ = netip.ParseAddr(strings.Fields(s)[0])
		}
		cookie := cookieOf(lb.UUID)
		what := "Load_Balancer " + lb.Name
		for _, v := range vips {
			vip := v.vip.Addr()
			four := vip.Is4()
			var vipMatch, ipType, srcField, dstField string
			if four {
				ipType, srcField, dstField = "ip", "nw_src", "nw_dst"
				if orig {
					vipMatch = fmt.Sprintf("reg1=0x%x", ip4Uint(vip))
				} else {
					vipMatch = "ct_state=+trk-inv+dnat,ct_nw_dst=" + vip.String()
				}
			} else {
				ipType, srcField, dstField = "ipv6", "ipv6_src", "ipv6_dst"
				if orig {
					vipMatch = fmt.Sprintf("xxreg1=0x%x", vip.As16())
				} else {
					vipMatch = "ct_state=+trk-inv+dnat,ct_ipv6_dst=" + vip.String()
				}
			}
			portMatch := ""
			if v.vip.Port() != 0 {
				if orig {
					portMatch = fmt.Sprintf(",nw_proto=%d,reg2=0x%x/0xffff", proto, v.vip.Port())
				} else {
					portMatch = fmt.Sprintf(",nw_proto=%d,ct_nw_proto=%d,ct_tp_dst=%d", proto, proto, v.vip.Port())
				}
			}
			replySrc := vip
			if snatIP.IsValid() && snatIP.Is4() == four {
				replySrc = snatIP
			}
			ethType := 0x800
			if !four {
				ethType = 0x86dd
			}
			for _, be := range v.backends {
				bm := fmt.Sprintf("%s,%s=%s,%s=%s,%s%s", ipType, srcField, be.Addr(), dstField, be.Addr(), vipMatch, portMatch)
				learn := fmt.Sprintf("learn(table=%d,priority=32768,cookie=0x%x,match:metadata->metadata,match:0x%x->eth_type,match:%s->%s,match:0x%s->%s,match:nw_proto->nw_proto",
					reply, cookie, ethType, srcField, srcField, hexAddr(replySrc), dstField)
				if be.Port() != 0 {
					bm += fmt.Sprintf(",tp_dst=%d", be.Port())
					learn = fmt.Sprintf("learn(table=%d,priority=32768,cookie=0x%x,match:metadata->metadata,match:0x%x->eth_type,match:%s->%s,match:0x%s->%s,match:0x%x->nw_proto,match:tp_dst->tp_src",
						reply, cookie, ethType, srcField, srcField, hexAddr(replySrc), dstField, proto)
				}
				learn += fmt.Sprintf(",load:0x1->reg10[%d])", flag)
				if chkSeen[bm] {
					continue // another load balancer with this VIP and backend
				}
				chkSeen[bm] = true
				tr.rowRule(what, "table=%d,priority=100,cookie=0x%x,ct_mark=0x2/0x2,%s actions=load:1->reg10[%d],%s", chk, cookie, bm, flag, learn)
			}
			// One SNAT rule per VIP (load balancers sharing a VIP SNAT
			// alike), per datapath for those with their own
			// hairpin_snat_ip.
			prio := 100
			if v.vip.Port() == 0 {
				prio -= 10
			}
			sm := fmt.Sprintf("%s,%s%s", ipType, vipMatch, portMatch)
			if snatIP.IsValid() && snatIP.Is4() == four {
				for _, dp := range dps {
					if d := tr.dps[dp]; d != nil && tr.local[dp] {
						m := fmt.Sprintf("metadata=%d,%s", d.TunnelKey, sm)
						if !snatSeen[m] {
							snatSeen[m] = true
							tr.rowRule(what, "table=%d,priority=%d,cookie=0x%x,%s actions=ct(commit,zone=NXM_NX_REG12[0..15],nat(src=%s))", snat, prio+100, cookie, m, natAddr(snatIP))
						}
					}
				}
				continue
			}
			if !snatSeen[sm] {
				snatSeen[sm] = true
				tr.rowRule(what, "table=%d,priority=%d,cookie=0x%x,%s actions=ct(commit,zone=NXM_NX_REG12[0..15],nat(src=%s))", snat, prio, cookie, sm, natAddr(vip))
			}
		}
	}
}

// hexAddr is an address's bytes in hex (a learn spec's immediate value).
func hexAddr(ip netip.Addr) string {
	return fmt.Sprintf("%x", ip.AsSlice())
}

// natAddr is an address as ct's nat() writes it.
func natAddr(ip netip.Addr) string {
	if ip.Is6() {
		return "[" + ip.String() + "]"
	}
	return ip.String()
}
