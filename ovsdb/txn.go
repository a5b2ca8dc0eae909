package ovsdb

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TxnOptions carries what a transaction needs from its session.
type TxnOptions struct {
	// HasLock reports whether the session owns the named lock ("assert").
	// Nil means it owns none.
	HasLock func(name string) bool
	// WaitExpired makes an unsatisfied "wait" fail with "timed out" at
	// once, whatever its timeout: the caller sets it when it re-runs a
	// blocked transaction whose time is up.
	WaitExpired bool
	// Waited is how long the transaction has been blocked, for the
	// error of a "wait" that timed out.
	Waited time.Duration
	// ReadOnly refuses operations that write ("not allowed"), after
	// parsing them, as ovsdb-server does for its _Server database.
	ReadOnly bool
	// ReadOnlySession refuses them as ovsdb-server does for a client of
	// a read-only connection (Connection.read_only in OVN Southbound).
	ReadOnlySession bool
	// Checker, when not nil, authorizes each insert, update, mutate and
	// delete before it is applied (OVN's role-based access control); its
	// error becomes the operation's reply.
	Checker WriteChecker
}

// WriteChecker authorizes the writes of a session.
type WriteChecker interface {
	// CheckWrite returns nil when w may be applied to db, which holds
	// the committed state the transaction runs against.
	CheckWrite(db *Database, w Write) error
}

// Write is one write operation as a WriteChecker sees it.
type Write struct {
	// Op is "insert", "update", "mutate" or "delete".
	Op    string
	Table *TableSchema
	// Rows are the new row of an insert, or the rows an update, mutate
	// or delete matches, as they are before it.
	Rows []*Row
	// Columns are the columns an update or mutate writes (an update's
	// whole "row", whether or not a value changes).
	Columns []*ColumnSchema
}

// TxnResult is the outcome of Transact.
type TxnResult struct {
	// Reply is the JSON array to send as the "result" of the transact
	// request: one element per operation, then an extra error element when
	// the commit itself failed.
	Reply []byte
	// Changes is the change set to commit with Apply; nil when the
	// transaction failed or changed nothing.
	Changes *ChangeSet
	// Durable is true when a "commit" operation asked for durability.
	Durable bool
	// Blocked is true when a "wait" operation is not yet satisfied and its
	// timeout has not expired: the caller should run the transaction again
	// after the next commit, until WaitTimeout has passed (negative: no
	// limit), and then once more with TxnOptions.WaitExpired.
	Blocked     bool
	WaitTimeout time.Duration
	// Failed is true when an operation or the commit failed.
	Failed bool
}

// txn is one transaction being executed against a database.
type txn struct {
	db      *Database
	opts    TxnOptions
	changes map[*TableSchema]map[UUID]*RowChange
	// names maps uuid-names to the UUIDs they stand for; inserted marks the
	// ones an insert has declared.
	names    map[string]UUID
	inserted map[string]bool
	comments []string
	durable  bool
	blocked  bool
	waitFor  time.Duration
}

// Transact executes the operations of a "transact" request (the params
// after the database name, in the generic JSON form of DecodeJSON) against
// db without changing it. The caller commits TxnResult.Changes with Apply.
// It never panics on malformed input: everything wrong becomes an error
// object in the reply.
func (db *Database) Transact(ops []any, opts TxnOptions) TxnResult {
	t := &txn{db: db, opts: opts, changes: map[*TableSchema]map[UUID]*RowChange{}, names: map[string]UUID{}, inserted: map[string]bool{}}
	reply := []byte{'['}
	var failed error
	for i, op := range ops {
		if i > 0 {
			reply = append(reply, ',')
		}
		if failed != nil {
			reply = append(reply, "null"...)
			continue
		}
		start := len(reply)
		var err error
		reply, err = t.execute(reply, op, i+1, len(ops))
		if t.blocked {
			return TxnResult{Blocked: true, WaitTimeout: t.waitFor}
		}
		if err != nil {
			failed = err
			reply = toError(err).AppendJSON(reply[:start])
		}
	}
	if failed == nil {
		// A named-uuid no insert declares is a UUID like any other, as
		// in ovsdb-server: a strong reference to it fails the
		// referential integrity check.
		failed = t.finish()
		if failed != nil {
			if len(ops) > 0 {
				reply = append(reply, ',')
			}
			reply = toError(failed).AppendJSON(reply)
		}
	}
	reply = append(reply, ']')
	res := TxnResult{Reply: reply, Durable: t.durable, Failed: failed != nil}
	if failed == nil {
		cs := &ChangeSet{Tables: map[string]map[UUID]*RowChange{}, Comment: strings.Join(t.comments, "\n")}
		for _, op := range ops {
			if r, ok := op.(*rawObject); ok {
				cs.TextSize += len(r.text)
			}
		}
		for ts, rows := range t.changes {
			if len(rows) > 0 {
				cs.Tables[ts.Name] = rows
			}
		}
		if !cs.Empty() {
			res.Changes = cs
		}
	}
	return res
}

func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Tag: "internal error", Details: err.Error()}
}

