package ovsdb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// Convert returns a new database holding db's rows under schema s, as
// ovsdb-server's schema conversion (the "convert" method, "ovsdb-tool
// convert") makes it: tables and columns that s lacks are dropped, columns
// new in s take their default values, every row keeps its UUID, and each
// value whose column type changed is re-read under the new type, so that
// it must satisfy the new constraints (size, enum, range, reference
// table). The result then goes through the same commit checks as a
// transaction: strong references must lead to rows, weak references to
// missing rows are dropped, unreferenced rows of non-root tables are
// garbage collected, indexes and maxRows hold. On any failure Convert
// returns an error saying which row and column did not fit; db is never
// changed.
func (db *Database) Convert(s *Schema) (*Database, error) {
	nd := NewDatabase(s)
	t := &txn{db: nd, changes: map[*TableSchema]map[UUID]*RowChange{}, names: map[string]UUID{}, inserted: map[string]bool{}}
	for _, name := range db.Schema.TableNames {
		nts := s.Tables[name]
		if nts == nil {
			continue
		}
		ots := db.Schema.Tables[name]
		// Pair each surviving column with its new place once per table.
		type pair struct{ from, to *ColumnSchema }
		var pairs []pair
		for _, oc := range ots.Columns {
			if nc, ok := nts.byName[oc.Name]; ok {
				pairs = append(pairs, pair{oc, nc})
			}
		}
		for uuid, r := range db.tables[name].Rows {
			nr := NewRow(nts, uuid)
			for _, p := range pairs {
				d, err := ConvertDatum(r.Data[p.from.Index], &p.from.Type, &p.to.Type)
				if err != nil {
					return nil, fmt.Errorf("table %s row %s column %s: %w", name, uuid, p.to.Name, err)
				}
				nr.Data[p.to.Index] = d
			}
			t.setRow(nts, uuid, nr)
		}
	}
	if err := t.finish(); err != nil {
		return nil, fmt.Errorf("converted data violate schema %s %s: %w", s.Name, s.Version, err)
	}
	cs := &ChangeSet{Tables: map[string]map[UUID]*RowChange{}}
	for ts, rows := range t.changes {
		cs.Tables[ts.Name] = rows
	}
	nd.Apply(cs)
	return nd, nil
}

// ConvertDatum returns d, a value of type from, as a value of type to. An
// unchanged type keeps d as it is; otherwise d is written as JSON and read
// back under the new type, as ovsdb-server does, which applies every
// constraint of to and fails with an *Error when d does not fit.
func ConvertDatum(d Datum, from, to *ColumnType) (Datum, error) {
	if from.Equal(to) {
		return d, nil
	}
	v, err := DecodeJSON(d.AppendJSON(nil, from))
	if err != nil {
		return Datum{}, err
	}
	return DecodeDatum(v, to, nil)
}

// Equal reports whether t and u are the same type with the same
// constraints.
func (t *ColumnType) Equal(u *ColumnType) bool {
	if t.Min != u.Min || t.Max != u.Max || !t.Key.Equal(&u.Key) || (t.Value == nil) != (u.Value == nil) {
		return false
	}
	return t.Value == nil || t.Value.Equal(u.Value)
}

// Equal reports whether b and c are the same base type with the same
// constraints.
func (b *BaseType) Equal(c *BaseType) bool {
	if b.Type != c.Type || b.MinInteger != c.MinInteger || b.MaxInteger != c.MaxInteger ||
		b.MinReal != c.MinReal || b.MaxReal != c.MaxReal || b.MinLength != c.MinLength ||
		b.MaxLength != c.MaxLength || b.RefTable != c.RefTable || b.RefType != c.RefType {
		return false
	}
	if b.Enum == nil || c.Enum == nil {
		return b.Enum == nil && c.Enum == nil
	}
	return b.Enum.Equal(*c.Enum)
}

// SchemasEqual reports whether two schema documents say the same thing
// (equal as JSON values, whatever their spacing and member order), the
// test "ovsdb-tool needs-conversion" makes.
func SchemasEqual(a, b []byte) (bool, error) {
	var va, vb any
	da := json.NewDecoder(bytes.NewReader(a))
	da.UseNumber()
	if err := da.Decode(&va); err != nil {
		return false, fmt.Errorf("parsing schema: %w", err)
	}
	db := json.NewDecoder(bytes.NewReader(b))
	db.UseNumber()
	if err := db.Decode(&vb); err != nil {
		return false, fmt.Errorf("parsing schema: %w", err)
	}
	return reflect.DeepEqual(va, vb), nil
}
