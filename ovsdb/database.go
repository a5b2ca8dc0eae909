package ovsdb

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Database is the committed contents of one database. It is not safe for
// concurrent use: its owner (the server) serializes transactions and reads.
type Database struct {
	Schema *Schema
	tables map[string]*Table
	// strong counts the strong references to each row from every row.
	strong map[UUID]int
	// weak records, for each row, the rows holding weak references to it,
	// so deleting a row finds what to clean without a scan.
	weak map[UUID]map[rowRef]int
	// uuids generates row UUIDs and versions.
	uuids *UUIDSource
}

type rowRef struct {
	table *TableSchema
	uuid  UUID
}

// Table is the committed contents of one table.
type Table struct {
	Schema *TableSchema
	Rows   map[UUID]*Row
	// indexes[i] maps the key of Schema.Indexes[i] to the row holding it.
	indexes []map[string]UUID
	refCols []*ColumnSchema
	// atoms holds secondary indexes built on first use by conditions: for
	// a set column, each atom maps to the rows whose value contains it.
	atoms map[*ColumnSchema]map[Atom]map[UUID]*Row
}

// NewDatabase returns an empty database for schema s.
func NewDatabase(s *Schema) *Database {
	db := &Database{Schema: s, tables: make(map[string]*Table, len(s.Tables)), strong: map[UUID]int{}, weak: map[UUID]map[rowRef]int{}, uuids: NewUUIDSource()}
	for name, ts := range s.Tables {
		t := &Table{Schema: ts, Rows: map[UUID]*Row{}, indexes: make([]map[string]UUID, len(ts.Indexes))}
		for i := range t.indexes {
			t.indexes[i] = map[string]UUID{}
		}
		t.refCols = refColumns(ts)
		db.tables[name] = t
	}
	return db
}

func refColumns(ts *TableSchema) []*ColumnSchema {
	var cols []*ColumnSchema
	for _, c := range ts.Columns {
		if c.Type.Key.RefTable != "" || (c.Type.Value != nil && c.Type.Value.RefTable != "") {
			cols = append(cols, c)
		}
	}
	return cols
}

// Table returns the named table, or nil.
func (db *Database) Table(name string) *Table { return db.tables[name] }

// Row returns the committed row uuid of table name, or nil.
func (db *Database) Row(table string, uuid UUID) *Row {
	t := db.tables[table]
	if t == nil {
		return nil
	}
	return t.Rows[uuid]
}

// ChangeSet is what one transaction changed: for each table, for each row,
// its old and new versions (Old nil: inserted; New nil: deleted).
type ChangeSet struct {
	Tables map[string]map[UUID]*RowChange
	// Comment joins the transaction's comment operations.
	Comment string
	// TextSize is the size of a large transaction's operations as text
	// (zero for a small one): about what its rows take encoded, to size
	// the buffers they are encoded into, which would otherwise be copied
	// over and over as they grow.
	TextSize int
}

// RowChange is one row's change.
type RowChange struct {
	Old, New *Row
}

// Len returns the number of rows cs changes.
func (cs *ChangeSet) Len() int {
	n := 0
	for _, rows := range cs.Tables {
		n += len(rows)
	}
	return n
}

// Empty reports whether cs changes nothing.
func (cs *ChangeSet) Empty() bool {
	if cs == nil {
		return true
	}
	for _, rows := range cs.Tables {
		if len(rows) > 0 {
			return false
		}
	}
	return true
}

// ref is one reference from a row: its target and whether it is strong.
type ref struct {
	table  *TableSchema
	target UUID
	// strong is set for a strong reference to another row: like
	// ovsdb-server, govn counts no row's references to itself, so a
	// row of a non-root table that only refers to itself is garbage.
	strong bool
	col    *ColumnSchema
}

