package controller

import (
	"testing"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/schema/sb"
)

// FuzzTranslate adds one logical flow of any text to a small switch:
// the translation never panics, reports a flow it cannot use as a
// problem, and what it produces installs in the datapath.
func FuzzTranslate(f *testing.F) {
	for _, s := range [][2]string{
		{"1", "next;"},
		{`inport == "vm1" && ip4.src == 10.0.0.0/8`, `outport = "vm2"; output;`},
		{"tcp.dst == {80, 443} && ip4.dst == {10.0.0.1, 10.0.0.2}", "ct_next;"},
		{"ip4", "ct_lb_mark(backends=10.0.0.12:80,10.0.0.13:80);"},
		{"arp.op == 1", "eth.dst <-> eth.src; arp.op = 2; output;"},
		{"eth.dst ==", "next;"},
		{"ip4.dst == $bad", "drop;"},
	} {
		f.Add(s[0], s[1], uint8(1))
	}
	tr, err := NewTranslator()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, match, actions string, table uint8) {
		in := oneSwitch()
		ls := in.Datapaths[0].UUID
		in.Flows = append(in.Flows, sb.LogicalFlow{UUID: id(200), LogicalDatapath: &ls, Pipeline: "ingress",
			TableID: int64(table % 30), Priority: 100, Match: match, Actions: actions})
		out := tr.Translate(in)
		p := dp.NewPipeline()
		var b flow.Bundle
		for _, g := range out.Groups {
			b.AddGroup(g)
		}
		for _, r := range out.Rules {
			b.Add(r)
		}
		if _, err := p.Apply(b); err != nil {
			t.Fatalf("match %q actions %q: the translation does not install: %v", match, actions, err)
		}
	})
}
