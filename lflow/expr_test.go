package lflow

import (
	"strings"
	"testing"
)

func testSymtab(t testing.TB) *Symtab {
	t.Helper()
	st, err := NewSymtab()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSymtab(t *testing.T) {
	st := testSymtab(t)
	for _, s := range st.Symbols() {
		switch s.Kind {
		case KindField, KindString:
			if s.DP == "" && !s.OVNField || s.Field != s {
				t.Errorf("%s: field without datapath mapping", s.Name)
			}
		case KindSubfield:
			if s.Field == nil || s.Ofs+s.Width > s.Field.Width {
				t.Errorf("%s: subfield outside its field", s.Name)
			}
		case KindPredicate:
			if s.expansion == nil {
				t.Errorf("%s: predicate without expansion", s.Name)
			}
		}
		if s.Prereq != "" && s.prereq == nil {
			t.Errorf("%s: prerequisite not parsed", s.Name)
		}
	}
	// The fields ovn-sb(5) lists must all be there.
	for _, name := range strings.Fields(`reg0 reg9 xxreg0 xxreg1 xreg0 xreg4 inport outport
		flags.loopback pkt.mark eth.src eth.dst eth.type vlan.tci vlan.vid vlan.pcp
		vlan.present ip.proto ip.dscp ip.ecn ip.ttl ip.frag ip4.src ip4.dst ip6.src
		ip6.dst ip6.label arp.op arp.spa arp.tpa arp.sha arp.tha rarp.op rarp.spa
		rarp.tpa rarp.sha rarp.tha tcp.src tcp.dst tcp.flags udp.src udp.dst sctp.src
		sctp.dst icmp4.type icmp4.code icmp6.type icmp6.code nd.target nd.sll nd.tll
		ct_mark ct_label ct_state ct.trk ct.new ct.est ct.rel ct.rpl ct.inv ct.dnat
		ct.snat eth.bcast eth.mcast ip4 ip4.src_mcast ip4.mcast ip6 ip icmp4 icmp6
		icmp ip.is_frag ip.later_frag ip.first_frag arp rarp nd nd_ns nd_na nd_rs
		nd_ra tcp udp sctp igmp mldv1 mldv2 ip6.mcast ip6.mcast_rsvd ct_proto`) {
		if st.Lookup(name) == nil {
			t.Errorf("symbol %s missing", name)
		}
	}
}

// TestSymbolTableGolden keeps the whole symbol table, with its datapath
// mapping, in testdata/symbols.golden (regenerate with -update).
func TestSymbolTableGolden(t *testing.T) {
	var sb strings.Builder
	if err := testSymtab(t).WriteTable(&sb); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "symbols.golden", sb.String())
}

func TestParseExprPrint(t *testing.T) {
	st := testSymtab(t)
	tests := []struct{ in, want string }{
		{"1", "1"},
		{"0", "0"},
		{"ip4.src == 10.0.0.0/8 && tcp.dst == {80, 443}", "ip4.src == 10.0.0.0/8 && tcp.dst == {80, 443}"},
		{"1024 <= tcp.src <= 49151", "tcp.src >= 1024 && tcp.src <= 49151"},
		{"80 == tcp.src", "tcp.src == 80"},
		{"!(ip4.dst == 1.2.3.4)", "!(ip4.dst == 1.2.3.4)"},
		{"!ct.new", "!ct.new"},
		{"reg0[0..15] == 0x10/0xf0", "reg0[0..15] == 0x10/0xf0"},
		{"reg0[3]", "reg0[3]"},
		{"inport == @pg && ip6.src == $as", "inport == @pg && ip6.src == $as"},
		{"(tcp || udp) && ip4", "(tcp || udp) && ip4"},
		{"ip4.src == {1.1.1.1 2.2.2.2,}", "ip4.src == {1.1.1.1, 2.2.2.2}"},
		{"is_chassis_resident(\"cr-lrp\")", "is_chassis_resident(\"cr-lrp\")"},
		{"eth.dst == 01:00:00:00:00:00/01:00:00:00:00:00", "eth.dst == 01:00:00:00:00:00/01:00:00:00:00:00"},
		{"ip6.dst == fe80::/64", "ip6.dst == fe80::/64"},
		{"outport == \"sw0-p\\\"1\"", "outport == \"sw0-p\\\"1\""},
	}
	for _, tt := range tests {
		e, err := st.ParseExpr(tt.in)
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if got := ExprString(e); got != tt.want {
			t.Errorf("%q: printed %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseExprErrors(t *testing.T) {
	st := testSymtab(t)
	tests := []struct{ in, want string }{
		{"", "at offset 0: expected a field"},
		{"x == 1", "at offset 0: unknown field x"},
		{"ip4.dst ==", "at offset 10: expected a constant"},
		{"reg0[40] == 1", "bit 40 is outside 32-bit field reg0"},
		{"reg0[5..3] == 1", "backwards"},
		{"ip4.src == \"x\"", "integer field"},
		{"inport == 1", "string field"},
		{"tcp.src == 70000", "wider than the 16-bit field tcp.src"},
		{"tcp.src", "explicit comparison required"},
		{"a && b || c", "unknown field a"},
		{"ct.new && ct.est || ct.rel", "must be parenthesized"},
		{"eth.type < 5", "only == and != can compare nominal field eth.type"},
		{"inport != \"a\" && inport < \"b\"", "nominal"},
		{"ip6.dst == fe80::1/64", "at offset 11: value fe80::1/64 has 1-bits outside its mask"},
		{"tcp == 1", "predicate tcp cannot be compared"},
		{"ip4.src == @pg", "port group @pg can only be compared with inport or outport"},
		{"inport == $as", "address set $as cannot be compared"},
		{"(ct.new", "expected ')'"},
		{"ct.new ct.est", "unexpected \"ct.est\" after expression"},
		{"ip4.src == {}", "empty set"},
		{"tcp.src < {1, 2}", "cannot compare tcp.src with a set"},
		{"5", "constant 5 must be compared with a field"},
		{"icmp4.frag_mtu == 1500", "icmp4.frag_mtu can only be assigned, not matched"},
		{strings.Repeat("(", 500) + "1" + strings.Repeat(")", 500), "nested too deeply"},
		{strings.Repeat("!", 500) + "1", "nested too deeply"},
	}
	for _, tt := range tests {
		_, err := st.ParseExpr(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got error %v, want %q", tt.in, err, tt.want)
		}
	}
}
