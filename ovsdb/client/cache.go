package client

import (
	"slices"
	"sync"

	"github.com/govn/govn/ovsdb"
)

// EventKind says what happened to a row.
type EventKind uint8

// The kinds of row events.
const (
	Insert EventKind = iota + 1
	Update
	Delete
)

func (k EventKind) String() string {
	switch k {
	case Insert:
		return "insert"
	case Update:
		return "update"
	case Delete:
		return "delete"
	}
	return "EventKind(?)"
}

// Event is one row's change. Old is nil for an insert, New is nil for a
// delete. Both rows are immutable and stay valid after the cache moves on.
type Event struct {
	Table string
	Kind  EventKind
	Old   *ovsdb.Row
	New   *ovsdb.Row
}

// UUID returns the UUID of the row the event is about.
func (e *Event) UUID() ovsdb.UUID {
	if e.New != nil {
		return e.New.UUID
	}
	return e.Old.UUID
}

// ChangeSet is what one server update did to the cache: the events of one
// committed transaction (or of a condition change), or, with Resync set, the
// difference between the cache before a reconnection and the full contents
// the server sent. Events are grouped by table, tables in name order, rows
// in UUID order.
type ChangeSet struct {
	Events []Event
	Resync bool
	// TxnID is the server's id of the last transaction now reflected in the
	// cache, when the server reports one (monitor_cond_since), else "".
	TxnID string
}

// ForTable returns the events of cs about table, in UUID order.
func (cs *ChangeSet) ForTable(table string) []Event {
	start := -1
	for i, e := range cs.Events {
		switch {
		case e.Table == table && start < 0:
			start = i
		case e.Table != table && start >= 0:
			return cs.Events[start:i]
		}
	}
	if start < 0 {
		return nil
	}
	return cs.Events[start:]
}

// Cache is the monitored part of one database. All methods are safe for
// concurrent use. Rows are shared, immutable values: never modify one.
type Cache struct {
	mu     sync.RWMutex
	schema *ovsdb.Schema
	tables map[string]map[ovsdb.UUID]*ovsdb.Row
	// generation counts applied change sets; changed is closed and
	// replaced whenever it grows.
	generation uint64
	changed    chan struct{}
	// indexes maps table and column to the rows holding each value.
	indexes map[string]map[string]map[string]map[ovsdb.UUID]*ovsdb.Row
}

// newCache returns an empty cache keeping indexes on the given columns
// (table -> columns).
func newCache(indexes map[string][]string) *Cache {
	c := &Cache{tables: map[string]map[ovsdb.UUID]*ovsdb.Row{}, changed: make(chan struct{}),
		indexes: map[string]map[string]map[string]map[ovsdb.UUID]*ovsdb.Row{}}
	for table, cols := range indexes {
		c.indexes[table] = map[string]map[string]map[ovsdb.UUID]*ovsdb.Row{}
		for _, col := range cols {
			c.indexes[table][col] = map[string]map[ovsdb.UUID]*ovsdb.Row{}
		}
	}
	return c
}

// datumKey is a map key that is equal for equal data.
func datumKey(d ovsdb.Datum) string {
	b := make([]byte, 0, 64)
	for _, a := range d.Keys {
		b = a.AppendJSON(b)
		b = append(b, ',')
	}
	if d.Values != nil {
		b = append(b, '|')
		for _, a := range d.Values {
			b = a.AppendJSON(b)
			b = append(b, ',')
		}
	}
	return string(b)
}

// Lookup returns the rows of table whose column equals value, sorted by
// UUID: through an index when Options.Indexes declares one, else by
// scanning the table.
func (c *Cache) Lookup(table, column string, value ovsdb.Datum) []*ovsdb.Row {
	c.mu.RLock()
	var rows []*ovsdb.Row
	if idx, ok := c.indexes[table][column]; ok {
		for _, r := range idx[datumKey(value)] {
			rows = append(rows, r)
		}
	} else if c.schema != nil && c.schema.Tables[table] != nil {
		if col := c.schema.Tables[table].Column(column); col != nil {
			for _, r := range c.tables[table] {
				if r.Get(col).Equal(value) {
					rows = append(rows, r)
				}
			}
		}
	}
	c.mu.RUnlock()
	slices.SortFunc(rows, func(a, b *ovsdb.Row) int { return a.UUID.Compare(b.UUID) })
	return rows
}

