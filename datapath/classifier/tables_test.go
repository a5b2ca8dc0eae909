package classifier

import (
	"testing"

	"github.com/govn/govn/datapath/flow"
)

func TestTablesBundle(t *testing.T) {
	ts := NewTables()
	a := *rule(10, 1, func(m *flow.Match) { m.Set(flow.InPort, 1) })
	b := *rule(10, 2, func(m *flow.Match) { m.Set(flow.InPort, 2) })
	b.Table = 3
	b.Cookie = 0xab
	var bun flow.Bundle
	bun.Add(a)
	bun.Add(b)
	bun.AddGroup(flow.GroupDef{ID: 1, Buckets: []flow.Bucket{{Weight: 1, Actions: []flow.Action{flow.Output{Port: 4}}}}})
	gen, err := ts.Apply(bun)
	if err != nil || gen != 1 {
		t.Fatalf("Apply = %d, %v", gen, err)
	}

	// A bundle whose last operation fails changes nothing.
	var bad flow.Bundle
	bad.Delete(a)
	c := b
	c.Actions = []flow.Action{flow.Output{Port: 9}}
	bad.Modify(c)
	bad.DeleteGroup(1)
	missing := a
	missing.Priority = 99
	bad.Modify(missing)
	if _, err := ts.Apply(bad); err == nil {
		t.Fatal("bundle modifying a missing rule applied")
	}
	if ts.Generation() != 1 {
		t.Errorf("generation moved to %d on a failed bundle", ts.Generation())
	}
	k := flow.Key{}
	k.Set(flow.InPort, 1)
	ts.BeginRead()
	var wc flow.Mask
	if r := ts.Lookup(0, &k, &wc); r == nil || r.Actions[0].(flow.Output).Port != 1 {
		t.Errorf("rule a lost after a failed bundle: %v", r)
	}
	k.Set(flow.InPort, 2)
	if r := ts.Lookup(3, &k, &wc); r == nil || r.Actions[0].(flow.Output).Port != 2 {
		t.Errorf("rule b modified by a failed bundle: %v", r)
	}
	if ts.Group(1) == nil {
		t.Error("group deleted by a failed bundle")
	}
	ts.EndRead()

	// Delete by cookie.
	var del flow.Bundle
	del.DeleteCookie(0xab, ^uint64(0))
	if gen, err := ts.Apply(del); err != nil || gen != 2 {
		t.Fatalf("Apply = %d, %v", gen, err)
	}
	if n := len(ts.Dump(flow.NumTables)); n != 1 {
		t.Errorf("%d rules left, want 1", n)
	}
	if st := ts.TableStats(3); st.Lookups != 1 || st.Matched != 1 {
		t.Errorf("table 3 stats = %d lookups %d matched", st.Lookups, st.Matched)
	}

	// Invalid rules are refused.
	var inv flow.Bundle
	r := a
	r.Actions = []flow.Action{flow.GotoTable{Table: 0}}
	inv.Add(r)
	if _, err := ts.Apply(inv); err == nil {
		t.Error("goto_table backwards accepted")
	}
}

func TestChangedSince(t *testing.T) {
	ts := NewTables()
	add := func(table uint8) uint64 {
		var b flow.Bundle
		b.Add(*rule(1, 1, func(m *flow.Match) { m.Set(flow.InPort, uint64(table)) }))
		b.Ops[0].Rule.Table = table
		gen, err := ts.Apply(b)
		if err != nil {
			t.Fatal(err)
		}
		return gen
	}
	g1 := add(3)
	var used flow.TableSet
	used.Add(0)
	used.Add(3)
	if ts.ChangedSince(g1, &used, false) {
		t.Error("nothing changed after g1")
	}
	add(7)
	if ts.ChangedSince(g1, &used, false) {
		t.Error("table 7 is not used")
	}
	add(0)
	if !ts.ChangedSince(g1, &used, false) {
		t.Error("table 0 changed")
	}
	g4 := ts.Generation()
	var b flow.Bundle
	b.AddGroup(flow.GroupDef{ID: 1})
	if _, err := ts.Apply(b); err != nil {
		t.Fatal(err)
	}
	if ts.ChangedSince(g4, &used, false) || !ts.ChangedSince(g4, &used, true) {
		t.Error("a group change matters only to users of groups")
	}
	// A failed bundle changes nothing.
	g5 := ts.Generation()
	var bad flow.Bundle
	bad.Add(flow.Rule{Table: 0, Actions: []flow.Action{flow.GotoTable{Table: 0}}})
	if _, err := ts.Apply(bad); err == nil {
		t.Fatal("bad bundle applied")
	}
	if ts.ChangedSince(g5, &used, true) {
		t.Error("a failed bundle counted as a change")
	}
}

// BenchmarkApply20kRules adds 20,000 rules in one bundle (one subtable of
// /32 routes, as OVN's per-port rules are) and deletes them by cookie.
func BenchmarkApply20kRules(b *testing.B) {
	for b.Loop() {
		ts := NewTables()
		var add flow.Bundle
		for i := 0; i < 20000; i++ {
			r := flow.Rule{Table: 1, Priority: uint16(100 + i%50), Cookie: uint64(i % 2), Actions: []flow.Action{flow.Output{Port: 1}}}
			r.Match.Set(flow.EthType, 0x0800)
			r.Match.Set(flow.NWDst, uint64(0x0a000000+i))
			add.Add(r)
		}
		if _, err := ts.Apply(add); err != nil {
			b.Fatal(err)
		}
		var del flow.Bundle
		del.DeleteCookie(0, 1)
		del.DeleteCookie(1, 1)
		if _, err := ts.Apply(del); err != nil {
			b.Fatal(err)
		}
		if n := len(ts.Dump(flow.NumTables)); n != 0 {
			b.Fatalf("%d rules left", n)
		}
	}
}
