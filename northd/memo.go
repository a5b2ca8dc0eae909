package northd

import "reflect"

// Memos are values derived from many rows that many owners read (a
// switch's facts, say): computed once, with their own recorded
// dependencies, and recomputed when those change. An owner that reads a
// memo depends on the memo's value, not on everything the memo read, so a
// change that leaves the value as it was (a new port on a switch that
// already had ACLs) regenerates the memo and nothing else.
//
// A memo's value is compared with reflect.DeepEqual, so it may hold slices
// and maps but must not be mutated once returned; its compute function must
// read only through the gen it is given.

// memoState is a memo's current value and how to compute it again.
type memoState struct {
	key     string
	value   any
	compute func(g *gen) any
}

// Memo returns the value of the memo named key, computing it (with
// compute) if it is not known yet, and makes the owner depend on it. Every
// caller must pass the same compute function for the same key.
func (g *gen) Memo(key string, compute func(g *gen) any) any {
	if g.x != nil {
		return g.specMemo(key, compute)
	}
	m := g.s.memos[key]
	if m == nil {
		o := &owner{key: ownerKey{kind: kindMemo}, memo: key}
		m = &memoState{key: key, compute: compute}
		g.s.memos[key] = m
		g.s.memoOwners[key] = o
		m.value = g.s.computeMemo(o, m)
	}
	// The memo's own copy of the key: every reader's dependency shares
	// it, instead of holding the string its caller just built.
	g.dep(depKey{kind: depDerived, name: m.key})
	return m.value
}

// computeMemo runs a memo's compute function as owner o, replacing o's
// recorded dependencies.
func (s *State) computeMemo(o *owner, m *memoState) any {
	for _, k := range o.deps {
		s.deps.remove(k, o)
	}
	o.deps = nil
	return m.compute(&gen{s: s, o: o})
}

// refreshMemo recomputes a stale memo and, if its value changed, marks its
// readers stale. A memo nobody reads any more is dropped.
func (s *State) refreshMemo(o *owner) {
	if set := s.dpSets[o.memo]; set != nil {
		s.refreshSet(o, set)
		return
	}
	m := s.memos[o.memo]
	if m == nil {
		return
	}
	dk := depKey{kind: depDerived, name: o.memo}
	if s.deps.count(dk) == 0 {
		for _, k := range o.deps {
			s.deps.remove(k, o)
		}
		delete(s.memos, o.memo)
		delete(s.memoOwners, o.memo)
		return
	}
	old := m.value
	m.value = s.computeMemo(o, m)
	if !reflect.DeepEqual(m.value, old) {
		s.touch(dk)
	}
}
