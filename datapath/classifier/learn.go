package classifier

import (
	"fmt"

	"github.com/govn/govn/datapath/flow"
)

// Learn installs rules that a learn action produced, leaving alone those
// already in place with the same cookie and actions, so re-learning a rule
// (every translation that runs the learn does) does not change the tables.
// It returns the new generation and whether anything changed; the
// generation moves only on a change.
func (ts *Tables) Learn(rules []flow.Rule) (uint64, bool, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var b flow.Bundle
	for _, r := range rules {
		if err := r.Validate(); err != nil {
			return ts.gen.Load(), false, fmt.Errorf("learned rule %s: %w", r.String(), err)
		}
		r.Match.Normalize()
		if old := ts.tables[r.Table].Find(r.Priority, r.Match); old != nil && sameRule(old, &r) {
			continue
		}
		b.Add(r)
	}
	return ts.applyLocked(b)
}

// Forget removes learned rules that idled out, unless the rule in their
// place has changed since (someone else installed one with the same
// priority and match).
func (ts *Tables) Forget(rules []flow.Rule) (uint64, bool, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var b flow.Bundle
	for _, r := range rules {
		if r.Table >= flow.NumTables {
			continue
		}
		r.Match.Normalize()
		if old := ts.tables[r.Table].Find(r.Priority, r.Match); old != nil && sameRule(old, &r) {
			b.Delete(r)
		}
	}
	return ts.applyLocked(b)
}

func sameRule(a, b *flow.Rule) bool {
	return a.Cookie == b.Cookie && flow.ActionsString(a.Actions) == flow.ActionsString(b.Actions)
}

// applyLocked applies a non-empty bundle with ts.mu held.
func (ts *Tables) applyLocked(b flow.Bundle) (uint64, bool, error) {
	if len(b.Ops) == 0 {
		return ts.gen.Load(), false, nil
	}
	gen, err := ts.applyBundle(b)
	return gen, err == nil, err
}
