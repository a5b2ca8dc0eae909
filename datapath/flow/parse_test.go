package flow

import (
	"net/netip"
	"testing"
)

func TestParseRuleRoundTrip(t *testing.T) {
	for _, s := range []string{
		"table=1,priority=120,tcp,nw_dst=10.0.0.100,tp_dst=80 actions=load:0x1->reg10[3],set_field:10.0.0.100->nw_src,load:0xa000064->reg1,resubmit(,2)",
		"priority=10,in_port=1,eth_dst=00:00:00:00:00:0b actions=output:2",
		"table=3,priority=5,ct_state=+trk+est-new,reg14=0x3 actions=goto_table:4",
		"table=3,priority=5,ct_state=0x100/0x100 actions=drop",
		"cookie=0xabc,icmp6,icmp_type=135,ipv6_src=fd00::/64,nd_target=fd00::5 actions=drop",
		"table=2,priority=7,ip,nw_src=10.0.0.0/255.0.255.0 actions=ct(commit,zone=reg13[0..15],table=5,nat(dst=10.0.0.1-10.0.0.3:80-81,random),exec(load:0x1->ct_mark[1],load:0x5->ct_label))",
		"priority=1,tcp6 actions=ct(zone=3,nat(src=[fd00::1]:1000)),ct_clear,clone(push_vlan:0x8100,load:0x1005->vlan_tci,output:3),pop_vlan,dec_ttl",
		"priority=9,arp,arp_tpa=10.0.0.1,arp_op=1 actions=move:arp_sha->eth_dst,move:reg0[0..15]->arp_op,controller(pause,userdata=00.00.00.01),group:4,exit",
		"priority=9,ip,nw_src=10.0.0.1 actions=conjunction(7,1/2)",
		"priority=9,udp actions=meter(rate=1000,burst=200),output:2",
		"priority=9,conj_id=7 actions=output:reg15,in_port",
		"priority=3,xxreg0=0x1000000000000000000000000000002 actions=load:0xffffffffffffffffffffffffffffffff->xxreg1",
	} {
		r, err := ParseRule(s)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", s, err)
			continue
		}
		again, err := ParseRule(r.String())
		if err != nil {
			t.Errorf("ParseRule(String()) of %q: %v\n%s", s, err, r.String())
			continue
		}
		if again.String() != r.String() {
			t.Errorf("round trip changed %q:\n%s\n%s", s, r.String(), again.String())
		}
	}
	for _, bad := range []string{"actions=meter(rate=0)", "actions=meter(rate=x)", "actions=meter(size=5)"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted", bad)
		}
	}
	if r, err := ParseRule("actions=meter(rate=64)"); err != nil || r.Actions[0] != (Meter{RateKbps: 64}) {
		t.Errorf("meter(rate=64): %v, %v", r, err)
	}
	r, _ := ParseRule("table=2,priority=7,ip,nw_src=10.0.0.0/8,ct_state=+trk-new actions=ct(nat(dst=10.0.0.1:80))")
	if r.Table != 2 || r.Priority != 7 || r.Match.Key.Get(NWSrc) != 0x0a000000 || r.Match.Mask.Get(NWSrc).Lo != 0xff000000 {
		t.Errorf("parsed %s", r.String())
	}
	if v, m := r.Match.Key.Get(CTState), r.Match.Mask.Get(CTState).Lo; v != 0x20 || m != 0x21 {
		t.Errorf("ct_state %x/%x", v, m)
	}
	nat := r.Actions[0].(CT).NAT
	if !nat.Dst || nat.AddrMin != netip.MustParseAddr("10.0.0.1") || nat.PortMin != 80 {
		t.Errorf("nat %+v", nat)
	}
}

func TestParseRuleErrors(t *testing.T) {
	for _, s := range []string{
		"priority=1",
		"priority=1,nosuch=1 actions=drop",
		"priority=70000 actions=drop",
		"table=255 actions=drop",
		"tcp_dst=70000 actions=drop",
		"nw_dst=10.0.0.0/40 actions=drop",
		"ct_state=+bogus actions=drop",
		"actions=frobnicate",
		"actions=load:1",
		"actions=move:reg0->tcp_dst",
		"actions=ct(zone=nosuch)",
		"actions=ct(nat(src=1.2.3))",
		"actions=goto_table:0",
		// ovs-ofctl reads load's value as an integer, this one as 10.
		"ip actions=load:10.0.0.1->nw_dst",
		"actions=load:00:00:00:00:00:01->eth_dst",
		"actions=drop,drop",
		"bogus actions=drop",
		"importance=5 actions=drop",
		"send_flow_rem,in_port=1 actions=drop",
		"idle_timeout=10 actions=drop",
		"hard_timeout=x actions=drop",
		"in_port=1,priority=5 actions=drop,output:1",
	} {
		if r, err := ParseRule(s); err == nil {
			t.Errorf("ParseRule(%q) accepted: %s", s, r.String())
		}
	}
}

func FuzzParseRule(f *testing.F) {
	f.Add("table=1,priority=120,tcp,nw_dst=10.0.0.100,tp_dst=80 actions=load:0x1->reg10[3],resubmit(,2)")
	f.Add("priority=1 actions=ct(commit,zone=reg13[0..15],table=5,nat(dst=[fd00::1]:80),exec(load:0x1->ct_mark))")
	f.Add("ct_state=+trk-new,ipv6_src=fd00::/64 actions=clone(output:1),controller(userdata=01.02)")
	f.Add("tcp actions=learn(table=78,priority=100,idle_timeout=30,match:nw_src->nw_src,load:0x1->reg10[14]),push:reg0,pop:reg1,check_pkt_larger(1500)->reg9[1]")
	for _, r := range ofctlRules {
		f.Add(r)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		again, err := ParseRule(r.String())
		if err != nil {
			t.Fatalf("%q parsed to %q, which does not parse: %v", s, r.String(), err)
		}
		if again.String() != r.String() {
			t.Fatalf("round trip: %q → %q", r.String(), again.String())
		}
	})
}

// TestParseRuleDefaults checks ovs-ofctl's defaults without ovs-ofctl at
// hand (TestParseRuleAgainstOfctl checks them against it).
func TestParseRuleDefaults(t *testing.T) {
	for _, tc := range []struct {
		text            string
		table, priority uint64
		cookie          uint64
	}{
		{"actions=drop", 0, 32768, 0},
		{"idle_timeout=0,hard_timeout=0 actions=drop", 0, 32768, 0},
		{"table=3,cookie=0x10 actions=drop", 3, 32768, 0x10},
		{"priority=0 actions=drop", 0, 0, 0},
	} {
		r, err := ParseRule(tc.text)
		if err != nil {
			t.Errorf("%q: %v", tc.text, err)
			continue
		}
		if uint64(r.Table) != tc.table || uint64(r.Priority) != tc.priority || r.Cookie != tc.cookie {
			t.Errorf("%q: table %d priority %d cookie %#x, want %d %d %#x", tc.text, r.Table, r.Priority, r.Cookie, tc.table, tc.priority, tc.cookie)
		}
	}
	r, err := ParseRule("arp,nw_proto=2 actions=drop")
	if err != nil || r.Match.Key.Get(ARPOp) != 2 || !r.Match.Mask.Get(NWProto).IsZero() {
		t.Errorf("arp,nw_proto=2 is the ARP opcode: %v %v", r.String(), err)
	}
}
