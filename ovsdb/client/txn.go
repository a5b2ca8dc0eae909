package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/govn/govn/ovsdb"
)

// Operation is one operation of a "transact" request (RFC 7047 §5.2). Only
// the members that Op uses are sent.
type Operation struct {
	Op        string // insert, select, update, mutate, delete, wait, commit, abort, comment, assert
	Table     string
	Row       map[string]ovsdb.Datum   // insert, update
	Where     []Condition              // select, update, mutate, delete, wait
	Mutations []Mutation               // mutate
	Columns   []string                 // select, wait
	UUIDName  string                   // insert: the name later operations refer to
	UUID      ovsdb.UUID               // insert: the new row's UUID, when not zero (OVS 2.13+)
	Until     string                   // wait: "==" or "!="
	Rows      []map[string]ovsdb.Datum // wait
	Timeout   *int                     // wait, in milliseconds
	Durable   bool                     // commit
	Comment   string                   // comment
	Lock      string                   // assert
}

// Mutation is one element of a mutate operation's "mutations". For the
// "delete" mutator on a map column, a Value without Values is the set of
// keys to delete.
type Mutation struct {
	Column  string
	Mutator string // +=, -=, *=, /=, %=, insert, delete
	Value   ovsdb.Datum
}

// OpResult is the result of one successful operation.
type OpResult struct {
	UUID  ovsdb.UUID               // insert
	Count int                      // update, mutate, delete
	Rows  []map[string]ovsdb.Datum // select
}

// ErrConflict is matched (errors.Is) by the error of a transaction whose
// "wait" found the database other than expected: typically a Verify whose
// columns another client changed. Retry after the cache has caught up.
var ErrConflict = errors.New("ovsdb client: transaction conflict")

// OpError is the error of a transaction that the server rejected: the
// failing operation's index (len(ops) for an error at commit) and the
// server's error object.
type OpError struct {
	Index int
	Op    string
	Err   *ovsdb.Error
}

