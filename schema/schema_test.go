package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// installed maps each embedded schema to the file OVN 23.03 / OVS 3.1
// install, which govn's schema must match in substance.
var installed = map[string]string{
	"nb":      "/usr/share/ovn/ovn-nb.ovsschema",
	"sb":      "/usr/share/ovn/ovn-sb.ovsschema",
	"vswitch": "/usr/share/openvswitch/vswitch.ovsschema",
}

// TestMatchesInstalled compares every table and column of govn's schemas
// with the installed OVN/OVS schema, after normalizing both to their
// meaning (defaults made explicit, enums as sorted sets, indexes as sorted
// column sets), so layout may differ but substance may not.
func TestMatchesInstalled(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			ref, err := os.ReadFile(installed[name])
			if os.IsNotExist(err) {
				t.Skipf("%s not installed", installed[name])
			}
			if err != nil {
				t.Fatal(err)
			}
			want := mustMeaning(t, ref)
			got := mustMeaning(t, MustLookup(name))
			if got.name != want.name || got.version != want.version {
				t.Errorf("name/version = %s %s, want %s %s", got.name, got.version, want.name, want.version)
			}
			for tn := range want.tables {
				if _, ok := got.tables[tn]; !ok {
					t.Errorf("table %s missing", tn)
				}
			}
			for tn, gt := range got.tables {
				wt, ok := want.tables[tn]
				if !ok {
					t.Errorf("table %s is not in %s", tn, installed[name])
					continue
				}
				if gt.isRoot != wt.isRoot || gt.maxRows != wt.maxRows {
					t.Errorf("table %s: isRoot/maxRows = %v/%d, want %v/%d", tn, gt.isRoot, gt.maxRows, wt.isRoot, wt.maxRows)
				}
				if !reflect.DeepEqual(gt.indexes, wt.indexes) {
					t.Errorf("table %s: indexes = %v, want %v", tn, gt.indexes, wt.indexes)
				}
				for cn := range wt.columns {
					if _, ok := gt.columns[cn]; !ok {
						t.Errorf("column %s.%s missing", tn, cn)
					}
				}
				for cn, gc := range gt.columns {
					wc, ok := wt.columns[cn]
					if !ok {
						t.Errorf("column %s.%s is not in %s", tn, cn, installed[name])
					} else if gc != wc {
						t.Errorf("column %s.%s = %+v, want %+v", tn, cn, gc, wc)
					}
				}
			}
			if len(got.tables) == 0 {
				t.Error("no tables")
			}
		})
	}
}

