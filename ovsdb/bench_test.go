package ovsdb

import (
	"fmt"
	"testing"
)

// BenchmarkTransactInsert measures decoding, executing and applying a
// single-row insert, the unit of the server's insert throughput.
func BenchmarkTransactInsert(b *testing.B) {
	db := newTestDB(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// Replace the root and, through garbage collection, its child.
		v, err := DecodeJSON(fmt.Appendf(nil, `[{"op":"delete","table":"Root","where":[["name","==","r"]]},{"op":"insert","table":"Child","uuid-name":"c","row":{"label":"x%d"}},{"op":"insert","table":"Root","row":{"name":"r","children":["named-uuid","c"],"opts":["map",[["k","v"]]]}}]`, i%1000))
		if err != nil {
			b.Fatal(err)
		}
		res := db.Transact(v.([]any), TxnOptions{})
		if res.Failed {
			b.Fatalf("transaction failed: %s", res.Reply)
		}
		db.Apply(res.Changes)
	}
}

// BenchmarkDecodeJSON measures the generic JSON decoding of a typical
// transact request.
func BenchmarkDecodeJSON(b *testing.B) {
	msg := []byte(`["OVN_Northbound",{"op":"insert","table":"Logical_Switch_Port","row":{"name":"lsp1","addresses":["set",["00:00:00:00:00:01 10.0.0.1"]],"options":["map",[["a","b"],["c","d"]]]},"uuid-name":"row1"},{"op":"mutate","table":"Logical_Switch","where":[["_uuid","==",["uuid","0123abcd-4567-89ab-cdef-0011223344ff"]]],"mutations":[["ports","insert",["set",[["named-uuid","row1"]]]]]}]`)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := DecodeJSON(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRowAppendJSON measures encoding a row for a monitor update.
func BenchmarkRowAppendJSON(b *testing.B) {
	s := MustParseSchema([]byte(testSchema))
	ts := s.Table("Root")
	r := NewRow(ts, NewUUID())
	r.Data[ts.Column("name").Index] = Scalar(String("a fairly ordinary name"))
	r.Data[ts.Column("opts").Index] = Map([]Atom{String("k1"), String("k2")}, []Atom{String("v1"), String("v2")})
	r.Data[ts.Column("children").Index] = Set(UUIDAtom(NewUUID()), UUIDAtom(NewUUID()))
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendJSON(buf[:0], ts, nil)
	}
}
