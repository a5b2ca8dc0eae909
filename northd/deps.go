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
	db     DB
	kind   depKind
	table  string
	id     ovsdb.UUID
	column string
	name   string
}

// depIndex maps each depKey to the owners that read it.
type depIndex map[depKey]map[*owner]struct{}

// add records that o reads k and says whether it was not recorded yet.
func (x depIndex) add(k depKey, o *owner) bool {
	s := x[k]
	if s == nil {
		s = make(map[*owner]struct{}, 1)
		x[k] = s
	} else if _, ok := s[o]; ok {
		return false
	}
	s[o] = struct{}{}
	return true
}

func (x depIndex) remove(k depKey, o *owner) {
	if s := x[k]; s != nil {
		delete(s, o)
		if len(s) == 0 {
			delete(x, k)
		}
	}
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
