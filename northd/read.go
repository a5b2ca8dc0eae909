package northd

import (
	"github.com/govn/govn/ovsdb"
)

// rowModel is a generated typed model (schema/nb, schema/sb).
type rowModel[T any] interface {
	*T
	LoadRow(t *ovsdb.TableSchema, r *ovsdb.Row)
	TableName() string
}

// Read returns the typed row id of db, recording a dependency on it
// (gen.Row); ok is false when there is no such row.
func Read[T any, P rowModel[T]](g *gen, db DB, id ovsdb.UUID) (m T, ok bool) {
	table := P(&m).TableName()
	r := g.Row(db, table, id)
	if r == nil {
		return m, false
	}
	if models := g.s.db(db).models; models != nil {
		// Decoded once per row version (rowDB.models), and shared as
		// below.
		if v, ok := models.Load(r); ok {
			if p, ok := v.(P); ok {
				return *p, true
			}
		}
		p := P(new(T))
		p.LoadRow(g.s.db(db).table(table), r)
		models.Store(r, p)
		return *p, true
	}
	if g.x != nil {
		// A parallel generation (a full compute, above all) reads a row
		// in many owners and memos: each row is decoded once in the
		// batch. The model is shared, so that generators must not change
		// what a model's maps and slices hold (as with a memo's value).
		if v, ok := g.x.sh.decoded.Load(r); ok {
			if p, ok := v.(P); ok {
				return *p, true
			}
		}
		p := P(new(T))
		p.LoadRow(g.s.db(db).table(table), r)
		g.x.sh.decoded.Store(r, p)
		return *p, true
	}
	P(&m).LoadRow(g.s.db(db).table(table), r)
	return m, true
}

// ReadAll returns the typed rows with the given UUIDs that exist, in order,
// recording a dependency on each.
func ReadAll[T any, P rowModel[T]](g *gen, db DB, ids []ovsdb.UUID) []T {
	out := make([]T, 0, len(ids))
	for _, id := range ids {
		if m, ok := Read[T, P](g, db, id); ok {
			out = append(out, m)
		}
	}
	return out
}

// Datum helpers for records.

func dString(s string) ovsdb.Datum { return ovsdb.Scalar(ovsdb.String(s)) }
func dInt(i int64) ovsdb.Datum     { return ovsdb.Scalar(ovsdb.Integer(i)) }
func dBool(b bool) ovsdb.Datum     { return ovsdb.Scalar(ovsdb.Boolean(b)) }
func dUUID(id ovsdb.UUID) ovsdb.Datum {
	return ovsdb.Scalar(ovsdb.UUIDAtom(id))
}

// dOptUUID is the optional reference: empty for the zero UUID.
func dOptUUID(id ovsdb.UUID) ovsdb.Datum {
	if id.IsZero() {
		return ovsdb.Datum{}
	}
	return dUUID(id)
}

func dStrings(ss []string) ovsdb.Datum {
	atoms := make([]ovsdb.Atom, len(ss))
	for i, s := range ss {
		atoms[i] = ovsdb.String(s)
	}
	return ovsdb.Set(atoms...)
}

func dUUIDs(ids []ovsdb.UUID) ovsdb.Datum {
	atoms := make([]ovsdb.Atom, len(ids))
	for i, id := range ids {
		atoms[i] = ovsdb.UUIDAtom(id)
	}
	return ovsdb.Set(atoms...)
}

func dMap(m map[string]string) ovsdb.Datum {
	keys := make([]ovsdb.Atom, 0, len(m))
	vals := make([]ovsdb.Atom, 0, len(m))
	for k, v := range m {
		keys = append(keys, ovsdb.String(k))
		vals = append(vals, ovsdb.String(v))
	}
	return ovsdb.Map(keys, vals)
}
