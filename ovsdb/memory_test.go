package ovsdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

func TestAtomSize(t *testing.T) {
	if got := int(unsafe.Sizeof(Atom{})); got != atomBytes {
		t.Errorf("an Atom takes %d bytes; atomBytes says %d", got, atomBytes)
	}
}

// expandRaw replaces the *rawArray values in v by their generic form, as
// encoding/json decodes them, and checks their element counts.
func expandRaw(t *testing.T, v any) any {
	t.Helper()
	switch v := v.(type) {
	case []any:
		for i := range v {
			v[i] = expandRaw(t, v[i])
		}
	case map[string]any:
		for k, e := range v {
			v[k] = expandRaw(t, e)
		}
	case *rawObject:
		g, err := decodeGeneric(v.text)
		if err != nil {
			t.Fatalf("raw object %s is not valid JSON: %v", v.text, err)
		}
		return g
	case *rawArray:
		g, err := decodeGeneric(v.text)
		if err != nil {
			t.Fatalf("raw array %s is not valid JSON: %v", v.text, err)
		}
		if arr, ok := g.([]any); !ok || len(arr) != v.n {
			t.Fatalf("raw array %s: counted %d elements", v.text, v.n)
		}
		return g
	}
	return v
}

// joinN returns n elements elem(i) joined by commas.
func joinN(n int, elem func(i int) string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem(i))
	}
	return b.String()
}

func TestDecodeJSONKeepsLargeDatumArraysRaw(t *testing.T) {
	big := `["set",[` + joinN(2000, func(i int) string { return fmt.Sprint(i) }) + `]]`
	for _, tc := range []struct {
		in  string
		raw bool
	}{
		{big, true},
		{`{"row":{"c":` + big + `}}`, true},
		{`["set",[1,2,3]]`, false}, // small
		{`["set",[` + joinN(2000, func(int) string { return "1" }) + `],3]`, false}, // three elements
		{`["list",[` + joinN(2000, func(int) string { return "1" }) + `]]`, false},
		{strings.Repeat("[", 10) + big + strings.Repeat("]", 10), false}, // too deep to be a datum
	} {
		v, err := DecodeJSON([]byte(tc.in))
		if err != nil {
			t.Fatalf("%.40s: %v", tc.in, err)
		}
		if got := strings.Contains(fmt.Sprintf("%#v", v), "rawArray"); got != tc.raw {
			t.Errorf("%.40s: raw %v, want %v", tc.in, got, tc.raw)
		}
		want, _ := decodeGeneric([]byte(tc.in))
		if got := expandRaw(t, v); !reflect.DeepEqual(got, want) {
			t.Errorf("%.40s: decodes differently from encoding/json", tc.in)
		}
	}
}

func TestDecodeJSONKeepsOperationsRaw(t *testing.T) {
	// Only large values keep operations as text.
	pad := `"` + strings.Repeat("x", rawOperationsMin) + `"`
	for _, tc := range []struct {
		in   string
		nRaw int
	}{
		{`["db",{"op":"insert","table":"T","row":{}},{"table":"T","op":"comment"},{"op":"select"},` + pad + `]`, 3},
		{`["db",{"op":"insert","table":"T","row":{}}]`, 0}, // small
		{`["db",{"op":"nonsense"},{"op":1},{"op":"uuid","table":"T"},{"name":"x"},{},` + pad + `]`, 0},
		{`["db",{"op":"uuid","op":"insert"},{"op":"insert","op":"uuid"},` + pad + `]`, 1}, // the last "op" counts
		{`["db",["x",{"op":"insert"}],` + pad + `]`, 0},                                   // not a top-level element
		{`{"a":{"op":"insert"},"b":` + pad + `}`, 0},
	} {
		v, err := DecodeJSON([]byte(tc.in))
		if err != nil {
			t.Fatalf("%.80s: %v", tc.in, err)
		}
		if got := strings.Count(fmt.Sprintf("%#v", v), "rawObject"); got != tc.nRaw {
			t.Errorf("%.80s: %d raw objects, want %d", tc.in, got, tc.nRaw)
		}
		want, _ := decodeGeneric([]byte(tc.in))
		if got := expandRaw(t, v); !reflect.DeepEqual(got, want) {
			t.Errorf("%.80s: decodes differently from encoding/json", tc.in)
		}
	}
}

