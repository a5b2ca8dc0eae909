package xlate

import (
	"testing"

	"github.com/govn/govn/datapath/flow"
)

func mustActions(t *testing.T, s string) []flow.Action {
	t.Helper()
	as, err := flow.ParseActions(s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	if err := flow.ValidateActions(0, as); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return as
}

// TestStack: push/pop save and restore, exchange through the stack, and
// what each does to the megaflow's mask.
func TestStack(t *testing.T) {
	tests := []struct {
		name, table0, table5 string
		want                 string
		matched, unmatched   []flow.Field // fields the megaflow must (not) match
	}{
		{
			name:   "registers saved around a resubmit",
			table0: "load:0x3->reg0,push:reg0,load:0x7->reg0,resubmit(,5),pop:reg0,output:reg0",
			table5: "output:reg0",
			want:   "7,3", unmatched: []flow.Field{flow.EthSrc, flow.EthDst},
		},
		{
			name:   "exchange of packet fields",
			table0: "push:eth_src,push:eth_dst,pop:eth_src,pop:eth_dst,output:2",
			want:   "set(eth_src=00:00:00:00:00:0b),set(eth_dst=00:00:00:00:00:0a),2",
			// Both were read by push: the set values depend on them.
			matched: []flow.Field{flow.EthSrc, flow.EthDst},
		},
		{
			name:   "pop reads nothing",
			table0: "load:0x5->reg1,push:reg1,pop:tcp_dst,output:2",
			want:   "set(tp_dst=5),2", unmatched: []flow.Field{flow.TPDst},
		},
		{
			name:   "subfields; a pop writes the destination's width",
			table0: "push:tcp_src[0..7],pop:reg2[8..15],load:0x3->reg3,push:reg3,pop:reg2[0..0],move:reg2[0..15]->tcp_dst,output:2",
			want:   "set(tp_dst=257),2", matched: []flow.Field{flow.TPSrc},
		},
		{
			name:   "pop from an empty stack does nothing",
			table0: "load:0x4->reg0,pop:reg0,output:reg0",
			want:   "4",
		},
		{
			name:   "a clone's pushes and pops are undone after it",
			table0: "load:0x3->reg0,push:reg0,clone(pop:reg0,load:0x9->reg0,push:reg0),pop:reg1,output:reg1",
			table5: "",
			want:   "3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			specs := []ruleSpec{{0, 1, matchAll, mustActions(t, tt.table0)}}
			if tt.table5 != "" {
				specs = append(specs, ruleSpec{5, 1, matchAll, mustActions(t, tt.table5)})
			}
			ts := program(t, specs...)
			k := tcpKey(1, 2)
			res := New(ts).Translate(&k, Options{Trace: true})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if got := flow.DPActionsString(res.Actions); got != tt.want {
				t.Errorf("actions %s, want %s\n%s", got, tt.want, res.FormatTrace())
			}
			for _, f := range tt.matched {
				if res.Mask.Get(f).IsZero() {
					t.Errorf("megaflow does not match %s: %s", f, res.String())
				}
			}
			for _, f := range tt.unmatched {
				if !res.Mask.Get(f).IsZero() {
					t.Errorf("megaflow matches %s: %s", f, res.String())
				}
			}
		})
	}
}

// TestStackSurvivesRecirculation: values pushed before ct(table=N) are
// popped after the recirculation, and states differing only in their
// stacks are distinct.
func TestStackSurvivesRecirculation(t *testing.T) {
	ts := program(t,
		ruleSpec{0, 1, matchAll, mustActions(t, "push:tcp_src,ct(zone=1,table=3)")},
		ruleSpec{3, 1, matchAll, mustActions(t, "pop:reg0,output:reg0")},
	)
	tr := New(ts)
	ids := map[uint32]uint64{}
	for _, sport := range []uint64{7, 8} {
		k := tcpKey(sport, 2)
		res := tr.Translate(&k, Options{})
		rc := res.Actions[len(res.Actions)-1].(flow.DPRecirc)
		ids[rc.ID] = sport
		k.Set(flow.RecircID, uint64(rc.ID))
		res = tr.Translate(&k, Options{})
		if got, want := flow.DPActionsString(res.Actions), (flow.DPOutput{Port: uint32(sport)}).String(); got != want {
			t.Errorf("sport %d: after recirculation %s", sport, got)
		}
	}
	if len(ids) != 2 {
		t.Errorf("recirc ids %v: the stack is not part of the frozen state", ids)
	}
}

func TestStackLimit(t *testing.T) {
	ts := program(t, ruleSpec{0, 1, matchAll, mustActions(t, "push:reg0,resubmit(,0)")})
	k := tcpKey(1, 2)
	if res := New(ts).Translate(&k, Options{}); res.Err == nil {
		t.Error("unbounded pushes not stopped")
	}
}

func TestStackActionsRoundTrip(t *testing.T) {
	for _, s := range []string{"push:reg0", "pop:eth_src", "push:tp_src[0..7]", "pop:reg2[8]", "check_pkt_larger(1500)->reg0[6]"} {
		as := mustActions(t, s)
		if got := flow.ActionsString(as); got != s {
			t.Errorf("%s printed as %s", s, got)
		}
	}
	for _, bad := range []string{"pop:ct_state", "check_pkt_larger(1500)->reg0", "check_pkt_larger(x)->reg0[1]", "push:nosuch"} {
		as, err := flow.ParseActions(bad)
		if err == nil {
			err = flow.ValidateActions(0, as)
		}
		if err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
