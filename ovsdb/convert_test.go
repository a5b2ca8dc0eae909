package ovsdb

import (
	"fmt"
	"strings"
	"testing"
)

// convertOldSchema is the schema the conversion tests start from.
const convertOldSchema = `{"name":"C","version":"1.0.0","tables":{
 "Sw":{"isRoot":true,"columns":{
   "name":{"type":"string"},
   "tags":{"type":{"key":"string","min":0,"max":"unlimited"}},
   "mode":{"type":{"key":{"type":"string","enum":["set",["a","b","c"]]}}},
   "n":{"type":"integer"},
   "ports":{"type":{"key":{"type":"uuid","refTable":"Port"},"min":0,"max":"unlimited"}},
   "gone":{"type":"string"}}},
 "Port":{"columns":{"name":{"type":"string"}}},
 "Old":{"isRoot":true,"columns":{"x":{"type":"integer"}}}}}`

// convertSchema returns convertOldSchema's text with Sw's columns replaced.
func convertSchema(version, swColumns string) string {
	return `{"name":"C","version":"` + version + `","tables":{
 "Sw":{"isRoot":true,"columns":{` + swColumns + `}},
 "Port":{"columns":{"name":{"type":"string"}}}}}`
}

const swKept = `"name":{"type":"string"},
   "ports":{"type":{"key":{"type":"uuid","refTable":"Port"},"min":0,"max":"unlimited"}},
   "n":{"type":"integer"},`

func filledConvertDB(t *testing.T) *Database {
	t.Helper()
	db := NewDatabase(MustParseSchema([]byte(convertOldSchema)))
	reply, _ := run(t, db, `[
	 {"op":"insert","table":"Port","row":{"name":"p1"},"uuid-name":"p1"},
	 {"op":"insert","table":"Port","row":{"name":"p2"},"uuid-name":"p2"},
	 {"op":"insert","table":"Sw","row":{"name":"s1","tags":["set",["x","y"]],"mode":"b","n":5,"gone":"bye",
	   "ports":["set",[["named-uuid","p1"],["named-uuid","p2"]]]}},
	 {"op":"insert","table":"Sw","row":{"name":"s2","tags":"z","mode":"c","n":7}},
	 {"op":"insert","table":"Old","row":{"x":1}}]`, TxnOptions{})
	if tag := errorTag(reply); tag != "" {
		t.Fatalf("filling test db: %v", reply)
	}
	return db
}

func swByName(t *testing.T, db *Database, name string) *Row {
	t.Helper()
	ts := db.Schema.Table("Sw")
	for _, r := range db.Table("Sw").Rows {
		if r.Get(ts.Column("name")).Keys[0].String() == name {
			return r
		}
	}
	t.Fatalf("no Sw row %q", name)
	return nil
}

