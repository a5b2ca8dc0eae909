package classifier

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/govn/govn/datapath/flow"
)

// Tables is a bridge's flow tables 0..254 and its groups. It implements
// flow.Programmer. The zero value is not usable; call NewTables.
type Tables struct {
	mu     sync.RWMutex
	tables [flow.NumTables]*Table
	groups map[uint32]*flow.GroupDef
	gen    atomic.Uint64
	stats  [flow.NumTables]tableStats
	// tableGen[t] is the generation that last changed table t; groupGen
	// the one that last changed a group. Revalidation uses them to skip
	// megaflows whose tables did not change.
	tableGen [flow.NumTables]uint64
	groupGen uint64
	// counterIDs numbers the packet counters of rules and tables.
	counterIDs atomic.Uint64
}

// tableStats are a table's counters: the slow path's lookups, and the
// packets credited from megaflows (a rule's counter credits matched).
type tableStats struct {
	lookups, matched atomic.Uint64
	matchedPackets   *flow.PacketCounter
	missedPackets    *flow.PacketCounter
}

// NewTables returns empty tables at generation 0.
func NewTables() *Tables {
	ts := &Tables{groups: map[uint32]*flow.GroupDef{}}
	for i := range ts.tables {
		ts.tables[i] = NewTable()
		ts.stats[i].matchedPackets = ts.newCounter(nil)
		ts.stats[i].missedPackets = ts.newCounter(nil)
	}
	return ts
}

// Generation returns the number of bundles applied so far.
func (ts *Tables) Generation() uint64 { return ts.gen.Load() }

// BeginRead takes the read lock and returns the generation it sees; Lookup
// and Group may be called until EndRead. Bundles wait for readers.
func (ts *Tables) BeginRead() uint64 {
	ts.mu.RLock()
	return ts.gen.Load()
}

// EndRead releases the read lock taken by BeginRead.
func (ts *Tables) EndRead() { ts.mu.RUnlock() }

// Lookup finds the rule k runs in table, adding examined bits to wc. Call
// it between BeginRead and EndRead.
func (ts *Tables) Lookup(table uint8, k *flow.Key, wc *flow.Mask) *flow.Rule {
	return ts.LookupExplain(table, k, wc, nil)
}

// LookupExplain is Lookup that reports examined bits to explain (if not
// nil); see Classifier.LookupExplain.
func (ts *Tables) LookupExplain(table uint8, k *flow.Key, wc *flow.Mask, explain Explain) *flow.Rule {
	return ts.LookupExplainScratch(table, k, wc, explain, nil)
}

// LookupExplainScratch is LookupExplain with the mask it gathers each
// probe's bits in: scratch must be zero and is left zero, so that a
// caller making many lookups (a translation) allocates none. Nil
// allocates one per lookup.
func (ts *Tables) LookupExplainScratch(table uint8, k *flow.Key, wc *flow.Mask, explain Explain, scratch *flow.Mask) *flow.Rule {
	if table >= flow.NumTables {
		return nil
	}
	r := ts.tables[table].lookupExplain(k, wc, explain, scratch)
	ts.stats[table].lookups.Add(1)
	if r != nil {
		ts.stats[table].matched.Add(1)
	}
	return r
}

// Group returns group id, or nil. Call it between BeginRead and EndRead.
func (ts *Tables) Group(id uint32) *flow.GroupDef { return ts.groups[id] }

// newCounter returns a packet counter with a fresh id.
func (ts *Tables) newCounter(parent *flow.PacketCounter) *flow.PacketCounter {
	return flow.NewPacketCounter(ts.counterIDs.Add(1), parent)
}

// MissCounter returns the counter a translation credits for a lookup in
// table that matched no rule (a lookup that matched credits the rule's
// Stats, which credit the table's matched packets).
func (ts *Tables) MissCounter(table uint8) *flow.PacketCounter {
	if table >= flow.NumTables {
		return nil
	}
	return ts.stats[table].missedPackets
}

// TableStats are a table's counters.
type TableStats struct {
	// Lookups and Matched count the slow path's lookups in the table
	// (upcalls, revalidations, traces) and those that found a rule.
	Lookups, Matched uint64
	// MatchedPackets and MissedPackets count the packets that found a
	// rule in the table, or none, as credited from megaflows so far.
	MatchedPackets, MissedPackets uint64
}

// TableStats returns table's counters.
func (ts *Tables) TableStats(table uint8) TableStats {
	if table >= flow.NumTables {
		return TableStats{}
	}
	s := &ts.stats[table]
	return TableStats{
		Lookups: s.lookups.Load(), Matched: s.matched.Load(),
		MatchedPackets: s.matchedPackets.Packets(), MissedPackets: s.missedPackets.Packets(),
	}
}

// RuleCounts returns the number of rules in each table.
func (ts *Tables) RuleCounts() [flow.NumTables]int {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	var n [flow.NumTables]int
	for i, t := range ts.tables {
		n[i] = t.Len()
	}
	return n
}

// Dump returns a copy of every rule of table (all tables if table is
// flow.NumTables), for observability.
func (ts *Tables) Dump(table int) []flow.Rule {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	var out []flow.Rule
	for i, t := range ts.tables {
		if table != flow.NumTables && i != table {
			continue
		}
		t.Rules(func(r *flow.Rule) bool { out = append(out, *r); return true })
	}
	return out
}

