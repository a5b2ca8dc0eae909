// Package ovsdb holds the data model of the Open vSwitch Database (RFC 7047
// with the extensions of ovsdb(7)): schemas, atoms, data (sets and maps),
// rows, and their JSON encoding, plus the transaction engine that turns a
// "transact" request into an atomic change set over an immutable database
// snapshot.
//
// # Values
//
// An [Atom] is one scalar of one of the five atomic types (integer, real,
// boolean, string, uuid). It is a small comparable value: two atoms are
// equal exactly when == says so, and they can key Go maps. A [Datum] is the
// value of one column: a set of atoms, or a map from key atoms to value
// atoms, always kept in canonical form (sorted by key with no duplicates), so
// two equal data compare equal element by element and encode to the same
// JSON. A [Row] is a row's UUID, its version and one Datum per column, in the
// order of [TableSchema.Columns]. Rows and data are immutable once built:
// code that "changes" a row builds a new one and may share the old one's
// slices.
//
// # JSON
//
// Values decode from the generic form that encoding/json produces (decode
// with UseNumber, so integers and reals stay apart) against a [ColumnType],
// which validates them as ovsdb-server does: wrong shapes are "syntax error",
// values outside a column's constraints are "constraint violation". They
// encode with AppendJSON functions that append to a byte slice, the hot path
// of monitors and selects. Errors that go on the wire are [*Error] values
// carrying the RFC 7047 error tag and a details string for a person.
package ovsdb
