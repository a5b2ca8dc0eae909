package dp

import (
	"strings"
	"testing"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
)

func macRule(table uint8, mac uint64, out uint32) flow.Rule {
	var m flow.Match
	m.Set(flow.EthDst, mac)
	return flow.Rule{Table: table, Priority: 100, Match: m, Actions: []flow.Action{flow.Output{Port: out}}}
}

func apply(t *testing.T, p *Pipeline, rules ...flow.Rule) {
	t.Helper()
	var b flow.Bundle
	for _, r := range rules {
		b.Add(r)
	}
	if _, err := p.Apply(b); err != nil {
		t.Fatal(err)
	}
}

// TestPipelineRevalidation programs real flow tables: a change to the
// table a megaflow used re-routes the next packet at once; a change to
// another table leaves the megaflow alone.
func TestPipelineRevalidation(t *testing.T) {
	p := NewPipeline()
	apply(t, p, macRule(0, mac2, 2))
	r := newRig(t, Config{Flows: p}, 3)

	r.inject(t, 1, udpFrame(mac2, mac1, 1, 2, 0), port.Offload{})
	r.expect(t, 2)
	apply(t, p, macRule(7, mac1, 1)) // unrelated table
	r.inject(t, 1, udpFrame(mac2, mac1, 1, 2, 0), port.Offload{})
	r.expect(t, 2)
	if s := r.d.Stats(); s.Invalidated != 0 || s.Upcalls != 1 {
		t.Errorf("after an unrelated change: invalidated %d upcalls %d, want 0, 1", s.Invalidated, s.Upcalls)
	}
	// The dump says which rule made the megaflow match eth_dst.
	mfs := r.d.Megaflows()
	if len(mfs) != 1 {
		t.Fatalf("%d megaflows, want 1", len(mfs))
	}
	if s := mfs[0].String(); !strings.Contains(s, "eth_dst") || !strings.Contains(s, "table 0") || mfs[0].Hits != 1 {
		t.Errorf("megaflow dump lacks the eth_dst reason or the hit:\n%s", s)
	} else {
		t.Logf("megaflow: %s", s)
	}
	apply(t, p, macRule(0, mac2, 3))
	r.inject(t, 1, udpFrame(mac2, mac1, 1, 2, 0), port.Offload{})
	r.expect(t, 3)
	r.expectNone(t, 2)
	if s := r.d.Stats(); s.Invalidated != 1 {
		t.Errorf("invalidated %d, want 1", s.Invalidated)
	}
}
