package ovsdb

import "fmt"

// Row is one row of a table: its UUID, its version (a fresh UUID for every
// change, the _version column) and the value of each user column in the
// order of TableSchema.Columns. Rows are immutable once stored.
type Row struct {
	UUID    UUID
	Version UUID
	Data    []Datum
}

// NewRow returns a row of table t with every column at its default value.
func NewRow(t *TableSchema, uuid UUID) *Row {
	r := &Row{UUID: uuid, Data: make([]Datum, len(t.Columns))}
	for i, c := range t.Columns {
		r.Data[i] = c.Type.Default()
	}
	return r
}

// Get returns the value of column c, including _uuid and _version.
func (r *Row) Get(c *ColumnSchema) Datum {
	switch c.Index {
	case ColumnIndexUUID:
		return Scalar(UUIDAtom(r.UUID))
	case ColumnIndexVersion:
		return Scalar(UUIDAtom(r.Version))
	}
	return r.Data[c.Index]
}

// Clone returns a shallow copy of r whose Data slice may be modified (the
// data themselves are shared and immutable).
func (r *Row) Clone() *Row {
	n := &Row{UUID: r.UUID, Version: r.Version, Data: make([]Datum, len(r.Data))}
	copy(n.Data, r.Data)
	return n
}

// AppendJSON appends r as a JSON object with the given columns (all user
// columns when cols is nil, without _uuid and _version).
func (r *Row) AppendJSON(b []byte, t *TableSchema, cols []*ColumnSchema) []byte {
	if cols == nil {
		cols = t.Columns
	}
	b = append(b, '{')
	for i, c := range cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, c.Name)
		b = append(b, ':')
		b = r.Get(c).AppendJSON(b, &c.Type)
	}
	return append(b, '}')
}

// DecodeRow decodes a JSON <row> object (column name -> value) for table t
// into a map from column to datum, and lists its columns in the order
// ovsdb-server visits them, which decides which of several errors it
// reports. The row may name _uuid and _version; each operation decides
// what they mean.
func DecodeRow(v any, t *TableSchema, names NameResolver) (map[*ColumnSchema]Datum, []*ColumnSchema, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, nil, syntaxErr(v, "Object expected.")
	}
	out := make(map[*ColumnSchema]Datum, len(obj))
	order := make([]*ColumnSchema, 0, len(obj))
	for _, name := range serverOrder(obj) {
		c := t.Column(name)
		if c == nil {
			return nil, nil, &Error{Tag: ErrUnknownColumn, Details: fmt.Sprintf("No column %s in table %s.", name, t.Name), Syntax: syntaxText(v)}
		}
		d, err := DecodeDatum(obj[name], &c.Type, names)
		if err != nil {
			return nil, nil, err
		}
		out[c] = d
		order = append(order, c)
	}
	return out, order, nil
}

// SameData reports whether r and o hold equal values in every user column
// (their versions may differ).
func (r *Row) SameData(o *Row) bool {
	if len(r.Data) != len(o.Data) {
		return false
	}
	for i := range r.Data {
		if !r.Data[i].Equal(o.Data[i]) {
			return false
		}
	}
	return true
}
