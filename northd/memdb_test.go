package northd

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema"
)

// memDB is an in-memory database for tests: it takes a transaction's
// operations (TxnBuilder), applies them at commit, garbage-collects
// unreferenced rows of non-root tables, and returns the events a monitor
// would send.
type memDB struct {
	t      testing.TB
	which  DB
	schema *ovsdb.Schema
	rows   map[string]map[ovsdb.UUID]*ovsdb.Row
	ops    []memOp
	named  map[ovsdb.UUID]ovsdb.UUID // placeholder -> real
	// uuids numbers the UUIDs memDB makes: the same operations make the
	// same rows, so a seeded random test is the same test every run.
	uuids uint64
	// lastReal maps the placeholders of the last commit's inserts to the
	// rows' UUIDs.
	lastReal map[ovsdb.UUID]ovsdb.UUID
}

// newUUID returns memDB's next UUID (version 4 bits set, as a server's).
func (m *memDB) newUUID() ovsdb.UUID {
	m.uuids++
	var b [16]byte
	b[0] = byte(m.which) + 1
	for i := 0; i < 8; i++ {
		b[15-i] = byte(m.uuids >> (8 * i))
	}
	b[6] = 0x40
	b[8] = 0x80
	return ovsdb.UUIDFromBytes(b)
}

type memOp struct {
	kind  string
	table string
	id    ovsdb.UUID // placeholder for inserts
	row   map[string]ovsdb.Datum
}