func TestConvert(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		wantErr string // substring of the error; "" for success
		check   func(t *testing.T, old, db *Database)
	}{
		{
			name: "drop column and table, add column with default",
			schema: convertSchema("1.1.0", swKept+`
   "tags":{"type":{"key":"string","min":0,"max":"unlimited"}},
   "mode":{"type":{"key":{"type":"string","enum":["set",["a","b","c"]]}}},
   "added":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},
   "weight":{"type":"integer"}`),
			check: func(t *testing.T, old, db *Database) {
				if db.Table("Old") != nil {
					t.Error("table Old survived")
				}
				ts := db.Schema.Table("Sw")
				if ts.Column("gone") != nil {
					t.Error("column gone survived")
				}
				s1 := swByName(t, db, "s1")
				if got := s1.Get(ts.Column("weight")); !got.Equal(Scalar(Integer(0))) {
					t.Errorf("weight = %v, want 0", got)
				}
				if got := s1.Get(ts.Column("added")); got.Len() != 0 {
					t.Errorf("added = %v, want empty", got)
				}
				if got := s1.Get(ts.Column("tags")); got.Len() != 2 {
					t.Errorf("tags = %v, want 2 elements", got)
				}
				if old.Row("Sw", s1.UUID) == nil {
					t.Error("row UUID changed")
				}
				if got := s1.Get(ts.Column("ports")); got.Len() != 2 || db.Row("Port", got.Keys[0].UUID()) == nil {
					t.Errorf("ports = %v, want the two Port rows", got)
				}
			},
		},
		{
			name: "set max grows, scalar becomes optional",
			schema: convertSchema("1.1.0", `"name":{"type":"string"},
   "ports":{"type":{"key":{"type":"uuid","refTable":"Port"},"min":0,"max":"unlimited"}},
   "n":{"type":{"key":"integer","min":0,"max":1}},
   "tags":{"type":{"key":"string","min":0,"max":10}}`),
			check: func(t *testing.T, _, db *Database) {
				ts := db.Schema.Table("Sw")
				if got := swByName(t, db, "s2").Get(ts.Column("n")); !got.Equal(Scalar(Integer(7))) {
					t.Errorf("n = %v, want 7", got)
				}
			},
		},
		{
			name: "set max shrinks below a value",
			schema: convertSchema("2.0.0", swKept+`
   "tags":{"type":{"key":"string","min":0,"max":1}}`),
			wantErr: "column tags",
		},
		{
			name: "enum narrowed below a value",
			schema: convertSchema("2.0.0", swKept+`
   "mode":{"type":{"key":{"type":"string","enum":["set",["a","b"]]}}}`),
			wantErr: "column mode",
		},
		{
			name: "enum widened",
			schema: convertSchema("1.1.0", swKept+`
   "mode":{"type":{"key":{"type":"string","enum":["set",["a","b","c","d"]]}}}`),
			check: func(t *testing.T, _, db *Database) {
				ts := db.Schema.Table("Sw")
				if got := swByName(t, db, "s2").Get(ts.Column("mode")); !got.Equal(Scalar(String("c"))) {
					t.Errorf("mode = %v, want c", got)
				}
			},
		},
		{
			name: "integer range narrowed below a value",
			schema: convertSchema("2.0.0", `"name":{"type":"string"},
   "ports":{"type":{"key":{"type":"uuid","refTable":"Port"},"min":0,"max":"unlimited"}},
   "n":{"type":{"key":{"type":"integer","maxInteger":6}}}`),
			wantErr: "column n",
		},
		{
			name: "type change integer to string fails",
			schema: convertSchema("2.0.0", `"name":{"type":"string"},
   "ports":{"type":{"key":{"type":"uuid","refTable":"Port"},"min":0,"max":"unlimited"}},
   "n":{"type":"string"}`),
			wantErr: "column n",
		},
		{
			name:   "dropping the referencing column collects the referenced rows",
			schema: convertSchema("2.0.0", `"name":{"type":"string"}`),
			check: func(t *testing.T, _, db *Database) {
				if n := len(db.Table("Port").Rows); n != 0 {
					t.Errorf("%d Port rows left, want 0 (garbage collected)", n)
				}
			},
		},
		{
			name: "table becomes root with a unique index that holds",
			schema: `{"name":"C","version":"2.0.0","tables":{
 "Sw":{"isRoot":true,"columns":{"name":{"type":"string"},"ports":{"type":{"key":{"type":"uuid","refTable":"Port"},"min":0,"max":"unlimited"}}}},
 "Port":{"isRoot":true,"indexes":[["name"]],"columns":{"name":{"type":"string"}}},
 "Dup":{"isRoot":true,"columns":{"x":{"type":"integer"}}}}}`,
			check: func(t *testing.T, _, db *Database) {
				if n := len(db.Table("Port").Rows); n != 2 {
					t.Errorf("%d Port rows, want 2", n)
				}
			},
		},
		{
			name: "new required reference column has no target",
			schema: `{"name":"C","version":"2.0.0","tables":{
 "Sw":{"isRoot":true,"columns":{"name":{"type":"string"},"ports":{"type":{"key":{"type":"uuid","refTable":"Port"},"min":0,"max":"unlimited"}},"x":{"type":{"key":{"type":"uuid","refTable":"Port"}}}}},
 "Port":{"columns":{"name":{"type":"string"}}}}}`,
			wantErr: "nonexistent row",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := filledConvertDB(t)
			before := len(old.Table("Sw").Rows) + len(old.Table("Port").Rows) + len(old.Table("Old").Rows)
			s, err := ParseSchema([]byte(tc.schema))
			if err != nil {
				t.Fatalf("test schema: %v", err)
			}
			db, err := old.Convert(s)
			if after := len(old.Table("Sw").Rows) + len(old.Table("Port").Rows) + len(old.Table("Old").Rows); after != before || old.Schema.Version != "1.0.0" {
				t.Fatalf("Convert changed the source database")
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Convert error = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			if db.Schema != s {
				t.Error("converted database has the wrong schema")
			}
			tc.check(t, old, db)
			// The converted database takes ordinary transactions and finds
			// rows by value (its indexes were built).
			reply, _ := run(t, db, `[{"op":"update","table":"Sw","where":[["name","==","s1"]],"row":{"name":"s3"}}]`, TxnOptions{})
			if tag := errorTag(reply); tag != "" {
				t.Errorf("update after conversion: %v", reply)
			} else if reply[0].(map[string]any)["count"] != 1.0 {
				t.Errorf("update after conversion: %v, want count 1", reply)
			}
		})
	}
}

