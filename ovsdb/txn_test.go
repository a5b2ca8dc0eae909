package ovsdb

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func newTestDB(t testing.TB) *Database {
	t.Helper()
	return NewDatabase(MustParseSchema([]byte(testSchema)))
}

// run executes a transaction given as JSON text, commits it when it
// succeeds, and returns the decoded reply.
func run(t testing.TB, db *Database, ops string, opts TxnOptions) ([]any, TxnResult) {
	t.Helper()
	v, err := DecodeJSON([]byte(ops))
	if err != nil {
		t.Fatalf("bad test JSON %s: %v", ops, err)
	}
	res := db.Transact(v.([]any), opts)
	if res.Blocked {
		return nil, res
	}
	var reply []any
	if err := json.Unmarshal(res.Reply, &reply); err != nil {
		t.Fatalf("reply %s is not JSON: %v", res.Reply, err)
	}
	if res.Changes != nil {
		db.Apply(res.Changes)
	}
	return reply, res
}

// errorTag returns the tag of the first error object in reply, or "".
func errorTag(reply []any) string {
	for _, r := range reply {
		if m, ok := r.(map[string]any); ok {
			if e, ok := m["error"].(string); ok {
				return e
			}
		}
	}
	return ""
}

func rowsOf(db *Database, table string) int { return len(db.Table(table).Rows) }

func TestTransactErrors(t *testing.T) {
	tests := []struct {
		name string
		ops  string
		want string
	}{
		{"unknown table", `[{"op":"insert","table":"Nope","row":{}}]`, ErrSyntax},
		{"unknown op", `[{"op":"frobnicate"}]`, ErrSyntax},
		{"not object", `[5]`, ErrSyntax},
		{"bad column", `[{"op":"insert","table":"Root","row":{"nope":1}}]`, ErrUnknownColumn},
		{"bad type", `[{"op":"insert","table":"Root","row":{"n":"x"}}]`, ErrSyntax},
		{"enum", `[{"op":"insert","table":"Root","row":{"color":"blue"}}]`, ErrConstraintViolation},
		{"abort", `[{"op":"insert","table":"Root","row":{"name":"a"}},{"op":"abort"}]`, ErrAborted},
		{"assert", `[{"op":"assert","lock":"l"}]`, ErrNotOwner},
		{"dangling strong", `[{"op":"insert","table":"Root","row":{"name":"a","children":["uuid","00000000-0000-0000-0000-000000000001"]}}]`, ErrReferentialIntegrity},
		{"index", `[{"op":"insert","table":"Root","row":{"name":"a"}},{"op":"insert","table":"Root","row":{"name":"a"}}]`, ErrConstraintViolation},
		{"maxRows", `[{"op":"insert","table":"Root","row":{"name":"a"}},{"op":"insert","table":"Root","row":{"name":"b"}},{"op":"insert","table":"Root","row":{"name":"c"}}]`, ErrConstraintViolation},
		{"duplicate uuid-name", `[{"op":"insert","table":"Child","uuid-name":"x","row":{"label":"a"}},{"op":"insert","table":"Child","uuid-name":"x","row":{"label":"b"}}]`, ErrDuplicateUUIDName},
		{"undeclared name", `[{"op":"insert","table":"Root","row":{"children":["named-uuid","ghost"]}}]`, ErrReferentialIntegrity},
		{"immutable update", `[{"op":"update","table":"Root","where":[],"row":{"flag":true}}]`, ErrConstraintViolation},
		{"wait timeout 0", `[{"op":"wait","table":"Root","where":[],"columns":["name"],"until":"==","rows":[{"name":"zzz"}],"timeout":0}]`, ErrTimedOut},
		{"default outside enum", `[{"op":"insert","table":"Enum","row":{}}]`, ErrConstraintViolation},
		{"missing where", `[{"op":"delete","table":"Root"}]`, ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := newTestDB(t)
			reply, res := run(t, db, tt.ops, TxnOptions{})
			if got := errorTag(reply); got != tt.want {
				t.Fatalf("error %q, want %q; reply %s", got, tt.want, res.Reply)
			}
			if res.Changes != nil || !res.Failed {
				t.Fatal("a failed transaction must not produce changes")
			}
			if rowsOf(db, "Root")+rowsOf(db, "Child") != 0 {
				t.Fatal("a failed transaction changed the database")
			}
			var ops []any
			json.Unmarshal([]byte(tt.ops), &ops)
			if len(reply) < len(ops) {
				t.Fatalf("reply has %d elements for %d operations", len(reply), len(ops))
			}
		})
	}
}

