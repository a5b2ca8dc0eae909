package incproc

import (
	"iter"
	"maps"
	"strconv"
)

// Change is what happened to one key (a row, say) since its changes were
// last cleared.
type Change uint8

// The changes, as a net effect: Inserted (absent before, present now),
// Updated (present before and now, possibly different) and Deleted
// (present before, absent now).
const (
	Inserted Change = iota + 1
	Updated
	Deleted
)

func (c Change) String() string {
	switch c {
	case Inserted:
		return "inserted"
	case Updated:
		return "updated"
	case Deleted:
		return "deleted"
	}
	return "Change(" + strconv.Itoa(int(c)) + ")"
}

// ChangeSet is a typed tracked-data set for a node: the net change of
// each key since the set was last cleared. Because the engine clears a
// node's tracked data only once every reader consumed it, changes arrive
// on top of changes not yet consumed; Add merges them so that the set
// always says how the data differs from what the readers last saw. Its
// zero value is an empty set; Clear is a ClearTracked.
type ChangeSet[K comparable] struct {
	m map[K]Change
}

// Add records change c of key k, merged with k's earlier change: an
// insert then an update is an insert; an insert then a delete is nothing;
// a delete then an insert is an update; otherwise the later change wins.
func (s *ChangeSet[K]) Add(k K, c Change) {
	if s.m == nil {
		s.m = make(map[K]Change)
	}
	old, ok := s.m[k]
	switch {
	case !ok:
		s.m[k] = c
	case old == Inserted && c == Deleted:
		delete(s.m, k)
	case old == Inserted:
		// Still absent before and present now.
	case old == Deleted && c == Inserted:
		s.m[k] = Updated
	default:
		s.m[k] = c
	}
}

// Get returns k's change, if any.
func (s *ChangeSet[K]) Get(k K) (Change, bool) {
	c, ok := s.m[k]
	return c, ok
}

// Len returns the number of changed keys.
func (s *ChangeSet[K]) Len() int { return len(s.m) }

// All iterates over the changed keys and their changes, in no particular
// order.
func (s *ChangeSet[K]) All() iter.Seq2[K, Change] { return maps.All(s.m) }

// Clear empties the set.
func (s *ChangeSet[K]) Clear() { clear(s.m) }
