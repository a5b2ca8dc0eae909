package ovsdb

import (
	"slices"
)

// Datum is the value of a column: a set of Keys, or, when the column is a
// map, the pairs Keys[i] -> Values[i]. A Datum is kept canonical: Keys are
// sorted (Atom.Compare) with no duplicates. The zero Datum is the empty set
// (and the empty map). Data are immutable; functions that derive one datum
// from another never modify their inputs.
type Datum struct {
	Keys   []Atom
	Values []Atom // nil for a set; same length as Keys for a map
}

// Set returns the canonical set of the given atoms (sorted, duplicates
// dropped). It takes ownership of atoms.
func Set(atoms ...Atom) Datum {
	if len(atoms) > 1 && !isSortedUnique(atoms) {
		slices.SortFunc(atoms, Atom.Compare)
		atoms = slices.Compact(atoms)
	}
	return Datum{Keys: atoms}
}

// Scalar returns the one-element set {a}.
func Scalar(a Atom) Datum { return Datum{Keys: []Atom{a}} }

// Map returns the canonical map of keys to values; when a key repeats, the
// last value wins. It takes ownership of both slices, which must have the
// same length.
func Map(keys, values []Atom) Datum {
	if len(keys) != len(values) {
		panic("ovsdb.Map: keys and values differ in length")
	}
	if values == nil {
		values = []Atom{}
	}
	if len(keys) > 1 && !isSortedUnique(keys) {
		idx := make([]int, len(keys))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(i, j int) int { return keys[i].Compare(keys[j]) })
		nk := make([]Atom, 0, len(keys))
		nv := make([]Atom, 0, len(keys))
		for _, i := range idx {
			if n := len(nk); n > 0 && nk[n-1] == keys[i] {
				nv[n-1] = values[i]
				continue
			}
			nk = append(nk, keys[i])
			nv = append(nv, values[i])
		}
		keys, values = nk, nv
	}
	return Datum{Keys: keys, Values: values}
}

func isSortedUnique(atoms []Atom) bool {
	for i := 1; i < len(atoms); i++ {
		if atoms[i-1].Compare(atoms[i]) >= 0 {
			return false
		}
	}
	return true
}

// Len returns the number of elements (keys).
func (d Datum) Len() int { return len(d.Keys) }

// Find returns the index of key k in d and whether it is present.
func (d Datum) Find(k Atom) (int, bool) {
	return slices.BinarySearchFunc(d.Keys, k, Atom.Compare)
}

// Contains reports whether d has key k.
func (d Datum) Contains(k Atom) bool {
	_, ok := d.Find(k)
	return ok
}

// Lookup returns the value that map d has for key k.
func (d Datum) Lookup(k Atom) (Atom, bool) {
	i, ok := d.Find(k)
	if !ok || d.Values == nil {
		return Atom{}, false
	}
	return d.Values[i], true
}

// ContainsPair reports whether map d maps k to v.
func (d Datum) ContainsPair(k, v Atom) bool {
	got, ok := d.Lookup(k)
	return ok && got == v
}

// Equal reports whether d and e hold the same elements.
func (d Datum) Equal(e Datum) bool {
	return slices.Equal(d.Keys, e.Keys) && (d.Values == nil && e.Values == nil || slices.Equal(d.Values, e.Values))
}

// Compare orders data as ovsdb-server does (element by element, then by
// length); used for index keys and sorting.
func (d Datum) Compare(e Datum) int {
	for i := 0; i < len(d.Keys) && i < len(e.Keys); i++ {
		if c := d.Keys[i].Compare(e.Keys[i]); c != 0 {
			return c
		}
		if d.Values != nil && e.Values != nil {
			if c := d.Values[i].Compare(e.Values[i]); c != 0 {
				return c
			}
		}
	}
	switch {
	case len(d.Keys) < len(e.Keys):
		return -1
	case len(d.Keys) > len(e.Keys):
		return 1
	}
	return 0
}

// Includes reports whether every element of e is in d (for maps, every
// pair).
func (d Datum) Includes(e Datum) bool {
	if len(e.Keys) > len(d.Keys) {
		return false
	}
	i := 0
	for j, k := range e.Keys {
		for i < len(d.Keys) && d.Keys[i].Compare(k) < 0 {
			i++
		}
		if i == len(d.Keys) || d.Keys[i] != k {
			return false
		}
		if e.Values != nil && (d.Values == nil || d.Values[i] != e.Values[j]) {
			return false
		}
	}
	return true
}

// Union returns d with the elements of e added; for maps, keys already in d
// keep their value (the "insert" mutator).
func (d Datum) Union(e Datum) Datum {
	if len(e.Keys) == 0 {
		return d
	}
	if len(d.Keys) == 0 {
		return e
	}
	isMap := d.Values != nil || e.Values != nil
	keys := make([]Atom, 0, len(d.Keys)+len(e.Keys))
	var values []Atom
	if isMap {
		values = make([]Atom, 0, len(d.Keys)+len(e.Keys))
	}
	i, j := 0, 0
	for i < len(d.Keys) || j < len(e.Keys) {
		var c int
		switch {
		case i == len(d.Keys):
			c = 1
		case j == len(e.Keys):
			c = -1
		default:
			c = d.Keys[i].Compare(e.Keys[j])
		}
		if c <= 0 {
			keys = append(keys, d.Keys[i])
			if isMap {
				values = append(values, d.Values[i])
			}
			i++
			if c == 0 {
				j++
			}
		} else {
			keys = append(keys, e.Keys[j])
			if isMap {
				values = append(values, e.Values[j])
			}
			j++
		}
	}
	return Datum{Keys: keys, Values: values}
}

// Difference returns d without the elements of e. When e is a set and d a
// map, keys of e are removed; when both are maps, only pairs that match
// exactly are removed (the "delete" mutator).
func (d Datum) Difference(e Datum) Datum {
	if len(e.Keys) == 0 || len(d.Keys) == 0 {
		return d
	}
	keys := make([]Atom, 0, len(d.Keys))
	var values []Atom
	if d.Values != nil {
		values = make([]Atom, 0, len(d.Keys))
	}
	j := 0
	for i, k := range d.Keys {
		for j < len(e.Keys) && e.Keys[j].Compare(k) < 0 {
			j++
		}
		if j < len(e.Keys) && e.Keys[j] == k && (e.Values == nil || d.Values == nil || e.Values[j] == d.Values[i]) {
			continue
		}
		keys = append(keys, k)
		if d.Values != nil {
			values = append(values, d.Values[i])
		}
	}
	return Datum{Keys: keys, Values: values}
}