// undo reverses one applied change.
type undo func()

// Apply applies b atomically and returns the new generation. If any
// operation fails, the ones before it are undone, the generation is
// unchanged and the error says which operation failed.
func (ts *Tables) Apply(b flow.Bundle) (uint64, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.applyBundle(b)
}

// applyBundle is Apply with ts.mu held.
func (ts *Tables) applyBundle(b flow.Bundle) (uint64, error) {
	var undos []undo
	var touched flow.TableSet
	groups := false
	for i, op := range b.Ops {
		u, err := ts.apply(op, &touched)
		if err != nil {
			for j := len(undos) - 1; j >= 0; j-- {
				undos[j]()
			}
			return ts.gen.Load(), fmt.Errorf("bundle operation %d: %w", i, err)
		}
		undos = append(undos, u...)
		groups = groups || op.Kind == flow.OpAddGroup || op.Kind == flow.OpDeleteGroup || op.Kind == flow.OpDeleteAll
	}
	gen := ts.gen.Add(1)
	for t := range ts.tableGen {
		if touched.Has(uint8(t)) {
			ts.tableGen[t] = gen
		}
	}
	if groups {
		ts.groupGen = gen
	}
	return gen, nil
}

// ChangedSince reports whether any of tables (or, with groups, any group)
// changed after generation since. A translation that looked only at
// unchanged tables is still valid.
func (ts *Tables) ChangedSince(since uint64, tables *flow.TableSet, groups bool) bool {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	if groups && ts.groupGen > since {
		return true
	}
	for t, g := range ts.tableGen {
		if g > since && tables.Has(uint8(t)) {
			return true
		}
	}
	return false
}

func (ts *Tables) apply(op flow.Op, touched *flow.TableSet) ([]undo, error) {
	switch op.Kind {
	case flow.OpAdd, flow.OpModify:
		r := op.Rule
		if err := r.Validate(); err != nil {
			return nil, err
		}
		r.Match.Normalize()
		t := ts.tables[r.Table]
		if op.Kind == flow.OpModify && t.Find(r.Priority, r.Match) == nil {
			return nil, fmt.Errorf("modify: no rule in table %d with priority %d and match %q", r.Table, r.Priority, r.Match.String())
		}
		nr := &r
		touched.Add(r.Table)
		old := t.Insert(nr)
		// A modified rule keeps its counts; an added one starts anew,
		// even over an existing rule, as an OpenFlow 1.0 add does in OVS
		// (what ovs-ofctl add-flow sends).
		if op.Kind == flow.OpModify && old != nil && old.Stats != nil {
			nr.Stats = old.Stats
		} else {
			nr.Stats = ts.newCounter(ts.stats[r.Table].matchedPackets)
		}
		return []undo{func() {
			t.Remove(nr.Priority, nr.Match)
			if old != nil {
				t.Insert(old)
			}
		}}, nil
	case flow.OpDelete:
		r := op.Rule
		if r.Table >= flow.NumTables {
			return nil, fmt.Errorf("table %d out of range", r.Table)
		}
		t := ts.tables[r.Table]
		old := t.Remove(r.Priority, r.Match)
		if old == nil {
			return nil, nil
		}
		touched.Add(r.Table)
		return []undo{func() { t.Insert(old) }}, nil
	case flow.OpDeleteCookie:
		var us []undo
		for i, t := range ts.tables {
			var del []*flow.Rule
			t.Rules(func(r *flow.Rule) bool {
				if (r.Cookie^op.Rule.Cookie)&op.CookieMask == 0 {
					del = append(del, r)
				}
				return true
			})
			for _, r := range del {
				t.Remove(r.Priority, r.Match)
				us = append(us, func() { t.Insert(r) })
				touched.Add(uint8(i))
			}
		}
		return us, nil
	case flow.OpAddGroup:
		g := op.Group
		for i, b := range g.Buckets {
			if err := flow.ValidateActions(0, b.Actions); err != nil {
				return nil, fmt.Errorf("group %d bucket %d: %w", g.ID, i, err)
			}
			for _, a := range b.Actions {
				if _, ok := a.(flow.GotoTable); ok {
					return nil, fmt.Errorf("group %d bucket %d: goto_table is not allowed in a bucket", g.ID, i)
				}
			}
		}
		old, had := ts.groups[g.ID]
		ts.groups[g.ID] = &g
		return []undo{func() {
			if had {
				ts.groups[g.ID] = old
			} else {
				delete(ts.groups, g.ID)
			}
		}}, nil
	case flow.OpDeleteGroup:
		old, had := ts.groups[op.Group.ID]
		if !had {
			return nil, nil
		}
		delete(ts.groups, op.Group.ID)
		return []undo{func() { ts.groups[op.Group.ID] = old }}, nil
	case flow.OpDeleteAll:
		oldTables, oldGroups := ts.tables, ts.groups
		for i := range ts.tables {
			ts.tables[i] = NewTable()
			touched.Add(uint8(i))
		}
		ts.groups = map[uint32]*flow.GroupDef{}
		return []undo{func() { ts.tables, ts.groups = oldTables, oldGroups }}, nil
	}
	return nil, fmt.Errorf("unknown operation kind %d", op.Kind)
}

var _ flow.Programmer = (*Tables)(nil)
