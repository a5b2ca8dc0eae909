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
//
// # Transactions
//
// A [Database] holds the committed rows of every table. It is not safe for
// concurrent use; its owner serializes access (the server holds one mutex
// per database). [Database.Transact] runs the operations of a "transact"
// request against it without changing it: each operation reads through an
// overlay of the rows the transaction has touched so far (old and new
// version per row), so a failing operation leaves nothing behind. When all
// operations succeed, the commit phase
//
//   - drops rows whose "changes" changed nothing,
//   - checks referential integrity (every strong reference must lead to a
//     row; a row still strongly referenced cannot be deleted),
//   - collects garbage: rows of non-root tables that no strong reference
//     from another row reaches any more are deleted, which may orphan
//     more rows,
//   - checks maxRows,
//   - removes weak references to rows that are gone, failing if a column
//     then falls below its minimum size,
//   - checks indexes (unique column combinations),
//   - stamps a new _version on every changed row.
//
// The checks run in ovsdb-server's order, and each visits rows in a fixed
// order (and the members of a JSON object in the order ovsdb-server's
// hash table does, see serverOrder), so a request with several errors
// gets the same one every time, and the one ovsdb-server reports; error
// objects carry ovsdb-server's texts and its "syntax" member.
//
// The result is a [ChangeSet] that the caller applies with
// [Database.Apply] (and may first log, or send to monitors, or both).
// Reference counts for garbage collection and a reverse map of weak
// references are kept up to date by Apply, so the commit phase costs work
// in proportion to what the transaction touched, never a table scan.
//
// "wait" operations that are not yet satisfied and have a timeout make
// Transact report Blocked; the caller runs the transaction again after
// later commits, and once more with [TxnOptions].WaitExpired when its time
// is up.
//
// Conditions on set columns (==, includes) are answered from secondary
// indexes that a [Table] builds the first time a condition needs one (see
// [Table.ForEachMatchAny]), so a monitor asking for "datapath == X" costs
// work in proportion to its rows, not to the table.
package ovsdb
