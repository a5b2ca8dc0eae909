package pinctrl

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/govn/govn/datapath/flow"
)

const dhcpAction = `reg0[3] = put_dhcp_opts(offerip = 10.0.0.11, classless_static_route = {30.0.0.0/24, 10.0.0.10, 0.0.0.0/0, 10.0.0.1}, dns_server = {8.8.8.8, 7.7.7.7}, domain_name = "ovn.org", domain_search_list = "ovn.org,example.com", ip_forward_enable = 0, lease_time = 3600, mtu = 1400, netmask = 255.255.255.0, router = 10.0.0.1, server_id = 10.0.0.1, tftp_server = "tftp.ovn.org", bootfile_name = "pxelinux.0", bootfile_name_alt = "ipxe.efi", next_server = 10.0.0.2, default_ttl = 64, arp_cache_timeout = 300);`

// dhcpClient builds a client's DHCPv4 message of type typ with extra
// options.
func dhcpClient(typ byte, ciaddr netip.Addr, opts ...[]byte) []byte {
	m := make([]byte, dhcpFixedLen)
	m[0], m[1], m[2] = 1, 1, 6
	binary.BigEndian.PutUint32(m[4:], 0xdeadbeef)
	copy(m[12:], ciaddr.AsSlice())
	copy(m[28:], vmMAC)
	m = append(m, dhcpMagic...)
	m = append(m, optMsgType, 1, typ, 55, 3, 1, 3, 6)
	for _, o := range opts {
		m = append(m, o...)
	}
	return append(m, optEnd)
}

func dhcpFrame(typ byte, ciaddr netip.Addr, opts ...[]byte) []byte {
	return udpFrame(broadcastMAC, ciaddr, netip.AddrFrom4([4]byte{255, 255, 255, 255}), 68, 67, dhcpClient(typ, ciaddr, opts...))
}

// paused runs a paused action and returns the resumed packet-out's frame
// (parsed, checksums checked) and result bit.
func paused(t *testing.T, action string, frame []byte, resultBit int) (*frame, bool) {
	t.Helper()
	e := newEngine(t)
	pi := packetIn(action, frame, 2, 8+20, nil)
	pi.Cont = &flow.Continuation{Table: 28, Actions: []flow.Action{flow.Resubmit{Table: 29}}}
	out, err := e.Handle(pi, testState())
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Packets) != 1 {
		t.Fatalf("%d packet-outs, want 1", len(out.Packets))
	}
	po := out.Packets[0]
	if po.Table != 28 || len(po.Actions) != 1 {
		t.Errorf("packet-out does not continue the pipeline: table %d actions %v", po.Table, po.Actions)
	}
	return checkSums(t, po.Frame), po.Key.Get(flow.Reg0)>>resultBit&1 == 1
}

