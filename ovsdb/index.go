package ovsdb

// Secondary indexes let conditions such as ["datapath", "==", X] or
// ["ports", "includes", X] find their rows without scanning the table: the
// first time a condition on a set column is evaluated through a Table, the
// table indexes that column by atom and keeps the index current in Apply.
// Only columns that conditions use pay for an index.

func (t *Table) atomIndex(c *ColumnSchema) map[Atom]map[UUID]*Row {
	if idx, ok := t.atoms[c]; ok {
		return idx
	}
	if t.atoms == nil {
		t.atoms = map[*ColumnSchema]map[Atom]map[UUID]*Row{}
	}
	idx := map[Atom]map[UUID]*Row{}
	for u, r := range t.Rows {
		for _, k := range r.Data[c.Index].Keys {
			addToIndex(idx, k, u, r)
		}
	}
	t.atoms[c] = idx
	return idx
}

func addToIndex(idx map[Atom]map[UUID]*Row, k Atom, u UUID, r *Row) {
	m := idx[k]
	if m == nil {
		m = map[UUID]*Row{}
		idx[k] = m
	}
	m[u] = r
}

func (t *Table) indexAtoms(r *Row) {
	for c, idx := range t.atoms {
		for _, k := range r.Data[c.Index].Keys {
			addToIndex(idx, k, r.UUID, r)
		}
	}
}

func (t *Table) unindexAtoms(r *Row) {
	for c, idx := range t.atoms {
		for _, k := range r.Data[c.Index].Keys {
			if m := idx[k]; m != nil {
				delete(m, r.UUID)
				if len(m) == 0 {
					delete(idx, k)
				}
			}
		}
	}
}

// indexable reports whether a row satisfying cond must contain the atom
// cond.Arg.Keys[0] in cond.Column (so the index can find it).
func indexable(cond *Condition) bool {
	if cond.Column == nil || cond.Column.Index < 0 || cond.Column.Type.IsMap() || cond.Arg.Len() == 0 {
		return false
	}
	return cond.Function == FuncEqual || cond.Function == FuncIncludes
}

// candidates returns the rows that may satisfy cond, and false when the
// condition cannot use an index (the caller then scans).
func (t *Table) candidates(cond *Condition) (map[UUID]*Row, []*Row, bool) {
	switch {
	case cond.Function == FuncFalse:
		return nil, nil, true
	case cond.Function == FuncEqual && cond.Column != nil && cond.Column.Index == ColumnIndexUUID:
		if cond.Arg.Len() != 1 {
			return nil, nil, true
		}
		if r := t.Rows[cond.Arg.Keys[0].UUID()]; r != nil {
			return nil, []*Row{r}, true
		}
		return nil, nil, true
	case indexable(cond):
		return t.atomIndex(cond.Column)[cond.Arg.Keys[0]], nil, true
	}
	return nil, nil, false
}

// ForEachMatchAny calls fn once for each row that satisfies at least one
// of conds (every row when conds is empty), using secondary indexes where
// the conditions allow.
func (t *Table) ForEachMatchAny(conds []Condition, fn func(*Row)) {
	if len(conds) == 0 {
		for _, r := range t.Rows {
			fn(r)
		}
		return
	}
	for i := range conds {
		if _, _, ok := t.candidates(&conds[i]); !ok {
			for _, r := range t.Rows {
				if MatchAny(conds, r) {
					fn(r)
				}
			}
			return
		}
	}
	var seen map[UUID]bool
	if len(conds) > 1 {
		seen = map[UUID]bool{}
	}
	visit := func(r *Row) {
		if !MatchAny(conds, r) {
			return
		}
		if seen != nil {
			if seen[r.UUID] {
				return
			}
			seen[r.UUID] = true
		}
		fn(r)
	}
	for i := range conds {
		m, list, _ := t.candidates(&conds[i])
		for _, r := range m {
			visit(r)
		}
		for _, r := range list {
			visit(r)
		}
	}
}

// forEachMatchAll calls fn for each committed row that satisfies all of
// conds, narrowing the scan with an index when one condition allows.
func (t *Table) forEachMatchAll(conds []Condition, fn func(*Row)) {
	for i := range conds {
		m, list, ok := t.candidates(&conds[i])
		if !ok {
			continue
		}
		for _, r := range m {
			if MatchAll(conds, r) {
				fn(r)
			}
		}
		for _, r := range list {
			if MatchAll(conds, r) {
				fn(r)
			}
		}
		return
	}
	for _, r := range t.Rows {
		if MatchAll(conds, r) {
			fn(r)
		}
	}
}