func loadSchema(t testing.TB, name string) *ovsdb.Schema {
	s, err := ovsdb.ParseSchema(schema.MustLookup(name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newMemDB(t testing.TB, which DB, name string) *memDB {
	return &memDB{t: t, which: which, schema: loadSchema(t, name), rows: map[string]map[ovsdb.UUID]*ovsdb.Row{}}
}

func (m *memDB) Insert(table string, row map[string]ovsdb.Datum) ovsdb.UUID {
	id := m.newUUID()
	m.ops = append(m.ops, memOp{"insert", table, id, row})
	return id
}

func (m *memDB) Update(table string, id ovsdb.UUID, row map[string]ovsdb.Datum) {
	m.ops = append(m.ops, memOp{"update", table, id, row})
}

func (m *memDB) Delete(table string, id ovsdb.UUID) {
	m.ops = append(m.ops, memOp{"delete", table, id, nil})
}

// commit applies the pending operations and returns the resulting events.
func (m *memDB) commit() []Event {
	m.t.Helper()
	before := m.snapshot()
	real := map[ovsdb.UUID]ovsdb.UUID{}
	for _, op := range m.ops {
		if op.kind == "insert" {
			real[op.id] = m.newUUID()
		}
	}
	m.lastReal = real
	fix := func(d ovsdb.Datum) ovsdb.Datum {
		f := func(as []ovsdb.Atom) []ovsdb.Atom {
			out := make([]ovsdb.Atom, len(as))
			for i, a := range as {
				switch a.Type() {
				case ovsdb.TypeUUID:
					if r, ok := real[a.UUID()]; ok {
						a = ovsdb.UUIDAtom(r)
					}
				case ovsdb.TypeString:
					// A copy, as a row that came back from a server
					// shares no memory with what northd sent.
					a = ovsdb.String(strings.Clone(a.Str()))
				}
				out[i] = a
			}
			return out
		}
		if d.Values == nil {
			return ovsdb.Set(f(d.Keys)...)
		}
		return ovsdb.Map(f(d.Keys), f(d.Values))
	}
	for _, op := range m.ops {
		t := m.schema.Tables[op.table]
		if t == nil {
			m.t.Fatalf("no table %s", op.table)
		}
		if m.rows[op.table] == nil {
			m.rows[op.table] = map[ovsdb.UUID]*ovsdb.Row{}
		}
		switch op.kind {
		case "insert":
			r := ovsdb.NewRow(t, real[op.id])
			m.set(t, r, op.row, fix)
			m.rows[op.table][r.UUID] = r
		case "update":
			cur := m.rows[op.table][op.id]
			if cur == nil {
				m.t.Fatalf("update of missing %s row %s", op.table, op.id)
			}
			r := cur.Clone()
			m.set(t, r, op.row, fix)
			m.rows[op.table][op.id] = r
		case "delete":
			if m.rows[op.table][op.id] == nil {
				m.t.Fatalf("delete of missing %s row %s", op.table, op.id)
			}
			delete(m.rows[op.table], op.id)
		}
	}
	m.ops = nil
	m.gc()
	m.checkRefs()
	m.checkIndexes()
	return m.diff(before)
}

func (m *memDB) set(t *ovsdb.TableSchema, r *ovsdb.Row, cols map[string]ovsdb.Datum, fix func(ovsdb.Datum) ovsdb.Datum) {
	for name, d := range cols {
		c := t.Column(name)
		if c == nil {
			m.t.Fatalf("table %s has no column %s", t.Name, name)
		}
		d = fix(d)
		if d.Len() < c.Type.Min || d.Len() > c.Type.Max {
			m.t.Fatalf("table %s column %s: %d values, want %d..%d", t.Name, name, d.Len(), c.Type.Min, c.Type.Max)
		}
		r.Data[c.Index] = d
	}
}

// gc deletes rows of non-root tables that nothing refers to, and drops
// references to rows that do not exist.
func (m *memDB) gc() {
	for {
		referenced := map[ovsdb.UUID]bool{}
		for tn, rows := range m.rows {
			t := m.schema.Tables[tn]
			for _, r := range rows {
				for _, c := range t.Columns {
					if refTable(c) == "" {
						continue
					}
					d := r.Data[c.Index]
					for _, a := range append(append([]ovsdb.Atom(nil), d.Keys...), d.Values...) {
						if a.Type() == ovsdb.TypeUUID {
							referenced[a.UUID()] = true
						}
					}
				}
			}
		}
		removed := false
		for tn, rows := range m.rows {
			if m.schema.Tables[tn].IsRoot {
				continue
			}
			for id := range rows {
				if !referenced[id] {
					delete(rows, id)
					removed = true
				}
			}
		}
		if !removed {
			return
		}
	}
}

// checkRefs fails the test when a strong reference names a row that does
// not exist (the server refuses such a transaction); weak references to
// missing rows are dropped, as the server drops them.
func (m *memDB) checkRefs() {
	for tn, rows := range m.rows {
		if m.which != SB || (!isRecordTable(tn) && tn != "Logical_Flow" && tn != "Logical_DP_Group" && tn != "MAC_Binding") {
			continue // not northd's rows: tests write them as they please
		}
		t := m.schema.Tables[tn]
		for id, r := range rows {
			for _, c := range t.Columns {
				check := func(b *ovsdb.BaseType, as []ovsdb.Atom) {
					if b == nil || b.RefTable == "" || b.RefType != ovsdb.RefStrong {
						return
					}
					for _, a := range as {
						if m.rows[b.RefTable][a.UUID()] == nil {
							m.t.Fatalf("table %s row %s column %s refers to missing %s row %s", tn, id, c.Name, b.RefTable, a.UUID())
						}
					}
				}
				d := r.Data[c.Index]
				check(&c.Type.Key, d.Keys)
				check(c.Type.Value, d.Values)
			}
		}
	}
}

// checkIndexes fails the test when two rows break a unique index.
func (m *memDB) checkIndexes() {
	for tn, rows := range m.rows {
		t := m.schema.Tables[tn]
		for _, idx := range t.Indexes {
			seen := map[string]ovsdb.UUID{}
			for _, r := range rows {
				var b strings.Builder
				for _, cn := range idx {
					fmt.Fprintf(&b, "%v|", r.Get(cn))
				}
				if other, dup := seen[b.String()]; dup {
					m.t.Fatalf("table %s: rows %s and %s share index %v = %s", tn, other, r.UUID, idx, b.String())
				}
				seen[b.String()] = r.UUID
			}
		}
	}
}

func (m *memDB) snapshot() map[string]map[ovsdb.UUID]*ovsdb.Row {
	s := map[string]map[ovsdb.UUID]*ovsdb.Row{}
	for tn, rows := range m.rows {
		s[tn] = map[ovsdb.UUID]*ovsdb.Row{}
		for id, r := range rows {
			s[tn][id] = r
		}
	}
	return s
}

// diff returns the events that turn before into the current rows, tables
// in name order, as a monitor would send them.
func (m *memDB) diff(before map[string]map[ovsdb.UUID]*ovsdb.Row) []Event {
	var tables []string
	for tn := range m.schema.Tables {
		tables = append(tables, tn)
	}
	sort.Strings(tables)
	var evs []Event
	for _, tn := range tables {
		ids := map[ovsdb.UUID]bool{}
		for id := range before[tn] {
			ids[id] = true
		}
		for id := range m.rows[tn] {
			ids[id] = true
		}
		var sorted []ovsdb.UUID
		for id := range ids {
			sorted = append(sorted, id)
		}
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].Compare(sorted[j]) < 0 })
		for _, id := range sorted {
			o, n := before[tn][id], m.rows[tn][id]
			if o == n {
				continue
			}
			evs = append(evs, Event{DB: m.which, Table: tn, Old: o, New: n})
		}
	}
	return evs
}

// count returns the number of rows of table.
func (m *memDB) count(table string) int { return len(m.rows[table]) }

// realUUID returns the UUID of the row the last commit inserted under
// placeholder id, as client.TxnResult.UUID does.
func (m *memDB) realUUID(id ovsdb.UUID) ovsdb.UUID { return m.lastReal[id] }
