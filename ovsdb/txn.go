package ovsdb

import (
	"errors"
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
		reply, err = t.execute(reply, op)
		if t.blocked {
			return TxnResult{Blocked: true, WaitTimeout: t.waitFor}
		}
		if err != nil {
			failed = err
			reply = toError(err).AppendJSON(reply[:start])
		}
	}
	if failed == nil {
		for name := range t.names {
			if !t.inserted[name] {
				failed = Errorf(ErrSyntax, "named-uuid %q is used but no insert in the transaction declares it", name)
				break
			}
		}
		if failed == nil {
			failed = t.finish()
		}
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
	// fn may change rows; it runs on a snapshot of the matches.
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

// member returns member name of op, which must be present.
func member(op map[string]any, name string) (any, error) {
	v, ok := op[name]
	if !ok {
		return nil, Errorf(ErrSyntax, "%s operation is missing required member %q", op["op"], name)
	}
	return v, nil
}

func (t *txn) table(op map[string]any) (*TableSchema, error) {
	v, err := member(op, "table")
	if err != nil {
		return nil, err
	}
	name, ok := v.(string)
	if !ok {
		return nil, syntaxErr(v, "\"table\" must be a string")
	}
	ts := t.db.Schema.Tables[name]
	if ts == nil {
		return nil, Errorf(ErrSyntax, "no table named %q in database %s", name, t.db.Schema.Name)
	}
	return ts, nil
}

// tableWhere decodes the "table" and "where" members that select, update,
// mutate, delete and wait share.
func (t *txn) tableWhere(op map[string]any) (*TableSchema, []Condition, error) {
	ts, err := t.table(op)
	if err != nil {
		return nil, nil, err
	}
	conds, err := t.where(op, ts)
	if err != nil {
		return nil, nil, err
	}
	return ts, conds, nil
}

func (t *txn) where(op map[string]any, ts *TableSchema) ([]Condition, error) {
	v, err := member(op, "where")
	if err != nil {
		return nil, err
	}
	if _, ok := v.([]any); !ok {
		return nil, syntaxErr(v, "\"where\" must be an array")
	}
	return ParseConditions(v, ts, t.resolve)
}

func (t *txn) execute(b []byte, v any) ([]byte, error) {
	if r, ok := v.(*rawObject); ok {
		var err error
		if v, err = r.decode(); err != nil {
			return b, err
		}
	}
	op, ok := v.(map[string]any)
	if !ok {
		return b, syntaxErr(v, "operation must be a JSON object")
	}
	name, _ := op["op"].(string)
	switch name {
	case "insert":
		return t.insert(b, op)
	case "select":
		return t.selectOp(b, op)
	case "update":
		return t.update(b, op)
	case "mutate":
		return t.mutate(b, op)
	case "delete":
		return t.deleteOp(b, op)
	case "wait":
		return t.wait(b, op)
	case "commit":
		d, ok := op["durable"].(bool)
		if !ok {
			return b, syntaxErr(op["durable"], "commit needs a boolean \"durable\"")
		}
		t.durable = t.durable || d
		return append(b, "{}"...), nil
	case "abort":
		return b, Errorf(ErrAborted, "aborted by request")
	case "comment":
		c, ok := op["comment"].(string)
		if !ok {
			return b, syntaxErr(op["comment"], "comment needs a string \"comment\"")
		}
		t.comments = append(t.comments, c)
		return append(b, "{}"...), nil
	case "assert":
		l, ok := op["lock"].(string)
		if !ok {
			return b, syntaxErr(op["lock"], "assert needs a string \"lock\"")
		}
		if t.opts.HasLock == nil || !t.opts.HasLock(l) {
			return b, Errorf(ErrNotOwner, "this session does not own lock %q", l)
		}
		return append(b, "{}"...), nil
	}
	if _, ok := op["op"]; !ok {
		return b, syntaxErr(v, "operation has no \"op\" member")
	}
	return b, syntaxErr(op["op"], "unknown operation")
}

func (t *txn) insert(b []byte, op map[string]any) ([]byte, error) {
	ts, err := t.table(op)
	if err != nil {
		return b, err
	}
	var uuid UUID
	explicit := false
	if v, ok := op["uuid"]; ok {
		s, ok := v.(string)
		if !ok {
			return b, syntaxErr(v, "\"uuid\" must be a UUID string")
		}
		if uuid, err = ParseUUID(s); err != nil {
			return b, Errorf(ErrSyntax, "\"uuid\": %v", err)
		}
		explicit = true
	}
	if v, ok := op["uuid-name"]; ok {
		name, ok := v.(string)
		if !ok || !isIdentifier(name) {
			return b, syntaxErr(v, "\"uuid-name\" must be an identifier")
		}
		if t.inserted[name] {
			return b, Errorf(ErrDuplicateUUIDName, "uuid-name %q is declared by more than one insert", name)
		}
		if prev, ok := t.names[name]; ok {
			if explicit && prev != uuid {
				return b, Errorf(ErrSyntax, "uuid-name %q was used before its insert, which then gave an explicit different uuid", name)
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
	if explicit {
		if _, ok := t.changes[ts][uuid]; ok || t.db.tables[ts.Name].Rows[uuid] != nil {
			return b, Errorf("duplicate uuid", "row %s already exists in table %s (or was deleted in this transaction)", uuid, ts.Name)
		}
	}
	r := NewRow(ts, uuid)
	var cols map[*ColumnSchema]Datum
	if v, ok := op["row"]; ok {
		if cols, err = DecodeRow(v, ts, t.resolve); err != nil {
			return b, err
		}
		for c, d := range cols {
			r.Data[c.Index] = d
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

// columns parses an optional "columns" member; nil means all.
func columnsMember(op map[string]any, ts *TableSchema) ([]*ColumnSchema, error) {
	v, ok := op["columns"]
	if !ok {
		return nil, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, syntaxErr(v, "\"columns\" must be an array of column names")
	}
	cols := make([]*ColumnSchema, 0, len(arr))
	for _, e := range arr {
		n, ok := e.(string)
		if !ok {
			return nil, syntaxErr(e, "column name must be a string")
		}
		c := ts.Column(n)
		if c == nil {
			return nil, Errorf(ErrSyntax, "no column %q in table %s", n, ts.Name)
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// allColumns lists _uuid, _version and the user columns.
func allColumns(ts *TableSchema) []*ColumnSchema {
	cols := make([]*ColumnSchema, 0, len(ts.Columns)+2)
	cols = append(cols, uuidColumn, versionColumn)
	return append(cols, ts.Columns...)
}

func (t *txn) selectOp(b []byte, op map[string]any) ([]byte, error) {
	ts, conds, err := t.tableWhere(op)
	if err != nil {
		return b, err
	}
	cols, err := columnsMember(op, ts)
	if err != nil {
		return b, err
	}
	if cols == nil {
		cols = allColumns(ts)
	}
	b = append(b, `{"rows":[`...)
	n := 0
	err = t.forEach(ts, conds, func(r *Row) error {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = r.AppendJSON(b, ts, cols)
		return nil
	})
	return append(b, "]}"...), err
}

func appendCount(b []byte, n int) []byte {
	b = append(b, `{"count":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '}')
}

func (t *txn) update(b []byte, op map[string]any) ([]byte, error) {
	ts, conds, err := t.tableWhere(op)
	if err != nil {
		return b, err
	}
	rv, err := member(op, "row")
	if err != nil {
		return b, err
	}
	cols, err := DecodeRow(rv, ts, t.resolve)
	if err != nil {
		return b, err
	}
	for c := range cols {
		if !c.Mutable {
			return b, Errorf(ErrConstraintViolation, "cannot update immutable column %s in table %s", c.Name, ts.Name)
		}
	}
	if err := t.refuseWrite("update"); err != nil {
		return b, err
	}
	if t.opts.Checker != nil {
		written := make([]*ColumnSchema, 0, len(cols))
		for c := range cols {
			written = append(written, c)
		}
		if err := t.checkWrite("update", ts, conds, nil, written); err != nil {
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

func (t *txn) deleteOp(b []byte, op map[string]any) ([]byte, error) {
	ts, conds, err := t.tableWhere(op)
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
		return mutation{}, syntaxErr(v, "mutation must be [column, mutator, value]")
	}
	name, ok1 := arr[0].(string)
	mut, ok2 := arr[1].(string)
	if !ok1 || !ok2 {
		return mutation{}, syntaxErr(v, "mutation must be [column, mutator, value]")
	}
	c := ts.Column(name)
	if c == nil {
		return mutation{}, Errorf(ErrSyntax, "no column %q in table %s", name, ts.Name)
	}
	if c.Index < 0 || !c.Mutable {
		return mutation{}, Errorf(ErrConstraintViolation, "cannot mutate immutable column %s in table %s", name, ts.Name)
	}
	m := mutation{col: c, mutator: mut}
	switch mut {
	case "+=", "-=", "*=", "/=", "%=":
		kt := c.Type.Key.Type
		if c.Type.IsMap() || (kt != TypeInteger && kt != TypeReal) || (mut == "%=" && kt != TypeInteger) {
			return mutation{}, Errorf(ErrSyntax, "mutator %s cannot apply to column %s of type %s", mut, name, c.Type.String())
		}
		bt := c.Type.Key.unconstrained()
		a, err := DecodeAtom(arr[2], &bt, t.resolve)
		if err != nil {
			return mutation{}, err
		}
		m.arg = Scalar(a)
	case "insert", "delete":
		ct := ColumnType{Key: c.Type.Key, Value: c.Type.Value, Min: 0, Max: Unlimited}
		if mut == "delete" {
			ct.Key = c.Type.Key.unconstrained()
			if c.Type.Value != nil {
				vt := c.Type.Value.unconstrained()
				ct.Value = &vt
				// A map may lose keys given as a plain set.
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
		return mutation{}, syntaxErr(arr[1], "unknown mutator")
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
			return d, Errorf(ErrConstraintViolation, "%s %s on column %s gives duplicate set elements", m.mutator, m.arg.Keys[0], m.col.Name)
		}
		d = nd
	}
	if n := d.Len(); n < ct.Min || n > ct.Max {
		return d, Errorf(ErrConstraintViolation, "mutation leaves column %s with %d elements, outside its allowed %d to %s", m.col.Name, n, ct.Min, maxString(ct.Max))
	}
	return d, nil
}

func arith(op string, x, y Atom) (Atom, error) {
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
				return x, Errorf(ErrDomainError, "division by zero")
			}
			r = a / b
		}
		if math.IsInf(r, 0) || math.IsNaN(r) {
			return x, Errorf(ErrRangeError, "result of %s is out of range", op)
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
			return x, Errorf(ErrDomainError, "division by zero")
		}
		overflow = a == math.MinInt64 && b == -1
		r = a / b
	case "%=":
		if b == 0 {
			return x, Errorf(ErrDomainError, "division by zero")
		}
		r = a % b
	}
	if overflow {
		return x, Errorf(ErrRangeError, "result of %d %s %d is out of range", a, op, b)
	}
	return Integer(r), nil
}

func (t *txn) mutate(b []byte, op map[string]any) ([]byte, error) {
	ts, conds, err := t.tableWhere(op)
	if err != nil {
		return b, err
	}
	mv, err := member(op, "mutations")
	if err != nil {
		return b, err
	}
	arr, ok := mv.([]any)
	if !ok {
		return b, syntaxErr(mv, "\"mutations\" must be an array")
	}
	muts := make([]mutation, 0, len(arr))
	for _, e := range arr {
		m, err := t.parseMutation(e, ts)
		if err != nil {
			return b, err
		}
		muts = append(muts, m)
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

func (t *txn) wait(b []byte, op map[string]any) ([]byte, error) {
	ts, conds, err := t.tableWhere(op)
	if err != nil {
		return b, err
	}
	cols, err := columnsMember(op, ts)
	if err != nil {
		return b, err
	}
	// Without "columns", ovsdb-server compares whole rows, _uuid and
	// _version included, which rows given in the request cannot match.
	whole := cols == nil
	if whole {
		cols = allColumns(ts)
	}
	until, _ := op["until"].(string)
	if until != "==" && until != "!=" {
		return b, syntaxErr(op["until"], "\"until\" must be \"==\" or \"!=\"")
	}
	rv, err := member(op, "rows")
	if err != nil {
		return b, err
	}
	rarr, ok := rv.([]any)
	if !ok {
		return b, syntaxErr(rv, "\"rows\" must be an array of rows")
	}
	timeout := time.Duration(-1)
	if tv, ok := op["timeout"]; ok {
		bt := NewBaseType(TypeInteger)
		a, err := DecodeAtom(tv, &bt, nil)
		if err != nil || a.Int() < 0 {
			return b, syntaxErr(tv, "\"timeout\" must be a non-negative integer")
		}
		// A timeout too long for a Duration (about 292 years) would wrap
		// around to a short one; it means no limit.
		if ms := a.Int(); ms <= int64(math.MaxInt64/time.Millisecond) {
			timeout = time.Duration(ms) * time.Millisecond
		}
	}
	// Compare the projections as multisets of encoded rows.
	var want []string
	for _, e := range rarr {
		obj, ok := e.(map[string]any)
		if !ok {
			return b, syntaxErr(e, "row must be an object")
		}
		vals, err := DecodeRow(obj, ts, t.resolve)
		if err != nil {
			return b, err
		}
		r := NewRow(ts, UUID{})
		for c, d := range vals {
			r.Data[c.Index] = d
		}
		for name := range obj {
			if c := ts.Column(name); c != nil && !slices.Contains(cols, c) {
				return b, Errorf(ErrSyntax, "wait row has column %q that is not in \"columns\"", name)
			}
		}
		want = append(want, string(projection(r, cols, whole)))
	}
	var got []string
	if err := t.forEach(ts, conds, func(r *Row) error {
		got = append(got, string(projection(r, cols, whole)))
		return nil
	}); err != nil {
		return b, err
	}
	slices.Sort(want)
	slices.Sort(got)
	equal := slices.Equal(want, got)
	if equal == (until == "==") {
		return append(b, "{}"...), nil
	}
	if timeout == 0 || t.opts.WaitExpired {
		return b, Errorf(ErrTimedOut, "\"wait\" for %s rows in table %s was not satisfied", until, ts.Name)
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
	deltas := t.dropNoOpsCountingRefs()
	t.collectGarbage(deltas)
	if err := t.checkReferences(deltas); err != nil {
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

// checkReferences enforces referential integrity: every strong reference
// must lead to a row, and no referenced row may be deleted.
func (t *txn) checkReferences(deltas refDeltas) error {
	for u, d := range deltas {
		n := t.strongRefs(deltas, u)
		if n <= 0 || t.row(d.table, u) != nil {
			continue
		}
		if ch, ok := t.changes[d.table][u]; ok && ch.Old != nil {
			return Errorf(ErrReferentialIntegrity, "cannot delete %s row %s because of %d remaining reference(s)", d.table.Name, u, n)
		}
		return Errorf(ErrReferentialIntegrity, "a row refers to nonexistent row %s in table %s", u, d.table.Name)
	}
	for ts, rows := range t.changes {
		for u, ch := range rows {
			if ch.Old != nil && ch.New == nil {
				if n := t.strongRefs(deltas, u); n > 0 {
					return Errorf(ErrReferentialIntegrity, "cannot delete %s row %s because of %d remaining reference(s)", ts.Name, u, n)
				}
			}
		}
	}
	return nil
}

// dropWeakToVanished drops weak references to rows that no longer exist,
// from rows this transaction changed and from committed rows that pointed
// to a deleted row.
func (t *txn) dropWeakToVanished() error {
	var weakFix []rowRef
	for ts, rows := range t.changes {
		for uuid, ch := range rows {
			if ch.New != nil && ts.HasRefs {
				weakFix = append(weakFix, rowRef{ts, uuid})
			}
			if ch.New == nil && ch.Old != nil {
				for from := range t.db.weak[uuid] {
					weakFix = append(weakFix, from)
				}
			}
		}
	}
	for _, rr := range weakFix {
		if err := t.dropDanglingWeak(rr.table, rr.uuid); err != nil {
			return err
		}
	}
	return nil
}

// checkTablesAndStamp checks maxRows and unique indexes of the changed
// tables and gives changed rows new versions.
func (t *txn) checkTablesAndStamp() error {
	for ts, rows := range t.changes {
		if len(rows) == 0 {
			continue
		}
		tbl := t.db.tables[ts.Name]
		if ts.MaxRows > 0 {
			n := len(tbl.Rows)
			for _, ch := range rows {
				if ch.Old == nil && ch.New != nil {
					n++
				} else if ch.Old != nil && ch.New == nil {
					n--
				}
			}
			if n > ts.MaxRows {
				return Errorf(ErrConstraintViolation, "transaction causes table %s to contain %d rows, more than the schema's limit of %d", ts.Name, n, ts.MaxRows)
			}
		}
		for i, cols := range ts.Indexes {
			seen := map[string]UUID{}
			for uuid, ch := range rows {
				if ch.New == nil {
					continue
				}
				k := indexKey(ch.New, cols)
				if other, ok := seen[k]; ok {
					return indexError(ts, cols, ch.New, other, uuid)
				}
				seen[k] = uuid
				if owner, ok := tbl.indexes[i][k]; ok && owner != uuid {
					if _, changed := rows[owner]; !changed {
						return indexError(ts, cols, ch.New, owner, uuid)
					}
				}
			}
		}
		for _, ch := range rows {
			if ch.New != nil {
				ch.New.Version = t.db.uuids.New()
			}
		}
	}
	return nil
}

func indexError(ts *TableSchema, cols []*ColumnSchema, r *Row, a, b UUID) error {
	var names, vals []string
	for _, c := range cols {
		names = append(names, c.Name)
		vals = append(vals, string(r.Get(c).AppendJSON(nil, &c.Type)))
	}
	return Errorf(ErrConstraintViolation, "transaction causes multiple rows in table %s to have identical values (%s) for index on column(s) %s: rows %s and %s",
		ts.Name, strings.Join(vals, ", "), strings.Join(names, ", "), a, b)
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
		dropped := 0
		for i, k := range d.Keys {
			ok := !keyWeak || exists(&c.Type.Key, k)
			if ok && valWeak {
				ok = exists(c.Type.Value, d.Values[i])
			}
			if !ok {
				dropped++
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
			return Errorf(ErrConstraintViolation, "deleting %d weak reference(s) to deleted or nonexistent rows from column %s of %s row %s leaves it with fewer than %d element(s)", dropped, c.Name, ts.Name, uuid, c.Type.Min)
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