// forEachRef calls fn for every reference that r (a row of t) holds.
func (db *Database) forEachRef(t *Table, r *Row, fn func(ref)) {
	if r == nil {
		return
	}
	for _, c := range t.refCols {
		d := r.Data[c.Index]
		if rt := c.Type.Key.RefTable; rt != "" {
			ts := db.Schema.Tables[rt]
			for _, k := range d.Keys {
				fn(ref{ts, k.UUID(), c.Type.Key.RefType == RefStrong && !r.isSelf(ts, t, k), c})
			}
		}
		if c.Type.Value != nil && c.Type.Value.RefTable != "" {
			ts := db.Schema.Tables[c.Type.Value.RefTable]
			for _, v := range d.Values {
				fn(ref{ts, v.UUID(), c.Type.Value.RefType == RefStrong && !r.isSelf(ts, t, v), c})
			}
		}
	}
}

// isSelf reports whether a, a reference into table to of row r of table
// from, refers to r itself.
func (r *Row) isSelf(to *TableSchema, from *Table, a Atom) bool {
	return to == from.Schema && a.UUID() == r.UUID
}

// indexKey renders the values of index cols of row r as a map key.
func indexKey(r *Row, cols []*ColumnSchema) string {
	var b []byte
	for _, c := range cols {
		b = r.Get(c).AppendJSON(b, &c.Type)
		b = append(b, 0)
	}
	return string(b)
}

// Apply makes cs part of the committed state. cs must come from Transact
// on this database (or from ApplyRecord), with nothing committed between.
func (db *Database) Apply(cs *ChangeSet) {
	for name, rows := range cs.Tables {
		t := db.tables[name]
		for uuid, ch := range rows {
			if ch.Old != nil {
				for i, cols := range t.Schema.Indexes {
					k := indexKey(ch.Old, cols)
					if t.indexes[i][k] == uuid {
						delete(t.indexes[i], k)
					}
				}
				db.forEachRef(t, ch.Old, func(r ref) { db.dropRef(r, t.Schema, uuid) })
				t.unindexAtoms(ch.Old)
			}
			if ch.New == nil {
				delete(t.Rows, uuid)
				continue
			}
			t.Rows[uuid] = ch.New
			for i, cols := range t.Schema.Indexes {
				t.indexes[i][indexKey(ch.New, cols)] = uuid
			}
			db.forEachRef(t, ch.New, func(r ref) { db.addRef(r, t.Schema, uuid) })
			t.indexAtoms(ch.New)
		}
	}
}

func (db *Database) addRef(r ref, from *TableSchema, uuid UUID) {
	if r.strong {
		db.strong[r.target]++
		return
	}
	m := db.weak[r.target]
	if m == nil {
		m = map[rowRef]int{}
		db.weak[r.target] = m
	}
	m[rowRef{from, uuid}]++
}

func (db *Database) dropRef(r ref, from *TableSchema, uuid UUID) {
	if r.strong {
		if n := db.strong[r.target] - 1; n > 0 {
			db.strong[r.target] = n
		} else {
			delete(db.strong, r.target)
		}
		return
	}
	m := db.weak[r.target]
	k := rowRef{from, uuid}
	if n := m[k] - 1; n > 0 {
		m[k] = n
	} else {
		delete(m, k)
		if len(m) == 0 {
			delete(db.weak, r.target)
		}
	}
}

// Record renders cs as a storage record body: table -> row UUID -> the
// row's new non-ephemeral column values (all non-default ones for a new
// row, the changed ones for a modified row) or nil for a deleted row. Rows
// whose only changes are ephemeral are left out.
func (cs *ChangeSet) Record(s *Schema) map[string]map[string]json.RawMessage {
	return cs.record(s, false)
}

// RecordAll is Record with ephemeral columns too, as a replicated log
// (package ovsdb/cluster) carries them: every member of a cluster serves
// them.
func (cs *ChangeSet) RecordAll(s *Schema) map[string]map[string]json.RawMessage {
	return cs.record(s, true)
}

func (cs *ChangeSet) record(s *Schema, ephemeral bool) map[string]map[string]json.RawMessage {
	out := map[string]map[string]json.RawMessage{}
	for name, rows := range cs.Tables {
		ts := s.Tables[name]
		var tr map[string]json.RawMessage
		for uuid, ch := range rows {
			var body json.RawMessage
			if ch.New != nil {
				b, ok := appendRecordRow(nil, ts, ch, ephemeral)
				if !ok {
					continue
				}
				body = b
			}
			if tr == nil {
				tr = map[string]json.RawMessage{}
				out[name] = tr
			}
			tr[uuid.String()] = body
		}
	}
	return out
}