func TestConvertDuplicateUnderNewIndexFails(t *testing.T) {
	db := NewDatabase(MustParseSchema([]byte(convertOldSchema)))
	run(t, db, `[{"op":"insert","table":"Old","row":{"x":1}},{"op":"insert","table":"Old","row":{"x":1}}]`, TxnOptions{})
	s := MustParseSchema([]byte(`{"name":"C","version":"2","tables":{"Old":{"isRoot":true,"indexes":[["x"]],"columns":{"x":{"type":"integer"}}}}}`))
	if _, err := db.Convert(s); err == nil || !strings.Contains(err.Error(), "identical values") {
		t.Fatalf("Convert error = %v, want an index violation", err)
	}
}

func TestSchemasEqual(t *testing.T) {
	a := `{"name":"C","version":"1","tables":{"T":{"columns":{"x":{"type":"integer"}}}}}`
	b := "{\n \"tables\": {\"T\": {\"columns\": {\"x\": {\"type\": \"integer\"}}}},\n \"version\": \"1\", \"name\": \"C\"}"
	c := strings.Replace(a, `"1"`, `"2"`, 1)
	for _, tc := range []struct {
		x, y string
		want bool
	}{{a, b, true}, {a, c, false}} {
		got, err := SchemasEqual([]byte(tc.x), []byte(tc.y))
		if err != nil || got != tc.want {
			t.Errorf("SchemasEqual(%s, %s) = %v, %v; want %v", tc.x, tc.y, got, err, tc.want)
		}
	}
	if _, err := SchemasEqual([]byte("{"), []byte(a)); err == nil {
		t.Error("SchemasEqual accepted broken JSON")
	}
}

// FuzzConvert converts a filled database to arbitrary schemas: a schema
// that parses must either convert or fail with an error, never panic, and
// a converted database must keep every row it kept under its new schema.
func FuzzConvert(f *testing.F) {
	f.Add([]byte(convertOldSchema))
	f.Add([]byte(convertSchema("2", swKept+`"tags":{"type":{"key":"string","min":0,"max":1}}`)))
	f.Add([]byte(convertSchema("2", `"name":{"type":{"key":"integer","min":0,"max":1}},"mode":{"type":{"key":"string","value":"integer","min":0,"max":"unlimited"}}`)))
	f.Add([]byte(`{"name":"C","tables":{"Port":{"isRoot":true,"columns":{"name":{"type":{"key":{"type":"string","maxLength":1}}}}}}}`))
	f.Fuzz(func(t *testing.T, text []byte) {
		s, err := ParseSchema(text)
		if err != nil {
			return
		}
		old := filledConvertDB(t)
		db, err := old.Convert(s)
		if err != nil {
			return
		}
		for _, name := range s.TableNames {
			ot := old.Table(name)
			for u, r := range db.Table(name).Rows {
				if ot == nil || ot.Rows[u] == nil {
					t.Fatalf("table %s row %s appeared from nowhere", name, u)
				}
				if len(r.Data) != len(s.Tables[name].Columns) {
					t.Fatalf("table %s row %s has %d values for %d columns", name, u, len(r.Data), len(s.Tables[name].Columns))
				}
			}
		}
	})
}

// BenchmarkConvert converts 10000 rows whose set column changes type, so
// every value is re-read under the new type.
func BenchmarkConvert(b *testing.B) {
	old := MustParseSchema([]byte(`{"name":"B","tables":{"T":{"isRoot":true,"columns":{"name":{"type":"string"},"tags":{"type":{"key":"string","min":0,"max":"unlimited"}}}}}}`))
	s := MustParseSchema([]byte(`{"name":"B","tables":{"T":{"isRoot":true,"columns":{"name":{"type":"string"},"tags":{"type":{"key":"string","min":0,"max":8}},"n":{"type":"integer"}}}}}`))
	db := NewDatabase(old)
	cs := &ChangeSet{Tables: map[string]map[UUID]*RowChange{"T": {}}}
	ts := old.Table("T")
	for i := range 10000 {
		r := NewRow(ts, NewUUID())
		r.Data[ts.Column("name").Index] = Scalar(String(fmt.Sprint("row", i)))
		r.Data[ts.Column("tags").Index] = Set(String("a"), String(fmt.Sprint(i)))
		cs.Tables["T"][r.UUID] = &RowChange{New: r}
	}
	db.Apply(cs)
	b.ResetTimer()
	for b.Loop() {
		if _, err := db.Convert(s); err != nil {
			b.Fatal(err)
		}
	}
}
