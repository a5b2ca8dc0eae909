package client

import (
	"testing"

	"github.com/govn/govn/ovsdb"
)

// TestParseUUID checks the client's byte parser against ovsdb.ParseUUID,
// which it stands in for on the hot path: valid UUIDs in both cases, and
// each one spoilt at every position (a bad digit, a digit for a dash, a
// character dropped, one added).
func TestParseUUID(t *testing.T) {
	checkParseUUID(t, "")
	for _, valid := range []string{"0123abcd-0000-4000-8000-00000000ffff", "0123ABCD-EF00-4000-8000-00000000FFFF"} {
		checkParseUUID(t, valid)
		for i := range len(valid) {
			for _, c := range "g0-" {
				checkParseUUID(t, valid[:i]+string(c)+valid[i+1:])
			}
			checkParseUUID(t, valid[:i]+valid[i+1:])
			checkParseUUID(t, valid[:i]+"a"+valid[i:])
		}
	}
}

func FuzzParseUUID(f *testing.F) {
	f.Add("0123abcd-0000-4000-8000-00000000ffff")
	f.Add("0123abcd-0000-4000-8000-00000000fffg")
	f.Fuzz(checkParseUUID)
}

func checkParseUUID(t *testing.T, in string) {
	got, err := parseUUID([]byte(in))
	want, wantErr := ovsdb.ParseUUID(in)
	if (err != nil) != (wantErr != nil) || got != want {
		t.Errorf("parseUUID(%q) = %v, %v; ovsdb.ParseUUID gives %v, %v", in, got, err, want, wantErr)
	}
}

// BenchmarkParseUUID compares the client's byte parser with converting
// the bytes for ovsdb.ParseUUID, once per row of every update.
func BenchmarkParseUUID(b *testing.B) {
	in := []byte("0123abcd-0000-4000-8000-00000000ffff")
	b.Run("client", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseUUID(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ovsdb", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ovsdb.ParseUUID(string(in)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestParserStrings checks the client's string reader against the core's
// JSON decoder on escapes, surrogates and invalid UTF-8.
func TestParserStrings(t *testing.T) {
	for _, in := range []string{
		`"plain"`, `"tab\there"`, `"\"quoted\" \\ \/"`, `"\u00e9\ud83d\ude00"`,
		`"lone \ud83d here"`, `"lone \ud83d\u0041"`, `"bad \x"`, `"short \u12"`,
		"\"invalid \xff utf8\"", "\"control \x01\"", `"unterminated \"`, `"ends in \`,
	} {
		got, err := (&parser{b: []byte(in)}).str()
		v, wantErr := ovsdb.DecodeJSON([]byte(in))
		if (err != nil) != (wantErr != nil) || (err == nil && got != v) {
			t.Errorf("%q: got %q, %v; core decodes %q, %v", in, got, err, v, wantErr)
		}
	}
}
