package ovsdb

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
// into a map from column to datum. Unknown columns and the read-only
// _uuid/_version are syntax errors.
func DecodeRow(v any, t *TableSchema, names NameResolver) (map[*ColumnSchema]Datum, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, syntaxErr(v, "expected a row object")
	}
	out := make(map[*ColumnSchema]Datum, len(obj))
	for name, val := range obj {
		c := t.Column(name)
		if c == nil {
			return nil, Errorf(ErrUnknownColumn, "no column %q in table %s", name, t.Name)
		}
		if c.Index < 0 {
			return nil, Errorf(ErrConstraintViolation, "column %s of table %s is read-only", name, t.Name)
		}
		d, err := DecodeDatum(val, &c.Type, names)
		if err != nil {
			if e, ok := err.(*Error); ok {
				return nil, &Error{Tag: e.Tag, Details: "column " + name + ": " + e.Details}
			}
			return nil, err
		}
		out[c] = d
	}
	return out, nil
}
