package northd

import (
	"slices"

	"github.com/govn/govn/ovsdb"
)

// depKind is what a generator read, and so what change makes it stale.
type depKind uint8

const (
	// depRow: a row's columns other than its membership columns (or the
	// row's existence).
	depRow depKind = iota
	// depColumn: one membership column of a row (Logical_Switch.ports).
	depColumn
	// depReferrers: which rows of a table refer to a row through a column
	// (the switches whose ports include a given port).
	depReferrers
	// depName: which rows of a table have a given name.
	depName
	// depTable: which rows a table has (inserts and deletes, not updates).
	depTable
	// depDerived: a value State derives from many rows (Features), named
	// by depKey.name, invalidated only when the value changes.
	depDerived
)

// depKey is one thing a generator read. Changes to the databases are
// turned into the depKeys they invalidate (rowDB.apply), and every owner
// that read one of them is generated again.
type depKey struct {
	db    DB
	kind  depKind
	table string
	id    ovsdb.UUID
	// name is the column of depColumn and depReferrers, the name of
	// depName and depDerived (no kind has both).
	name string
}

// depIndex maps each depKey to the owners that read it. An owner keeps
// the entries of what it read (owner.deps), so a key is stored once
// however many owners read it, and forgetting an owner's reads needs no
// lookup.
type depIndex map[depKey]*depEntry

// depEntry is one depKey and the owners that read it: most keys have one
// or a few, held in a short slice; a key that many read (a memo every
// switch reads) gets a set.
type depEntry struct {
	key  depKey
	few  []*owner
	many map[*owner]struct{}
}

// depFew is the most owners a key keeps in a slice.
const depFew = 8

// add records that o reads k and returns k's entry if it was not recorded
// yet.
func (x depIndex) add(k depKey, o *owner) (*depEntry, bool) {
	e := x[k]
	if e == nil {
		e = &depEntry{key: k, few: []*owner{o}}
		x[k] = e
		return e, true
	}
	if e.many != nil {
		if _, ok := e.many[o]; ok {
			return nil, false
		}
		e.many[o] = struct{}{}
		return e, true
	}
	if slices.Contains(e.few, o) {
		return nil, false
	}
	if len(e.few) < depFew {
		e.few = append(e.few, o)
		return e, true
	}
	e.many = make(map[*owner]struct{}, 2*depFew)
	for _, p := range e.few {
		e.many[p] = struct{}{}
	}
	e.many[o] = struct{}{}
	e.few = nil
	return e, true
}

// remove forgets that o reads e's key.
func (x depIndex) remove(e *depEntry, o *owner) {
	if e.many != nil {
		delete(e.many, o)
		if len(e.many) == 0 {
			delete(x, e.key)
		}
		return
	}
	i := slices.Index(e.few, o)
	if i < 0 {
		return
	}
	e.few = slices.Delete(e.few, i, i+1)
	if len(e.few) == 0 {
		delete(x, e.key)
	}
}

// owners returns the owners that read k; the caller must not change the
// slice, nor the index while it uses it.
func (x depIndex) owners(k depKey) []*owner {
	e := x[k]
	if e == nil {
		return nil
	}
	if e.many == nil {
		return e.few
	}
	out := make([]*owner, 0, len(e.many))
	for o := range e.many {
		out = append(out, o)
	}
	return out
}

// count returns how many owners read k.
func (x depIndex) count(k depKey) int {
	e := x[k]
	switch {
	case e == nil:
		return 0
	case e.many != nil:
		return len(e.many)
	}
	return len(e.few)
}

// sortedUUIDs returns the members of set in UUID order.
func sortedUUIDs(set map[ovsdb.UUID]struct{}) []ovsdb.UUID {
	out := make([]ovsdb.UUID, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.SortFunc(out, ovsdb.UUID.Compare)
	return out
}