// TestCanonicalLayout checks that each embedded file is already in the
// layout Format produces, so hand edits keep the files uniform.
func TestCanonicalLayout(t *testing.T) {
	for _, name := range Names() {
		b := MustLookup(name)
		f, err := Format(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(f, b) {
			t.Errorf("%s is not in canonical layout; rewrite it with Format", name)
		}
	}
}

// TestRealToolAcceptsSchemas has the real ovsdb-tool create a database from
// each embedded schema and read back its name and version.
func TestRealToolAcceptsSchemas(t *testing.T) {
	tool, err := exec.LookPath("ovsdb-tool")
	if err != nil {
		t.Skip("ovsdb-tool not installed")
	}
	dir := t.TempDir()
	for _, name := range Names() {
		b := MustLookup(name)
		m := mustMeaning(t, b)
		sf := filepath.Join(dir, name+".ovsschema")
		if err := os.WriteFile(sf, b, 0o644); err != nil {
			t.Fatal(err)
		}
		db := filepath.Join(dir, name+".db")
		if out, err := exec.Command(tool, "create", db, sf).CombinedOutput(); err != nil {
			t.Fatalf("ovsdb-tool create %s: %v: %s", name, err, out)
		}
		out, err := exec.Command(tool, "db-name", db).Output()
		if err != nil || strings.TrimSpace(string(out)) != m.name {
			t.Errorf("ovsdb-tool db-name %s = %q, %v; want %s", name, out, err, m.name)
		}
		out, err = exec.Command(tool, "db-version", db).Output()
		if err != nil || strings.TrimSpace(string(out)) != m.version {
			t.Errorf("ovsdb-tool db-version %s = %q, %v; want %s", name, out, err, m.version)
		}
	}
}

func TestLookup(t *testing.T) {
	if got := Names(); !slices.Equal(got, []string{"nb", "sb", "vswitch"}) {
		t.Errorf("Names() = %v", got)
	}
	wantNames := map[string]string{"nb": "OVN_Northbound", "sb": "OVN_Southbound", "vswitch": "Open_vSwitch"}
	for short, full := range wantNames {
		b, err := Lookup(short)
		if err != nil {
			t.Fatal(err)
		}
		if m := mustMeaning(t, b); m.name != full {
			t.Errorf("Lookup(%q) is schema %q, want %q", short, m.name, full)
		}
		b[0] = 'X' // callers own their copy
		if again := MustLookup(short); again[0] != '{' {
			t.Errorf("Lookup(%q) shares its bytes with callers", short)
		}
	}
	for _, bad := range []string{"", "NB", "ovn-nb", "../nb"} {
		if _, err := Lookup(bad); err == nil {
			t.Errorf("Lookup(%q) succeeded", bad)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`{"name":"x","version":"1.0.0","cksum":"1 2","tables":{"T":{"columns":{"b":{"type":"integer"},"a":{"type":{"key":"real","min":0}}}}}}`,
			"{\n  \"name\": \"x\",\n  \"tables\": {\n    \"T\": {\n      \"columns\": {\n" +
				"        \"a\": {\"type\": {\"key\": \"real\", \"min\": 0}},\n        \"b\": {\"type\": \"integer\"}\n      }\n    }\n  },\n" +
				"  \"version\": \"1.0.0\"\n}\n"},
		{`{"n": 18446744073709551615}`, "{\n  \"n\": 18446744073709551615\n}\n"},
	}
	for _, tt := range tests {
		got, err := Format([]byte(tt.in))
		if err != nil {
			t.Fatalf("Format(%s): %v", tt.in, err)
		}
		if string(got) != tt.want {
			t.Errorf("Format(%s) =\n%s\nwant\n%s", tt.in, got, tt.want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"a":1} {}`, `{"a":`, `"s"`} {
		if _, err := Format([]byte(bad)); err == nil {
			t.Errorf("Format(%q) succeeded", bad)
		}
	}
}

// FuzzFormat checks that Format never panics, that its output is valid JSON
// with the same content (less "cksum"), and that it is idempotent.
func FuzzFormat(f *testing.F) {
	for _, name := range Names() {
		f.Add(MustLookup(name))
	}
	f.Add([]byte(`{"tables":{"T":{"columns":{"c":{"type":{"key":{"type":"string","enum":["set",["a"]]}}}}}}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Format(in)
		if err != nil {
			return
		}
		again, err := Format(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Format is not idempotent: %v\n%s\n%s", err, out, again)
		}
		var a, b map[string]any
		if json.Unmarshal(in, &a) != nil {
			return // Format took input encoding/json rejects; nothing to compare
		}
		delete(a, "cksum")
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("output is not JSON: %v", err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("content changed:\n%v\n%v", a, b)
		}
	})
}

// meaning is a schema reduced to what a server and its clients observe.
type meaning struct {
	name, version string
	tables        map[string]tableMeaning
}

type tableMeaning struct {
	isRoot  bool
	maxRows int64
	indexes []string // each index's columns sorted and joined, then sorted
	columns map[string]columnMeaning
}

// columnMeaning is comparable so columns compare with ==.
type columnMeaning struct {
	key, value         baseMeaning
	min                int64
	max                string // a number or "unlimited"
	ephemeral, mutable bool
}

type baseMeaning struct {
	typ                    string
	enum                   string // sorted JSON atoms joined by "|"
	minInteger, maxInteger string
	minReal, maxReal       string
	minLength, maxLength   string
	refTable, refType      string
}

func mustMeaning(t *testing.T, raw []byte) meaning {
	t.Helper()
	m, err := parseMeaning(raw)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func parseMeaning(raw []byte) (meaning, error) {
	var s struct {
		Name    string
		Version string
		Tables  map[string]struct {
			Columns map[string]struct {
				Type      json.RawMessage
				Ephemeral *bool
				Mutable   *bool
			}
			IsRoot  bool
			MaxRows int64
			Indexes [][]string
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&s); err != nil {
		return meaning{}, err
	}
	m := meaning{name: s.Name, version: s.Version, tables: map[string]tableMeaning{}}
	for tn, tab := range s.Tables {
		tm := tableMeaning{isRoot: tab.IsRoot, maxRows: tab.MaxRows, columns: map[string]columnMeaning{}}
		for _, idx := range tab.Indexes {
			cols := slices.Clone(idx)
			slices.Sort(cols)
			tm.indexes = append(tm.indexes, strings.Join(cols, ","))
		}
		slices.Sort(tm.indexes)
		for cn, col := range tab.Columns {
			cm, err := parseColumnType(col.Type)
			if err != nil {
				return meaning{}, fmt.Errorf("%s.%s: %w", tn, cn, err)
			}
			cm.ephemeral = col.Ephemeral != nil && *col.Ephemeral
			cm.mutable = col.Mutable == nil || *col.Mutable
			tm.columns[cn] = cm
		}
		m.tables[tn] = tm
	}
	return m, nil
}

// parseColumnType reads an RFC 7047 <type>: an atomic type name, or an
// object with key, optional value, min (default 1) and max (default 1).
func parseColumnType(raw json.RawMessage) (columnMeaning, error) {
	var c columnMeaning
	var name string
	if json.Unmarshal(raw, &name) == nil {
		c.key = baseMeaning{typ: name}
		c.min, c.max = 1, "1"
		return c, nil
	}
	var obj struct {
		Key   json.RawMessage
		Value json.RawMessage
		Min   *int64
		Max   json.RawMessage
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return c, err
	}
	var err error
	if c.key, err = parseBaseType(obj.Key); err != nil {
		return c, err
	}
	if obj.Value != nil {
		if c.value, err = parseBaseType(obj.Value); err != nil {
			return c, err
		}
	}
	c.min, c.max = 1, "1"
	if obj.Min != nil {
		c.min = *obj.Min
	}
	if obj.Max != nil {
		var s string
		if json.Unmarshal(obj.Max, &s) == nil {
			c.max = s
		} else {
			c.max = string(obj.Max)
		}
	}
	return c, nil
}

// parseBaseType reads an RFC 7047 <base-type>, making refType's default
// ("strong", for uuids with a refTable) explicit.
func parseBaseType(raw json.RawMessage) (baseMeaning, error) {
	var b baseMeaning
	if json.Unmarshal(raw, &b.typ) == nil {
		return b, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return b, err
	}
	str := func(k string) string {
		v, ok := obj[k]
		if !ok {
			return ""
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		return string(v)
	}
	b.typ = str("type")
	b.minInteger, b.maxInteger = str("minInteger"), str("maxInteger")
	b.minReal, b.maxReal = str("minReal"), str("maxReal")
	b.minLength, b.maxLength = str("minLength"), str("maxLength")
	b.refTable, b.refType = str("refTable"), str("refType")
	if b.refTable != "" && b.refType == "" {
		b.refType = "strong"
	}
	if e, ok := obj["enum"]; ok {
		atoms, err := enumAtoms(e)
		if err != nil {
			return b, fmt.Errorf("enum: %w", err)
		}
		b.enum = strings.Join(atoms, "|")
	}
	return b, nil
}

// enumAtoms lists an enum's atoms, which is either one atom or
// ["set", [atoms...]], as sorted JSON texts.
func enumAtoms(raw json.RawMessage) ([]string, error) {
	var set []json.RawMessage
	if json.Unmarshal(raw, &set) != nil {
		return []string{string(raw)}, nil
	}
	var tag string
	if len(set) != 2 || json.Unmarshal(set[0], &tag) != nil || tag != "set" {
		return nil, fmt.Errorf("not an atom or a set: %s", raw)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(set[1], &elems); err != nil {
		return nil, err
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		out[i] = string(e)
	}
	slices.Sort(out)
	return out, nil
}
