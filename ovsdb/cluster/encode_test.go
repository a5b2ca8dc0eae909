package cluster

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/govn/govn/ovsdb"
)

// TestAppendCommandIsJSON checks the hand-made encoding of an entry
// against encoding/json's: the same command once decoded, deleted rows
// (null) and names that need escaping included.
func TestAppendCommandIsJSON(t *testing.T) {
	id := ovsdb.NewUUID()
	u1, u2 := ovsdb.NewUUID().String(), ovsdb.NewUUID().String()
	for _, tables := range []map[string]map[string]json.RawMessage{
		{},
		{"T": {u1: json.RawMessage(`{"name":"a","n":1}`)}},
		{"T": {u1: json.RawMessage(`{"name":"a"}`), u2: nil}, `odd"name\`: {u2: json.RawMessage(`{"m":["map",[["k","v"]]]}`)}},
	} {
		got := appendCommand(nil, "sid/nonce\u2028", 7, id, tables)
		var dec command
		if err := json.Unmarshal(got, &dec); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		want, err := json.Marshal(command{Origin: "sid/nonce\u2028", Epoch: 7, Txns: []txnData{{ID: id, Tables: tables}}})
		if err != nil {
			t.Fatal(err)
		}
		again, err := json.Marshal(dec)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, want) {
			t.Errorf("appendCommand decodes as\n%s\nwant\n%s", again, want)
		}
	}
}

// TestAppendLogBodyIsJSON checks the hand-made encoding of log records
// against encoding/json's, byte for byte.
func TestAppendLogBodyIsJSON(t *testing.T) {
	at := time.Date(2026, 12, 4, 16, 5, 7, 123456789, time.FixedZone("x", 3600+1800))
	for _, c := range []struct {
		logs   []raft.Log
		commit uint64
	}{
		{[]raft.Log{{Index: 1, Term: 1}}, 0},
		{[]raft.Log{{Index: 7, Term: 3, Type: raft.LogCommand, Data: []byte(`{"x":[]}`), AppendedAt: at}}, 6},
		{[]raft.Log{
			{Index: 8, Term: 3, Type: raft.LogConfiguration, Data: []byte{0, 1, 2, 255}, Extensions: []byte("ext"), AppendedAt: at.UTC()},
			{Index: 9, Term: 4, Type: raft.LogBarrier, AppendedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		}, 1 << 40},
	} {
		got, err := appendLogBody(nil, c.logs, c.commit)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(&record{Type: "log", Entries: toEntries(c.logs), Commit: c.commit})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("appendLogBody:\n%s\nwant\n%s", got, want)
		}
	}
	if _, err := appendLogBody(nil, []raft.Log{{Index: 1, AppendedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}, 0); err == nil {
		t.Error("a time json.Marshal refuses was encoded")
	}
}
