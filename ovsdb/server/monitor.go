package server

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"

	"github.com/govn/govn/ovsdb"
)

// Monitor protocol versions: "monitor" sends update, "monitor_cond" sends
// update2, "monitor_cond_since" sends update3.
const (
	monitorV1 = 1
	monitorV2 = 2
	monitorV3 = 3
)

// monitor is one monitor of one session on one database.
type monitor struct {
	sess *session
	d    *dbState
	id   json.RawMessage
	// prefix opens an update's params: "[" id ",".
	prefix  []byte
	version int
	tables  map[string]*monTable
	// shape identifies monitors whose updates are byte-for-byte the same
	// (same version, tables, columns and select flags, no conditions); ""
	// when the monitor has conditions and must be encoded on its own.
	shape string
	// condShape is the same for monitors with conditions: monitors with
	// the same tables, columns, flags and conditions (in the same order)
	// are routed the same rows, so they too share one encoding. "" when
	// shape is set.
	condShape string
	// held, while not nil, collects the monitor's update notifications
	// (params) instead of sending them: its initial reply is being encoded
	// outside the database's lock and must go out first. Guarded by d.mu.
	held [][]byte
	// shared is the encoding monitors of the same shape share, while the
	// monitor is watched; sentGen is the last dbState.notifyGen it was
	// sent. Guarded by d.mu.
	shared  *sharedEnc
	sentGen uint64
}

// monTable is what a monitor watches in one table.
type monTable struct {
	ts    *ovsdb.TableSchema
	cols  []*ovsdb.ColumnSchema
	conds []ovsdb.Condition // empty: every row
	sel   selectFlags
}

type selectFlags struct{ initial, insert, delete, modify bool }

// setID sets the monitor's <json-value> and the params prefix made of it.
func (m *monitor) setID(id json.RawMessage) {
	m.id = id
	m.prefix = append(append(append(m.prefix[:0:0], '['), id...), ',')
}

func (m *monitor) method() string {
	switch m.version {
	case monitorV1:
		return "update"
	case monitorV2:
		return "update2"
	}
	return "update3"
}

