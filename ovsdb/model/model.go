// Package model binds the fields of typed OVSDB rows to their columns. The
// models that ovsdb/modelgen generates (schema/nb, schema/sb,
// schema/vswitch) list, per table, one Column per field; Load and Row then
// convert between those fields and ovsdb rows, so the conversion code lives
// here once instead of in every generated file.
//
// Go types stand for column types as modelgen maps them: a scalar column
// (exactly one value) is the atom's Go type (int64, float64, bool, string,
// ovsdb.UUID), an optional one (0 or 1 values) a pointer to it, any other
// set a slice and a map a Go map.
package model

import "github.com/govn/govn/ovsdb"

// Atom lists the Go types of OVSDB atoms.
type Atom interface {
	int64 | float64 | bool | string | ovsdb.UUID
}

// Column binds one field of a model to the column of that name.
type Column struct {
	Name  string
	field field
}

// field converts one bound Go value to and from a column's datum.
type field interface {
	load(d ovsdb.Datum)
	datum() ovsdb.Datum
}

// Scalar binds *p to a column that holds exactly one value.
func Scalar[T Atom](name string, p *T) Column { return Column{name, scalarField[T]{p}} }

// Optional binds *p to a column that holds 0 or 1 values (nil for none).
func Optional[T Atom](name string, p **T) Column { return Column{name, optionalField[T]{p}} }

// Set binds *p to a set column (nil for the empty set).
func Set[T Atom](name string, p *[]T) Column { return Column{name, setField[T]{p}} }

// Map binds *p to a map column (nil for the empty map).
func Map[K, V Atom](name string, p *map[K]V) Column { return Column{name, mapField[K, V]{p}} }

// Load sets the bound fields from r, a row of table t. A field whose column
// t lacks (an older or newer schema) is left as it was.
func Load(t *ovsdb.TableSchema, r *ovsdb.Row, cols []Column) {
	for _, c := range cols {
		s := t.Column(c.Name)
		if s == nil || s.Index < 0 || s.Index >= len(r.Data) {
			continue
		}
		c.field.load(r.Data[s.Index])
	}
}

// Row returns the data of all bound fields, by column name.
func Row(cols []Column) map[string]ovsdb.Datum {
	row := make(map[string]ovsdb.Datum, len(cols))
	for _, c := range cols {
		row[c.Name] = c.field.datum()
	}
	return row
}

type scalarField[T Atom] struct{ p *T }

func (f scalarField[T]) load(d ovsdb.Datum) {
	var v T
	if d.Len() > 0 {
		v = value[T](d.Keys[0])
	}
	*f.p = v
}

func (f scalarField[T]) datum() ovsdb.Datum { return ovsdb.Scalar(atom(*f.p)) }

type optionalField[T Atom] struct{ p **T }

func (f optionalField[T]) load(d ovsdb.Datum) {
	if d.Len() == 0 {
		*f.p = nil
		return
	}
	v := value[T](d.Keys[0])
	*f.p = &v
}

func (f optionalField[T]) datum() ovsdb.Datum {
	if *f.p == nil {
		return ovsdb.Datum{}
	}
	return ovsdb.Scalar(atom(**f.p))
}

type setField[T Atom] struct{ p *[]T }

func (f setField[T]) load(d ovsdb.Datum) {
	if d.Len() == 0 {
		*f.p = nil
		return
	}
	s := make([]T, d.Len())
	for i, a := range d.Keys {
		s[i] = value[T](a)
	}
	*f.p = s
}

func (f setField[T]) datum() ovsdb.Datum {
	atoms := make([]ovsdb.Atom, len(*f.p))
	for i, v := range *f.p {
		atoms[i] = atom(v)
	}
	return ovsdb.Set(atoms...)
}

type mapField[K, V Atom] struct{ p *map[K]V }

func (f mapField[K, V]) load(d ovsdb.Datum) {
	if d.Len() == 0 || len(d.Values) != len(d.Keys) {
		*f.p = nil
		return
	}
	m := make(map[K]V, d.Len())
	for i, k := range d.Keys {
		m[value[K](k)] = value[V](d.Values[i])
	}
	*f.p = m
}

func (f mapField[K, V]) datum() ovsdb.Datum {
	keys := make([]ovsdb.Atom, 0, len(*f.p))
	values := make([]ovsdb.Atom, 0, len(*f.p))
	for k, v := range *f.p {
		keys = append(keys, atom(k))
		values = append(values, atom(v))
	}
	return ovsdb.Map(keys, values)
}

// atom wraps v as an OVSDB atom.
func atom[T Atom](v T) ovsdb.Atom {
	switch x := any(v).(type) {
	case int64:
		return ovsdb.Integer(x)
	case float64:
		return ovsdb.Real(x)
	case bool:
		return ovsdb.Boolean(x)
	case string:
		return ovsdb.String(x)
	case ovsdb.UUID:
		return ovsdb.UUIDAtom(x)
	}
	return ovsdb.Atom{} // not reached: Atom allows only the types above
}

// value unwraps a, an atom of T's type (rows fit their table's schema, and
// the model was generated from that schema).
func value[T Atom](a ovsdb.Atom) T {
	var v T
	switch p := any(&v).(type) {
	case *int64:
		*p = a.Int()
	case *float64:
		*p = a.Float()
	case *bool:
		*p = a.Bool()
	case *string:
		*p = a.Str()
	case *ovsdb.UUID:
		*p = a.UUID()
	}
	return v
}
