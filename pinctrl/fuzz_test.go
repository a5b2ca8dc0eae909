package pinctrl

import (
	"net/netip"
	"testing"

	"github.com/govn/govn/datapath/flow"
)

// Seeds: the frames of the table tests.
func frameSeeds() [][]byte {
	zero := netip.IPv4Unspecified()
	return [][]byte{
		dhcpFrame(dhcpDiscover, zero),
		dhcpFrame(dhcpRequest, zero, []byte{optRequestedIP, 4, 10, 0, 0, 11}),
		tcpFrame(vmIP, farIP, 0x02, 0),
		tcpFrame(vmIP6, netip.MustParseAddr("bef0::9"), 0x10, 4),
		sctpFrame(vmIP, farIP, 0, sctpInit(7)),
		udpFrame(routerMAC, vmIP, farIP, 5000, 53, []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'v', 'm', '1', 0, 0, 1, 0, 1}),
		ethFrame(routerMAC, vmMAC, 0x8100, []byte{0, 5, 8, 0, 0x45, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}),
		{},
	}
}

func FuzzParseFrame(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := parseFrame(b)
		if err != nil {
			return
		}
		if len(fr.l4) > len(b) || len(fr.ipHdr) > len(b) {
			t.Fatalf("headers longer than the frame")
		}
		_, _, _, _ = fr.udp()
	})
}

func FuzzParseDHCPv4(f *testing.F) {
	f.Add(dhcpClient(dhcpDiscover, netip.IPv4Unspecified()))
	f.Add(dhcpClient(dhcpRequest, vmIP, []byte{optRequestedIP, 4, 10, 0, 0, 11}))
	f.Add(dhcpClient(dhcpInform, vmIP, []byte{optUserClass, 4, 'i', 'P', 'X', 'E'}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseDHCPv4(b)
		if err != nil {
			return
		}
		if len(m.fixed) != dhcpFixedLen || m.msgType == 0 {
			t.Fatalf("accepted a message without its fixed part or type")
		}
	})
}

func FuzzParseDHCPv6(f *testing.F) {
	sol := appendOpt6([]byte{dhcp6Solicit, 1, 2, 3}, opt6IANA, []byte{0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(sol)
	f.Add([]byte{dhcp6InfoRequest, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := parseDHCPv6(b); err == nil && len(b) < 4 {
			t.Fatal("accepted a message shorter than its header")
		}
	})
}

func FuzzParseDNSQuery(f *testing.F) {
	f.Add([]byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'v', 'm', '1', 3, 'o', 'v', 'n', 3, 'o', 'r', 'g', 0, 0, 1, 0, 1})
	f.Add([]byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, '1', '1', 1, '0', 1, '0', 2, '1', '0', 7, 'i', 'n', '-', 'a', 'd', 'd', 'r', 4, 'a', 'r', 'p', 'a', 0, 0, 12, 0, 1})
	st := testState()
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := parseDNSQuery(b)
		if err != nil {
			return
		}
		if len(q.name) > maxDNSName {
			t.Fatalf("name of %d bytes", len(q.name))
		}
		_, _ = dnsAnswers(q, st.Datapaths[2].DNS)
	})
}

// FuzzHandle: no frame crashes the engine, whatever action it meets.
func FuzzHandle(f *testing.F) {
	actions := []string{
		dhcpAction,
		"reg0[4] = dns_lookup();",
		`reg0[3] = put_dhcpv6_opts(ia_addr = aef0::11, server_id = 00:00:00:10:00:01);`,
		`reg0[5] = put_nd_ra_opts(addr_mode = "slaac", slla = 00:00:00:00:ff:01, prefix = aef0::/64);`,
		"arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.spa = reg1; arp.tpa = reg0; arp.op = 1; output; };",
		"nd_ns { nd.target = xxreg0; output; };",
		"nd_na { nd.tll = 00:00:00:00:ff:01; output; };",
		"icmp4 { eth.dst <-> eth.src; ip4.dst <-> ip4.src; output; };",
		"icmp6 { eth.dst <-> eth.src; ip6.dst <-> ip6.src; output; };",
		"tcp_reset { output; };",
		"reject { output; };",
		"sctp_abort { eth.dst <-> eth.src; ip4.dst <-> ip4.src; output; };",
		`bind_vport("vip", inport);`,
		`trigger_event(event = "empty_lb_backends", vip = "10.0.0.10:80", protocol = "tcp", load_balancer = "7f1fcd3d-2b6a-4b7e-8a54-5b7d5b0a6c11");`,
	}
	for i, s := range frameSeeds() {
		f.Add(s, uint8(i))
	}
	e, err := NewEngine()
	if err != nil {
		f.Fatal(err)
	}
	st := vportState()
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		pi := packetIn(actions[int(which)%len(actions)], b, 2, 28, nil)
		pi.Cont = &flow.Continuation{Table: 28}
		out, err := e.Handle(pi, st)
		if err == nil && len(out.Packets)+len(out.VPorts)+len(out.Events) == 0 {
			t.Fatal("handled without a packet-out, binding or event")
		}
	})
}

func FuzzParseIGMP(f *testing.F) {
	f.Add(igmpMsg(igmpV2Report, group1))
	f.Add(igmpMsg(igmpV2Leave, group1))
	f.Add(igmpMsg(igmpQuery, netip.IPv4Unspecified()))
	f.Add(v3Report(v3Record(igmpChangeToExclude, group1), v3Record(igmpModeIsInclude, group2, vmIP)))
	f.Fuzz(func(t *testing.T, b []byte) {
		changes, query, err := parseIGMP(b)
		if err != nil {
			return
		}
		if query && len(changes) > 0 {
			t.Fatalf("a query reported changes")
		}
		for _, c := range changes {
			if !c.Group.Is4() || !c.Group.IsMulticast() || c.Group.IsLinkLocalMulticast() {
				t.Fatalf("change of %s, not a snooped group", c.Group)
			}
		}
	})
}

func FuzzParseMLD(f *testing.F) {
	f.Add(mldMsg(mldV1Report, mldGroup, mldGroup))
	f.Add(mldMsg(mldV2Report, mldRouter, netip.Addr{}, append([]byte{igmpChangeToExclude, 0, 0, 0}, mldGroup.AsSlice()...)))
	f.Fuzz(func(t *testing.T, b []byte) {
		changes, query, err := parseMLD(b, vmLL, mldRouter)
		if err != nil {
			return
		}
		if query && len(changes) > 0 {
			t.Fatalf("a query reported changes")
		}
		for _, c := range changes {
			if !c.Group.Is6() || !c.Group.IsMulticast() || c.Group.IsLinkLocalMulticast() {
				t.Fatalf("change of %s, not a snooped group", c.Group)
			}
		}
	})
}
