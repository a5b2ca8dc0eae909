package server

import "github.com/govn/govn/ovsdb"

// Routing commits to conditional monitors.
//
// A chassis monitors, say, Port_Binding rows whose datapath is one of its
// few hundred datapaths. With a thousand chassis, checking every changed
// row against every monitor's conditions would cost each commit work in
// proportion to the number of monitors times their conditions. Instead each
// database keeps, per table, an index from (column, atom) to the monitors
// with a condition "column == atom" or "column includes atom": a changed
// row reaches only the monitors indexed under the atoms its old and new
// versions hold. Monitors whose conditions cannot be indexed (no
// conditions, !=, <, excludes, map columns) see every change of the table,
// as before.

// tableWatch indexes one table's monitors.
type tableWatch struct {
	// all holds monitors that must see every change of the table.
	all map[*monitor]struct{}
	// atoms maps column -> atom -> monitors with a condition on that atom
	// (counted, as one monitor may name the same atom twice).
	atoms map[*ovsdb.ColumnSchema]map[ovsdb.Atom]map[*monitor]int
}

// indexableCond reports whether a row matching c must hold c.Arg.Keys[0]
// in c.Column.
func indexableCond(c *ovsdb.Condition) bool {
	switch c.Function {
	case ovsdb.FuncEqual, ovsdb.FuncIncludes:
		return c.Column.Index >= 0 && !c.Column.Type.IsMap() && c.Arg.Len() > 0
	}
	return false
}

// routable reports whether every condition of a disjunction can be indexed
// (false conditions match nothing and need no entry).
func routable(conds []ovsdb.Condition) bool {
	if len(conds) == 0 {
		return false
	}
	for i := range conds {
		if conds[i].Function != ovsdb.FuncFalse && !indexableCond(&conds[i]) {
			return false
		}
	}
	return true
}

// watchLocked adds m's tables to the index. Callers hold d.mu.
func (d *dbState) watchLocked(m *monitor) {
	if d.watch == nil {
		d.watch = map[string]*tableWatch{}
	}
	d.acquireShapeLocked(m)
	for name, mt := range m.tables {
		tw := d.watch[name]
		if tw == nil {
			tw = &tableWatch{all: map[*monitor]struct{}{}, atoms: map[*ovsdb.ColumnSchema]map[ovsdb.Atom]map[*monitor]int{}}
			d.watch[name] = tw
		}
		if !routable(mt.conds) {
			tw.all[m] = struct{}{}
			continue
		}
		for i := range mt.conds {
			c := &mt.conds[i]
			if c.Function == ovsdb.FuncFalse {
				continue
			}
			byAtom := tw.atoms[c.Column]
			if byAtom == nil {
				byAtom = map[ovsdb.Atom]map[*monitor]int{}
				tw.atoms[c.Column] = byAtom
			}
			k := c.Arg.Keys[0]
			if byAtom[k] == nil {
				byAtom[k] = map[*monitor]int{}
			}
			byAtom[k][m]++
		}
	}
}

// unwatchLocked removes m from the index; it must be called with the
// conditions m was watched with. Callers hold d.mu.
func (d *dbState) unwatchLocked(m *monitor) {
	d.releaseShapeLocked(m)
	for name, mt := range m.tables {
		tw := d.watch[name]
		if tw == nil {
			continue
		}
		delete(tw.all, m)
		if !routable(mt.conds) {
			continue
		}
		for i := range mt.conds {
			c := &mt.conds[i]
			if c.Function == ovsdb.FuncFalse {
				continue
			}
			byAtom := tw.atoms[c.Column]
			k := c.Arg.Keys[0]
			if n := byAtom[k][m] - 1; n > 0 {
				byAtom[k][m] = n
			} else {
				delete(byAtom[k], m)
				if len(byAtom[k]) == 0 {
					delete(byAtom, k)
				}
				if len(byAtom) == 0 {
					delete(tw.atoms, c.Column)
				}
			}
		}
	}
}

// route returns, for each monitor a commit may concern, the changes to
// encode for it; a nil map means "all of cs" (monitors without conditions,
// which share encodings by shape). Those are left out unless
// unconditional: notifyLocked finds them in tableWatch.all itself.
func (d *dbState) route(cs *ovsdb.ChangeSet, unconditional bool) map[*monitor]map[string]map[ovsdb.UUID]*ovsdb.RowChange {
	out := map[*monitor]map[string]map[ovsdb.UUID]*ovsdb.RowChange{}
	for name, rows := range cs.Tables {
		tw := d.watch[name]
		if tw == nil {
			continue
		}
		for m := range tw.all {
			if m.shape != "" {
				if unconditional {
					out[m] = nil
				}
				continue
			}
			t := out[m]
			if t == nil {
				t = map[string]map[ovsdb.UUID]*ovsdb.RowChange{}
				out[m] = t
			}
			t[name] = rows
		}
		if len(tw.atoms) == 0 {
			continue
		}
		for u, ch := range rows {
			for c, byAtom := range tw.atoms {
				for _, r := range [2]*ovsdb.Row{ch.Old, ch.New} {
					if r == nil {
						continue
					}
					for _, k := range r.Data[c.Index].Keys {
						for m := range byAtom[k] {
							t := out[m]
							if t == nil {
								t = map[string]map[ovsdb.UUID]*ovsdb.RowChange{}
								out[m] = t
							}
							tr := t[name]
							if tr == nil {
								tr = map[ovsdb.UUID]*ovsdb.RowChange{}
								t[name] = tr
							}
							tr[u] = ch
						}
					}
				}
			}
		}
	}
	return out
}

// sharedEnc is the update encoding that monitors of one shape (or one
// condition shape) share, remembered for the commit being notified.
type sharedEnc struct {
	refs int    // monitors watching with this shape
	gen  uint64 // the dbState.notifyGen that b was encoded for
	b    []byte // <table-updates> and the params' closing bracket
	ok   bool   // b concerns the monitors at all
}

// shapeKey names m's shape among both kinds.
func (m *monitor) shapeKey() string {
	if m.shape != "" {
		return "u" + m.shape
	}
	return "c" + m.condShape
}

// acquireShapeLocked points m at the shared encoding of its shape.
func (d *dbState) acquireShapeLocked(m *monitor) {
	if d.shapes == nil {
		d.shapes = map[string]*sharedEnc{}
	}
	key := m.shapeKey()
	sh := d.shapes[key]
	if sh == nil {
		sh = &sharedEnc{}
		d.shapes[key] = sh
	}
	sh.refs++
	m.shared = sh
}

// releaseShapeLocked undoes acquireShapeLocked.
func (d *dbState) releaseShapeLocked(m *monitor) {
	if m.shared == nil {
		return
	}
	if m.shared.refs--; m.shared.refs == 0 {
		delete(d.shapes, m.shapeKey())
	}
	m.shared = nil
}
