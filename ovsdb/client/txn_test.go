package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/govn/govn/ovsdb"
)

// TestDecodeManySmallRows checks that a select answer of many small rows
// decodes, although as one JSON value it would cost more memory per byte
// than ovsdb.DecodeJSON allows a request.
func TestDecodeManySmallRows(t *testing.T) {
	s := ovsdb.MustParseSchema([]byte(testSchema))
	const n = 50000
	raw := []byte(`[{"rows":[`)
	for i := range n {
		if i > 0 {
			raw = append(raw, ',')
		}
		raw = fmt.Appendf(raw, `{"tag":%d}`, i%4096)
	}
	raw = append(raw, "]}]"...)
	results, err := decodeTransactResult(s, []opHead{{Op: "select", Table: "Switch"}}, raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(results[0].Rows) != n || !results[0].Rows[n-1]["tag"].Equal(ovsdb.Set(ovsdb.Integer((n-1)%4096))) {
		t.Fatalf("decoded %d rows, last %v", len(results[0].Rows), results[0].Rows[len(results[0].Rows)-1])
	}
}

// TestDecodeTransactResultForms checks the fast forms of results (an
// insert's, an empty object) against the same results written otherwise.
func TestDecodeTransactResultForms(t *testing.T) {
	const id = "01234567-89ab-cdef-0123-456789abcdef"
	ops := []opHead{{Op: "insert", Table: "T"}, {Op: "insert", Table: "T"}, {Op: "update", Table: "T"}, {Op: "comment"}}
	for _, raw := range []string{
		`[{"uuid":["uuid","` + id + `"]},{"uuid":["uuid","` + id + `"]},{"count":2},{}]`,
		`[ {"uuid": ["uuid", "` + id + `"]}, {"uuid":["uuid","` + strings.ToUpper(id) + `"]} , {"count":2}, { } ]`,
	} {
		res, err := decodeTransactResult(nil, ops, json.RawMessage(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		want := ovsdb.MustParseUUID(id)
		if res[0].UUID != want || res[1].UUID != want || res[2].Count != 2 || len(res) != 4 {
			t.Errorf("%s: %+v", raw, res)
		}
	}
	if _, err := decodeTransactResult(nil, ops, json.RawMessage(`{"uuid":1}`)); err == nil {
		t.Error("a reply that is not an array decoded")
	}
	res, err := decodeTransactResult(nil, ops, json.RawMessage(`[{"uuid":["uuid","`+id+`"]},{"error":"constraint violation","details":"d"}]`))
	var oe *OpError
	if !errors.As(err, &oe) || oe.Index != 1 || res[0].UUID.IsZero() {
		t.Errorf("error reply: %+v, %v", res, err)
	}
}

// TestTxnEncodesAsBuilt checks what encoding operations as they are added
// changes for callers: a row map changed after Insert does not change the
// row sent, an operation on an unknown column fails the Commit, a Txn
// built before the client has a schema is encoded at Commit, and a Txn
// commits once (what is added to it after is dropped).
func TestTxnEncodesAsBuilt(t *testing.T) {
	srv := startGovnServer(t, testSchema)
	ctx := t.Context()

	// Built before the first connection: no schema yet.
	early, err := New(Options{Endpoints: []string{"unix:" + srv.Socket()}, Database: "Test"})
	if err != nil {
		t.Fatal(err)
	}
	pending := early.Txn()
	pending.Insert("Switch", map[string]ovsdb.Datum{"name": str("early")})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = early.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	if _, err := pending.Commit(ctx); err != nil {
		t.Fatalf("transaction built before connecting: %v", err)
	}

	c := connect(t, srv.Socket(), Options{})
	txn := c.Txn()
	row := map[string]ovsdb.Datum{"name": str("p1")}
	port := txn.Insert("Port", row)
	row["name"] = str("changed") // too late: p1 is encoded
	sw := txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("sw1"), "ports": ovsdb.Scalar(ovsdb.UUIDAtom(port))})
	res, err := txn.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Cache().Get("Port", res.UUID(port), "name"); !got.Equal(str("p1")) {
		t.Errorf("port name = %v, want the value at Insert, p1", got)
	}
	if got, _ := c.Cache().Get("Switch", res.UUID(sw), "ports"); !got.Equal(ovsdb.Scalar(ovsdb.UUIDAtom(res.UUID(port)))) {
		t.Errorf("switch ports = %v, want the port inserted along", got)
	}
	txn.Insert("Port", map[string]ovsdb.Datum{"name": str("late")}) // on a committed Txn: no effect
	if _, err := txn.Commit(ctx); err == nil {
		t.Error("a Txn committed twice")
	}

	bad := c.Txn()
	bad.Insert("Port", map[string]ovsdb.Datum{"name": str("p2")})
	bad.Update("Port", res.UUID(port), map[string]ovsdb.Datum{"no_such_column": str("x")})
	if _, err := bad.Commit(ctx); err == nil || !strings.Contains(err.Error(), "no_such_column") {
		t.Errorf("an update of an unknown column committed: %v", err)
	}
	for _, r := range c.Cache().Rows("Port") {
		if got := r.Get(c.Cache().Schema().Tables["Port"].Column("name")); got.Equal(str("p2")) {
			t.Error("the failed transaction's insert was sent")
		}
	}
}