// parseMonitorRequests parses <monitor-requests> (or
// <monitor-cond-requests>): table name -> a request or an array of them.
func parseMonitorRequests(db *ovsdb.Database, v any, version int) (map[string]*monTable, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, ovsdb.ErrorAt(v, ovsdb.ErrSyntax, "monitor requests must be an object mapping table names to requests")
	}
	out := map[string]*monTable{}
	// Tables, and the members of each request, are taken in the order
	// ovsdb-server takes them, so that of several errors it is the same
	// one that is reported.
	for _, name := range ovsdb.ServerOrder(slices.Collect(maps.Keys(obj))) {
		rv := obj[name]
		ts := db.Schema.Table(name)
		if ts == nil {
			return nil, ovsdb.Errorf(ovsdb.ErrSyntax, "no table named %s", name)
		}
		reqs, ok := rv.([]any)
		if !ok {
			reqs = []any{rv}
		}
		mt := &monTable{ts: ts}
		// mentioned holds the columns the table's requests named, which
		// may name each only once.
		mentioned := map[*ovsdb.ColumnSchema]bool{}
		var colSet map[*ovsdb.ColumnSchema]bool
		allCols := false
		trueCond := false
		for _, r := range reqs {
			req, ok := r.(map[string]any)
			if !ok {
				return nil, ovsdb.Errorf(ovsdb.ErrSyntax, "Parsing table %s failed: Object expected.", name)
			}
			p := ovsdb.NewMemberParser(req, "table "+name)
			cv := p.Member("columns", ovsdb.MemberArray, true)
			sv := p.Member("select", ovsdb.MemberObject, true)
			var wv any
			if version != monitorV1 {
				wv = p.Member("where", ovsdb.MemberArray, true)
			}
			if err := p.Err(); err != nil {
				return nil, err
			}
			if cv != nil {
				if colSet == nil {
					colSet = map[*ovsdb.ColumnSchema]bool{}
				}
				for _, e := range cv.([]any) {
					n, ok := e.(string)
					if !ok {
						return nil, ovsdb.ErrorAt(cv, ovsdb.ErrSyntax, "array of distinct column names expected")
					}
					c := ts.Column(n)
					if c == nil {
						return nil, ovsdb.ErrorAt(cv, ovsdb.ErrSyntax, "%s is not a valid column name", n)
					}
					if mentioned[c] {
						return nil, ovsdb.ErrorAt(cv, ovsdb.ErrSyntax, "column %s mentioned more than once", n)
					}
					mentioned[c] = true
					if c.Index == ovsdb.ColumnIndexUUID {
						continue
					}
					colSet[c] = true
				}
			} else {
				allCols = true
			}
			sel := selectFlags{true, true, true, true}
			if sv != nil {
				sp := ovsdb.NewMemberParser(sv.(map[string]any), "table "+name+" select")
				for _, f := range []struct {
					name string
					flag *bool
				}{{"initial", &sel.initial}, {"insert", &sel.insert}, {"delete", &sel.delete}, {"modify", &sel.modify}} {
					if bv := sp.Member(f.name, ovsdb.MemberBoolean, true); bv != nil {
						*f.flag = bv.(bool)
					}
				}
				if err := sp.Finish(nil); err != nil {
					return nil, err
				}
			}
			mt.sel.initial = mt.sel.initial || sel.initial
			mt.sel.insert = mt.sel.insert || sel.insert
			mt.sel.delete = mt.sel.delete || sel.delete
			mt.sel.modify = mt.sel.modify || sel.modify
			var conds []ovsdb.Condition
			if wv != nil {
				var err error
				if conds, err = ovsdb.ParseConditions(wv, ts, nil); err != nil {
					return nil, err
				}
			}
			if err := p.Finish(nil); err != nil {
				return nil, err
			}
			if wv == nil || len(conds) == 0 {
				trueCond = true
				continue
			}
			mt.conds = append(mt.conds, conds...)
		}
		if trueCond {
			mt.conds = nil
		} else {
			mt.conds = simplify(mt.conds)
		}
		if allCols || colSet == nil {
			mt.cols = defaultColumns(ts)
		} else {
			for _, c := range append(ts.Columns, ts.Column("_version")) {
				if colSet[c] {
					mt.cols = append(mt.cols, c)
				}
			}
		}
		out[name] = mt
	}
	return out, nil
}

