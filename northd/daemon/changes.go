package daemon

import (
	"slices"
	"strings"

	"github.com/govn/govn/northd"
	"github.com/govn/govn/ovsdb"
)

// changes are row changes waiting to be applied, coalesced per row: one
// entry holds the row as the state last saw it (Old) and as it is now
// (New), however many transactions changed it in between. So a queue that
// is not applied for a while (a standby northd's) holds at most one entry
// per row, and applying it gives the state what applying every change in
// turn would.
type changes map[tableKey]map[ovsdb.UUID]*northd.Event

// add records that a row went from old to new.
func (c changes) add(k tableKey, old, new *ovsdb.Row) {
	var id ovsdb.UUID
	switch {
	case new != nil:
		id = new.UUID
	case old != nil:
		id = old.UUID
	default:
		return
	}
	rows := c[k]
	if rows == nil {
		rows = make(map[ovsdb.UUID]*northd.Event)
		c[k] = rows
	}
	if e, ok := rows[id]; ok {
		e.New = new
		if e.Old == nil && e.New == nil {
			delete(rows, id) // inserted and deleted: nothing happened
			if len(rows) == 0 {
				delete(c, k)
			}
		}
		return
	}
	rows[id] = &northd.Event{DB: k.db, Table: k.table, Old: old, New: new}
}

// merge adds the later changes of o.
func (c changes) merge(o changes) {
	for k, rows := range o {
		for _, e := range rows {
			c.add(k, e.Old, e.New)
		}
	}
}

// take removes and returns one table's changes.
func (c changes) take(k tableKey) []northd.Event {
	rows := c[k]
	delete(c, k)
	out := make([]northd.Event, 0, len(rows))
	for _, e := range rows {
		out = append(out, *e)
	}
	// In UUID order, so that a run does not depend on map order.
	slices.SortFunc(out, func(a, b northd.Event) int { return eventID(a).Compare(eventID(b)) })
	return out
}

func eventID(e northd.Event) ovsdb.UUID {
	if e.New != nil {
		return e.New.UUID
	}
	return e.Old.UUID
}

// takeAll removes and returns every change.
func (c changes) takeAll() []northd.Event {
	keys := make([]tableKey, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b tableKey) int {
		if a.db != b.db {
			return int(a.db) - int(b.db)
		}
		return strings.Compare(a.table, b.table)
	})
	var out []northd.Event
	for _, k := range keys {
		out = append(out, c.take(k)...)
	}
	return out
}

// drop removes every change of database db.
func (c changes) drop(db northd.DB) {
	for k := range c {
		if k.db == db {
			delete(c, k)
		}
	}
}

func (c changes) empty() bool { return len(c) == 0 }