func dhcpReply(t *testing.T, f *frame) *dhcpRequestMsg {
	t.Helper()
	_, _, payload, err := f.udp()
	if err != nil {
		t.Fatal(err)
	}
	// The reply has op 2; parse it with the request parser otherwise.
	c := append([]byte(nil), payload...)
	if c[0] != 2 {
		t.Fatalf("op %d, want BOOTREPLY", c[0])
	}
	c[0] = 1
	m, err := parseDHCPv4(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPutDHCPOpts: every option type of lflow's table, encoded as RFC
// 2132 and its successors say; offer, ack, nak and inform.
func TestPutDHCPOpts(t *testing.T) {
	zero := netip.IPv4Unspecified()
	f, ok := paused(t, dhcpAction, dhcpFrame(dhcpDiscover, zero), 3)
	if !ok {
		t.Fatal("result 0 for a DISCOVER")
	}
	m := dhcpReply(t, f)
	if m.msgType != dhcpOffer || netip.AddrFrom4([4]byte(m.fixed[16:20])) != vmIP || netip.AddrFrom4([4]byte(m.fixed[20:24])).String() != "10.0.0.2" ||
		!bytes.Equal(m.fixed[28:34], vmMAC) || binary.BigEndian.Uint32(m.fixed[4:]) != 0xdeadbeef {
		t.Errorf("offer header % x", m.fixed)
	}
	if f.ipDst != vmIP {
		t.Errorf("offer to %s, want %s", f.ipDst, vmIP)
	}
	want := map[byte][]byte{
		1:   {255, 255, 255, 0},
		3:   {10, 0, 0, 1},
		6:   {8, 8, 8, 8, 7, 7, 7, 7},
		15:  []byte("ovn.org"),
		19:  {0},
		23:  {64},
		26:  {0x05, 0x78},
		35:  {0, 0, 1, 44},
		51:  {0, 0, 0x0e, 0x10},
		54:  {10, 0, 0, 1},
		66:  []byte("tftp.ovn.org"),
		67:  []byte("pxelinux.0"),
		119: append([]byte("\x03ovn\x03org\x00"), "\x07example\x03com\x00"...),
		121: {24, 30, 0, 0, 10, 0, 0, 10, 0, 10, 0, 0, 1},
	}
	for code, w := range want {
		if got := m.options[code]; !bytes.Equal(got, w) {
			t.Errorf("option %d = % x, want % x", code, got, w)
		}
	}
	for _, code := range []byte{0, 253, 254} {
		if _, ok := m.options[code]; ok && code != 0 {
			t.Errorf("OVN's pseudo-option %d on the wire", code)
		}
	}

	// iPXE gets bootfile_name_alt.
	f, _ = paused(t, dhcpAction, dhcpFrame(dhcpDiscover, zero, []byte{optUserClass, 4, 'i', 'P', 'X', 'E'}), 3)
	if got := dhcpReply(t, f).options[67]; string(got) != "ipxe.efi" {
		t.Errorf("iPXE bootfile %q", got)
	}

	tests := []struct {
		name   string
		frame  []byte
		result bool
		reply  byte
	}{
		{"request for the offer", dhcpFrame(dhcpRequest, zero, []byte{optRequestedIP, 4, 10, 0, 0, 11}), true, dhcpAck},
		{"renewal", dhcpFrame(dhcpRequest, vmIP), true, dhcpAck},
		{"request for another address", dhcpFrame(dhcpRequest, zero, []byte{optRequestedIP, 4, 10, 0, 0, 99}), true, dhcpNak},
		{"inform", dhcpFrame(dhcpInform, vmIP), true, dhcpAck},
		{"release", dhcpFrame(dhcpRelease, vmIP), false, 0},
		{"not DHCP", udpFrame(broadcastMAC, vmIP, farIP, 68, 69, []byte("x")), false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := paused(t, dhcpAction, tc.frame, 3)
			if ok != tc.result {
				t.Fatalf("result %v, want %v", ok, tc.result)
			}
			if !ok {
				if !bytes.Equal(f.raw, tc.frame) {
					t.Error("a packet the action does not answer was changed")
				}
				return
			}
			m := dhcpReply(t, f)
			if m.msgType != tc.reply {
				t.Fatalf("reply type %d, want %d", m.msgType, tc.reply)
			}
			switch tc.reply {
			case dhcpNak:
				if len(m.options) != 2 || f.ipDst.String() != "255.255.255.255" {
					t.Errorf("nak options %v to %s", m.options, f.ipDst)
				}
			case dhcpAck:
				_, lease := m.options[51]
				if inform := tc.name == "inform"; lease == inform {
					t.Errorf("lease time present %v for %s", lease, tc.name)
				}
			}
		})
	}
}

// TestDNSLookup: A, AAAA and PTR answers from the datapath's records;
// other names go on unanswered.
func TestDNSLookup(t *testing.T) {
	query := func(name string, qtype uint16) []byte {
		m := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
		n, err := encodeName(name)
		if err != nil {
			t.Fatal(err)
		}
		m = append(m, n...)
		m = binary.BigEndian.AppendUint16(m, qtype)
		return binary.BigEndian.AppendUint16(m, dnsClassIN)
	}
	tests := []struct {
		name, qname string
		qtype       uint16
		want        [][]byte // rdata of each answer
	}{
		{"A", "VM1.ovn.org", dnsTypeA, [][]byte{{10, 0, 0, 11}}},
		{"AAAA", "vm1.ovn.org", dnsTypeAAAA, [][]byte{netip.MustParseAddr("aef0::11").AsSlice()}},
		{"ANY", "vm1.ovn.org", dnsTypeANY, [][]byte{{10, 0, 0, 11}, netip.MustParseAddr("aef0::11").AsSlice()}},
		{"PTR", "11.0.0.10.in-addr.arpa", dnsTypePTR, nil}, // two names: checked below
		{"unknown name", "vm9.ovn.org", dnsTypeA, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := udpFrame(routerMAC, vmIP, netip.MustParseAddr("10.0.0.1"), 5353, 53, query(tc.qname, tc.qtype))
			f, ok := paused(t, "reg0[4] = dns_lookup();", q, 4)
			if tc.name == "unknown name" {
				if ok {
					t.Error("answered an unknown name")
				}
				return
			}
			if !ok {
				t.Fatal("not answered")
			}
			sport, dport, msg, _ := f.udp()
			if sport != 5353 || dport != 53 || binary.BigEndian.Uint16(msg) != 0x1234 || msg[2]&0x80 == 0 {
				t.Fatalf("reply header % x", msg)
			}
			an := int(binary.BigEndian.Uint16(msg[6:]))
			qb := query(tc.qname, tc.qtype)
			name := qb[12 : len(qb)-4] // each answer repeats the question's name
			p := len(qb)
			var got [][]byte
			for range an {
				if !bytes.Equal(msg[p:p+len(name)], name) {
					t.Fatalf("answer name % x, want % x", msg[p:p+len(name)], name)
				}
				p += len(name)
				n := int(binary.BigEndian.Uint16(msg[p+8:]))
				got = append(got, msg[p+10:p+10+n])
				p += 10 + n
			}
			if tc.qtype == dnsTypePTR {
				if an != 2 {
					t.Errorf("%d PTR answers, want 2 (vm1, vm1.ovn.org)", an)
				}
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d answers, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if !bytes.Equal(got[i], tc.want[i]) {
					t.Errorf("answer %d % x, want % x", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestPutDHCPv6Opts: a Solicit gets an Advertise with the server id and
// the address in an IA_NA with the client's IAID.
func TestPutDHCPv6Opts(t *testing.T) {
	sol := []byte{dhcp6Solicit, 1, 2, 3}
	sol = appendOpt6(sol, opt6ClientID, []byte{0, 3, 0, 1, 0x50, 0x54, 0, 0, 0, 1})
	sol = appendOpt6(sol, opt6IANA, []byte{0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0})
	frame := udpFrame(routerMAC, netip.MustParseAddr("fe80::5254:ff:fe00:1"), netip.MustParseAddr("ff02::1:2"), 546, 547, sol)
	f, ok := paused(t, `reg0[3] = put_dhcpv6_opts(ia_addr = aef0::11, server_id = 00:00:00:10:00:01, dns_server = {aef0::1}, domain_search = "ovn.org");`, frame, 3)
	if !ok {
		t.Fatal("not answered")
	}
	_, _, msg, _ := f.udp()
	m, err := parseDHCPv6(msg)
	if err != nil {
		t.Fatal(err)
	}
	if m.typ != dhcp6Advertise || !bytes.Equal(m.xid, []byte{1, 2, 3}) ||
		!bytes.Equal(m.options[opt6ServerID], []byte{0, 3, 0, 1, 0, 0, 0, 0x10, 0, 1}) ||
		!bytes.Equal(m.options[opt6DNSServers], netip.MustParseAddr("aef0::1").AsSlice()) ||
		!bytes.Equal(m.options[opt6DomainList], []byte("\x03ovn\x03org\x00")) {
		t.Errorf("advertise %+v", m.options)
	}
	ia := m.options[opt6IANA]
	if len(ia) != 12+4+24 || binary.BigEndian.Uint32(ia) != 7 || !bytes.Equal(ia[16:32], vmIP6.AsSlice()) {
		t.Errorf("IA_NA % x", ia)
	}
}

// TestPutNDRAOpts: a router solicitation gets an advertisement with the
// flags of the address mode and every option.
func TestPutNDRAOpts(t *testing.T) {
	rs := ethFrame(routerMAC, vmMAC, etherIPv6, ipPacket(netip.MustParseAddr("fe80::5254:ff:fe00:1"), netip.MustParseAddr("ff02::2"), protoICMPv6, 255, []byte{133, 0, 0, 0, 0, 0, 0, 0}, 2))
	f, ok := paused(t, `reg0[5] = put_nd_ra_opts(addr_mode = "dhcpv6_stateless", slla = 00:00:00:00:ff:01, prefix = aef0::/64, mtu = 1450, rdnss = aef0::1, dnssl = "ovn.org", router_preference = "HIGH");`, rs, 5)
	if !ok {
		t.Fatal("not answered")
	}
	ra := f.l4
	if ra[0] != 134 || ra[5] != 0x48 || binary.BigEndian.Uint16(ra[6:]) != raRouterLifetime {
		t.Errorf("RA header % x", ra[:16])
	}
	seen := map[byte][]byte{}
	for p := 16; p+2 <= len(ra); {
		n := int(ra[p+1]) * 8
		if n == 0 || p+n > len(ra) {
			t.Fatalf("bad option at %d", p)
		}
		seen[ra[p]] = ra[p : p+n]
		p += n
	}
	if o := seen[ndOptSLL]; !bytes.Equal(o[2:], routerMAC) {
		t.Errorf("slla % x", o)
	}
	if o := seen[ndOptMTU]; binary.BigEndian.Uint32(o[4:]) != 1450 {
		t.Errorf("mtu % x", o)
	}
	if o := seen[ndOptPrefix]; o[2] != 64 || o[3] != 0xc0 || !bytes.Equal(o[16:32], netip.MustParseAddr("aef0::").AsSlice()) {
		t.Errorf("prefix % x", o)
	}
	if o := seen[ndOptRDNSS]; !bytes.Equal(o[8:], routerIP6.AsSlice()) {
		t.Errorf("rdnss % x", o)
	}
	if o := seen[ndOptDNSSL]; !bytes.HasPrefix(o[8:], []byte("\x03ovn\x03org\x00")) {
		t.Errorf("dnssl % x", o)
	}
}
