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
		nd_ra tcp udp sctp igmp mldv1 mldv2 ip6.mcast ip6.mcast_rsvd icmp4.frag_mtu`) {
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

// TestExprGolden keeps what ParseExpr and CheckRefs make of every form
// and every error of testdata/exprs.txt in testdata/exprs.golden; each
// accepted match must also print to a text that parses back to itself.
func TestExprGolden(t *testing.T) {
	st := testSymtab(t)
	env := newTestEnv(t, st)
	var sb strings.Builder
	for _, c := range readCases(t, "testdata/exprs.txt") {
		sb.WriteString(c[0] + ": " + c[1] + "\n")
		e, err := st.ParseExpr(c[1])
		if err == nil {
			err = st.CheckRefs(e, env)
		}
		if err != nil {
			sb.WriteString("    error: " + err.Error() + "\n")
			continue
		}
		text := ExprString(e)
		sb.WriteString("    => " + text + "\n")
		again, err := st.ParseExpr(text)
		if err != nil {
			t.Errorf("%s: printed %q does not parse: %v", c[0], text, err)
		} else if ExprString(again) != text {
			t.Errorf("%s: printed %q reparses as %q", c[0], text, ExprString(again))
		}
	}
	checkGolden(t, "exprs.golden", sb.String())
}
