package cluster

import (
	"bytes"
	"encoding/json"
	"reflect"
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

// TestScanCommandIsJSON: what appendCommand writes, scanCommand reads as
// json.Unmarshal does; the other entries go to json.Unmarshal.
func TestScanCommandIsJSON(t *testing.T) {
	id := ovsdb.NewUUID()
	u1, u2 := ovsdb.NewUUID().String(), ovsdb.NewUUID().String()
	for _, tables := range []map[string]map[string]json.RawMessage{
		{},
		{"T": {}},
		{"T": {u1: json.RawMessage(`{"name":"a \"}{[","n":1,"s":["set",[1,2]]}`)}},
		{"T": {u1: json.RawMessage(`{"name":"a"}`), u2: nil}, "U": {u2: json.RawMessage(`{"m":["map",[["k","v\\"]]]}`)}},
	} {
		data := appendCommand(nil, "sid/nonce", 7, id, tables)
		got, ok := scanCommand(data)
		if !ok {
			t.Fatalf("scanCommand refused %s", data)
		}
		var want command
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("scanCommand(%s) = %+v, want %+v", data, got, want)
		}
	}
	for _, data := range []string{
		`{"timer":5000}`,
		`{"o":"a\u00e9","e":1,"x":[{"id":"` + u1 + `","r":{}}]}`,
		`{"o":"a", "e":1,"x":[{"id":"` + u1 + `","r":{}}]}`,
		`{"o":"a","e":1,"x":[{"id":"` + u1 + `","r":{"T":{"` + u2 + `":{"a":]}}}}]}`,
		`{"o":"a","e":1,"x":[{"id":"` + u1 + `","r":{}}]}x`,
	} {
		if c, ok := scanCommand([]byte(data)); ok {
			t.Errorf("scanCommand took %s (as %+v)", data, c)
		}
	}
}

// FuzzScanCommand: whatever scanCommand takes, json.Unmarshal takes too
// and decodes the same.
func FuzzScanCommand(f *testing.F) {
	u1, u2 := ovsdb.NewUUID(), ovsdb.NewUUID().String()
	f.Add(appendCommand(nil, "o", 1, u1, map[string]map[string]json.RawMessage{"T": {u2: json.RawMessage(`{"a":["set",["x"]]}`)}, "U": {u2: nil}}))
	f.Add([]byte(`{"timer":5000}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := scanCommand(data)
		if !ok {
			return
		}
		var want command
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("scanCommand took %q, which json.Unmarshal refuses: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("scanCommand(%q) = %+v, json.Unmarshal %+v", data, got, want)
		}
	})
}