func (e *OpError) Error() string {
	if e.Op == "" {
		return "transaction failed at commit: " + e.Err.Error()
	}
	return fmt.Sprintf("transaction operation %d (%s): %v", e.Index, e.Op, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// Is makes a failed "wait" match ErrConflict.
func (e *OpError) Is(target error) bool {
	return target == ErrConflict && e.Op == "wait" && e.Err.Tag == ovsdb.ErrTimedOut
}

// Transact runs ops as one transaction, waiting for a session if there is
// none. The error is an *OpError when the server rejected the transaction;
// if the session fails while waiting for the reply, the transaction may or
// may not have been committed.
func (c *Client) Transact(ctx context.Context, ops ...Operation) ([]OpResult, error) {
	return c.transact(ctx, ops, nil)
}

func (c *Client) transact(ctx context.Context, ops []Operation, names map[ovsdb.UUID]string) ([]OpResult, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	params, err := encodeTransact(s.schema, c.opts.Database, ops, names)
	if err != nil {
		return nil, err
	}
	heads := make([]opHead, len(ops))
	for i, op := range ops {
		heads[i] = opHead{op.Op, op.Table}
	}
	return c.send(ctx, s, params, heads)
}

// send sends the params of a transact request on s and decodes the reply.
func (c *Client) send(ctx context.Context, s *session, params []byte, heads []opHead) ([]OpResult, error) {
	raw, err := s.transact(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	return decodeTransactResult(s.schema, heads, raw)
}

// encodeTransact builds the params of a transact request.
func encodeTransact(s *ovsdb.Schema, db string, ops []Operation, names map[ovsdb.UUID]string) ([]byte, error) {
	b := []byte{'['}
	b = ovsdb.AppendJSONString(b, db)
	for i, op := range ops {
		var err error
		b = append(b, ',')
		if b, err = appendOp(b, s, op, names); err != nil {
			return nil, fmt.Errorf("transact: operation %d (%s): %w", i, op.Op, err)
		}
	}
	return append(b, ']'), nil
}

func appendOp(b []byte, s *ovsdb.Schema, op Operation, names map[ovsdb.UUID]string) ([]byte, error) {
	b = append(b, `{"op":`...)
	b = ovsdb.AppendJSONString(b, op.Op)
	var t *ovsdb.TableSchema
	switch op.Op {
	case "insert", "select", "update", "mutate", "delete", "wait":
		if t = s.Tables[op.Table]; t == nil {
			return nil, fmt.Errorf("no table %q in schema %s", op.Table, s.Name)
		}
		b = append(b, `,"table":`...)
		b = ovsdb.AppendJSONString(b, op.Table)
	}
	var err error
	switch op.Op {
	case "insert":
		if b, err = appendRow(append(b, `,"row":`...), t, op.Row, names); err != nil {
			return nil, err
		}
		if op.UUIDName != "" {
			b = append(b, `,"uuid-name":`...)
			b = ovsdb.AppendJSONString(b, op.UUIDName)
		}
		if !op.UUID.IsZero() {
			b = append(b, `,"uuid":`...)
			b = ovsdb.AppendJSONString(b, op.UUID.String())
		}
	case "update":
		if b, err = appendRow(append(b, `,"row":`...), t, op.Row, names); err != nil {
			return nil, err
		}
	case "mutate":
		b = append(b, `,"mutations":[`...)
		for i, m := range op.Mutations {
			c := t.Column(m.Column)
			if c == nil {
				return nil, fmt.Errorf("table %s has no column %q", t.Name, m.Column)
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = ovsdb.AppendJSONString(b, m.Column)
			b = append(b, ',')
			b = ovsdb.AppendJSONString(b, m.Mutator)
			b = append(b, ',')
			ct := c.Type
			if m.Mutator != "insert" && m.Mutator != "delete" {
				ct = ovsdb.ColumnType{Key: ct.Key, Min: 1, Max: 1}
			}
			b = appendDatum(b, m.Value, &ct, names)
			b = append(b, ']')
		}
		b = append(b, ']')
	case "wait":
		if op.Timeout != nil {
			b = append(b, `,"timeout":`...)
			b = strconv.AppendInt(b, int64(*op.Timeout), 10)
		}
		b = append(b, `,"until":`...)
		b = ovsdb.AppendJSONString(b, op.Until)
		b = append(b, `,"rows":[`...)
		for i, r := range op.Rows {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendRow(b, t, r, names); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	case "commit":
		b = append(b, `,"durable":`...)
		b = strconv.AppendBool(b, op.Durable)
	case "comment":
		b = append(b, `,"comment":`...)
		b = ovsdb.AppendJSONString(b, op.Comment)
	case "assert":
		b = append(b, `,"lock":`...)
		b = ovsdb.AppendJSONString(b, op.Lock)
	case "select", "delete", "abort":
	default:
		return nil, fmt.Errorf("unknown operation %q", op.Op)
	}
	switch op.Op {
	case "select", "update", "mutate", "delete", "wait":
		if b, err = appendWhere(append(b, `,"where":`...), op.Where, t, names); err != nil {
			return nil, err
		}
	}
	switch op.Op {
	case "select", "wait":
		if op.Columns != nil {
			b = append(b, `,"columns":[`...)
			for i, c := range op.Columns {
				if i > 0 {
					b = append(b, ',')
				}
				b = ovsdb.AppendJSONString(b, c)
			}
			b = append(b, ']')
		}
	}
	return append(b, '}'), nil
}

// appendRow encodes a <row>, columns in name order.
func appendRow(b []byte, t *ovsdb.TableSchema, row map[string]ovsdb.Datum, names map[ovsdb.UUID]string) ([]byte, error) {
	// The schema's columns are in name order: when they are all the
	// row has, no sorting.
	start := len(b)
	b = append(b, '{')
	n := 0
	for _, c := range t.Columns {
		d, ok := row[c.Name]
		if !ok {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = ovsdb.AppendJSONString(b, c.Name)
		b = append(b, ':')
		b = appendDatum(b, d, &c.Type, names)
	}
	if n == len(row) {
		return append(b, '}'), nil
	}
	b = append(b[:start], '{')
	for i, name := range slices.Sorted(maps.Keys(row)) {
		c := t.Column(name)
		if c == nil {
			return nil, fmt.Errorf("table %s has no column %q", t.Name, name)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = ovsdb.AppendJSONString(b, name)
		b = append(b, ':')
		b = appendDatum(b, row[name], &c.Type, names)
	}
	return append(b, '}'), nil
}

// decodeTransactResult decodes the reply to a transact request.
func decodeTransactResult(s *ovsdb.Schema, ops []opHead, raw json.RawMessage) ([]OpResult, error) {
	elems, err := splitArray(raw)
	if err != nil {
		return nil, fmt.Errorf("transact reply: want an array: %w", err)
	}
	results := make([]OpResult, len(ops))
	for i, e := range elems {
		// The common results, an insert's and an empty object, without
		// encoding/json: a large transaction has tens of thousands.
		if string(e) == "{}" {
			continue
		}
		if id, ok := insertResult(e); ok {
			if i < len(ops) {
				results[i].UUID = id
			}
			continue
		}
		var obj struct {
			Error   *string           `json:"error"`
			Details string            `json:"details"`
			UUID    []json.RawMessage `json:"uuid"`
			Count   int               `json:"count"`
			Rows    json.RawMessage   `json:"rows"`
		}
		if string(e) == "null" {
			continue
		}
		if err := json.Unmarshal(e, &obj); err != nil {
			return nil, fmt.Errorf("transact reply element %d: %w", i, err)
		}
		if obj.Error != nil {
			oe := &OpError{Index: i, Err: &ovsdb.Error{Tag: *obj.Error, Details: obj.Details}}
			if i < len(ops) {
				oe.Op = ops[i].Op
			}
			return results, oe
		}
		if i >= len(ops) {
			continue
		}
		r := &results[i]
		r.Count = obj.Count
		if len(obj.UUID) == 2 {
			var text string
			if err := json.Unmarshal(obj.UUID[1], &text); err == nil {
				r.UUID, _ = ovsdb.ParseUUID(text)
			}
		}
		if obj.Rows != nil {
			t := s.Tables[ops[i].Table]
			if t == nil {
				continue
			}
			// One row at a time: DecodeJSON bounds the memory a value
			// may cost for its size, which a server's answer to a
			// select of many small rows may exceed as a whole.
			var rows []json.RawMessage
			if err := json.Unmarshal(obj.Rows, &rows); err != nil {
				return nil, fmt.Errorf("transact reply rows: %w", err)
			}
			for _, text := range rows {
				rv, err := ovsdb.DecodeJSON(text)
				if err != nil {
					return nil, fmt.Errorf("transact reply row: %w", err)
				}
				ro, _ := rv.(map[string]any)
				row := make(map[string]ovsdb.Datum, len(ro))
				for name, val := range ro {
					c := t.Column(name)
					if c == nil {
						continue
					}
					d, err := ovsdb.DecodeDatum(val, relaxed(&c.Type), nil)
					if err != nil {
						return nil, fmt.Errorf("transact reply: %s column %s: %w", t.Name, name, err)
					}
					row[name] = d
				}
				r.Rows = append(r.Rows, row)
			}
		}
	}
	return results, nil
}

// insertResult decodes an insert's result as servers write it,
// {"uuid":["uuid","<uuid>"]}, and reports whether e is exactly that.
func insertResult(e []byte) (ovsdb.UUID, bool) {
	const prefix, suffix = `{"uuid":["uuid","`, `"]}`
	n := len(prefix) + 36 + len(suffix)
	if len(e) != n || string(e[:len(prefix)]) != prefix || string(e[n-len(suffix):]) != suffix {
		return ovsdb.UUID{}, false
	}
	id, err := ovsdb.ParseUUID(string(e[len(prefix) : len(prefix)+36]))
	return id, err == nil
}

// Txn builds a transaction in the usual OVSDB client style. The zero Txn is
// not usable; get one from Client.Txn.
//
// Each operation is encoded as it is added, with the cache's schema, and
// only its encoding is kept: a large transaction (a northd's first, every
// logical flow) then costs its JSON text while it is built, not the row
// maps it was made of as well. So a row map passed in may be reused or
// changed once the call returns. Operations added before the cache has a
// schema are kept whole and encoded at Commit.
type Txn struct {
	c     *Client
	names map[ovsdb.UUID]string // placeholder UUID -> uuid-name
	// schema is what enc was encoded with; enc holds the operations
	// encoded so far, each followed by a comma, and heads what
	// decoding their results needs.
	schema *ovsdb.Schema
	enc    []byte
	heads  []opHead
	// ops are operations not encoded yet (added while the cache had no
	// schema), all after those in enc.
	ops      []Operation
	inserted []insertedRow
	err      error
}

// opHead is what decoding an operation's result needs of it.
type opHead struct{ Op, Table string }

type insertedRow struct {
	placeholder ovsdb.UUID
	op          int
}

// Txn starts building a transaction.
func (c *Client) Txn() *Txn {
	return &Txn{c: c, names: map[ovsdb.UUID]string{}}
}

// len is how many operations t holds.
func (t *Txn) len() int { return len(t.heads) + len(t.ops) }

// add adds op: encoded now if the cache has a schema, else kept whole.
func (t *Txn) add(op Operation) {
	if t.err != nil {
		return
	}
	if len(t.ops) == 0 {
		if t.schema == nil {
			t.schema = t.c.cache.Schema()
		}
		if t.schema != nil {
			if len(t.enc) == 0 {
				t.enc = t.begin(t.enc)
			}
			b, err := appendOp(t.enc, t.schema, op, t.names)
			if err != nil {
				t.err = fmt.Errorf("transact: operation %d (%s): %w", t.len(), op.Op, err)
				return
			}
			t.enc = append(b, ',')
			t.heads = append(t.heads, opHead{op.Op, op.Table})
			return
		}
	}
	t.ops = append(t.ops, op)
}

// Insert adds an insert and returns a placeholder UUID for the new row:
// use it in references and conditions of this transaction (it travels as a
// named-uuid) and with TxnResult.UUID to learn the real UUID.
func (t *Txn) Insert(table string, row map[string]ovsdb.Datum) ovsdb.UUID {
	id := ovsdb.NewUUID()
	if t.err != nil {
		return id // the Commit fails; and a committed Txn has no names
	}
	name := "row" + strconv.Itoa(len(t.names))
	t.names[id] = name
	t.inserted = append(t.inserted, insertedRow{placeholder: id, op: t.len()})
	t.add(Operation{Op: "insert", Table: table, Row: row, UUIDName: name})
	return id
}

func byUUID(id ovsdb.UUID) []Condition {
	return []Condition{Equal("_uuid", ovsdb.Scalar(ovsdb.UUIDAtom(id)))}
}

// Update sets columns of the row with the given UUID.
func (t *Txn) Update(table string, id ovsdb.UUID, row map[string]ovsdb.Datum) {
	t.add(Operation{Op: "update", Table: table, Row: row, Where: byUUID(id)})
}

// Mutate applies mutations to the row with the given UUID.
func (t *Txn) Mutate(table string, id ovsdb.UUID, mutations ...Mutation) {
	t.add(Operation{Op: "mutate", Table: table, Mutations: mutations, Where: byUUID(id)})
}

// Delete deletes the row with the given UUID.
func (t *Txn) Delete(table string, id ovsdb.UUID) {
	t.add(Operation{Op: "delete", Table: table, Where: byUUID(id)})
}

// Verify makes the transaction fail with ErrConflict unless the given
// columns of the row still hold the values the cache holds now: a "wait"
// with "until": "==" and a zero timeout. Verify what was read to decide on
// the changes, and call Verify before reading them: the cache may take an
// update in between, and a value read after Verify is then newer than the
// one verified, so the wait fails and Do retries. Read first and a change
// that lands in between goes unnoticed.
func (t *Txn) Verify(table string, id ovsdb.UUID, columns ...string) {
	cache := t.c.cache
	row := cache.Row(table, id)
	s := cache.Schema()
	if row == nil || s == nil || s.Tables[table] == nil {
		t.err = fmt.Errorf("verify %s row %s: not in the cache: %w", table, id, ErrConflict)
		return
	}
	want := make(map[string]ovsdb.Datum, len(columns))
	for _, name := range columns {
		c := s.Tables[table].Column(name)
		if c == nil {
			t.err = fmt.Errorf("verify: table %s has no column %q", table, name)
			return
		}
		want[name] = row.Get(c)
	}
	zero := 0
	t.add(Operation{Op: "wait", Table: table, Where: byUUID(id), Columns: slices.Clone(columns),
		Until: "==", Rows: []map[string]ovsdb.Datum{want}, Timeout: &zero})
}

// Comment adds a comment to the transaction (it shows in the server's log).
func (t *Txn) Comment(text string) {
	t.add(Operation{Op: "comment", Comment: text})
}

// Add appends a raw operation.
func (t *Txn) Add(op Operation) { t.add(op) }

// TxnResult is the outcome of a committed Txn.
type TxnResult struct {
	Results []OpResult
	real    map[ovsdb.UUID]ovsdb.UUID
}

// UUID returns the real UUID of a row inserted under placeholder.
func (r *TxnResult) UUID(placeholder ovsdb.UUID) ovsdb.UUID { return r.real[placeholder] }

// Commit sends the transaction. An empty transaction is not sent. A Txn
// is committed once: its encoding is let go of while the reply is awaited.
func (t *Txn) Commit(ctx context.Context) (*TxnResult, error) {
	if t.err != nil {
		return nil, t.err
	}
	if t.len() == 0 {
		return &TxnResult{real: map[ovsdb.UUID]ovsdb.UUID{}}, nil
	}
	s, err := t.c.session(ctx)
	if err != nil {
		return nil, err
	}
	if t.schema != nil && t.schema != s.schema && string(t.schema.JSON()) != string(s.schema.JSON()) {
		return nil, fmt.Errorf("transact: the server's schema changed while the transaction was built: %w", ErrConflict)
	}
	params := t.enc
	if len(params) == 0 {
		params = t.begin(nil)
	}
	heads := t.heads
	for _, op := range t.ops {
		if params, err = appendOp(params, s.schema, op, t.names); err != nil {
			return nil, fmt.Errorf("transact: operation %d (%s): %w", len(heads), op.Op, err)
		}
		params = append(params, ',')
		heads = append(heads, opHead{op.Op, op.Table})
	}
	params[len(params)-1] = ']' // the last comma
	// Everything is encoded: the placeholders' names are not needed any
	// more, and a cold start's thousands of them are let go of while
	// the reply (and the update it causes, which may arrive first) is
	// awaited.
	inserted := t.inserted
	t.enc, t.heads, t.ops, t.names, t.inserted = nil, nil, nil, nil, nil
	t.err = errors.New("transact: transaction already committed")
	results, err := t.c.send(ctx, s, params, heads)
	if err != nil {
		return nil, err
	}
	res := &TxnResult{Results: results, real: make(map[ovsdb.UUID]ovsdb.UUID, len(inserted))}
	for _, ins := range inserted {
		res.real[ins.placeholder] = results[ins.op].UUID
	}
	return res, nil
}

// begin starts the params of a transact request in b: "[", the database
// name and a comma.
func (t *Txn) begin(b []byte) []byte {
	b = append(b, '[')
	b = ovsdb.AppendJSONString(b, t.c.opts.Database)
	return append(b, ',')
}

// Do builds a transaction with build and commits it, and on ErrConflict
// waits for the cache to change and tries again, until ctx ends. build is
// called afresh for each attempt and should read what it needs from the
// cache then.
func (c *Client) Do(ctx context.Context, build func(*Txn) error) (*TxnResult, error) {
	for {
		changed := c.cache.Changed()
		t := c.Txn()
		if err := build(t); err != nil {
			return nil, err
		}
		res, err := t.Commit(ctx)
		if !errors.Is(err, ErrConflict) {
			return res, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (gave up: %w)", err, context.Cause(ctx))
		}
	}
}
