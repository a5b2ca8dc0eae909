package lflow

import (
	"strings"
	"testing"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/xlate"
)

// TestCompileStackActions: push/pop and <-> compile to the datapath's
// stack actions; bad arguments are clear errors.
func TestCompileStackActions(t *testing.T) {
	_, c := testCompiler(t)
	tests := []struct {
		match, actions string
		want           string // the rule's actions, ovs-ofctl style
		err            string
	}{
		{"1", "push(reg1); reg1 = 5; pop(reg1);", "push:reg1,load:0x5->reg1,pop:reg1", ""},
		{"ip4", "push(ip4.src); pop(reg2);", "push:nw_src,pop:reg2", ""},
		{"1", "push(reg0[8..15]); pop(reg1[3]);", "push:reg0[8..15],pop:reg1[3]", ""},
		{"1", "reg0 <-> reg1;", "push:reg0,push:reg1,pop:reg0,pop:reg1", ""},
		{"1", "xxreg0 <-> xxreg1;", "push:xxreg0,push:xxreg1,pop:xxreg0,pop:xxreg1", ""},
		{"1", "pop(nosuch);", "", "unknown field"},
		{"1", "pop(eth.type);", "", "read-only"},
		{"1", "push(reg0[40]);", "", "outside"},
		{"1", "push(reg0, reg1);", "", "expected ')'"},
		{"1", "push(1);", "", "expected a field"},
		{"1", "reg9[1] = check_pkt_larger(1514);", "check_pkt_larger(1514)->reg9[1]", ""},
		{"1", "reg9[1..2] = check_pkt_larger(1514);", "", "where a 1-bit field is needed"},
		{"1", "reg9[1] = check_pkt_larger(70000);", "", "out of range"},
		{"1", "reg9[1] = check_pkt_larger(reg0);", "", "packet length"},
	}
	for _, tt := range tests {
		var res Result
		err := c.Compile(&Lflow{Pipeline: "ingress", Table: 0, Priority: 1, Match: tt.match, Actions: tt.actions},
			&Context{Datapath: 1}, &res)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want one saying %q", tt.actions, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.actions, err)
			continue
		}
		if got := flow.ActionsString(res.Rules[0].Actions); got != tt.want {
			t.Errorf("%s: compiled to %s, want %s", tt.actions, got, tt.want)
		}
	}
}

// TestLookupRestoresArguments runs lookup_arp through the datapath with a
// stub MAC-binding table that clobbers the registers it reads, as the
// real one may: after the lookup, reg0 and eth.src hold what they held
// before, and the result bit is set.
func TestLookupRestoresArguments(t *testing.T) {
	_, c := testCompiler(t)
	lflows := []Lflow{
		{"ingress", 0, 100, "arp", "reg0 = 123; reg9[2] = lookup_arp(inport, arp.spa, arp.sha); next;"},
		{"ingress", 1, 100, "reg0 == 123 && reg9[2] == 1", "output;"},
	}
	var b flow.Bundle
	for i := range lflows {
		var res Result
		if err := c.Compile(&lflows[i], &Context{Datapath: 7}, &res); err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Rules {
			b.Add(r)
		}
	}
	field := func(name string) flow.Field {
		f, ok := flow.FieldByName(name)
		if !ok {
			t.Fatalf("no field %s", name)
		}
		return f
	}
	b.Add(flow.Rule{Table: 0, Priority: 1, Actions: []flow.Action{
		flow.Load{Dst: flow.Whole(field("metadata")), Value: flow.U128{Lo: 7}}, flow.Resubmit{Table: 8}}})
	// The MAC binding table: found (flags bit 6), and clobbers reg0 and
	// eth.src.
	lk := DefaultLayout().Lookups["lookup_arp"]
	b.Add(flow.Rule{Table: lk.Table, Priority: 1, Actions: []flow.Action{
		flow.Load{Dst: flow.FieldRange{Field: field("reg10"), Ofs: uint(lk.Flag), Bits: 1}, Value: flow.U128{Lo: 1}},
		flow.Load{Dst: flow.Whole(field("reg0")), Value: flow.U128{Lo: 0xdead}},
		flow.Load{Dst: flow.Whole(field("eth_src")), Value: flow.U128{Lo: 0xbad}},
	}})
	b.Add(flow.Rule{Table: DefaultLayout().IngressOutput, Priority: 1, Actions: []flow.Action{flow.Output{Port: 9}}})
	ts := classifier.NewTables()
	if _, err := ts.Apply(b); err != nil {
		t.Fatal(err)
	}
	var k flow.Key
	k.Set(flow.InPort, 1)
	k.Set(flow.EthSrc, 0x0a)
	k.Set(flow.EthType, 0x806)
	k.Set(flow.ARPOp, 2)
	k.Set(flow.ARPSPA, 0x0a000001)
	k.Set(flow.ARPSHA, 0x0c)
	res := xlate.New(ts).Translate(&k, xlate.Options{Trace: true})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	as := res.Actions
	if len(as) == 0 || as[len(as)-1] != (flow.DPOutput{Port: 9}) {
		t.Fatalf("reg0 or the result not as expected after lookup_arp: %s\n%s", flow.DPActionsString(as), res.FormatTrace())
	}
	// The packet's eth.src ends as it began.
	for i := len(as) - 1; i >= 0; i-- {
		if s, ok := as[i].(flow.DPSetField); ok && s.Field == flow.EthSrc {
			if s.Value.Lo != 0x0a {
				t.Errorf("eth.src left as %x: %s", s.Value.Lo, flow.DPActionsString(as))
			}
			break
		}
	}
}

// TestCompileSetMeter: set_meter(rate[, burst]) compiles to a meter of
// that rate and burst in front of the rest of the actions.
func TestCompileSetMeter(t *testing.T) {
	_, c := testCompiler(t)
	for _, tt := range []struct{ actions, want string }{
		{"set_meter(1000, 100); reg1 = 5;", "meter(rate=1000,burst=100),load:0x5->reg1"},
		{"set_meter(64);", "meter(rate=64,burst=0)"},
	} {
		var res Result
		err := c.Compile(&Lflow{Pipeline: "ingress", Table: 0, Priority: 1, Match: "1", Actions: tt.actions},
			&Context{Datapath: 1}, &res)
		if err != nil {
			t.Errorf("%s: %v", tt.actions, err)
			continue
		}
		if got := flow.ActionsString(res.Rules[0].Actions); !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s: compiled to %s, want it to start with %s", tt.actions, got, tt.want)
		}
	}
}