// appendRecordRow appends the record's object for the new or modified row
// of ch (not a deletion); ok is false, and b unchanged, for a modified row
// with nothing to write.
func appendRecordRow(b []byte, ts *TableSchema, ch *RowChange, ephemeral bool) (_ []byte, ok bool) {
	start := len(b)
	b = append(b, '{')
	n := 0
	for _, c := range ts.Columns {
		if c.Ephemeral && !ephemeral {
			continue
		}
		d := ch.New.Data[c.Index]
		if ch.Old == nil {
			if c.Type.IsDefault(d) {
				continue
			}
		} else if d.Equal(ch.Old.Data[c.Index]) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = AppendJSONString(b, c.Name)
		b = append(b, ':')
		b = d.AppendJSON(b, &c.Type)
	}
	if n == 0 && ch.Old != nil {
		return b[:start], false
	}
	return append(b, '}'), true
}

// AppendRecord appends cs's storage record as Record renders it, already
// in the file's text (storage.Record.Encoded): for each table with a row
// to write, in name order, `,"TABLE":{"UUID":ROW,...}`, rows in UUID
// order, a deleted row as null. It saves a large transaction the map of
// Record and encoding each row twice.
func (cs *ChangeSet) AppendRecord(b []byte, s *Schema) []byte {
	b = slices.Grow(b, cs.TextSize)
	names := make([]string, 0, len(cs.Tables))
	for name, rows := range cs.Tables {
		if len(rows) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var ids []UUID
	for _, name := range names {
		rows := cs.Tables[name]
		ts := s.Tables[name]
		ids = ids[:0]
		for id := range rows {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, UUID.Compare)
		tableStart := len(b)
		b = append(b, ',')
		b = AppendJSONString(b, name)
		b = append(b, ":{"...)
		n := 0
		for _, id := range ids {
			ch := rows[id]
			rowStart := len(b)
			if n > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = id.appendString(b)
			b = append(b, `":`...)
			if ch.New == nil {
				b = append(b, "null"...)
			} else {
				var ok bool
				if b, ok = appendRecordRow(b, ts, ch, false); !ok {
					b = b[:rowStart]
					continue
				}
			}
			n++
		}
		if n == 0 {
			b = b[:tableStart]
			continue
		}
		b = append(b, '}')
	}
	return b
}

// ApplyRecord replays one storage record (see ChangeSet.Record) onto the
// database, as recovery does. When isDiff is true, modified columns hold
// differences, as ovsdb-server 2.15 and later write them: for sets the
// elements to toggle, for maps the pairs to add, remove or change. Data are
// validated against the schema; references are trusted.
func (db *Database) ApplyRecord(tables map[string]map[string]json.RawMessage, isDiff bool) error {
	cs, err := db.DecodeRecord(tables, isDiff)
	if err != nil {
		return err
	}
	db.Apply(cs)
	return nil
}

// DecodeRecord is ApplyRecord without the applying: it returns the change
// set the record makes to the database's current contents, for a caller
// that applies it itself (and tells monitors). Rows the record deletes
// that are not there are left out.
func (db *Database) DecodeRecord(tables map[string]map[string]json.RawMessage, isDiff bool) (*ChangeSet, error) {
	cs := &ChangeSet{Tables: map[string]map[UUID]*RowChange{}}
	// Tables, rows and columns in order, so that of several errors in a
	// record the same one is reported every time.
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		rows := tables[name]
		t := db.tables[name]
		if t == nil {
			return nil, fmt.Errorf("record names unknown table %q", name)
		}
		ch := map[UUID]*RowChange{}
		cs.Tables[name] = ch
		for _, us := range slices.Sorted(maps.Keys(rows)) {
			body := rows[us]
			uuid, err := ParseUUID(us)
			if err != nil {
				return nil, fmt.Errorf("table %s: %w", name, err)
			}
			old := t.Rows[uuid]
			if body == nil || string(body) == "null" {
				if old != nil {
					ch[uuid] = &RowChange{Old: old}
				}
				continue
			}
			v, err := DecodeJSON(body)
			if err != nil {
				return nil, fmt.Errorf("table %s row %s: %w", name, us, err)
			}
			obj, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("table %s row %s: not an object", name, us)
			}
			var nr *Row
			if old != nil {
				nr = old.Clone()
			} else {
				nr = NewRow(t.Schema, uuid)
			}
			nr.Version = db.uuids.New()
			for _, cname := range slices.Sorted(maps.Keys(obj)) {
				cv := obj[cname]
				c := t.Schema.Column(cname)
				if c == nil || c.Index < 0 {
					// Columns a newer schema dropped are ignored, as ovsdb-server does on conversion.
					continue
				}
				ct := c.Type
				if isDiff && old != nil {
					ct.Min, ct.Max = 0, Unlimited
				}
				d, err := DecodeDatum(cv, &ct, nil)
				if err != nil {
					return nil, fmt.Errorf("table %s row %s column %s: %w", name, us, cname, err)
				}
				if isDiff && old != nil {
					d = ApplyDiff(nr.Data[c.Index], d, &c.Type)
				}
				nr.Data[c.Index] = d
			}
			ch[uuid] = &RowChange{Old: old, New: nr}
		}
	}
	return cs, nil
}

