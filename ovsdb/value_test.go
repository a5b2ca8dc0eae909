package ovsdb

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestUUID(t *testing.T) {
	const s = "0123abcd-4567-89ab-cdef-0011223344ff"
	u, err := ParseUUID(s)
	if err != nil {
		t.Fatal(err)
	}
	if u.String() != s {
		t.Errorf("round trip: %s", u)
	}
	if v, _ := ParseUUID(strings.ToUpper(s)); v != u {
		t.Error("upper case parses differently")
	}
	for _, bad := range []string{"", "0123abcd", "0123abcd-4567-89ab-cdef-0011223344fg", "0123abcd+4567-89ab-cdef-0011223344ff"} {
		if _, err := ParseUUID(bad); err == nil {
			t.Errorf("ParseUUID(%q) succeeded", bad)
		}
	}
	a, b := NewUUID(), NewUUID()
	if a == b || a.IsZero() {
		t.Error("NewUUID not random")
	}
	if (a.Compare(b) < 0) != (a.String() < b.String()) {
		t.Error("UUID order differs from string order")
	}
}

func TestAtomCompare(t *testing.T) {
	ordered := [][]Atom{
		{Integer(math.MinInt64), Integer(-1), Integer(0), Integer(5)},
		{Real(-2.5), Real(0), Real(1e10)},
		{Boolean(false), Boolean(true)},
		{String(""), String("A"), String("a"), String("ab"), String("\u00e9")},
		{UUIDAtom(MustParseUUID("00000000-0000-0000-0000-000000000001")), UUIDAtom(MustParseUUID("ffffffff-0000-0000-0000-000000000000"))},
	}
	for _, list := range ordered {
		for i := range list {
			for j := range list {
				want := 0
				if i < j {
					want = -1
				} else if i > j {
					want = 1
				}
				if got := list[i].Compare(list[j]); got != want {
					t.Errorf("Compare(%v, %v) = %d, want %d", list[i], list[j], got, want)
				}
			}
		}
	}
	if Real(math.Copysign(0, -1)) != Real(0) {
		t.Error("-0 and 0 differ")
	}
}

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := DecodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDatumJSON(t *testing.T) {
	s := MustParseSchema([]byte(testSchema))
	root := s.Table("Root")
	child := s.Table("Child")
	tests := []struct {
		table *TableSchema
		col   string
		in    string
		out   string // "" means same as in
		err   string // error tag expected
	}{
		{root, "name", `"x\"y\n"`, "", ""},
		{root, "name", `["set",["x"]]`, `"x"`, ""},
		{root, "name", `["set",[]]`, "", ErrSyntax},
		{root, "name", `5`, "", ErrSyntax},
		{root, "n", `7`, "", ""},
		{root, "n", `7.5`, "", ErrSyntax},
		{root, "n", `101`, "", ErrConstraintViolation},
		{root, "n", `-1`, "", ErrConstraintViolation},
		{root, "r", `["set",[]]`, "", ""},
		// ovsdb-server writes a real as %.15g does: 1.0 as 1.
		{root, "r", `1.0`, `1`, ""},
		{root, "r", `1.1000000000000001`, `1.1`, ""},
		{root, "r", `0.25`, "", ""},
		{root, "r", `2.0`, "", ErrConstraintViolation},
		{root, "color", `"red"`, "", ""},
		{root, "color", `"blue"`, "", ErrConstraintViolation},
		{root, "opts", `["map",[["b","2"],["a","1"]]]`, `["map",[["a","1"],["b","2"]]]`, ""},
		{root, "opts", `["map",[]]`, "", ""},
		{root, "opts", `["map",[["a","1"],["a","2"]]]`, "", ErrOVSDB},
		{root, "opts", `["set",[]]`, "", ErrSyntax},
		{root, "children", `["set",[["uuid","00000000-0000-0000-0000-000000000002"],["uuid","00000000-0000-0000-0000-000000000001"]]]`,
			`["set",[["uuid","00000000-0000-0000-0000-000000000001"],["uuid","00000000-0000-0000-0000-000000000002"]]]`, ""},
		{root, "children", `["set",[["uuid","00000000-0000-0000-0000-000000000001"],["uuid","00000000-0000-0000-0000-000000000001"]]]`, "", ErrOVSDB},
		{root, "children", `["named-uuid","x"]`, "", ErrSyntax},
		{root, "children", `["uuid","nope"]`, "", ErrSyntax},
		{root, "flag", `true`, "", ""},
		{child, "label", `""`, "", ErrConstraintViolation},
		{child, "label", `"\u00e9\u00e9\u00e9\u00e9"`, "\"\u00e9\u00e9\u00e9\u00e9\"", ""},
		{child, "label", `"abcde"`, "", ErrConstraintViolation},
		{child, "peers", `["set",[["uuid","00000000-0000-0000-0000-000000000001"],["uuid","00000000-0000-0000-0000-000000000002"],["uuid","00000000-0000-0000-0000-000000000003"]]]`, "", ErrSyntax},
	}
	for _, tt := range tests {
		c := tt.table.Column(tt.col)
		d, err := DecodeDatum(mustDecode(t, tt.in), &c.Type, nil)
		if tt.err != "" {
			var e *Error
			if !errors.As(err, &e) || e.Tag != tt.err {
				t.Errorf("%s %s: got %v, want %q error", tt.col, tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", tt.col, tt.in, err)
			continue
		}
		want := tt.out
		if want == "" {
			want = tt.in
		}
		if got := string(d.AppendJSON(nil, &c.Type)); got != want {
			t.Errorf("%s %s: encodes as %s, want %s", tt.col, tt.in, got, want)
		}
	}
}

func TestNamedUUID(t *testing.T) {
	s := MustParseSchema([]byte(testSchema))
	c := s.Table("Root").Column("children")
	u := NewUUID()
	d, err := DecodeDatum(mustDecode(t, `["named-uuid","kid"]`), &c.Type, func(name string) (UUID, error) {
		if name != "kid" {
			t.Errorf("resolved %q", name)
		}
		return u, nil
	})
	if err != nil || d.Len() != 1 || d.Keys[0].UUID() != u {
		t.Fatalf("got %v, %v", d, err)
	}
}

func TestDatumSetOps(t *testing.T) {
	set := func(xs ...int64) Datum {
		var a []Atom
		for _, x := range xs {
			a = append(a, Integer(x))
		}
		return Set(a...)
	}
	if got := set(1, 3, 5).Union(set(2, 3, 6)); !got.Equal(set(1, 2, 3, 5, 6)) {
		t.Errorf("union: %v", got)
	}
	if got := set(1, 3, 5).Difference(set(3, 4)); !got.Equal(set(1, 5)) {
		t.Errorf("difference: %v", got)
	}
	if !set(1, 2, 3).Includes(set(1, 3)) || set(1, 2).Includes(set(4)) {
		t.Error("includes")
	}
	if set(3, 1, 3).Len() != 2 {
		t.Error("Set did not dedupe")
	}
	m := Map([]Atom{String("b"), String("a")}, []Atom{String("2"), String("1")})
	m2 := m.Union(Map([]Atom{String("a"), String("c")}, []Atom{String("x"), String("3")}))
	if v, _ := m2.Lookup(String("a")); v != String("1") || m2.Len() != 3 {
		t.Errorf("map insert must keep existing keys: %v", m2)
	}
	if got := m2.Difference(Set(String("a"))); got.Contains(String("a")) || got.Len() != 2 {
		t.Errorf("map delete by key: %v", got)
	}
	if got := m2.Difference(Map([]Atom{String("b")}, []Atom{String("wrong")})); got.Len() != 3 {
		t.Errorf("map delete by pair with a different value must keep it: %v", got)
	}
}

func FuzzDecodeDatum(f *testing.F) {
	s := MustParseSchema([]byte(testSchema))
	for _, seed := range []string{`"x"`, `["set",[1,2]]`, `["map",[["a","b"]]]`, `["uuid","00000000-0000-0000-0000-000000000001"]`, `["named-uuid","a"]`, `1.5`, `null`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		v, err := DecodeJSON([]byte(in))
		if err != nil {
			return
		}
		for _, tbl := range s.Tables {
			for _, c := range tbl.Columns {
				d, err := DecodeDatum(v, &c.Type, func(string) (UUID, error) { return UUID{}, nil })
				// Decoding from text gives the same datum, or fails too.
				if raw, rerr := parseJSONWith([]byte(in), 1, 1); rerr != nil {
					t.Fatalf("%q: with raw arrays: %v", in, rerr)
				} else if rd, rerr := DecodeDatum(raw, &c.Type, func(string) (UUID, error) { return UUID{}, nil }); (rerr == nil) != (err == nil) || !rd.Equal(d) {
					t.Fatalf("%q as %s: from text %v, %v; generic %v, %v", in, c.Type.String(), rd, rerr, d, err)
				}
				if err != nil {
					continue
				}
				// What decodes must re-encode to something that decodes to the
				// same datum; reals, which are written with 15 significant
				// digits as ovsdb-server writes them, to one that encodes the
				// same.
				out := d.AppendJSON(nil, &c.Type)
				v2, err := DecodeJSON(out)
				if err != nil {
					t.Fatalf("re-encoding %s gave invalid JSON %s: %v", in, out, err)
				}
				d2, err := DecodeDatum(v2, &c.Type, nil)
				hasReals := c.Type.Key.Type == TypeReal || c.Type.Value != nil && c.Type.Value.Type == TypeReal
				switch {
				case err != nil:
					t.Fatalf("%s: round trip %s: %v", in, out, err)
				case hasReals && string(d2.AppendJSON(nil, &c.Type)) != string(out):
					t.Fatalf("%s: round trip %s -> %s", in, out, d2.AppendJSON(nil, &c.Type))
				case !hasReals && !d2.Equal(d):
					t.Fatalf("%s: round trip %s -> %v", in, out, d2)
				}
			}
		}
	})
}

func TestUUIDSource(t *testing.T) {
	s := NewUUIDSource()
	seen := map[UUID]bool{}
	for i := 0; i < 1000; i++ {
		u := s.New()
		str := u.String()
		if str[14] != '4' || !strings.ContainsRune("89ab", rune(str[19])) {
			t.Fatalf("%s is not a version 4 UUID", str)
		}
		if seen[u] {
			t.Fatal("repeated UUID")
		}
		seen[u] = true
	}
}

// FuzzDecodeJSON cross-checks the hand-written decoder with encoding/json,
// the slow and obviously correct reference.
func FuzzDecodeJSON(f *testing.F) {
	for _, seed := range []string{`{"a":[1,-2.5e3,"x\u00e9\ud83d\ude00",true,false,null,{}]}`, `"\ud800"`, `[1,]`, `{"a":1,"a":2}`, " [ ] ", `"\u0000"`, "\"\xff\"", `01`, `1.`, `-`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := DecodeJSON([]byte(in))
		want, werr := decodeGeneric([]byte(in))
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: error %v, reference error %v", in, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %#v, reference %#v", in, got, want)
		}
		// Keeping every datum's array as text changes nothing but that.
		raw, rerr := parseJSONWith([]byte(in), 1, 1)
		if (rerr == nil) != (werr == nil) {
			t.Fatalf("%q: with raw arrays, error %v, reference error %v", in, rerr, werr)
		}
		if rerr == nil && !reflect.DeepEqual(expandRaw(t, raw), want) {
			t.Fatalf("%q: with raw arrays, got %#v, reference %#v", in, raw, want)
		}
	})
}
