package ovsdb

import (
	"cmp"
	"math"
	"strconv"
	"strings"
)

// Atom is one value of an atomic type. Atoms are comparable with == (equal
// atoms are ==, reals are kept with -0 folded into 0) and small enough to
// pass by value. The zero Atom has TypeInvalid; use the constructors.
type Atom struct {
	t    AtomicType
	a, b uint64 // integer, real bits, boolean, or the UUID's two halves
	s    string
}

// Integer returns an integer atom.
func Integer(i int64) Atom { return Atom{t: TypeInteger, a: uint64(i)} }

// Real returns a real atom.
func Real(f float64) Atom {
	if f == 0 {
		f = 0 // fold -0 into 0 so == agrees with numeric equality
	}
	return Atom{t: TypeReal, a: math.Float64bits(f)}
}

// Boolean returns a boolean atom.
func Boolean(v bool) Atom {
	if v {
		return Atom{t: TypeBoolean, a: 1}
	}
	return Atom{t: TypeBoolean}
}

// String returns a string atom.
func String(s string) Atom { return Atom{t: TypeString, s: s} }

// UUIDAtom returns a uuid atom.
func UUIDAtom(u UUID) Atom { return Atom{t: TypeUUID, a: u.hi, b: u.lo} }

// DefaultAtom returns the default value of type t: 0, 0.0, false, "" or
// the all-zero UUID.
func DefaultAtom(t AtomicType) Atom { return Atom{t: t} }

// Type returns a's atomic type.
func (a Atom) Type() AtomicType { return a.t }

// Int returns an integer atom's value (0 for other types).
func (a Atom) Int() int64 { return int64(a.a) }

// Float returns a real atom's value.
func (a Atom) Float() float64 {
	if a.t != TypeReal {
		return 0
	}
	return math.Float64frombits(a.a)
}

// Bool returns a boolean atom's value.
func (a Atom) Bool() bool { return a.t == TypeBoolean && a.a != 0 }

// Str returns a string atom's value.
func (a Atom) Str() string { return a.s }

// UUID returns a uuid atom's value.
func (a Atom) UUID() UUID {
	if a.t != TypeUUID {
		return UUID{}
	}
	return UUID{a.a, a.b}
}

// Compare orders atoms of the same type as ovsdb-server does: numerically,
// false before true, strings bytewise, UUIDs as their strings. Atoms of
// different types order by type.
func (a Atom) Compare(b Atom) int {
	if a.t != b.t {
		return cmp.Compare(a.t, b.t)
	}
	switch a.t {
	case TypeInteger:
		return cmp.Compare(int64(a.a), int64(b.a))
	case TypeReal:
		return cmp.Compare(a.Float(), b.Float())
	case TypeBoolean:
		return cmp.Compare(a.a, b.a)
	case TypeString:
		return strings.Compare(a.s, b.s)
	case TypeUUID:
		return UUID{a.a, a.b}.Compare(UUID{b.a, b.b})
	}
	return 0
}

// String formats a as ovsdb-client and the *ctl tools print atoms in
// "bare" form: strings unquoted, UUIDs canonical.
func (a Atom) String() string {
	switch a.t {
	case TypeInteger:
		return strconv.FormatInt(a.Int(), 10)
	case TypeReal:
		return strconv.FormatFloat(a.Float(), 'g', -1, 64)
	case TypeBoolean:
		return strconv.FormatBool(a.Bool())
	case TypeString:
		return a.s
	case TypeUUID:
		return a.UUID().String()
	}
	return "<invalid atom>"
}

// AppendJSON appends a's JSON encoding: a number, boolean, string, or
// ["uuid", "..."].
func (a Atom) AppendJSON(b []byte) []byte {
	switch a.t {
	case TypeInteger:
		return strconv.AppendInt(b, a.Int(), 10)
	case TypeReal:
		return appendReal(b, a.Float())
	case TypeBoolean:
		return strconv.AppendBool(b, a.Bool())
	case TypeString:
		return AppendJSONString(b, a.s)
	case TypeUUID:
		b = append(b, `["uuid","`...)
		b = a.UUID().appendString(b)
		return append(b, `"]`...)
	}
	return append(b, "null"...)
}

// appendReal writes f as ovsdb-server writes a real: with 15 significant
// digits, so 2.0 is 2 and 1.7000000000000002 is 1.7 (clients read an
// integer as a real where the column is real).
func appendReal(b []byte, f float64) []byte {
	return strconv.AppendFloat(b, f, 'g', 15, 64)
}
