package client

import (
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
	results, err := decodeTransactResult(s, []Operation{{Op: "select", Table: "Switch", Columns: []string{"tag"}}}, raw)
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
	ops := []Operation{{Op: "insert", Table: "T"}, {Op: "insert", Table: "T"}, {Op: "update", Table: "T"}, {Op: "comment"}}
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