// TestTransactRefusesTooComplexOperation checks that an operation whose
// generic form would take too much memory fails as "resources exhausted"
// without harm to the transaction's other operations' decoding.
func TestTransactRefusesTooComplexOperation(t *testing.T) {
	db := newTestDB(t)
	comment := "[" + joinN(1<<19, func(int) string { return "[]" }) + "]"
	ops, err := DecodeJSON([]byte(`[{"op":"comment","comment":"fine"},{"op":"comment","comment":` + comment + `}]`))
	if err != nil {
		t.Fatal(err)
	}
	res := db.Transact(ops.([]any), TxnOptions{})
	if !res.Failed || !strings.Contains(string(res.Reply), `{},{"error":"resources exhausted","details":"operation {\"op\":\"comment\",\"comment\":[[],[],`) {
		t.Errorf("reply %.300s", res.Reply)
	}
}

func TestDecodeJSONTooComplex(t *testing.T) {
	const n = 1 << 20
	for name, in := range map[string]string{
		"empty arrays":  "[" + joinN(n, func(int) string { return "[]" }) + "]",
		"empty objects": "[" + joinN(n, func(int) string { return "{}" }) + "]",
		"numbers":       "[" + joinN(n, func(int) string { return "0" }) + "]",
		"wide object":   "{" + joinN(n/4, func(i int) string { return fmt.Sprintf(`"%d":0`, i) }) + "}",
		"nested":        "[" + joinN(n/200, func(int) string { return strings.Repeat("[", 100) + strings.Repeat("]", 100) }) + "]",
	} {
		_, err := DecodeJSON([]byte(in))
		var tc *TooComplexError
		if !errors.As(err, &tc) || tc.Size != len(in) || tc.Limit != maxTreeBytes(len(in)) {
			t.Errorf("%s: got %v, want a TooComplexError", name, err)
		}
	}
}

// TestDecodeJSONRealRequestsFit checks that large requests of the shapes
// OVN's daemons send stay within the memory bound with room to spare.
func TestDecodeJSONRealRequestsFit(t *testing.T) {
	const n = 20000
	lflows := `["OVN_Southbound",` + joinN(n, func(i int) string {
		return fmt.Sprintf(`{"op":"insert","table":"Logical_Flow","row":{"logical_datapath":["uuid","0123abcd-4567-89ab-cdef-%012d"],"pipeline":"ingress","table_id":%d,"priority":100,"match":"inport == \"lsp%d\"","actions":"next;","external_ids":["map",[["source","northd.c:1234"],["stage-name","ls_in_port_sec_l2"]]]}}`, i, i%30, i)
	}) + `]`
	conds := `["OVN_Southbound",["monid","OVN_Southbound"],{"Port_Binding":[{"where":[` + joinN(n, func(i int) string {
		return fmt.Sprintf(`["logical_port","==","lsp%d"]`, i)
	}) + `]}]}]`
	mutations := `["OVN_Northbound",` + joinN(n, func(i int) string {
		return fmt.Sprintf(`{"op":"mutate","table":"Logical_Switch","where":[["_uuid","==",["uuid","0123abcd-4567-89ab-cdef-%012d"]]],"mutations":[["ports","insert",["named-uuid","p%d"]]]}`, i, i)
	}) + `]`
	for name, in := range map[string]string{"lflows": lflows, "conditions": conds, "mutations": mutations} {
		p := &jsonParser{data: []byte(in), budget: maxTreeBytes(len(in)), rawMin: rawArrayMin}
		if _, err := p.value(); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		// The floor hides the ratio of small requests; these must fit by
		// the ratio alone, with a margin.
		if ratio := float64(p.cost) / float64(len(in)); ratio > 0.9*treeBytesPerByte {
			t.Errorf("%s: %d bytes cost %d (%.2f per byte), too close to the limit of %d per byte", name, len(in), p.cost, ratio, treeBytesPerByte)
		}
	}
}