// reindex moves row r of table between index entries: out of old's
// values (if old is not nil) and into new's (if new is not nil). c.mu is
// held for writing.
func (c *Cache) reindex(table string, old, new *ovsdb.Row) {
	idxs := c.indexes[table]
	if len(idxs) == 0 || c.schema == nil || c.schema.Tables[table] == nil {
		return
	}
	t := c.schema.Tables[table]
	for name, idx := range idxs {
		col := t.Column(name)
		if col == nil {
			continue
		}
		if old != nil {
			k := datumKey(old.Get(col))
			delete(idx[k], old.UUID)
			if len(idx[k]) == 0 {
				delete(idx, k)
			}
		}
		if new != nil {
			k := datumKey(new.Get(col))
			if idx[k] == nil {
				idx[k] = map[ovsdb.UUID]*ovsdb.Row{}
			}
			idx[k][new.UUID] = new
		}
	}
}

// Schema returns the schema the server reported (nil before the first
// connection).
func (c *Cache) Schema() *ovsdb.Schema {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.schema
}

// Row returns the row of table with the given UUID, or nil.
func (c *Cache) Row(table string, id ovsdb.UUID) *ovsdb.Row {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.tables[table][id]
}

// Len returns the number of rows in table.
func (c *Cache) Len(table string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.tables[table])
}

// Rows returns the rows of table, sorted by UUID.
func (c *Cache) Rows(table string) []*ovsdb.Row {
	c.mu.RLock()
	rows := make([]*ovsdb.Row, 0, len(c.tables[table]))
	for _, r := range c.tables[table] {
		rows = append(rows, r)
	}
	c.mu.RUnlock()
	slices.SortFunc(rows, func(a, b *ovsdb.Row) int { return a.UUID.Compare(b.UUID) })
	return rows
}

// Generation returns a number that grows with every change set applied.
func (c *Cache) Generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.generation
}

// Changed returns a channel that is closed when the next change set has
// been applied.
func (c *Cache) Changed() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.changed
}

// Get returns column col of the row of table with the given UUID.
func (c *Cache) Get(table string, id ovsdb.UUID, col string) (ovsdb.Datum, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	r := c.tables[table][id]
	if r == nil || c.schema == nil {
		return ovsdb.Datum{}, false
	}
	cs := c.schema.Tables[table].Column(col)
	if cs == nil {
		return ovsdb.Datum{}, false
	}
	return r.Get(cs), true
}

// apply installs the rows of cs (already computed against the current
// contents) and bumps the generation. With a schema, it first switches
// the cache to it: the events of such a change set then delete every row of
// a different old schema and insert the new ones.
func (c *Cache) apply(cs *ChangeSet, schema *ovsdb.Schema) {
	c.mu.Lock()
	if schema != nil && schema != c.schema {
		if c.schema != nil && string(c.schema.JSON()) != string(schema.JSON()) {
			// Old rows do not fit the new schema's columns: start the
			// indexes afresh and never read old rows through it.
			for _, cols := range c.indexes {
				for col := range cols {
					cols[col] = map[string]map[ovsdb.UUID]*ovsdb.Row{}
				}
			}
			c.tables = map[string]map[ovsdb.UUID]*ovsdb.Row{}
		}
		c.schema = schema
	}
	for _, e := range cs.Events {
		t := c.tables[e.Table]
		if t == nil {
			t = map[ovsdb.UUID]*ovsdb.Row{}
			c.tables[e.Table] = t
		}
		if e.New == nil {
			c.reindex(e.Table, t[e.Old.UUID], nil)
			delete(t, e.Old.UUID)
		} else {
			c.reindex(e.Table, t[e.New.UUID], e.New)
			t[e.New.UUID] = e.New
		}
	}
	c.generation++
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// snapshotTable returns table's row map for reading by the update decoder,
// which runs on the single goroutine that also writes the cache.
func (c *Cache) snapshotTable(table string) map[ovsdb.UUID]*ovsdb.Row {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.tables[table]
}
