package client

import (
	"fmt"
	"strings"
	"testing"

	"github.com/govn/govn/ovsdb"
)

// initialUpdate returns a <table-updates2> with n Switch rows, as an
// initial monitor reply carries them.
func initialUpdate(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"Switch":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%08x-0000-4000-8000-000000000000":{"initial":{"name":"switch-%d","counter":%d,"external_ids":["map",[["owner","bench"],["index","%d"]]]}}`, i, i, i, i)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// BenchmarkParseInitial measures turning an initial monitor reply into
// cache events with the direct decoder the client uses.
func BenchmarkParseInitial(b *testing.B) {
	s := ovsdb.MustParseSchema([]byte(testSchema))
	data := initialUpdate(10000)
	empty := func(string) map[ovsdb.UUID]*ovsdb.Row { return nil }
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		events, err := parseUpdates(s, empty, data, methodCond)
		if err != nil || len(events) != 10000 {
			b.Fatal(err, len(events))
		}
	}
}

// BenchmarkDecodeInitial is BenchmarkParseInitial with the reference
// decoder (encoding/json's generic values first).
func BenchmarkDecodeInitial(b *testing.B) {
	s := ovsdb.MustParseSchema([]byte(testSchema))
	data := initialUpdate(10000)
	empty := func(string) map[ovsdb.UUID]*ovsdb.Row { return nil }
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		v, err := ovsdb.DecodeJSON(data)
		if err != nil {
			b.Fatal(err)
		}
		events, err := decodeUpdates(s, empty, v, methodCond)
		if err != nil || len(events) != 10000 {
			b.Fatal(err, len(events))
		}
	}
}

// BenchmarkTransact measures a small transaction's round trip to govn's
// server.
func BenchmarkTransact(b *testing.B) {
	srv := startGovnServer(b, testSchema)
	c := connect(b, srv.Socket(), Options{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Transact(b.Context(), Operation{Op: "comment", Comment: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
}