func TestTransactRefsAndGC(t *testing.T) {
	db := newTestDB(t)
	reply, _ := run(t, db, `[
	  {"op":"insert","table":"Root","uuid-name":"r","row":{"name":"a","children":["set",[["named-uuid","c1"],["named-uuid","c2"]]],"watch":["named-uuid","c1"]}},
	  {"op":"insert","table":"Child","uuid-name":"c1","row":{"label":"one"}},
	  {"op":"insert","table":"Child","uuid-name":"c2","row":{"label":"two","peers":["named-uuid","c1"]}},
	  {"op":"insert","table":"Child","uuid-name":"orphan","row":{"label":"gone"}}
	]`, TxnOptions{})
	if e := errorTag(reply); e != "" {
		t.Fatalf("insert failed: %v", reply)
	}
	if n := rowsOf(db, "Child"); n != 2 {
		t.Fatalf("%d Child rows, want 2 (the unreferenced one is garbage)", n)
	}
	c1 := MustParseUUID(reply[1].(map[string]any)["uuid"].([]any)[1].(string))
	// Deleting a strongly referenced row directly fails.
	reply, _ = run(t, db, `[{"op":"delete","table":"Child","where":[["_uuid","==",["uuid","`+c1.String()+`"]]]}]`, TxnOptions{})
	if errorTag(reply) != ErrReferentialIntegrity {
		t.Fatalf("got %v", reply)
	}
	// Dropping c1 from children garbage-collects it and the weak references
	// to it go away from Root.watch and Child.peers.
	reply, _ = run(t, db, `[{"op":"mutate","table":"Root","where":[],"mutations":[["children","delete",["uuid","`+c1.String()+`"]]]}]`, TxnOptions{})
	if errorTag(reply) != "" || reply[0].(map[string]any)["count"] != float64(1) {
		t.Fatalf("mutate: %v", reply)
	}
	if db.Row("Child", c1) != nil {
		t.Fatal("c1 was not garbage collected")
	}
	for _, r := range db.Table("Root").Rows {
		if w := r.Data[db.Schema.Table("Root").Column("watch").Index]; w.Len() != 0 {
			t.Errorf("weak reference survived: %v", w)
		}
	}
	for _, r := range db.Table("Child").Rows {
		if p := r.Data[db.Schema.Table("Child").Column("peers").Index]; p.Len() != 0 {
			t.Errorf("weak peer survived: %v", p)
		}
	}
	// Deleting the root collects everything.
	run(t, db, `[{"op":"delete","table":"Root","where":[]}]`, TxnOptions{})
	if rowsOf(db, "Child") != 0 || len(db.strong) != 0 || len(db.weak) != 0 {
		t.Fatalf("left %d children, %d strong, %d weak", rowsOf(db, "Child"), len(db.strong), len(db.weak))
	}
}

