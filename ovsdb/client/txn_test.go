package client

import (
	"fmt"
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
