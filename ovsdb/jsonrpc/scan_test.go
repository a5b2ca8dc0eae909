package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	for _, in := range []string{
		`{}`, `[]`, ` {"a" : [1, -2.5e+3, true, false, null, "x\u00e9\n"]} `, `0`, `-0.0`, `1E9`, `"\/"`,
		`{"a":1,}`, `[1,]`, `[1 2]`, `{"a"}`, `{1:2}`, `01`, `-`, `1.`, `1e`, `.5`, `+1`, `"\x"`, `"\u12"`,
		"\"\x01\"", `tru`, `nul`, `{"a":1}x`, `[`, `"abc`, ``, ` `, "\xff", `"` + "\xff" + `"`, `[1]]`, deep,
	} {
		got := valid([]byte(in))
		want := json.Valid([]byte(in))
		if in == deep {
			want = false // deeper than this package allows
		}
		if got != want {
			t.Errorf("valid(%.40q) = %v, want %v", in, got, want)
		}
	}
}

// FuzzValid checks the scanner against encoding/json: both must accept
// and reject the same inputs.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}]}`, `[-1.5e-3,"\u00e9\"",true]`, `{"a":1,}`, `"\ud800"`, `01`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if strings.Count(string(b), "[")+strings.Count(string(b), "{") >= maxDepth {
			return // nesting limits differ
		}
		if got, want := valid(b), json.Valid(b); got != want {
			t.Fatalf("valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

func TestParseMessageDoesNotAlias(t *testing.T) {
	in := []byte(`{"method":"m","params":["x"],"id":1}`)
	m, err := ParseMessage(in)
	if err != nil {
		t.Fatal(err)
	}
	copy(in, strings.Repeat("#", len(in)))
	if string(m.Params) != `["x"]` || string(m.ID) != "1" {
		t.Errorf("message changed with its input: %s %s", m.Params, m.ID)
	}
}