// simplify folds constant conditions: any "true" makes the disjunction
// match everything (nil); "false" terms drop out.
func simplify(conds []ovsdb.Condition) []ovsdb.Condition {
	out := conds[:0:0]
	for _, c := range conds {
		switch c.Function {
		case ovsdb.FuncTrue:
			return nil
		case ovsdb.FuncFalse:
			continue
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		// Only "false": match nothing.
		return []ovsdb.Condition{{Function: ovsdb.FuncFalse}}
	}
	return out
}

// defaultColumns are the columns monitored when a request names none:
// every column but _uuid, as ovsdb-server does.
func defaultColumns(ts *ovsdb.TableSchema) []*ovsdb.ColumnSchema {
	return append(append([]*ovsdb.ColumnSchema(nil), ts.Columns...), ts.Column("_version"))
}

func (m *monitor) computeShape() {
	names := make([]string, 0, len(m.tables))
	conditional := false
	for n, mt := range m.tables {
		names = append(names, n)
		conditional = conditional || len(mt.conds) > 0
	}
	sort.Strings(names)
	var b []byte
	b = append(b, byte('0'+m.version))
	for _, n := range names {
		mt := m.tables[n]
		b = append(b, n...)
		b = append(b, ':')
		for _, c := range mt.cols {
			b = append(b, c.Name...)
			b = append(b, ',')
		}
		for _, f := range []bool{mt.sel.initial, mt.sel.insert, mt.sel.delete, mt.sel.modify} {
			if f {
				b = append(b, '1')
			} else {
				b = append(b, '0')
			}
		}
		for i := range mt.conds {
			c := &mt.conds[i]
			b = append(b, '|')
			if c.Column != nil { // nil for the constant false
				b = append(b, c.Column.Name...)
			}
			b = append(b, ' ', byte('0'+c.Function), ' ')
			for j, k := range c.Arg.Keys {
				b = k.AppendJSON(b)
				if c.Arg.Values != nil {
					b = append(b, '=')
					b = c.Arg.Values[j].AppendJSON(b)
				}
				b = append(b, ',')
			}
		}
		b = append(b, ';')
	}
	if conditional {
		m.shape, m.condShape = "", string(b)
	} else {
		m.shape, m.condShape = string(b), ""
	}
}

func (mt *monTable) matches(r *ovsdb.Row) bool {
	return r != nil && ovsdb.MatchAny(mt.conds, r)
}

// appendRow appends r's monitored columns; for update2 rows, columns at
// their default value are left out.
func (mt *monTable) appendRow(b []byte, r *ovsdb.Row, version int) []byte {
	b = append(b, '{')
	n := 0
	for _, c := range mt.cols {
		d := r.Get(c)
		if version != monitorV1 && c.Index >= 0 && c.Type.IsDefault(d) {
			continue
		}
		b = appendMember(b, n, c.Name)
		n++
		b = d.AppendJSON(b, &c.Type)
	}
	return append(b, '}')
}

// appendMember starts member n (from 0) of a JSON object: a comma unless
// it is the first, then the quoted name and a colon.
func appendMember(b []byte, n int, name string) []byte {
	if n > 0 {
		b = append(b, ',')
	}
	b = ovsdb.AppendJSONString(b, name)
	return append(b, ':')
}

// appendChange appends the <row-update> (v1) or <row-update2> for one
// row's change, with its "uuid": prefix; it returns b unchanged when the
// monitor has nothing to say about it.
func (mt *monTable) appendChange(b []byte, uuid ovsdb.UUID, old, new *ovsdb.Row, version int) []byte {
	oldIn, newIn := mt.matches(old), mt.matches(new)
	start := len(b)
	b = append(b, '"')
	b, _ = uuid.AppendText(b)
	b = append(b, `":`...)
	switch {
	case newIn && !oldIn:
		if !mt.sel.insert {
			return b[:start]
		}
		if version == monitorV1 {
			b = append(b, `{"new":`...)
		} else {
			b = append(b, `{"insert":`...)
		}
		b = mt.appendRow(b, new, version)
	case oldIn && !newIn:
		if !mt.sel.delete {
			return b[:start]
		}
		if version == monitorV1 {
			b = append(b, `{"old":`...)
			b = mt.appendRow(b, old, version)
		} else {
			b = append(b, `{"delete":null`...)
		}
	case oldIn && newIn:
		if !mt.sel.modify {
			return b[:start]
		}
		if version == monitorV1 {
			b = append(b, `{"old":{`...)
			n := 0
			for _, c := range mt.cols {
				od := old.Get(c)
				if od.Equal(new.Get(c)) {
					continue
				}
				b = appendMember(b, n, c.Name)
				n++
				b = od.AppendJSON(b, &c.Type)
			}
			if n == 0 {
				return b[:start]
			}
			b = append(b, `},"new":`...)
			b = mt.appendRow(b, new, version)
		} else {
			b = append(b, `{"modify":{`...)
			n := 0
			for _, c := range mt.cols {
				od, nd := old.Get(c), new.Get(c)
				if od.Equal(nd) {
					continue
				}
				b = appendMember(b, n, c.Name)
				n++
				b = ovsdb.Diff(od, nd, &c.Type).AppendJSON(b, &c.Type)
			}
			if n == 0 {
				return b[:start]
			}
			b = append(b, '}')
		}
	default:
		return b[:start]
	}
	return append(b, '}')
}

// appendUpdates appends the <table-updates> (or <table-updates2>) object
// for changes; ok is false when nothing in it concerns the monitor.
func (m *monitor) appendUpdates(b []byte, tables map[string]map[ovsdb.UUID]*ovsdb.RowChange) ([]byte, bool) {
	b = append(b, '{')
	nt := 0
	for name, rows := range tables {
		mt := m.tables[name]
		if mt == nil || len(rows) == 0 {
			continue
		}
		tstart := len(b)
		if nt > 0 {
			b = append(b, ',')
		}
		b = ovsdb.AppendJSONString(b, name)
		b = append(b, `:{`...)
		nr := 0
		for u, ch := range rows {
			rstart := len(b)
			if nr > 0 {
				b = append(b, ',')
			}
			before := len(b)
			b = mt.appendChange(b, u, ch.Old, ch.New, m.version)
			if len(b) == before {
				b = b[:rstart]
				continue
			}
			nr++
		}
		if nr == 0 {
			b = b[:tstart]
			continue
		}
		b = append(b, '}')
		nt++
	}
	return append(b, '}'), nt > 0
}

// initialRows is the rows a monitor's initial reply holds, per table,
// captured under the database's lock. Rows are immutable, so the reply can
// be encoded from it after the lock is released.
type initialRows map[string][]*ovsdb.Row

// snapshotInitialLocked captures the rows the monitor's initial contents
// select. Callers hold m.d.mu.
func (m *monitor) snapshotInitialLocked(db *ovsdb.Database) initialRows {
	snap := initialRows{}
	for name, mt := range m.tables {
		if !mt.sel.initial {
			continue
		}
		t := db.Table(name)
		var rows []*ovsdb.Row
		if len(mt.conds) == 0 {
			rows = make([]*ovsdb.Row, 0, len(t.Rows))
		}
		t.ForEachMatchAny(mt.conds, func(r *ovsdb.Row) { rows = append(rows, r) })
		snap[name] = rows
	}
	return snap
}

// appendInitial appends the initial contents in snap.
func (m *monitor) appendInitial(b []byte, snap initialRows) []byte {
	b = append(b, '{')
	nt := 0
	for name, rows := range snap {
		if len(rows) == 0 {
			continue
		}
		mt := m.tables[name]
		if nt > 0 {
			b = append(b, ',')
		}
		b = ovsdb.AppendJSONString(b, name)
		b = append(b, `:{`...)
		for i, r := range rows {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b, _ = r.UUID.AppendText(b)
			if m.version == monitorV1 {
				b = append(b, `":{"new":`...)
			} else {
				b = append(b, `":{"initial":`...)
			}
			b = mt.appendRow(b, r, m.version)
			b = append(b, '}')
		}
		b = append(b, '}')
		nt++
	}
	return append(b, '}')
}

// notifyLocked queues one commit's updates for every monitor of d that it
// concerns (unlock sends them). Monitors of the same shape, or with the
// same conditions, share one encoding. Callers hold d.mu.
func (d *dbState) notifyLocked(cs *ovsdb.ChangeSet, txnID ovsdb.UUID) {
	if len(d.monitors) == 0 {
		return
	}
	d.notifyGen++
	gen := d.notifyGen
	var txnText []byte
	// A monitor of whole tables gets about as many bytes as the rows take
	// (ChangeSet.TextSize); a conditional one may get few.
	send := func(m *monitor, tables map[string]map[ovsdb.UUID]*ovsdb.RowChange, whole bool) {
		sh := m.shared
		if sh.gen != gen {
			b := sh.b[:0]
			if whole {
				b = slices.Grow(b, cs.TextSize)
			}
			sh.b, sh.ok = m.appendUpdates(b, tables)
			sh.b = append(sh.b, ']') // closes the params array
			sh.gen = gen
		}
		if !sh.ok {
			return
		}
		var txn []byte
		if m.version == monitorV3 {
			if txnText == nil {
				txnText = []byte(`"` + txnID.String() + `",`)
			}
			txn = txnText
		}
		if m.held != nil {
			p := make([]byte, 0, len(m.prefix)+len(txn)+len(sh.b))
			p = append(append(append(p, m.prefix...), txn...), sh.b...)
			m.held = append(m.held, p)
			return
		}
		// Queued, not sent: unlock writes them after releasing d.mu.
		if m.sess.conn.QueueNotification(m.method(), m.prefix, txn, sh.b) == nil {
			d.counters.monitorUpdates.Add(1)
			d.queuedLocked(m.sess.conn)
		}
	}
	// Monitors without conditions see every change of their tables.
	for name := range cs.Tables {
		tw := d.watch[name]
		if tw == nil {
			continue
		}
		for m := range tw.all {
			if m.shape == "" || m.sentGen == gen {
				continue
			}
			m.sentGen = gen
			send(m, cs.Tables, true)
		}
	}
	// The others see the rows their conditions select; the same
	// conditions are routed the same rows.
	for m, tables := range d.route(cs, false) {
		send(m, tables, false)
	}
}

// composeSince merges the history after txn id into one change set; ok is
// false when id is not in the history.
func (d *dbState) composeSince(id ovsdb.UUID) (map[string]map[ovsdb.UUID]*ovsdb.RowChange, bool) {
	if id == d.lastTxn {
		// The client is up to date, even if the history was trimmed.
		return map[string]map[ovsdb.UUID]*ovsdb.RowChange{}, true
	}
	start := -1
	for i := len(d.history) - 1; i >= 0; i-- {
		if d.history[i].id == id {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return nil, false
	}
	out := map[string]map[ovsdb.UUID]*ovsdb.RowChange{}
	for _, e := range d.history[start:] {
		for name, rows := range e.cs.Tables {
			t := out[name]
			if t == nil {
				t = map[ovsdb.UUID]*ovsdb.RowChange{}
				out[name] = t
			}
			for u, ch := range rows {
				if prev, ok := t[u]; ok {
					t[u] = &ovsdb.RowChange{Old: prev.Old, New: ch.New}
				} else {
					t[u] = ch
				}
			}
		}
	}
	return out, true
}

func (s *session) monitor(id json.RawMessage, method string, params []any) {
	version := map[string]int{"monitor": monitorV1, "monitor_cond": monitorV2, "monitor_cond_since": monitorV3}[method]
	want := 3
	if version == monitorV3 {
		want = 4
	}
	if len(params) != want && !(version == monitorV1 && len(params) == 2) {
		s.replyError(id, errorAtJSON(params, ovsdb.ErrSyntax, "invalid parameters"))
		return
	}
	d, errv := s.db(method, params)
	if errv != nil {
		s.replyError(id, errv)
		return
	}
	monID, err := json.Marshal(params[1])
	if err != nil {
		s.replyError(id, errorJSON(ovsdb.ErrSyntax, "bad monitor id"))
		return
	}
	var reqs any = map[string]any{}
	if len(params) > 2 {
		reqs = params[2]
	}
	tables, err := parseMonitorRequests(d.current(), reqs, version)
	if err != nil {
		s.replyError(id, toErrJSON(err))
		return
	}
	var since ovsdb.UUID
	if version == monitorV3 {
		str, _ := params[3].(string)
		if since, err = ovsdb.ParseUUID(str); err != nil {
			s.replyError(id, errorAtJSON(params[3], ovsdb.ErrSyntax, "last-txn-id must be UUID format."))
			return
		}
	}
	m := &monitor{sess: s, d: d, version: version, tables: tables}
	m.setID(monID)
	m.computeShape()

	d.mu.Lock()
	if !parsedAgainst(tables, d.db) {
		d.unlock()
		s.replyError(id, errorJSON(ovsdb.ErrCanceled, "database %s was converted to a new schema meanwhile", d.name))
		return
	}
	s.mu.Lock()
	if _, dup := s.monitors[string(monID)]; dup || s.closed {
		s.mu.Unlock()
		d.unlock()
		s.replyError(id, errorAtJSON(params[1], ovsdb.ErrSyntax, "duplicate monitor ID"))
		return
	}
	s.monitors[string(monID)] = m
	s.mu.Unlock()
	d.monitors[m] = struct{}{}
	d.watchLocked(m)

	if version == monitorV3 && !since.IsZero() {
		if changes, found := d.composeSince(since); found {
			result := []byte(`[true,"`)
			result, _ = d.lastTxn.AppendText(result)
			result = append(result, `",`...)
			result, _ = m.appendUpdates(result, changes)
			result = append(result, ']')
			s.conn.Reply(id, json.RawMessage(result))
			d.unlock()
			return
		}
	}
	// The initial contents: capture the rows under the lock, encode them
	// outside it (a large table takes long enough to stall every commit),
	// and hold the monitor's updates meanwhile so that they follow the
	// reply.
	snap := m.snapshotInitialLocked(d.db)
	lastTxn := d.lastTxn
	m.held = [][]byte{}
	d.unlock()

	var result []byte
	if version == monitorV3 {
		result = append(result, `[false,"`...)
		result, _ = lastTxn.AppendText(result)
		result = append(result, `",`...)
		result = m.appendInitial(result, snap)
		result = append(result, ']')
	} else {
		result = m.appendInitial(nil, snap)
	}

	// Updates are still held, so the reply (whose queueing copies it) goes
	// out before them without the lock.
	s.conn.Reply(id, json.RawMessage(result))
	d.mu.Lock()
	for _, p := range m.held {
		s.conn.Notify(m.method(), json.RawMessage(p))
	}
	m.held = nil
	d.unlock()
}

func toErrJSON(err error) json.RawMessage {
	if e, ok := err.(*ovsdb.Error); ok {
		return e.AppendJSON(nil)
	}
	return errorJSON(ovsdb.ErrSyntax, "%v", err)
}

func (s *session) findMonitor(v any) (*monitor, string) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.monitors[string(raw)], string(raw)
}

func (s *session) monitorCancel(id json.RawMessage, params []any) {
	// ovsdb-server's errors here are bare strings, not error objects.
	if len(params) != 1 {
		s.replyError(id, json.RawMessage(`"invalid parameters"`))
		return
	}
	m, key := s.findMonitor(params[0])
	if m == nil {
		s.replyError(id, json.RawMessage(`"unknown monitor"`))
		return
	}
	m.d.mu.Lock()
	if _, live := m.d.monitors[m]; !live { // canceled meanwhile (see convert.go)
		m.d.unlock()
		s.replyError(id, json.RawMessage(`"unknown monitor"`))
		return
	}
	delete(m.d.monitors, m)
	m.d.monitorsChangedLocked()
	m.d.unwatchLocked(m)
	m.d.unlock()
	s.mu.Lock()
	delete(s.monitors, key)
	s.mu.Unlock()
	s.conn.Reply(id, json.RawMessage("{}"))
}

func (s *session) monitorCondChange(id json.RawMessage, params []any) {
	if len(params) != 3 {
		s.replyError(id, errorAtJSON(params, ovsdb.ErrSyntax, "invalid parameters"))
		return
	}
	m, key := s.findMonitor(params[0])
	if m == nil {
		s.replyError(id, errorAtJSON(params[0], ovsdb.ErrSyntax, "unknown monitor session"))
		return
	}
	if m.version == monitorV1 {
		s.replyError(id, errorJSON(ovsdb.ErrNotSupported, "monitor_cond_change needs a monitor_cond or monitor_cond_since monitor"))
		return
	}
	newID, err := json.Marshal(params[1])
	if err != nil {
		s.replyError(id, errorJSON(ovsdb.ErrSyntax, "bad monitor id"))
		return
	}
	// Taking another monitor's ID would orphan that monitor: it could no
	// longer be canceled and would outlive the session.
	if other, _ := s.findMonitor(params[1]); other != nil && other != m {
		s.replyError(id, errorJSON(ovsdb.ErrSyntax, "duplicate new monitor ID %s", newID))
		return
	}
	reqs, ok := params[2].(map[string]any)
	if !ok {
		s.replyError(id, errorJSON(ovsdb.ErrSyntax, "monitor-cond-change-requests must be object"))
		return
	}
	d := m.d
	d.mu.Lock()
	defer d.unlock()
	if _, live := d.monitors[m]; !live { // canceled meanwhile (see convert.go)
		s.replyError(id, errorAtJSON(params[0], ovsdb.ErrSyntax, "unknown monitor session"))
		return
	}
	// Parse all first, so an error changes nothing.
	newConds := map[string][]ovsdb.Condition{}
	for _, name := range ovsdb.ServerOrder(slices.Collect(maps.Keys(reqs))) {
		rv := reqs[name]
		mt := m.tables[name]
		if mt == nil {
			s.replyError(id, errorJSON(ovsdb.ErrSyntax, "no table named %s in monitor session", name))
			return
		}
		list, ok := rv.([]any)
		if !ok {
			s.replyError(id, errorJSON(ovsdb.ErrSyntax, "table %s no monitor-cond-change JSON array", name))
			return
		}
		var conds []ovsdb.Condition
		trueCond := false
		for _, r := range list {
			req, ok := r.(map[string]any)
			if !ok {
				s.replyError(id, errorJSON(ovsdb.ErrSyntax, "Parsing table %s failed: Object expected.", name))
				return
			}
			if _, has := req["columns"]; has {
				s.replyError(id, errorAtJSON(req, ovsdb.ErrSyntax, "changing columns is unsupported"))
				return
			}
			p := ovsdb.NewMemberParser(req, "table "+name)
			wv := p.Member("where", ovsdb.MemberArray, true)
			if err := p.Err(); err != nil {
				s.replyError(id, toErrJSON(err))
				return
			}
			var c []ovsdb.Condition
			if wv != nil {
				var err error
				if c, err = ovsdb.ParseConditions(wv, mt.ts, nil); err != nil {
					s.replyError(id, toErrJSON(err))
					return
				}
			}
			if err := p.Finish(nil); err != nil {
				s.replyError(id, toErrJSON(err))
				return
			}
			if wv == nil {
				trueCond = true
				continue
			}
			if len(c) == 0 {
				trueCond = true
			}
			conds = append(conds, c...)
		}
		if trueCond {
			conds = nil
		} else {
			conds = simplify(conds)
		}
		newConds[name] = conds
	}
	// Rows that enter or leave the monitor's view.
	changes := map[string]map[ovsdb.UUID]*ovsdb.RowChange{}
	d.unwatchLocked(m)
	defer d.watchLocked(m)
	for name, conds := range newConds {
		mt := m.tables[name]
		old := &monTable{ts: mt.ts, cols: mt.cols, conds: mt.conds, sel: mt.sel}
		mt.conds = conds
		rows := map[ovsdb.UUID]*ovsdb.RowChange{}
		tbl := d.db.Table(name)
		was := map[ovsdb.UUID]*ovsdb.Row{}
		tbl.ForEachMatchAny(old.conds, func(r *ovsdb.Row) { was[r.UUID] = r })
		tbl.ForEachMatchAny(mt.conds, func(r *ovsdb.Row) {
			if _, ok := was[r.UUID]; ok {
				delete(was, r.UUID)
				return
			}
			rows[r.UUID] = &ovsdb.RowChange{New: r}
		})
		for u, r := range was {
			rows[u] = &ovsdb.RowChange{Old: r}
		}
		changes[name] = rows
	}
	m.computeShape()
	s.mu.Lock()
	delete(s.monitors, key)
	m.setID(newID)
	s.monitors[string(newID)] = m
	s.mu.Unlock()
	// The entering and leaving rows are already chosen: encode them with a
	// view of the monitor that matches every row.
	all := &monitor{version: m.version, tables: map[string]*monTable{}}
	for name, mt := range m.tables {
		all.tables[name] = &monTable{ts: mt.ts, cols: mt.cols, sel: mt.sel}
	}
	if b, ok := all.appendUpdates(nil, changes); ok {
		p := []byte{'['}
		p = append(p, m.id...)
		p = append(p, ',')
		if m.version == monitorV3 {
			p = append(p, '"')
			p, _ = d.lastTxn.AppendText(p)
			p = append(p, `",`...)
		}
		p = append(p, b...)
		p = append(p, ']')
		s.conn.Notify(m.method(), json.RawMessage(p))
	}
	s.conn.Reply(id, json.RawMessage("{}"))
}