func TestTransactOps(t *testing.T) {
	db := newTestDB(t)
	reply, res := run(t, db, `[
	  {"op":"insert","table":"Root","row":{"name":"a","n":5,"opts":["map",[["k","v"]]]}},
	  {"op":"comment","comment":"hello"},
	  {"op":"commit","durable":true},
	  {"op":"assert","lock":"mine"}
	]`, TxnOptions{HasLock: func(l string) bool { return l == "mine" }})
	if errorTag(reply) != "" || !res.Durable || res.Changes.Comment != "hello" {
		t.Fatalf("reply %v durable %v comment %q", reply, res.Durable, res.Changes.Comment)
	}
	cases := []struct {
		ops  string
		want string // substring of the reply
		err  string
	}{
		{`[{"op":"update","table":"Root","where":[["name","==","a"]],"row":{"n":7}}]`, `{"count":1}`, ""},
		{`[{"op":"select","table":"Root","where":[["n",">",6]],"columns":["name","n"]}]`, `{"rows":[{"name":"a","n":7}]}`, ""},
		{`[{"op":"select","table":"Root","where":[["n","<",6]],"columns":["name"]}]`, `{"rows":[]}`, ""},
		{`[{"op":"mutate","table":"Root","where":[],"mutations":[["n","+=",3],["n","*=",2]]}]`, `{"count":1}`, ""},
		{`[{"op":"select","table":"Root","where":[],"columns":["n"]}]`, `"n":20`, ""},
		{`[{"op":"mutate","table":"Root","where":[],"mutations":[["n","+=",100]]}]`, "", ErrConstraintViolation},
		{`[{"op":"mutate","table":"Root","where":[],"mutations":[["n","/=",0]]}]`, "", ErrDomainError},
		{`[{"op":"mutate","table":"Root","where":[],"mutations":[["n","%=",0]]}]`, "", ErrDomainError},
		{`[{"op":"mutate","table":"Root","where":[],"mutations":[["name","+=",1]]}]`, "", ErrSyntax},
		{`[{"op":"mutate","table":"Root","where":[],"mutations":[["opts","insert",["map",[["k","other"],["k2","v2"]]]]]}]`, `{"count":1}`, ""},
		{`[{"op":"select","table":"Root","where":[["opts","includes",["map",[["k","v"],["k2","v2"]]]]],"columns":["opts"]}]`, `["map",[["k","v"],["k2","v2"]]]`, ""},
		{`[{"op":"mutate","table":"Root","where":[],"mutations":[["opts","delete",["set",["k"]]]]}]`, `{"count":1}`, ""},
		{`[{"op":"select","table":"Root","where":[["opts","excludes",["map",[["k","v"]]]]],"columns":["opts"]}]`, `["map",[["k2","v2"]]]`, ""},
		{`[{"op":"wait","table":"Root","where":[],"columns":["name"],"until":"==","rows":[{"name":"a"}],"timeout":0}]`, `[{}]`, ""},
		{`[{"op":"wait","table":"Root","where":[],"columns":["name"],"until":"!=","rows":[{"name":"a"}],"timeout":0}]`, "", ErrTimedOut},
		{`[{"op":"delete","table":"Root","where":[["name","!=","a"]]}]`, `{"count":0}`, ""},
		{`[{"op":"insert","table":"Root","uuid":"11111111-2222-3333-4444-555555555555","row":{"name":"b"}}]`, `["uuid","11111111-2222-3333-4444-555555555555"]`, ""},
		{`[{"op":"insert","table":"Root","uuid":"11111111-2222-3333-4444-555555555555","row":{"name":"c"}}]`, "", "duplicate uuid"},
	}
	for _, c := range cases {
		reply, res := run(t, db, c.ops, TxnOptions{})
		if got := errorTag(reply); got != c.err {
			t.Errorf("%s: error %q, want %q (%s)", c.ops, got, c.err, res.Reply)
			continue
		}
		if !strings.Contains(string(res.Reply), c.want) {
			t.Errorf("%s: reply %s lacks %s", c.ops, res.Reply, c.want)
		}
	}
}

func TestWaitBlocks(t *testing.T) {
	db := newTestDB(t)
	ops := `[{"op":"wait","table":"Root","where":[],"columns":["name"],"until":"==","rows":[{"name":"x"}],"timeout":1000}]`
	_, res := run(t, db, ops, TxnOptions{})
	if !res.Blocked || res.WaitTimeout.Milliseconds() != 1000 {
		t.Fatalf("want blocked for 1s, got %+v", res)
	}
	reply, _ := run(t, db, ops, TxnOptions{WaitExpired: true})
	if errorTag(reply) != ErrTimedOut {
		t.Fatalf("expired wait: %v", reply)
	}
	run(t, db, `[{"op":"insert","table":"Root","row":{"name":"x"}}]`, TxnOptions{})
	reply, res = run(t, db, ops, TxnOptions{})
	if res.Blocked || errorTag(reply) != "" {
		t.Fatalf("satisfied wait: %v %+v", reply, res)
	}
}