// ApplyDiff applies an update2 "modify" difference, as Diff makes it, to
// old, a value of a column of type ct: a scalar or optional column takes
// the difference as its new value; a set toggles the difference's elements;
// a map drops the pairs it shares with the difference, takes the
// difference's value for keys in both, and adds the difference's other
// pairs. Both data must be canonical (sorted keys), as DecodeDatum returns
// them.
func ApplyDiff(old, diff Datum, ct *ColumnType) Datum {
	if ct.IsScalar() || ct.IsOptional() {
		return diff
	}
	if !ct.IsMap() {
		return old.Difference(diff).Union(diff.Difference(old))
	}
	return mergeMaps(old, diff, old.Len()+diff.Len())
}

// Diff returns the update2 "modify" difference from old to new for a
// column of type ct (see ovsdb-server(7) §4.1.14): the new value for a
// scalar, the symmetric difference for a set, and for a map the pairs
// whose keys are in only one of the two plus the new pairs of changed keys.
//
// An optional column (a set of at most one atom) counts as a single value,
// as ovsdb-server sends it: the new value, or the empty set when cleared.
// Its symmetric difference could hold two atoms, which ovsdb-idl clients
// reject against the column's max of 1 and then never see the change.
func Diff(old, new Datum, ct *ColumnType) Datum {
	if ct.IsScalar() || ct.IsOptional() {
		return new
	}
	if !ct.IsMap() {
		return old.Difference(new).Union(new.Difference(old))
	}
	return mergeMaps(old, new, 0) // a difference is usually small
}

// mergeMaps merges two canonical maps: the pairs whose keys only one of
// them has, and b's pair for each key both have with different values.
// It is both the update2 difference from a to b (Diff) and the map that a
// difference b makes of a (ApplyDiff): applying a difference twice undoes
// it. capacity is the room to allocate for the result at once.
func mergeMaps(a, b Datum, capacity int) Datum {
	keys := make([]Atom, 0, capacity)
	values := make([]Atom, 0, capacity)
	i, j := 0, 0
	for i < a.Len() || j < b.Len() {
		var c int
		switch {
		case i == a.Len():
			c = 1
		case j == b.Len():
			c = -1
		default:
			c = a.Keys[i].Compare(b.Keys[j])
		}
		switch {
		case c < 0:
			keys, values = append(keys, a.Keys[i]), append(values, a.Values[i])
			i++
		case c > 0:
			keys, values = append(keys, b.Keys[j]), append(values, b.Values[j])
			j++
		default:
			if a.Values[i] != b.Values[j] {
				keys, values = append(keys, b.Keys[j]), append(values, b.Values[j])
			}
			i++
			j++
		}
	}
	return Datum{Keys: keys, Values: values}
}
