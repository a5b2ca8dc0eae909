package classifier

import (
	"testing"

	"github.com/govn/govn/datapath/flow"
)

// TestRuleCountersAcrossChanges checks which bundle operations keep a
// rule's packet counts: modify does; an add over the same rule does not
// (as OVS's OpenFlow 1.0 add), nor a delete followed by an add; a failed
// bundle leaves the counter where it was.
func TestRuleCountersAcrossChanges(t *testing.T) {
	rule := func(out uint32) flow.Rule {
		var m flow.Match
		m.Set(flow.InPort, 1)
		return flow.Rule{Table: 2, Priority: 10, Match: m, Actions: []flow.Action{flow.Output{Port: out}}}
	}
	installed := func(t *testing.T, ts *Tables) *flow.PacketCounter {
		t.Helper()
		rs := ts.Dump(2)
		if len(rs) != 1 || rs[0].Stats == nil {
			t.Fatalf("dump of table 2: %v", rs)
		}
		return rs[0].Stats
	}
	for _, tt := range []struct {
		name   string
		change func(b *flow.Bundle)
		fails  bool
		want   uint64 // packets on the rule after the change
	}{
		{"modify", func(b *flow.Bundle) { b.Modify(rule(3)) }, false, 5},
		{"add over it", func(b *flow.Bundle) { b.Add(rule(3)) }, false, 0},
		{"delete and add", func(b *flow.Bundle) { b.Delete(rule(2)); b.Add(rule(3)) }, false, 0},
		{"delete all and add", func(b *flow.Bundle) {
			b.Ops = append(b.Ops, flow.Op{Kind: flow.OpDeleteAll})
			b.Add(rule(3))
		}, false, 0},
		{"failed modify", func(b *flow.Bundle) {
			b.Modify(rule(3))
			b.Add(flow.Rule{Table: 200, Actions: []flow.Action{flow.GotoTable{Table: 1}}})
		}, true, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := NewTables()
			var b flow.Bundle
			r := rule(2)
			r.Stats = flow.NewPacketCounter(99, nil) // a caller's counter is not used
			b.Add(r)
			if _, err := ts.Apply(b); err != nil {
				t.Fatal(err)
			}
			c := installed(t, ts)
			if c == r.Stats {
				t.Fatal("the tables kept the caller's counter")
			}
			c.Credit(5, 500)
			var ch flow.Bundle
			tt.change(&ch)
			if _, err := ts.Apply(ch); (err != nil) != tt.fails {
				t.Fatalf("Apply: %v", err)
			}
			got := installed(t, ts)
			if got.Packets() != tt.want {
				t.Errorf("rule has %d packets after the change, want %d", got.Packets(), tt.want)
			}
			// Whatever the rule's counter, the table's matched packets are
			// what was credited in it.
			if st := ts.TableStats(2); st.MatchedPackets != 5 {
				t.Errorf("table 2 matched %d packets, want 5", st.MatchedPackets)
			}
		})
	}
}

func TestMissCounter(t *testing.T) {
	ts := NewTables()
	ts.MissCounter(4).Credit(3, 300)
	if st := ts.TableStats(4); st.MissedPackets != 3 || st.MatchedPackets != 0 {
		t.Errorf("table 4: %+v, want 3 missed packets", st)
	}
	if ts.MissCounter(flow.NumTables) != nil {
		t.Error("a miss counter for a table out of range")
	}
	if ts.MissCounter(1).ID() == ts.MissCounter(2).ID() {
		t.Error("two tables' miss counters share an id")
	}
}
