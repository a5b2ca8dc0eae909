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
	if l, m := ts.TableStats(3); l != 1 || m != 1 {
		t.Errorf("table 3 stats = %d lookups %d matched", l, m)
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