// A timeout in milliseconds too large for a time.Duration must not wrap
// around to a short or negative wait.
func TestWaitHugeTimeout(t *testing.T) {
	db := newTestDB(t)
	for _, ms := range []string{"9223372036854775807", "9223372036854776"} {
		ops := `[{"op":"wait","table":"Root","where":[],"columns":["name"],"until":"==","rows":[{"name":"x"}],"timeout":` + ms + `}]`
		_, res := run(t, db, ops, TxnOptions{})
		if !res.Blocked || (res.WaitTimeout >= 0 && res.WaitTimeout < 100*365*24*time.Hour) {
			t.Errorf("timeout %s ms: want blocked with no limit, got %+v", ms, res)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	db := newTestDB(t)
	_, res := run(t, db, `[{"op":"insert","table":"Root","uuid-name":"r","row":{"name":"a","tmp":3,"children":["named-uuid","c"],"opts":["map",[["a","b"]]]}},
	  {"op":"insert","table":"Child","uuid-name":"c","row":{"label":"x"}}]`, TxnOptions{})
	rec1 := res.Changes.Record(db.Schema)
	_, res = run(t, db, `[{"op":"update","table":"Root","where":[],"row":{"n":4,"tmp":9}}]`, TxnOptions{})
	rec2 := res.Changes.Record(db.Schema)
	for _, row := range rec2["Root"] {
		if strings.Contains(string(row), "tmp") || strings.Contains(string(row), "name") {
			t.Errorf("modified row record %s must hold only changed persistent columns", row)
		}
	}
	replay := NewDatabase(db.Schema)
	for _, rec := range []map[string]map[string]json.RawMessage{rec1, rec2} {
		if err := replay.ApplyRecord(rec, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range db.Schema.TableNames {
		a, b := db.Table(name), replay.Table(name)
		if len(a.Rows) != len(b.Rows) {
			t.Fatalf("%s: %d rows vs %d", name, len(a.Rows), len(b.Rows))
		}
		for u, r := range a.Rows {
			r2 := b.Rows[u]
			for _, c := range a.Schema.Columns {
				if c.Ephemeral {
					continue
				}
				if !r.Data[c.Index].Equal(r2.Data[c.Index]) {
					t.Errorf("%s %s column %s differs after replay", name, u, c.Name)
				}
			}
		}
	}
}

func TestDiff(t *testing.T) {
	s := MustParseSchema([]byte(testSchema))
	opts := &s.Table("Root").Column("opts").Type
	m := func(kv ...string) Datum {
		var k, v []Atom
		for i := 0; i < len(kv); i += 2 {
			k, v = append(k, String(kv[i])), append(v, String(kv[i+1]))
		}
		return Map(k, v)
	}
	old, new := m("a", "1", "b", "2", "c", "3"), m("b", "2", "c", "4", "d", "5")
	diff := Diff(old, new, opts)
	if want := m("a", "1", "c", "4", "d", "5"); !diff.Equal(want) {
		t.Fatalf("diff %v, want %v", diff, want)
	}
	if got := ApplyDiff(old, diff, opts); !got.Equal(new) {
		t.Fatalf("applying the diff gives %v, want %v", got, new)
	}
}

func TestApplyDiff(t *testing.T) {
	strs := func(ss ...string) []Atom {
		var out []Atom
		for _, s := range ss {
			out = append(out, String(s))
		}
		return out
	}
	setType := &ColumnType{Key: NewBaseType(TypeString), Min: 0, Max: Unlimited}
	valueType := NewBaseType(TypeString)
	mapType := &ColumnType{Key: NewBaseType(TypeString), Value: &valueType, Min: 0, Max: Unlimited}
	optType := &ColumnType{Key: NewBaseType(TypeString), Min: 0, Max: 1}
	tests := []struct {
		name      string
		old, diff Datum
		ct        *ColumnType
		want      Datum
	}{
		{"set add", Set(strs("a")...), Set(strs("b")...), setType, Set(strs("a", "b")...)},
		{"set remove", Set(strs("a", "b")...), Set(strs("a")...), setType, Set(strs("b")...)},
		{"set toggle both", Set(strs("a")...), Set(strs("a", "b")...), setType, Set(strs("b")...)},
		{"set from empty", Datum{}, Set(strs("x")...), setType, Set(strs("x")...)},
		{"map add", Map(strs("a"), strs("1")), Map(strs("b"), strs("2")), mapType, Map(strs("a", "b"), strs("1", "2"))},
		{"map remove same pair", Map(strs("a", "b"), strs("1", "2")), Map(strs("a"), strs("1")), mapType, Map(strs("b"), strs("2"))},
		{"map change value", Map(strs("a", "b"), strs("1", "2")), Map(strs("b"), strs("3")), mapType, Map(strs("a", "b"), strs("1", "3"))},
		{"map all at once", Map(strs("a", "b", "c"), strs("1", "2", "3")), Map(strs("a", "c", "d"), strs("1", "9", "4")), mapType, Map(strs("b", "c", "d"), strs("2", "9", "4"))},
		{"map from empty", Datum{}, Map(strs("k"), strs("v")), mapType, Map(strs("k"), strs("v"))},
		{"optional replaced", Set(strs("a")...), Set(strs("b")...), optType, Set(strs("b")...)},
		{"optional cleared", Set(strs("a")...), Set(), optType, Set()},
	}
	for _, tt := range tests {
		got := ApplyDiff(tt.old, tt.diff, tt.ct)
		if !got.Equal(tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// An optional column's difference is its new value, as ovsdb-server sends
// it: a two-atom symmetric difference would violate the column's max of 1
// and real ovsdb-idl clients would drop the update.
func TestDiffOptional(t *testing.T) {
	s := MustParseSchema([]byte(testSchema))
	color := &s.Table("Root").Column("color").Type
	red, green, none := Set(String("red")), Set(String("green")), Set()
	for _, tc := range []struct{ old, new Datum }{
		{red, green}, {green, none}, {none, red},
	} {
		diff := Diff(tc.old, tc.new, color)
		if !diff.Equal(tc.new) {
			t.Errorf("Diff(%v, %v) = %v, want the new value", tc.old, tc.new, diff)
		}
		if got := ApplyDiff(tc.old, diff, color); !got.Equal(tc.new) {
			t.Errorf("applying %v to %v gives %v, want %v", diff, tc.old, got, tc.new)
		}
	}
}

func FuzzTransact(f *testing.F) {
	for _, seed := range []string{
		`[{"op":"insert","table":"Root","uuid-name":"r","row":{"name":"a","children":["named-uuid","c"]}},{"op":"insert","table":"Child","uuid-name":"c","row":{"label":"x"}}]`,
		`[{"op":"mutate","table":"Root","where":[["n","<",3]],"mutations":[["n","/=",-1],["opts","delete",["set",["a"]]]]}]`,
		`[{"op":"wait","table":"Child","where":[],"columns":["label"],"until":"!=","rows":[{"label":"q"}],"timeout":0}]`,
		`[{"op":"update","table":"Root","where":[["_uuid","==",["named-uuid","zz"]]],"row":{"r":1.5}},{"op":"select","table":"Root","where":[true]}]`,
		`[{"op":"delete","table":"Child","where":[["peers","includes",["set",[]]]]},{"op":"comment","comment":"c"},{"op":"commit","durable":false}]`,
	} {
		f.Add(seed)
	}
	// Inserts for insertText, and near misses that it leaves to the
	// generic path.
	for _, insert := range insertTextCases {
		f.Add(`[` + insert + `,{"op":"insert","table":"Child","uuid-name":"c","row":{"label":"c"}}]`)
	}
	f.Fuzz(func(t *testing.T, in string) {
		v, err := DecodeJSON([]byte(in))
		if err != nil {
			return
		}
		ops, ok := v.([]any)
		if !ok {
			return
		}
		// The same operations with every datum array and operation kept
		// as text must get the same replies, UUIDs aside; and so must
		// they on another database in the same state: the reply may not
		// depend on map order.
		rv, err := parseJSONWith([]byte(in), 1, 1)
		if err != nil {
			t.Fatalf("with raw values: %v", err)
		}
		rawOps := rv.([]any)
		db, rawDB, again := newTestDB(t), newTestDB(t), newTestDB(t)
		uuids := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
		for i := 0; i < 2; i++ {
			res := db.Transact(ops, TxnOptions{WaitExpired: true})
			if !json.Valid(res.Reply) {
				t.Fatalf("invalid reply %q", res.Reply)
			}
			if res.Changes != nil {
				db.Apply(res.Changes)
			}
			againRes := again.Transact(ops, TxnOptions{WaitExpired: true})
			if got, want := uuids.ReplaceAll(againRes.Reply, nil), uuids.ReplaceAll(res.Reply, nil); string(got) != string(want) {
				t.Fatalf("%s: the same request got reply %s, then %s", in, res.Reply, againRes.Reply)
			}
			if againRes.Changes != nil {
				again.Apply(againRes.Changes)
			}
			rawRes := rawDB.Transact(rawOps, TxnOptions{WaitExpired: true})
			if got, want := uuids.ReplaceAll(rawRes.Reply, nil), uuids.ReplaceAll(res.Reply, nil); string(got) != string(want) {
				t.Fatalf("%s: with raw values, reply %s; generic %s", in, rawRes.Reply, res.Reply)
			}
			if rawRes.Changes != nil {
				rawDB.Apply(rawRes.Changes)
			}
			if got, want := contentsText(rawDB, uuids), contentsText(db, uuids); got != want {
				t.Fatalf("%s: with raw values, contents\n%s\ngeneric\n%s", in, got, want)
			}
		}
	})
}

// contentsText is db's rows as text, UUIDs left out, sorted.
func contentsText(db *Database, uuids *regexp.Regexp) string {
	var rows []string
	for _, name := range db.Schema.TableNames {
		ts := db.Schema.Tables[name]
		for _, r := range db.Table(name).Rows {
			rows = append(rows, name+" "+string(uuids.ReplaceAll(r.AppendJSON(nil, ts, nil), nil)))
		}
	}
	slices.Sort(rows)
	return strings.Join(rows, "\n")
}

// insertTextCases are insert operations for insertText; those before the
// empty string it executes itself, the others it leaves to the generic
// path.
var insertTextCases = []string{
	`{"op":"insert","table":"Root","row":{"name":"a"}}`,
	`{"op":"insert","table":"Root","uuid-name":"r","row":{"name":"a\n\"\u00e9\ud83d\ude00","n":7,"r":-1.25,"color":"red","flag":true,"tmp":-3,"opts":["map",[["z","1"],["a","2"]]],"children":["named-uuid","c"]}}`,
	` { "table" : "Child" , "row" : { "label" : "xy" , "peers" : ["set", [["named-uuid", "c"]]] } , "op" : "insert" , "uuid-name" : "d" } `,
	`{"op":"insert","table":"Root","row":{"name":"b","children":["set",[]],"opts":["map",[]],"color":["set",["green"]],"watch":["uuid","01234567-89ab-cdef-0123-456789abcdef"]}}`,
	`{"op":"insert","table":"Enum","row":{"kind":"b"}}`,
	`{"op":"insert","table":"Child","row":{"label":"\u0000\t"}}`,
	`{"op":"insert","table":"Root","row":{"name":"a"}} `,
	`{"op":"insert","table":"Root","row":{}}`,
	"",
	`{"op":"insert","table":"Enum","row":{}}`,
	`{"op":"insert","table":"Root","row":{"children":["set",[["named-uuid","c"],["named-uuid","c"]]]}}`,
	`{"op":"insert","table":"Root","row":{"opts":["map",[["a","1"],["a","2"]]]}}`,
	`{"op":"insert","table":"Root","row":{"color":["set",["red","green"]]}}`,
	`{"op":"insert","table":"Root","row":{"color":"blue"}}`,
	`{"op":"insert","table":"Root","row":{"n":101}}`,
	`{"op":"insert","table":"Root","row":{"n":1.5}}`,
	`{"op":"insert","table":"Root","row":{"name":"a","name":"b"}}`,
	`{"op":"insert","table":"Root","row":{"nope":1}}`,
	`{"op":"insert","table":"Root","row":{"_uuid":["uuid","01234567-89ab-cdef-0123-456789abcdef"]}}`,
	`{"op":"insert","table":"Root","uuid":"01234567-89ab-cdef-0123-456789abcdef","row":{}}`,
	`{"op":"insert","table":"Root","uuid-name":"c","row":{}}`,
	`{"op":"insert","table":"Root","uuid-name":"9x","row":{}}`,
	`{"op":"insert","table":"Root","row":{"children":["named-uuid","9x"]}}`,
	`{"op":"insert","table":"Root","row":{"children":["uuid","nope"]}}`,
	`{"op":"insert","table":"Child","row":{"label":""}}`,
	`{"op":"insert","table":"Child","row":{"label":"abcde"}}`,
	`{"op":"insert","table":"Child","row":{"peers":["set",[["uuid","01234567-89ab-cdef-0123-456789abcdef"],["uuid","01234567-89ab-cdef-0123-456789abcde0"],["uuid","01234567-89ab-cdef-0123-456789abcde1"]]]}}`,
	`{"op":"insert","table":"Nope","row":{}}`,
	`{"op":"insert","row":{}}`,
	`{"op":"insert","table":"Root","row":[]}`,
	`{"op":"insert","table":"Root","row":{},"extra":1}`,
	`{"op":"insert","op":"insert","table":"Root","row":{}}`,
	`{"op":"insert","table":"Root","row":{"name":"a"}} x`,
	`{"op":"insert","table":"Root","row":{"opts":["map",[["a"]]]}}`,
	`{"op":"insert","table":"Root","row":{"opts":["set",[]]}}`,
	`{"op":"insert","table":"Root","row":{"children":["set",[["named-uuid","c"],["uuid","01234567-89ab-cdef-0123-456789abcdef"]]]}}`,
}

// TestInsertText checks which inserts insertText executes itself (the
// fuzz target FuzzTransact compares its results with the generic path's).
func TestInsertText(t *testing.T) {
	handled := true
	for _, op := range insertTextCases {
		if op == "" {
			handled = false
			continue
		}
		db := newTestDB(t)
		tx := &txn{db: db, changes: map[*TableSchema]map[UUID]*RowChange{}, names: map[string]UUID{}, inserted: map[string]bool{}}
		tx.names["c"] = NewUUID()
		tx.inserted["c"] = true
		reply, ok := tx.insertText(nil, []byte(op))
		if ok != handled {
			t.Errorf("%s: handled %t, want %t", op, ok, handled)
		}
		if !ok && (len(reply) != 0 || len(tx.changes) != 0 || len(tx.names) != 1) {
			t.Errorf("%s: not handled, but reply %q, changes %v, names %v", op, reply, tx.changes, tx.names)
		}
	}
}

func TestReadOnly(t *testing.T) {
	db := newTestDB(t)
	run(t, db, `[{"op":"insert","table":"Root","row":{"name":"a"}}]`, TxnOptions{})
	ro := TxnOptions{ReadOnly: true}
	for _, op := range []string{
		`{"op":"insert","table":"Root","row":{"name":"b"}}`,
		`{"op":"update","table":"Root","where":[],"row":{"n":1}}`,
		`{"op":"mutate","table":"Root","where":[],"mutations":[["n","+=",1]]}`,
		`{"op":"delete","table":"Root","where":[]}`,
	} {
		reply, _ := run(t, db, "["+op+"]", ro)
		if errorTag(reply) != ErrNotAllowed {
			t.Errorf("%s: %v", op, reply)
		}
	}
	reply, _ := run(t, db, `[{"op":"select","table":"Root","where":[],"columns":["name"]}]`, ro)
	if errorTag(reply) != "" {
		t.Errorf("select in a read-only database: %v", reply)
	}
}

// TestWaitWithoutColumns follows ovsdb-server: without "columns" whole
// rows are compared, so only an empty "rows" can match.
func TestWaitWithoutColumns(t *testing.T) {
	db := newTestDB(t)
	empty := `[{"op":"wait","table":"Root","where":[],"until":"==","rows":[],"timeout":0}]`
	if reply, _ := run(t, db, empty, TxnOptions{}); errorTag(reply) != "" {
		t.Fatalf("empty table: %v", reply)
	}
	run(t, db, `[{"op":"insert","table":"Root","row":{"name":"a"}}]`, TxnOptions{})
	if reply, _ := run(t, db, empty, TxnOptions{}); errorTag(reply) != ErrTimedOut {
		t.Fatalf("non-empty table: %v", reply)
	}
	same := `[{"op":"wait","table":"Root","where":[],"until":"==","rows":[{"name":"a"}],"timeout":0}]`
	if reply, _ := run(t, db, same, TxnOptions{}); errorTag(reply) != ErrTimedOut {
		t.Fatalf("rows without _uuid cannot match whole rows: %v", reply)
	}
}

// TestAppendRecordMatchesRecord checks that AppendRecord writes what the
// storage writes for Record's map: tables and rows sorted, a deleted row
// null, a row or table with nothing persistent to write left out.
func TestAppendRecordMatchesRecord(t *testing.T) {
	db := newTestDB(t)
	for _, ops := range []string{
		`[{"op":"insert","table":"Root","uuid-name":"r","row":{"name":"a","tmp":3,"children":["set",[["named-uuid","c"],["named-uuid","d"]]],"opts":["map",[["a","b\n\"x"]]],"r":0.5}},
		  {"op":"insert","table":"Child","uuid-name":"c","row":{"label":"x"}},
		  {"op":"insert","table":"Child","uuid-name":"d","row":{"label":"y","peers":["named-uuid","c"]}},
		  {"op":"insert","table":"Enum","row":{"kind":"a"}},
		  {"op":"insert","table":"Enum","row":{"kind":"b"}}]`,
		`[{"op":"update","table":"Root","where":[],"row":{"n":4,"tmp":9}}]`,
		`[{"op":"update","table":"Root","where":[],"row":{"tmp":10}}]`,
		`[{"op":"update","table":"Root","where":[],"row":{"tmp":11,"children":["set",[]]}},{"op":"delete","table":"Enum","where":[["kind","==","a"]]}]`,
	} {
		_, res := run(t, db, ops, TxnOptions{})
		if res.Changes == nil {
			t.Fatalf("%s: no changes: %s", ops, res.Reply)
		}
		var want []byte
		rec := res.Changes.Record(db.Schema)
		for _, table := range slices.Sorted(maps.Keys(rec)) {
			want = append(want, ',')
			want = AppendJSONString(want, table)
			want = append(want, ":{"...)
			for i, id := range slices.Sorted(maps.Keys(rec[table])) {
				if i > 0 {
					want = append(want, ',')
				}
				want = AppendJSONString(want, id)
				want = append(want, ':')
				if row := rec[table][id]; row == nil {
					want = append(want, "null"...)
				} else {
					want = append(want, row...)
				}
			}
			want = append(want, '}')
		}
		got := res.Changes.AppendRecord([]byte("x"), db.Schema)
		if string(got) != "x"+string(want) {
			t.Errorf("%s:\nAppendRecord %s\nRecord       x%s", ops, got, want)
		}
	}
}