func TestDecodeDatumRaw(t *testing.T) {
	s := MustParseSchema([]byte(`{"name":"S","tables":{"T":{"columns":{
		"ints":{"type":{"key":"integer","min":0,"max":"unlimited"}},
		"small":{"type":{"key":{"type":"integer","maxInteger":100},"min":0,"max":"unlimited"}},
		"reals":{"type":{"key":"real","min":0,"max":"unlimited"}},
		"strs":{"type":{"key":"string","min":0,"max":"unlimited"}},
		"few":{"type":{"key":"string","min":0,"max":3}},
		"refs":{"type":{"key":"uuid","min":0,"max":"unlimited"}},
		"kv":{"type":{"key":"string","value":"integer","min":0,"max":"unlimited"}}}}}}`))
	ts := s.Table("T")
	names := func(name string) (UUID, error) {
		var b [16]byte
		copy(b[:], name)
		return UUIDFromBytes(b), nil
	}
	const n = 3000
	for _, tc := range []struct {
		col, in string
		errTag  string
	}{
		{"ints", `["set",[` + joinN(n, func(i int) string { return fmt.Sprint(n - i) }) + `]]`, ""},
		{"ints", `["set",[` + joinN(n, func(i int) string { return fmt.Sprint(i%1000 + 1) }) + `]]`, ErrOVSDB}, // duplicates
		{"ints", `["set",[` + joinN(n, func(i int) string { return fmt.Sprint(i) }) + `,1.5]]`, ErrSyntax},
		{"ints", `["set",[` + joinN(n, func(i int) string { return fmt.Sprint(i) }) + `,"x"]]`, ErrSyntax},
		{"small", `["set",[` + joinN(n, func(i int) string { return fmt.Sprint(i) }) + `]]`, ErrConstraintViolation},
		{"reals", `["set",[` + joinN(n, func(i int) string { return fmt.Sprintf("%d.5", i) }) + `,1e400]]`, ErrSyntax},
		{"reals", `["set",[` + joinN(n, func(i int) string { return fmt.Sprintf("%d.5e-3", i) }) + `]]`, ""},
		{"strs", `["set",[` + joinN(n, func(i int) string { return fmt.Sprintf(`"s\u00e9%d\n"`, i) }) + `]]`, ""},
		{"strs", `["set",[` + joinN(n, func(i int) string { return fmt.Sprintf(`"s%d"`, i) }) + `,1]]`, ErrSyntax},
		{"few", `["set",[` + joinN(n, func(i int) string { return fmt.Sprintf(`"s%d"`, i) }) + `]]`, ErrSyntax},
		{"refs", `["set",[` + joinN(n, func(i int) string { return fmt.Sprintf(`["uuid","00000000-0000-0000-0000-%012d"]`, i) }) + `]]`, ""},
		{"refs", `["set",[` + joinN(n, func(i int) string { return fmt.Sprintf(`["named-uuid","r%d"]`, i) }) + `]]`, ""},
		{"kv", `["map",[` + joinN(n, func(i int) string { return fmt.Sprintf(`["k%d",%d]`, n-i, i) }) + `]]`, ""},
		{"kv", `["map",[` + joinN(n, func(i int) string { return fmt.Sprintf(`["k%d",%d]`, i%100, i) }) + `]]`, ErrOVSDB},
		{"kv", `["map",[` + joinN(n, func(i int) string { return fmt.Sprintf(`["k%d",%d]`, i, i) }) + `,["x"]]]`, ErrSyntax},
		{"kv", `["map",[` + joinN(n, func(i int) string { return fmt.Sprintf(`["k%d",%d]`, i, i) }) + `,["x",1,2]]]`, ErrSyntax},
		{"kv", `["map",[` + joinN(n, func(i int) string { return fmt.Sprintf(`["k%d",%d]`, i, i) }) + `,{"x":1}]]`, ErrSyntax},
		{"kv", `["map",[` + joinN(n, func(i int) string { return fmt.Sprintf(`["k%d","v"]`, i) }) + `]]`, ErrSyntax},
		{"kv", `["set",[` + joinN(n, func(i int) string { return fmt.Sprintf(`"k%d"`, i) }) + `]]`, ErrSyntax},
	} {
		c := ts.Column(tc.col)
		raw, err := DecodeJSON([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(fmt.Sprintf("%#v", raw), "rawArray") {
			t.Fatalf("%s %.40s: not kept raw", tc.col, tc.in)
		}
		generic, err := parseJSONWith([]byte(tc.in), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeDatum(raw, &c.Type, names)
		want, werr := DecodeDatum(generic, &c.Type, names)
		var e *Error
		switch {
		case tc.errTag == "" && err != nil:
			t.Errorf("%s %.40s: %v", tc.col, tc.in, err)
		case tc.errTag != "" && (!errors.As(err, &e) || e.Tag != tc.errTag):
			t.Errorf("%s %.40s: got %v, want a %q", tc.col, tc.in, err, tc.errTag)
		case (err == nil) != (werr == nil) || !got.Equal(want):
			t.Errorf("%s %.40s: raw gives %v, generic gives %v", tc.col, tc.in, err, werr)
		case err != nil && len(err.Error()) > 500:
			t.Errorf("%s: error message of %d bytes", tc.col, len(err.Error()))
		}
	}
}

func TestDecodeDatumRawRefusesDenseSets(t *testing.T) {
	ct := ColumnType{Key: NewBaseType(TypeInteger), Min: 0, Max: Unlimited}
	const n = 1 << 20
	for _, in := range []string{
		`["set",[` + joinN(n, func(int) string { return "0" }) + `]]`,
		`["set",[` + joinN(n, func(i int) string { return fmt.Sprint(i % 10) }) + `]]`,
	} {
		v, err := DecodeJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		_, err = DecodeDatum(v, &ct, nil)
		var e *Error
		if !errors.As(err, &e) || e.Tag != ErrResourcesExhausted || !strings.Contains(e.Details, "bytes per byte of JSON") {
			t.Errorf("%.30s: got %v, want resources exhausted", in, err)
		}
	}
	// A dense set of distinct values fits.
	in := `["set",[` + joinN(n/4, func(i int) string { return fmt.Sprint(i) }) + `]]`
	v, err := DecodeJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := DecodeDatum(v, &ct, nil); err != nil || d.Len() != n/4 {
		t.Errorf("set of %d distinct integers: %v", n/4, err)
	}
}

func TestAbbrevJSON(t *testing.T) {
	long := strings.Repeat("x", 1000)
	for _, v := range []any{
		nil, true, "a<b", []any{"set", []any{json1(), "é"}}, map[string]any{"b": 1.5, "a": []any{}},
		[]any{long}, map[string]any{long: long},
	} {
		want := abbrevJSONReference(v)
		if got := abbrevJSON(v); got != want {
			t.Errorf("abbrevJSON(%#v) = %s, want %s", v, got, want)
		}
	}
	raw, _ := DecodeJSON([]byte(`["set",[` + joinN(100000, func(i int) string { return fmt.Sprint(i) }) + `]]`))
	if got := abbrevJSON(raw); len(got) != 203 || !strings.HasPrefix(got, `["set",[0,1,2,`) {
		t.Errorf("abbrevJSON of a raw set = %s", got)
	}
}

func json1() any { v, _ := DecodeJSON([]byte(`-1.5e3`)); return v }

// abbrevJSONReference is what abbrevJSON did before it learned to stop
// early: encode everything with encoding/json, then cut.
func abbrevJSONReference(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// BenchmarkTransactLarge measures decoding and executing a transaction of
// 3000 inserts and a set of 3000 references, the shape of a large commit
// by ovn-northd: its operations and its set stay text until executed.
func BenchmarkTransactLarge(b *testing.B) {
	const n = 3000
	req := []byte(`[` + joinN(n, func(i int) string {
		return fmt.Sprintf(`{"op":"insert","table":"Child","uuid-name":"c%d","row":{"label":"%d"}}`, i, i)
	}) + `,{"op":"insert","table":"Root","row":{"name":"r","children":["set",[` + joinN(n, func(i int) string {
		return fmt.Sprintf(`["named-uuid","c%d"]`, i)
	}) + `]],"opts":["map",[` + joinN(n, func(i int) string { return fmt.Sprintf(`["key%d","value%d"]`, i, i) }) + `]]}}]`)
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	for b.Loop() {
		b.StopTimer()
		db := newTestDB(b)
		b.StartTimer()
		v, err := DecodeJSON(req)
		if err != nil {
			b.Fatal(err)
		}
		if res := db.Transact(v.([]any), TxnOptions{}); res.Failed {
			b.Fatalf("%.300s", res.Reply)
		}
	}
}
