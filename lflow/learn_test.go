package lflow

import (
	"strings"
	"testing"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/xlate"
)

// TestLBAffinity compiles the affinity pair OVN emits (lflows-a.txt lines
// 413 and 421), runs a client's new connection through the learn, installs
// what it learned, and checks chk_lb_aff answers 1 for that client and 0
// for another.
func TestLBAffinity(t *testing.T) {
	_, c := testCompiler(t)
	lflows := []Lflow{
		{"ingress", 0, 100, "ip4 && reg1 == 30.0.0.3 && reg2[0..15] == 53", "reg9[6] = chk_lb_aff(); next;"},
		{"ingress", 1, 100, "reg9[6] == 1", "reg3 = reg4; reg5 = reg8; output;"},
		{"ingress", 1, 50, "reg9[6] == 0 && ip4 && udp.dst == 53",
			`commit_lb_aff(vip = "30.0.0.3:53", backend = "10.0.0.13:53", proto = udp, timeout = 60); output;`},
	}
	var b flow.Bundle
	for i := range lflows {
		var res Result
		if err := c.Compile(&lflows[i], &Context{Datapath: 7}, &res); err != nil {
			t.Fatalf("%s: %v", lflows[i].Actions, err)
		}
		for _, r := range res.Rules {
			b.Add(r)
		}
	}
	field := func(name string) flow.Field {
		f, _ := flow.FieldByName(name)
		return f
	}
	// Table 0 stands for the earlier stages: the datapath key, the VIP
	// and its port in reg1 and reg2 (OVN's REG_ORIG_DIP_IPV4 / _TP_DPORT).
	b.Add(flow.Rule{Table: 0, Priority: 1, Actions: []flow.Action{
		flow.Load{Dst: flow.Whole(field("metadata")), Value: flow.U128{Lo: 7}},
		flow.Load{Dst: flow.Whole(field("reg1")), Value: flow.U128{Lo: 0x1e000003}},
		flow.Load{Dst: flow.FieldRange{Field: field("reg2"), Bits: 16}, Value: flow.U128{Lo: 53}},
		flow.Resubmit{Table: 8}}})
	// Output: the backend in reg3/reg5 becomes the output port, to see it.
	b.Add(flow.Rule{Table: DefaultLayout().IngressOutput, Priority: 1, Actions: []flow.Action{
		flow.Output{PortField: flow.FieldRange{Field: field("reg3"), Bits: 8}},
		flow.Output{PortField: flow.FieldRange{Field: field("reg5"), Bits: 16}}}})
	ts := classifier.NewTables()
	if _, err := ts.Apply(b); err != nil {
		t.Fatal(err)
	}
	tr := xlate.New(ts)
	query := func(client uint64) xlate.Result {
		var k flow.Key
		k.Set(flow.InPort, 1)
		k.Set(flow.EthType, 0x800)
		k.Set(flow.NWProto, 17)
		k.Set(flow.NWSrc, client)
		k.Set(flow.NWDst, 0x1e000003)
		k.Set(flow.TPDst, 53)
		res := tr.Translate(&k, xlate.Options{Trace: true})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return res
	}
	first := query(0x0a000001)
	if first.Learned.Len() != 1 || first.Mask.Get(flow.NWSrc).IsZero() {
		t.Fatalf("first connection learned %d rules; megaflow %s", first.Learned.Len(), first.String())
	}
	if err := first.Learned.Install(); err != nil {
		t.Fatal(err)
	}
	rules := ts.Dump(int(DefaultLayout().Lookups["chk_lb_aff"].Table))
	if len(rules) != 1 || !strings.Contains(rules[0].String(), "nw_src=10.0.0.1") {
		t.Fatalf("learned rules: %v", rules)
	}
	// reg3 low byte = 13 (10.0.0.13), reg5 = 53: outputs 13 and 53.
	if got := flow.DPActionsString(query(0x0a000001).Actions); got != "13,53" {
		t.Errorf("same client: %s", got)
	}
	if res := query(0x0a000002); res.Learned.Len() != 1 {
		t.Errorf("another client did not go through the learn: %s", res.String())
	}
}

func TestCommitLBAffErrors(t *testing.T) {
	_, c := testCompiler(t)
	for _, tt := range []struct{ actions, err string }{
		{`commit_lb_aff(vip = "30.0.0.3:53", proto = udp);`, "expects backend="},
		{`commit_lb_aff(vip = "30.0.0.3:53", backend = "fd00::1", proto = udp);`, "not of the same IP version"},
		{`commit_lb_aff(vip = "x", backend = "10.0.0.1", proto = udp);`, "not IP"},
		{`commit_lb_aff(vip = "30.0.0.3:53", backend = "10.0.0.1", proto = icmp, timeout = 1);`, "must be tcp, udp or sctp"},
		{`commit_lb_aff(vip = "30.0.0.3", backend = "10.0.0.1", proto = tcp, timeout = 70000);`, "timeout"},
	} {
		var res Result
		err := c.Compile(&Lflow{Pipeline: "ingress", Priority: 1, Match: "ip4", Actions: tt.actions}, &Context{Datapath: 1}, &res)
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: error %v, want one saying %q", tt.actions, err, tt.err)
		}
	}
	var res Result
	if err := c.Compile(&Lflow{Pipeline: "ingress", Priority: 1, Match: "ip6",
		Actions: `commit_lb_aff(vip = "[fd00::10]:80", backend = "[fd00::2]:8080", proto = tcp, timeout = 5);`},
		&Context{Datapath: 1}, &res); err != nil {
		t.Fatal(err)
	}
	if got := flow.ActionsString(res.Rules[0].Actions); !strings.Contains(got, "match:fd00::10->ipv6_dst") || !strings.Contains(got, "->xxreg1") {
		t.Errorf("IPv6 affinity: %s", got)
	}
}
