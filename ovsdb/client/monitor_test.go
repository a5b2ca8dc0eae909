package client

import (
	"fmt"
	"strings"
	"testing"

	"github.com/govn/govn/ovsdb"
)

func strs(ss ...string) []ovsdb.Atom {
	var out []ovsdb.Atom
	for _, s := range ss {
		out = append(out, ovsdb.String(s))
	}
	return out
}

func mustDecode(t testing.TB, s string) any {
	t.Helper()
	v, err := ovsdb.DecodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const (
	uuid1 = "11111111-1111-4111-8111-111111111111"
	uuid2 = "22222222-2222-4222-8222-222222222222"
)

func describe(s *ovsdb.Schema, events []Event) string {
	var parts []string
	for _, e := range events {
		row := e.New
		if row == nil {
			row = e.Old
		}
		t := s.Tables[e.Table]
		var cols []string
		for _, c := range t.Columns {
			if d := row.Data[c.Index]; d.Len() > 0 {
				cols = append(cols, fmt.Sprintf("%s=%s", c.Name, d.AppendJSON(nil, &c.Type)))
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s %s {%s}", e.Kind, e.Table, row.UUID.String()[:4], strings.Join(cols, " ")))
	}
	return strings.Join(parts, "\n")
}

func TestDecodeUpdates(t *testing.T) {
	s := ovsdb.MustParseSchema([]byte(testSchema))
	// The cache holds Switch uuid1 with name "sw", counter 1, ports {},
	// external_ids {a=1}.
	old := ovsdb.NewRow(s.Tables["Switch"], ovsdb.MustParseUUID(uuid1))
	sw := s.Tables["Switch"]
	old.Data[sw.Column("name").Index] = str("sw")
	old.Data[sw.Column("counter").Index] = integer(1)
	old.Data[sw.Column("external_ids").Index] = ovsdb.Map(strs("a"), strs("1"))
	current := func(table string) map[ovsdb.UUID]*ovsdb.Row {
		if table == "Switch" {
			return map[ovsdb.UUID]*ovsdb.Row{old.UUID: old}
		}
		return nil
	}
	tests := []struct {
		name    string
		method  monitorMethod
		update  string
		want    string
		wantErr string
	}{
		{"insert with defaults omitted", methodCond,
			`{"Port":{"` + uuid2 + `":{"insert":{"name":"p"}}}}`,
			`insert Port 2222 {name="p"}`, ""},
		{"modify scalar, map diff and optional", methodCondSince,
			`{"Switch":{"` + uuid1 + `":{"modify":{"counter":5,"external_ids":["map",[["a","1"],["b","2"]]],"tag":["set",[7]]}}}}`,
			`update Switch 1111 {counter=5 external_ids=["map",[["b","2"]]] name="sw" tag=7}`, ""},
		{"delete", methodCond,
			`{"Switch":{"` + uuid1 + `":{"delete":null}}}`,
			`delete Switch 1111 {counter=1 external_ids=["map",[["a","1"]]] name="sw"}`, ""},
		{"delete of unknown row is ignored", methodCond,
			`{"Port":{"` + uuid2 + `":{"delete":null}}}`, ``, ""},
		{"unknown table and column ignored", methodCond,
			`{"Nope":{"` + uuid2 + `":{"insert":{}}},"Port":{"` + uuid2 + `":{"insert":{"name":"p","extra":1}}}}`,
			`insert Port 2222 {name="p"}`, ""},
		{"plain monitor modify", methodPlain,
			`{"Switch":{"` + uuid1 + `":{"old":{"counter":1},"new":{"name":"sw","counter":2,"external_ids":["map",[]]}}}}`,
			`update Switch 1111 {counter=2 name="sw"}`, ""},
		{"plain monitor delete", methodPlain,
			`{"Switch":{"` + uuid1 + `":{"old":{"name":"sw"}}}}`,
			`delete Switch 1111 {counter=1 external_ids=["map",[["a","1"]]] name="sw"}`, ""},
		{"modify of unknown row", methodCond,
			`{"Port":{"` + uuid2 + `":{"modify":{"name":"x"}}}}`, ``, "not in the cache"},
		{"bad uuid", methodCond, `{"Port":{"xyz":{"insert":{}}}}`, ``, "not a UUID"},
		{"bad kind", methodCond, `{"Port":{"` + uuid2 + `":{"upsert":{}}}}`, ``, "unknown row update kind"},
		{"bad value type", methodCond, `{"Port":{"` + uuid2 + `":{"insert":{"name":3}}}}`, ``, "column name"},
		{"not an object", methodCond, `[1]`, ``, "want an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			generic, gerr := decodeUpdates(s, current, mustDecode(t, tt.update), tt.method)
			direct, derr := parseUpdates(s, current, []byte(tt.update), tt.method)
			for _, r := range []struct {
				name   string
				events []Event
				err    error
			}{{"decodeUpdates", generic, gerr}, {"parseUpdates", direct, derr}} {
				if tt.wantErr != "" {
					if r.err == nil || !strings.Contains(r.err.Error(), tt.wantErr) {
						t.Errorf("%s: error %v, want %q", r.name, r.err, tt.wantErr)
					}
					continue
				}
				if r.err != nil {
					t.Fatalf("%s: %v", r.name, r.err)
				}
				if got := describe(s, r.events); got != tt.want {
					t.Errorf("%s: got\n%s\nwant\n%s", r.name, got, tt.want)
				}
			}
		})
	}
	// The old row was not modified by any of this.
	if !old.Data[sw.Column("counter").Index].Equal(integer(1)) {
		t.Error("decoding modified the cached row")
	}
}

func TestMonitorRequests(t *testing.T) {
	s := ovsdb.MustParseSchema([]byte(testSchema))
	tables := map[string][]string{"Switch": {"name", "ports", "_uuid", "nope"}, "Port": nil, "Missing": nil}
	conds := map[string][]Condition{"Switch": {Equal("name", str("a")), Constant(false)}}
	tests := []struct {
		method monitorMethod
		want   string
	}{
		{methodCondSince, `{"Port":[{"columns":["addresses","name"]}],"Switch":[{"columns":["name","ports"],"where":[["name","==","a"],false]}]}`},
		{methodPlain, `{"Port":{"columns":["addresses","name"]},"Switch":{"columns":["name","ports"]}}`},
	}
	for _, tt := range tests {
		got, err := monitorRequests(s, tables, conds, tt.method)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("%v:\n got %s\nwant %s", tt.method, got, tt.want)
		}
	}
	if _, err := monitorRequests(s, tables, map[string][]Condition{"Switch": {Equal("nope", str("a"))}}, methodCond); err == nil {
		t.Error("condition on an unknown column accepted")
	}
}

func TestEncodeTransact(t *testing.T) {
	s := ovsdb.MustParseSchema([]byte(testSchema))
	port := ovsdb.MustParseUUID(uuid2)
	names := map[ovsdb.UUID]string{port: "p"}
	zero := 0
	ops := []Operation{
		{Op: "insert", Table: "Port", Row: map[string]ovsdb.Datum{"name": str("p1")}, UUIDName: "p"},
		{Op: "insert", Table: "Switch", Row: map[string]ovsdb.Datum{"ports": ovsdb.Set(ovsdb.UUIDAtom(port)), "name": str("s")}},
		{Op: "mutate", Table: "Switch", Where: []Condition{Equal("name", str("s"))}, Mutations: []Mutation{
			{Column: "counter", Mutator: "+=", Value: integer(1)},
			{Column: "external_ids", Mutator: "delete", Value: ovsdb.Set(strs("k")...)},
			{Column: "external_ids", Mutator: "insert", Value: ovsdb.Map(strs("k"), strs("v"))},
		}},
		{Op: "wait", Table: "Switch", Where: []Condition{Equal("_uuid", ovsdb.Scalar(ovsdb.UUIDAtom(port)))}, Columns: []string{"name"}, Until: "==", Rows: []map[string]ovsdb.Datum{{"name": str("s")}}, Timeout: &zero},
		{Op: "comment", Comment: "hi"},
		{Op: "commit", Durable: true},
	}
	got, err := encodeTransact(s, "Test", ops, names)
	if err != nil {
		t.Fatal(err)
	}
	want := `["Test",` +
		`{"op":"insert","table":"Port","row":{"name":"p1"},"uuid-name":"p"},` +
		`{"op":"insert","table":"Switch","row":{"name":"s","ports":["named-uuid","p"]}},` +
		`{"op":"mutate","table":"Switch","mutations":[["counter","+=",1],["external_ids","delete","k"],["external_ids","insert",["map",[["k","v"]]]]],"where":[["name","==","s"]]},` +
		`{"op":"wait","table":"Switch","timeout":0,"until":"==","rows":[{"name":"s"}],"where":[["_uuid","==",["named-uuid","p"]]],"columns":["name"]},` +
		`{"op":"comment","comment":"hi"},` +
		`{"op":"commit","durable":true}]`
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	for _, bad := range []Operation{
		{Op: "insert", Table: "Nope"},
		{Op: "insert", Table: "Port", Row: map[string]ovsdb.Datum{"nope": str("x")}},
		{Op: "frobnicate"},
		{Op: "select", Table: "Port", Where: []Condition{{Column: "name", Function: "~", Value: str("x")}}},
	} {
		if _, err := encodeTransact(s, "Test", []Operation{bad}, nil); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
}

// FuzzDecodeUpdates feeds arbitrary JSON to both update decoders: neither
// may panic, and when both succeed they must agree event for event.
func FuzzDecodeUpdates(f *testing.F) {
	s := ovsdb.MustParseSchema([]byte(testSchema))
	old := ovsdb.NewRow(s.Tables["Switch"], ovsdb.MustParseUUID(uuid1))
	old.Data[s.Tables["Switch"].Column("external_ids").Index] = ovsdb.Map(strs("a"), strs("1"))
	current := func(table string) map[ovsdb.UUID]*ovsdb.Row {
		if table == "Switch" {
			return map[ovsdb.UUID]*ovsdb.Row{old.UUID: old}
		}
		return nil
	}
	for _, seed := range []string{
		`{"Switch":{"` + uuid1 + `":{"modify":{"counter":5,"external_ids":["map",[["a","1"]]],"ports":["set",[["uuid","` + uuid2 + `"]]]}}}}`,
		`{"Port":{"` + uuid2 + `":{"insert":{"name":"p\u00e9\ud83d\ude00","addresses":["set",["a","b"]]}}}}`,
		`{"Switch":{"` + uuid1 + `":{"old":{},"new":{"tag":["set",[]],"ports":["uuid","` + uuid2 + `"]}}}}`,
		`{"Switch":{"` + uuid1 + `":{"delete":null}},"Port":{}}`,
	} {
		f.Add([]byte(seed), uint8(0))
		f.Add([]byte(seed), uint8(2))
	}
	f.Fuzz(func(t *testing.T, data []byte, method uint8) {
		m := monitorMethod(method % 3)
		direct, derr := parseUpdates(s, current, data, m)
		if derr == nil {
			for _, e := range direct {
				if (e.Kind == Insert) != (e.Old == nil) || (e.Kind == Delete) != (e.New == nil) {
					t.Fatalf("inconsistent event %+v", e)
				}
			}
		}
		v, err := ovsdb.DecodeJSON(data)
		if err != nil {
			return
		}
		generic, gerr := decodeUpdates(s, current, v, m)
		if gerr != nil || derr != nil {
			return
		}
		if a, b := describe(s, generic), describe(s, direct); a != b {
			t.Fatalf("decoders disagree on %s:\ngeneric:\n%s\ndirect:\n%s", data, a, b)
		}
	})
}

func TestForTable(t *testing.T) {
	row := func(n byte) *ovsdb.Row { return &ovsdb.Row{UUID: ovsdb.UUIDFromBytes([16]byte{n})} }
	cs := ChangeSet{Events: []Event{
		{Table: "A", Kind: Insert, New: row(1)},
		{Table: "B", Kind: Insert, New: row(2)},
		{Table: "B", Kind: Delete, Old: row(3)},
		{Table: "C", Kind: Insert, New: row(4)},
	}}
	for table, want := range map[string]int{"A": 1, "B": 2, "C": 1, "D": 0} {
		got := cs.ForTable(table)
		if len(got) != want {
			t.Errorf("ForTable(%s): %d events, want %d", table, len(got), want)
		}
		for _, e := range got {
			if e.Table != table {
				t.Errorf("ForTable(%s) returned an event of %s", table, e.Table)
			}
		}
	}
}