// row returns the current version of a row within the transaction.
func (t *txn) row(ts *TableSchema, uuid UUID) *Row {
	if ch, ok := t.changes[ts][uuid]; ok {
		return ch.New
	}
	return t.db.tables[ts.Name].Rows[uuid]
}

// setRow records newRow (nil: deleted) as the current version of uuid.
func (t *txn) setRow(ts *TableSchema, uuid UUID, newRow *Row) {
	rows := t.changes[ts]
	if rows == nil {
		rows = map[UUID]*RowChange{}
		t.changes[ts] = rows
	}
	if ch, ok := rows[uuid]; ok {
		ch.New = newRow
		if ch.Old == nil && newRow == nil {
			delete(rows, uuid)
		}
		return
	}
	rows[uuid] = &RowChange{Old: t.db.tables[ts.Name].Rows[uuid], New: newRow}
}

// forEach calls fn for each current row of ts matching conds, stopping
// when fn returns an error.
func (t *txn) forEach(ts *TableSchema, conds []Condition, fn func(*Row) error) error {
	// The IDL addresses rows by _uuid; look those up directly.
	for i := range conds {
		c := &conds[i]
		if c.Function == FuncEqual && c.Column.Index == ColumnIndexUUID {
			if c.Arg.Len() != 1 {
				return nil
			}
			r := t.row(ts, c.Arg.Keys[0].UUID())
			if r != nil && MatchAll(conds, r) {
				return fn(r)
			}
			return nil
		}
	}
	changed := t.changes[ts]
	var matched []*Row
	t.db.tables[ts.Name].forEachMatchAll(conds, func(r *Row) {
		if _, ok := changed[r.UUID]; !ok {
			matched = append(matched, r)
		}
	})
	for _, ch := range changed {
		if ch.New != nil && MatchAll(conds, ch.New) {
			matched = append(matched, ch.New)
		}
	}
	// fn may change rows; it runs on a snapshot of the matches, in UUID
	// order, so that the same request on the same rows gets the same
	// reply: rows in the same order, the same row named in an error.
	slices.SortFunc(matched, func(a, b *Row) int { return a.UUID.Compare(b.UUID) })
	for _, r := range matched {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// refuseWrite fails a write operation in a read-only database.
func (t *txn) refuseWrite(op string) error {
	switch {
	case t.opts.ReadOnly:
		return Errorf(ErrNotAllowed, "%s operation not allowed on table in reserved database %s", op, t.db.Schema.Name)
	case t.opts.ReadOnlySession:
		return Errorf(ErrNotAllowed, "%s operation not allowed when database server is in read only mode", op)
	}
	return nil
}

// checkWrite asks the session's WriteChecker, if any, about a write: an
// insert of newRow, or an op on the rows of ts matching conds.
func (t *txn) checkWrite(op string, ts *TableSchema, conds []Condition, newRow *Row, cols []*ColumnSchema) error {
	if t.opts.Checker == nil {
		return nil
	}
	w := Write{Op: op, Table: ts, Columns: cols}
	if newRow != nil {
		w.Rows = []*Row{newRow}
	} else if err := t.forEach(ts, conds, func(r *Row) error {
		w.Rows = append(w.Rows, r)
		return nil
	}); err != nil {
		return err
	}
	return t.opts.Checker.CheckWrite(t.db, w)
}

func (t *txn) resolve(name string) (UUID, error) {
	if !isIdentifier(name) {
		return UUID{}, Errorf(ErrSyntax, "%q is not a valid uuid-name", name)
	}
	if u, ok := t.names[name]; ok {
		return u, nil
	}
	u := t.db.uuids.New()
	t.names[name] = u
	return u, nil
}

// where parses the conditions of a "where" member that p has read.
func (t *txn) where(v any, ts *TableSchema) ([]Condition, error) {
	return ParseConditions(v, ts, t.resolve)
}

// execute runs operation number i of the transaction's n, appending its
// result to b.
func (t *txn) execute(b []byte, v any, i, n int) ([]byte, error) {
	if r, ok := v.(*rawObject); ok {
		if b, ok := t.insertText(b, r.text); ok {
			return b, nil
		}
		var err error
		if v, err = r.decode(); err != nil {
			return b, err
		}
	}
	op, ok := v.(map[string]any)
	if !ok {
		return b, Errorf(ErrSyntax, "Parsing ovsdb operation %d of %d failed: Object expected.", i, n)
	}
	p := &MemberParser{op: op, used: map[string]bool{}, index: i, count: n}
	nv := p.Member("op", MemberString, false)
	if nv == nil {
		return b, p.err
	}
	var err error
	switch name := nv.(string); name {
	case "insert":
		b, err = t.insert(b, p)
	case "select":
		b, err = t.selectOp(b, p)
	case "update":
		b, err = t.update(b, p)
	case "mutate":
		b, err = t.mutate(b, p)
	case "delete":
		b, err = t.deleteOp(b, p)
	case "wait":
		b, err = t.wait(b, p)
	case "commit":
		if d := p.Member("durable", MemberBoolean, false); d != nil {
			t.durable = t.durable || d.(bool)
		}
		b = append(b, "{}"...)
	case "abort":
		err = Errorf(ErrAborted, "aborted by request")
	case "comment":
		if c := p.Member("comment", MemberString, false); c != nil {
			t.comments = append(t.comments, c.(string))
		}
		b = append(b, "{}"...)
	case "assert":
		if l := p.Member("lock", MemberString, false); l != nil {
			if t.opts.HasLock == nil || !t.opts.HasLock(l.(string)) {
				err = Errorf(ErrNotOwner, "Asserted lock %s not held.", l.(string))
			}
		}
		b = append(b, "{}"...)
	default:
		return b, &Error{Tag: ErrSyntax, Details: fmt.Sprintf("Parsing ovsdb operation %d of %d failed: No operation \"%s\"", i, n, name), Syntax: syntaxText(op)}
	}
	if err = p.Finish(err); err != nil {
		t.blocked = false
	}
	return b, err
}

func (t *txn) insert(b []byte, p *MemberParser) ([]byte, error) {
	ts := p.table(t.db.Schema)
	uuidV := p.Member("uuid", MemberString, true)
	nameV := p.Member("uuid-name", MemberID, true)
	rowV := p.Member("row", MemberObject, true)
	if p.err != nil {
		return b, p.err
	}
	var uuid UUID
	explicit := uuidV != nil
	if explicit {
		var err error
		if uuid, err = ParseUUID(uuidV.(string)); err != nil {
			return b, syntaxErr(uuidV, "bad uuid")
		}
		if _, ok := t.changes[ts][uuid]; ok || t.db.tables[ts.Name].Rows[uuid] != nil {
			return b, &Error{Tag: "duplicate uuid", Details: "This UUID would duplicate a UUID already present within the table or deleted within the same transaction.", Syntax: syntaxText(uuidV)}
		}
	}
	if nameV != nil {
		name := nameV.(string)
		if t.inserted[name] {
			return b, &Error{Tag: ErrDuplicateUUIDName, Details: `This "uuid-name" appeared on an earlier "insert" operation.`, Syntax: syntaxText(nameV)}
		}
		if prev, ok := t.names[name]; ok {
			if explicit && prev != uuid {
				return b, syntaxErr(nameV, "uuid-name %s was used before its insert, which then gave an explicit different uuid", name)
			}
			uuid = prev
		} else if !explicit {
			uuid = t.db.uuids.New()
		}
		t.names[name] = uuid
		t.inserted[name] = true
	} else if !explicit {
		uuid = t.db.uuids.New()
	}
	r := NewRow(ts, uuid)
	// A select later in the transaction shows a _version, as in
	// ovsdb-server; the commit stamps the final one.
	r.Version = t.db.uuids.New()
	var cols map[*ColumnSchema]Datum
	if rowV != nil {
		var err error
		if cols, _, err = DecodeRow(rowV, ts, t.resolve); err != nil {
			return b, err
		}
		for c, d := range cols {
			// An insert's row may give _uuid or _version; the row
			// gets its own.
			if c.Index >= 0 {
				r.Data[c.Index] = d
			}
		}
	}
	// Defaults must satisfy the constraints too (an enum without "").
	for _, c := range ts.Columns {
		if _, given := cols[c]; given || c.Type.Min == 0 {
			continue
		}
		if err := c.Type.Key.Check(r.Data[c.Index].Keys[0]); err != nil {
			return b, err
		}
		if c.Type.Value != nil {
			if err := c.Type.Value.Check(r.Data[c.Index].Values[0]); err != nil {
				return b, err
			}
		}
	}
	if err := t.refuseWrite("insert"); err != nil {
		return b, err
	}
	if err := t.checkWrite("insert", ts, nil, r, nil); err != nil {
		return b, err
	}
	t.setRow(ts, uuid, r)
	b = append(b, `{"uuid":`...)
	b = UUIDAtom(uuid).AppendJSON(b)
	return append(b, '}'), nil
}

// allColumns lists _uuid, _version and the user columns.
func allColumns(ts *TableSchema) []*ColumnSchema {
	cols := make([]*ColumnSchema, 0, len(ts.Columns)+2)
	cols = append(cols, uuidColumn, versionColumn)
	return append(cols, ts.Columns...)
}

func (t *txn) selectOp(b []byte, p *MemberParser) ([]byte, error) {
	ts := p.table(t.db.Schema)
	whereV := p.Member("where", MemberArray, false)
	columnsV := p.Member("columns", MemberArray, true)
	sortV := p.Member("sort", MemberArray, true)
	if p.err != nil {
		return b, p.err
	}
	conds, err := t.where(whereV, ts)
	if err != nil {
		return b, err
	}
	cols := allColumns(ts)
	if columnsV != nil {
		if cols, err = parseColumnSet(columnsV, ts); err != nil {
			return b, err
		}
	}
	var sortBy []*ColumnSchema
	if sortV != nil {
		if sortBy, err = parseColumnSet(sortV, ts); err != nil {
			return b, err
		}
	}
	var rows []*Row
	t.forEach(ts, conds, func(r *Row) error {
		rows = append(rows, r)
		return nil
	})
	if len(sortBy) > 0 {
		slices.SortStableFunc(rows, func(x, y *Row) int {
			for _, c := range sortBy {
				if n := sortCompare(x.Get(c), y.Get(c)); n != 0 {
					return n
				}
			}
			return 0
		})
	}
	b = append(b, `{"rows":[`...)
	for i, r := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.AppendJSON(b, ts, cols)
	}
	return append(b, "]}"...), nil
}

// sortCompare orders two values of a column as a select's "sort" does:
// fewer elements first, then element by element, keys before values.
func sortCompare(x, y Datum) int {
	if n := len(x.Keys) - len(y.Keys); n != 0 {
		return n
	}
	for i := range x.Keys {
		if n := x.Keys[i].Compare(y.Keys[i]); n != 0 {
			return n
		}
	}
	for i := range x.Values {
		if n := x.Values[i].Compare(y.Values[i]); n != 0 {
			return n
		}
	}
	return 0
}

func appendCount(b []byte, n int) []byte {
	b = append(b, `{"count":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '}')
}

func (t *txn) update(b []byte, p *MemberParser) ([]byte, error) {
	ts := p.table(t.db.Schema)
	whereV := p.Member("where", MemberArray, false)
	rowV := p.Member("row", MemberObject, false)
	if p.err != nil {
		return b, p.err
	}
	cols, order, err := DecodeRow(rowV, ts, t.resolve)
	if err != nil {
		return b, err
	}
	for _, c := range order {
		if c.Index < 0 || !c.Mutable {
			return b, &Error{Tag: ErrConstraintViolation, Details: fmt.Sprintf("Cannot update immutable column %s in table %s.", c.Name, ts.Name), Syntax: syntaxText(p.op)}
		}
	}
	conds, err := t.where(whereV, ts)
	if err != nil {
		return b, err
	}
	if err := t.refuseWrite("update"); err != nil {
		return b, err
	}
	if t.opts.Checker != nil {
		if err := t.checkWrite("update", ts, conds, nil, order); err != nil {
			return b, err
		}
	}
	n := 0
	err = t.forEach(ts, conds, func(r *Row) error {
		n++
		nr := r.Clone()
		for c, d := range cols {
			nr.Data[c.Index] = d
		}
		t.setRow(ts, r.UUID, nr)
		return nil
	})
	return appendCount(b, n), err
}

func (t *txn) deleteOp(b []byte, p *MemberParser) ([]byte, error) {
	ts := p.table(t.db.Schema)
	whereV := p.Member("where", MemberArray, false)
	if p.err != nil {
		return b, p.err
	}
	conds, err := t.where(whereV, ts)
	if err != nil {
		return b, err
	}
	if err := t.refuseWrite("delete"); err != nil {
		return b, err
	}
	if err := t.checkWrite("delete", ts, conds, nil, nil); err != nil {
		return b, err
	}
	n := 0
	err = t.forEach(ts, conds, func(r *Row) error {
		n++
		t.setRow(ts, r.UUID, nil)
		return nil
	})
	return appendCount(b, n), err
}

// mutation is one parsed [column, mutator, value].
type mutation struct {
	col     *ColumnSchema
	mutator string
	arg     Datum
}

func (t *txn) parseMutation(v any, ts *TableSchema) (mutation, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		return mutation{}, syntaxErr(v, "Parse error in mutation.")
	}
	name, ok1 := arr[0].(string)
	mut, ok2 := arr[1].(string)
	if !ok1 || !ok2 {
		return mutation{}, syntaxErr(v, "Parse error in mutation.")
	}
	c := ts.Column(name)
	if c == nil {
		return mutation{}, &Error{Tag: ErrUnknownColumn, Details: fmt.Sprintf("No column %s in table %s.", name, ts.Name), Syntax: syntaxText(v)}
	}
	if c.Index < 0 || !c.Mutable {
		return mutation{}, &Error{Tag: ErrConstraintViolation, Details: fmt.Sprintf("Cannot mutate immutable column %s in table %s.", name, ts.Name), Syntax: syntaxText(v)}
	}
	m := mutation{col: c, mutator: mut}
	mismatch := func() error {
		return syntaxErr(v, "Type mismatch: \"%s\" operator may not be applied to column %s of type %s.", mut, name, c.Type.typeEnglish())
	}
	switch mut {
	case "+=", "-=", "*=", "/=", "%=":
		kt := c.Type.Key.Type
		if c.Type.IsMap() || (kt != TypeInteger && kt != TypeReal) || (mut == "%=" && kt != TypeInteger) {
			return mutation{}, mismatch()
		}
		bt := c.Type.Key.unconstrained()
		a, err := DecodeAtom(arr[2], &bt, t.resolve)
		if err != nil {
			return mutation{}, err
		}
		m.arg = Scalar(a)
	case "insert", "delete":
		if c.Type.Min == 1 && c.Type.Max == 1 {
			return mutation{}, mismatch()
		}
		// The argument has the column's type, constraints included, but
		// may be empty; a "delete" may name any number of elements, and
		// a map may lose keys given as a plain set.
		ct := ColumnType{Key: c.Type.Key, Value: c.Type.Value, Min: 0, Max: c.Type.Max}
		if mut == "delete" {
			ct.Max = Unlimited
			if c.Type.Value != nil {
				if a, ok := arr[2].([]any); !ok || len(a) == 0 || a[0] != "map" {
					ct.Value = nil
				}
			}
		}
		d, err := DecodeDatum(arr[2], &ct, t.resolve)
		if err != nil {
			return mutation{}, err
		}
		m.arg = d
	default:
		return mutation{}, Errorf("unknown mutator", "No mutator named %s.", mut)
	}
	return m, nil
}

func (m *mutation) apply(d Datum) (Datum, error) {
	ct := &m.col.Type
	switch m.mutator {
	case "insert":
		d = d.Union(m.arg)
	case "delete":
		d = d.Difference(m.arg)
	default:
		keys := make([]Atom, len(d.Keys))
		for i, k := range d.Keys {
			a, err := arith(m.mutator, k, m.arg.Keys[0])
			if err != nil {
				return d, err
			}
			if err := ct.Key.Check(a); err != nil {
				return d, err
			}
			keys[i] = a
		}
		nd := Set(keys...)
		if nd.Len() != len(keys) {
			return d, Errorf(ErrConstraintViolation, "Result of \"%s\" operation contains duplicates.", m.mutator)
		}
		d = nd
	}
	if n := d.Len(); n < ct.Min || n > ct.Max {
		return d, Errorf(ErrConstraintViolation, "Attempted to store %d elements in %s.", n, ct.typeEnglish())
	}
	return d, nil
}

func arith(op string, x, y Atom) (Atom, error) {
	outOfRange := func() (Atom, error) {
		return x, Errorf(ErrRangeError, "Result of \"%s\" operation is out of range.", op)
	}
	if x.Type() == TypeReal {
		a, b := x.Float(), y.Float()
		if y.Type() == TypeInteger {
			b = float64(y.Int())
		}
		var r float64
		switch op {
		case "+=":
			r = a + b
		case "-=":
			r = a - b
		case "*=":
			r = a * b
		case "/=":
			if b == 0 {
				return x, Errorf(ErrDomainError, "Division by zero.")
			}
			r = a / b
		}
		if math.IsInf(r, 0) || math.IsNaN(r) {
			return outOfRange()
		}
		return Real(r), nil
	}
	a, b := x.Int(), y.Int()
	var r int64
	overflow := false
	switch op {
	case "+=":
		r = a + b
		overflow = (b > 0 && r < a) || (b < 0 && r > a)
	case "-=":
		r = a - b
		overflow = (b > 0 && r > a) || (b < 0 && r < a)
	case "*=":
		r = a * b
		overflow = a != 0 && (r/a != b || (a == -1 && b == math.MinInt64))
	case "/=":
		if b == 0 {
			return x, Errorf(ErrDomainError, "Division by zero.")
		}
		overflow = a == math.MinInt64 && b == -1
		r = a / b
	case "%=":
		if b == 0 {
			return x, Errorf(ErrDomainError, "Division by zero.")
		}
		r = a % b
	}
	if overflow {
		return outOfRange()
	}
	return Integer(r), nil
}

func (t *txn) mutate(b []byte, p *MemberParser) ([]byte, error) {
	ts := p.table(t.db.Schema)
	whereV := p.Member("where", MemberArray, false)
	mv := p.Member("mutations", MemberArray, false)
	if p.err != nil {
		return b, p.err
	}
	arr, _ := mv.([]any)
	muts := make([]mutation, 0, len(arr))
	for _, e := range arr {
		m, err := t.parseMutation(e, ts)
		if err != nil {
			return b, err
		}
		muts = append(muts, m)
	}
	conds, err := t.where(whereV, ts)
	if err != nil {
		return b, err
	}
	if err := t.refuseWrite("mutate"); err != nil {
		return b, err
	}
	if t.opts.Checker != nil {
		written := make([]*ColumnSchema, 0, len(muts))
		for _, m := range muts {
			written = append(written, m.col)
		}
		if err := t.checkWrite("mutate", ts, conds, nil, written); err != nil {
			return b, err
		}
	}
	n := 0
	err = t.forEach(ts, conds, func(r *Row) error {
		n++
		nr := r.Clone()
		for i := range muts {
			d, err := muts[i].apply(nr.Data[muts[i].col.Index])
			if err != nil {
				return err
			}
			nr.Data[muts[i].col.Index] = d
		}
		t.setRow(ts, r.UUID, nr)
		return nil
	})
	return appendCount(b, n), err
}

func (t *txn) wait(b []byte, p *MemberParser) ([]byte, error) {
	ts := p.table(t.db.Schema)
	whereV := p.Member("where", MemberArray, false)
	columnsV := p.Member("columns", MemberArray, true)
	untilV := p.Member("until", MemberString, false)
	rowsV := p.Member("rows", MemberArray, false)
	timeoutV := p.Member("timeout", MemberInteger, true)
	if p.err != nil {
		return b, p.err
	}
	conds, err := t.where(whereV, ts)
	if err != nil {
		return b, err
	}
	// Without "columns", ovsdb-server compares whole rows, _uuid and
	// _version included, which rows given in the request cannot match.
	cols := allColumns(ts)
	whole := columnsV == nil
	if !whole {
		if cols, err = parseColumnSet(columnsV, ts); err != nil {
			return b, err
		}
	}
	timeout := time.Duration(-1)
	if timeoutV != nil {
		ms, _ := numberAsInteger(fmt.Sprint(timeoutV))
		if ms < 0 {
			return b, syntaxErr(timeoutV, "timeout must be nonnegative")
		}
		// A timeout too long for a Duration (about 292 years) would wrap
		// around to a short one; it means no limit.
		if ms < int64(math.MaxInt64/time.Millisecond) {
			timeout = time.Duration(ms) * time.Millisecond
		}
	}
	until := untilV.(string)
	if until != "==" && until != "!=" {
		return b, syntaxErr(untilV, "\"until\" must be \"==\" or \"!=\"")
	}
	// Compare the projections as multisets of encoded rows.
	rarr, _ := rowsV.([]any)
	var want []string
	for _, e := range rarr {
		if _, ok := e.(map[string]any); !ok {
			return b, syntaxErr(e, "row must be JSON object")
		}
		vals, _, err := DecodeRow(e, ts, t.resolve)
		if err != nil {
			return b, err
		}
		r := NewRow(ts, UUID{})
		for c, d := range vals {
			if c.Index >= 0 {
				r.Data[c.Index] = d
			}
		}
		want = append(want, string(projection(r, cols, whole)))
	}
	var got []string
	t.forEach(ts, conds, func(r *Row) error {
		got = append(got, string(projection(r, cols, whole)))
		return nil
	})
	// ovsdb-server compares the distinct projections, as sets.
	slices.Sort(want)
	slices.Sort(got)
	equal := slices.Equal(slices.Compact(want), slices.Compact(got))
	if equal == (until == "==") {
		return append(b, "{}"...), nil
	}
	if timeout == 0 {
		return b, Errorf(ErrTimedOut, "\"where\" clause test failed")
	}
	if t.opts.WaitExpired {
		return b, Errorf(ErrTimedOut, "\"wait\" timed out after %d ms", t.opts.Waited.Milliseconds())
	}
	t.blocked = true
	t.waitFor = timeout
	return b, nil
}

// projection encodes the columns of r that a "wait" compares; _uuid and
// _version count only when withIDs is set.
func projection(r *Row, cols []*ColumnSchema, withIDs bool) []byte {
	var b []byte
	for _, c := range cols {
		if c.Index < 0 && !withIDs {
			continue
		}
		b = r.Get(c).AppendJSON(b, &c.Type)
		b = append(b, 0)
	}
	return b
}

// finish runs the commit-time work: drops no-op changes, collects
// garbage, removes weak references to vanished rows, checks referential
// integrity, indexes and maxRows, and stamps new versions.
func (t *txn) finish() error {
	// The order of the checks is ovsdb-server's, which decides which
	// error a transaction with several gets: references (of rows that
	// are garbage too), maxRows, weak references, indexes.
	deltas := t.dropNoOpsCountingRefs()
	if err := t.checkReferences(deltas); err != nil {
		return err
	}
	t.collectGarbage(deltas)
	if err := t.checkMaxRows(); err != nil {
		return err
	}
	if err := t.dropWeakToVanished(); err != nil {
		return err
	}
	return t.checkTablesAndStamp()
}

// refDeltas holds, per referenced row, how the transaction changes the
// number of strong references to it.
type refDeltas map[UUID]*refDelta

type refDelta struct {
	table *TableSchema
	n     int
}

func (ds refDeltas) add(rf ref, n int) {
	d := ds[rf.target]
	if d == nil {
		d = &refDelta{table: rf.table}
		ds[rf.target] = d
	}
	d.n += n
}

// strongRefs returns how many strong references u has once the
// transaction commits.
func (t *txn) strongRefs(ds refDeltas, u UUID) int {
	n := t.db.strong[u]
	if d := ds[u]; d != nil {
		n += d.n
	}
	return n
}

// dropNoOpsCountingRefs drops changes that leave a row as it was and
// counts how the others change strong references.
func (t *txn) dropNoOpsCountingRefs() refDeltas {
	deltas := refDeltas{}
	addRefs := func(ts *TableSchema, r *Row, sign int) {
		t.db.forEachRef(t.db.tables[ts.Name], r, func(rf ref) {
			if rf.strong {
				deltas.add(rf, sign)
			}
		})
	}
	for ts, rows := range t.changes {
		for uuid, ch := range rows {
			if ch.Old != nil && ch.New != nil && slices.EqualFunc(ch.Old.Data, ch.New.Data, Datum.Equal) {
				delete(rows, uuid)
				continue
			}
			if ts.HasRefs {
				addRefs(ts, ch.Old, -1)
				addRefs(ts, ch.New, +1)
			}
		}
	}
	return deltas
}

// collectGarbage deletes rows of non-root tables that nothing strongly
// references, which may orphan more rows.
func (t *txn) collectGarbage(deltas refDeltas) {
	var queue []rowRef
	for ts, rows := range t.changes {
		if ts.IsRoot {
			continue
		}
		for uuid, ch := range rows {
			if ch.New != nil {
				queue = append(queue, rowRef{ts, uuid})
			}
		}
	}
	for u, d := range deltas {
		if d.n < 0 && !d.table.IsRoot {
			queue = append(queue, rowRef{d.table, u})
		}
	}
	for len(queue) > 0 {
		rr := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		r := t.row(rr.table, rr.uuid)
		if r == nil || t.strongRefs(deltas, rr.uuid) > 0 {
			continue
		}
		t.setRow(rr.table, rr.uuid, nil)
		t.db.forEachRef(t.db.tables[rr.table.Name], r, func(rf ref) {
			if !rf.strong {
				return
			}
			deltas.add(rf, -1)
			if !rf.table.IsRoot {
				queue = append(queue, rowRef{rf.table, rf.target})
			}
		})
	}
}

// changedRows lists the rows the transaction changed, table by table in
// name order and by UUID within a table, so that of several errors the
// commit finds, the same one is reported every time.
func (t *txn) changedRows() []rowRef {
	var out []rowRef
	for _, name := range t.db.Schema.TableNames {
		ts := t.db.Schema.Tables[name]
		rows := t.changes[ts]
		start := len(out)
		for u := range rows {
			out = append(out, rowRef{ts, u})
		}
		slices.SortFunc(out[start:], func(a, b rowRef) int { return a.uuid.Compare(b.uuid) })
	}
	return out
}

// checkReferences enforces referential integrity: every strong reference
// must lead to a row, and no referenced row may be deleted.
func (t *txn) checkReferences(deltas refDeltas) error {
	// Name the first row, in a stable order, that is deleted while
	// referenced or that refers to a row that does not exist.
	changed := t.changedRows()
	for _, rr := range changed {
		ch := t.changes[rr.table][rr.uuid]
		if ch.Old != nil && ch.New == nil {
			if n := t.strongRefs(deltas, rr.uuid); n > 0 {
				return Errorf(ErrReferentialIntegrity, "cannot delete %s row %s because of %d remaining reference(s)", rr.table.Name, rr.uuid, n)
			}
		}
	}
	dangling := false
	for u, d := range deltas {
		if t.strongRefs(deltas, u) > 0 && t.row(d.table, u) == nil {
			dangling = true
			break
		}
	}
	if !dangling {
		return nil
	}
	for _, rr := range changed {
		ch := t.changes[rr.table][rr.uuid]
		var err error
		t.db.forEachRef(t.db.tables[rr.table.Name], ch.New, func(rf ref) {
			if err == nil && rf.strong && t.row(rf.table, rf.target) == nil {
				err = Errorf(ErrReferentialIntegrity, "Table %s column %s row %s references nonexistent row %s in table %s.", rr.table.Name, rf.col.Name, rr.uuid, rf.target, rf.table.Name)
			}
		})
		if err != nil {
			return err
		}
	}
	return Errorf(ErrReferentialIntegrity, "a row refers to a nonexistent row")
}

// dropWeakToVanished drops weak references to rows that no longer exist,
// from rows this transaction changed and from committed rows that pointed
// to a deleted row.
func (t *txn) dropWeakToVanished() error {
	var weakFix []rowRef
	for _, rr := range t.changedRows() {
		ch := t.changes[rr.table][rr.uuid]
		if ch.New != nil && rr.table.HasRefs {
			weakFix = append(weakFix, rr)
		}
		if ch.New == nil && ch.Old != nil {
			start := len(weakFix)
			for from := range t.db.weak[rr.uuid] {
				weakFix = append(weakFix, from)
			}
			slices.SortFunc(weakFix[start:], func(a, b rowRef) int {
				if a.table != b.table {
					return strings.Compare(a.table.Name, b.table.Name)
				}
				return a.uuid.Compare(b.uuid)
			})
		}
	}
	for _, rr := range weakFix {
		if err := t.dropDanglingWeak(rr.table, rr.uuid); err != nil {
			return err
		}
	}
	return nil
}

// checkMaxRows checks the maxRows of the changed tables.
func (t *txn) checkMaxRows() error {
	for _, name := range t.db.Schema.TableNames {
		ts := t.db.Schema.Tables[name]
		rows := t.changes[ts]
		if len(rows) == 0 || ts.MaxRows == 0 {
			continue
		}
		n := len(t.db.tables[ts.Name].Rows)
		for _, ch := range rows {
			if ch.Old == nil && ch.New != nil {
				n++
			} else if ch.Old != nil && ch.New == nil {
				n--
			}
		}
		if n > ts.MaxRows {
			return Errorf(ErrConstraintViolation, "transaction causes \"%s\" table to contain %d rows, greater than the schema-defined limit of %d row(s)", ts.Name, n, ts.MaxRows)
		}
	}
	return nil
}

// checkTablesAndStamp checks the unique indexes of the changed tables and
// gives changed rows new versions.
func (t *txn) checkTablesAndStamp() error {
	changed := t.changedRows()
	for _, name := range t.db.Schema.TableNames {
		ts := t.db.Schema.Tables[name]
		rows := t.changes[ts]
		if len(rows) == 0 {
			continue
		}
		tbl := t.db.tables[ts.Name]
		for i, cols := range ts.Indexes {
			seen := map[string]UUID{}
			for _, rr := range changed {
				if rr.table != ts {
					continue
				}
				uuid, ch := rr.uuid, rows[rr.uuid]
				if ch.New == nil {
					continue
				}
				k := indexKey(ch.New, cols)
				if other, ok := seen[k]; ok {
					return t.indexError(ts, cols, ch.New, other, uuid)
				}
				seen[k] = uuid
				if owner, ok := tbl.indexes[i][k]; ok && owner != uuid {
					if _, changed := rows[owner]; !changed {
						return t.indexError(ts, cols, ch.New, owner, uuid)
					}
				}
			}
		}
	}
	for _, rr := range changed {
		if ch := t.changes[rr.table][rr.uuid]; ch.New != nil {
			ch.New.Version = t.db.uuids.New()
		}
	}
	return nil
}

// indexError is ovsdb-server's message for rows a and b of ts that share
// the values (those of r) of the index on cols.
func (t *txn) indexError(ts *TableSchema, cols []*ColumnSchema, r *Row, a, b UUID) error {
	var names, vals []string
	for _, c := range cols {
		names = append(names, `"`+c.Name+`"`)
		vals = append(vals, datumText(r.Get(c), &c.Type))
	}
	columns := "column " + names[0]
	if len(names) > 1 {
		columns = "columns " + englishList(names)
	}
	return Errorf(ErrConstraintViolation, "Transaction causes multiple rows in \"%s\" table to have identical values (%s) for index on %s.  First row, with UUID %s, %s.  Second row, with UUID %s, %s.",
		ts.Name, englishList(vals), columns, a, t.rowHistory(ts, cols, a), b, t.rowHistory(ts, cols, b))
}

// rowHistory says, for an index error, what the transaction did to row u.
func (t *txn) rowHistory(ts *TableSchema, cols []*ColumnSchema, u UUID) string {
	ch, ok := t.changes[ts][u]
	switch {
	case !ok:
		return "existed in the database before this transaction and was not modified by the transaction"
	case ch.Old == nil:
		return "was inserted by this transaction"
	}
	var vals []string
	for _, c := range cols {
		vals = append(vals, datumText(ch.Old.Get(c), &c.Type))
	}
	return "had the following index values before the transaction: " + englishList(vals)
}

// dropDanglingWeak removes from row uuid of ts the weak references to rows
// that do not exist once the transaction commits.
func (t *txn) dropDanglingWeak(ts *TableSchema, uuid UUID) error {
	r := t.row(ts, uuid)
	if r == nil {
		return nil
	}
	var nr *Row
	for _, c := range t.db.tables[ts.Name].refCols {
		d := r.Data[c.Index]
		exists := func(bt *BaseType, a Atom) bool {
			return bt.RefType != RefWeak || t.row(t.db.Schema.Tables[bt.RefTable], a.UUID()) != nil
		}
		keyWeak := c.Type.Key.RefTable != "" && c.Type.Key.RefType == RefWeak
		valWeak := c.Type.Value != nil && c.Type.Value.RefTable != "" && c.Type.Value.RefType == RefWeak
		if !keyWeak && !valWeak {
			continue
		}
		var keys, values []Atom
		dropped, droppedZero := 0, 0
		for i, k := range d.Keys {
			ok := !keyWeak || exists(&c.Type.Key, k)
			if ok && valWeak {
				ok = exists(c.Type.Value, d.Values[i])
			}
			if !ok {
				dropped++
				if keyWeak && k.UUID() == (UUID{}) || valWeak && d.Values[i].UUID() == (UUID{}) {
					droppedZero++
				}
				continue
			}
			keys = append(keys, k)
			if d.Values != nil {
				values = append(values, d.Values[i])
			}
		}
		if dropped == 0 {
			continue
		}
		if len(keys) < c.Type.Min {
			inserted := ""
			if ch, ok := t.changes[ts][uuid]; ok && ch.Old == nil {
				inserted = " (inserted within this transaction)"
				if droppedZero == dropped {
					return Errorf(ErrConstraintViolation, "Weak reference column \"%s\" in \"%s\" row %s%s contained all-zeros UUID (probably as the default value for this column) but deleting this value caused a constraint volation because this column is not allowed to be empty.", c.Name, ts.Name, uuid, inserted)
				}
			}
			return Errorf(ErrConstraintViolation, "Deletion of %d weak reference(s) to deleted (or never-existing) rows from column \"%s\" in \"%s\" row %s%s caused this column to become empty, but constraints on this column disallow an empty column.", dropped, c.Name, ts.Name, uuid, inserted)
		}
		if nr == nil {
			nr = r.Clone()
		}
		if c.Type.Value != nil && values == nil {
			values = []Atom{}
		}
		nr.Data[c.Index] = Datum{Keys: keys, Values: values}
	}
	if nr != nil {
		t.setRow(ts, uuid, nr)
	}
	return nil
}

// Select returns the rows of table that match all conds, for readers
// outside transactions.
func (db *Database) Select(table string, conds []Condition) []*Row {
	tbl := db.tables[table]
	if tbl == nil {
		return nil
	}
	var out []*Row
	for _, r := range tbl.Rows {
		if MatchAll(conds, r) {
			out = append(out, r)
		}
	}
	return out
}
