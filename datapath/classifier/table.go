package classifier

import (
	"slices"

	"github.com/govn/govn/datapath/flow"
)

// Table is one flow table: ordinary rules and conjunction clauses in one
// Classifier, and the rules matching conj_id in another.
type Table struct {
	plain *Classifier
	conj  *Classifier
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{plain: New(), conj: New()}
}

// Len returns the number of rules in t.
func (t *Table) Len() int { return t.plain.Len() + t.conj.Len() }

func (t *Table) classifierFor(r *flow.Rule) *Classifier {
	if !r.IsConjunctive() && r.Match.Mask.Get(flow.ConjID) != (flow.U128{}) {
		return t.conj
	}
	return t.plain
}

// Insert adds r, replacing and returning a rule with the same priority and
// match.
func (t *Table) Insert(r *flow.Rule) *flow.Rule {
	old := t.Remove(r.Priority, r.Match)
	t.classifierFor(r).Insert(r)
	return old
}

// Find returns the rule with this priority and match, or nil.
func (t *Table) Find(priority uint16, m flow.Match) *flow.Rule {
	for _, c := range [...]*Classifier{t.plain, t.conj} {
		if r := c.Find(priority, m); r != nil {
			return r
		}
	}
	return nil
}

// Remove deletes and returns the rule with this priority and match.
func (t *Table) Remove(priority uint16, m flow.Match) *flow.Rule {
	for _, c := range [...]*Classifier{t.plain, t.conj} {
		if r := c.Remove(priority, m); r != nil {
			return r
		}
	}
	return nil
}

// Rules calls fn for every rule until it returns false.
func (t *Table) Rules(fn func(*flow.Rule) bool) {
	ok := true
	for _, c := range [...]*Classifier{t.plain, t.conj} {
		c.Rules(func(r *flow.Rule) bool { ok = fn(r); return ok })
		if !ok {
			return
		}
	}
}

// Lookup returns the rule k runs in this table, or nil, adding the bits the
// decision examined to wc. When a conjunction completes above the best
// ordinary rule, the result is the conj_id rule for it (looked up with
// conj_id set in a copy of k); wc then includes conj_id bits, which are
// pipeline-only.
func (t *Table) Lookup(k *flow.Key, wc *flow.Mask) *flow.Rule {
	return t.LookupExplain(k, wc, nil)
}

// LookupExplain is Lookup that reports examined bits to explain (if not
// nil); see Classifier.LookupExplain.
func (t *Table) LookupExplain(k *flow.Key, wc *flow.Mask, explain Explain) *flow.Rule {
	return t.lookupExplain(k, wc, explain, nil)
}

func (t *Table) lookupExplain(k *flow.Key, wc *flow.Mask, explain Explain, scratch *flow.Mask) *flow.Rule {
	best, soft := t.plain.lookup(k, wc, explain, scratch, true)
	if len(soft) == 0 {
		return best
	}
	// Clauses found before the best ordinary rule may rank below it.
	soft = slices.DeleteFunc(soft, func(r *flow.Rule) bool { return best != nil && r.Priority <= best.Priority })
	slices.SortStableFunc(soft, func(a, b *flow.Rule) int { return int(b.Priority) - int(a.Priority) })
	for i := 0; i < len(soft); {
		j := i
		for j < len(soft) && soft[j].Priority == soft[i].Priority {
			j++
		}
		if r := t.completeConjunction(soft[i:j], k, wc, explain, scratch); r != nil {
			return r
		}
		i = j
	}
	return best
}

// completeConjunction finds a conjunction all of whose clauses are among
// level (matching clause rules of one priority), in increasing id order, and
// returns the conj_id rule it leads to.
func (t *Table) completeConjunction(level []*flow.Rule, k *flow.Key, wc *flow.Mask, explain Explain, scratch *flow.Mask) *flow.Rule {
	type progress struct {
		seen uint64
		n    uint8
	}
	byID := map[uint32]*progress{}
	for _, r := range level {
		for _, a := range r.Actions {
			c := a.(flow.Conjunction)
			p := byID[c.ID]
			if p == nil {
				p = &progress{n: c.NClauses}
				byID[c.ID] = p
			}
			p.seen |= 1 << (c.Clause - 1)
		}
	}
	ids := make([]uint32, 0, len(byID))
	for id, p := range byID {
		if p.seen == 1<<p.n-1 || (p.n == 64 && p.seen == ^uint64(0)) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		kc := *k
		kc.Set(flow.ConjID, uint64(id))
		if r, _ := t.conj.lookup(&kc, wc, explain, scratch, false); r != nil {
			return r
		}
	}
	return nil
}
