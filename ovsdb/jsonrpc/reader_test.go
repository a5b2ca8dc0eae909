package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(r *Reader) ([]string, error) {
	var out []string
	for {
		v, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, string(v))
	}
}

func TestReaderSplitsValues(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{"empty", "", nil},
		{"whitespace only", " \n\t\r ", nil},
		{"one object", `{"a":1}`, []string{`{"a":1}`}},
		{"back to back", `{"a":1}{"b":[2]}[3]`, []string{`{"a":1}`, `{"b":[2]}`, `[3]`}},
		{"separated", "\n {\"a\":1}\n\n{}\r\n", []string{`{"a":1}`, `{}`}},
		{"brackets in strings", `{"s":"}]{[\"\\"}{"t":"\\\""}`, []string{`{"s":"}]{[\"\\"}`, `{"t":"\\\""}`}},
		{"nested", `{"a":[{"b":[[],{}]}]}`, []string{`{"a":[{"b":[[],{}]}]}`}},
		{"utf8", `{"é":"ü→"}`, []string{`{"é":"ü→"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, src := range []struct {
				name string
				r    io.Reader
			}{
				{"whole", strings.NewReader(tt.input)},
				{"byte by byte", iotest.OneByteReader(strings.NewReader(tt.input))},
				{"half", iotest.HalfReader(strings.NewReader(tt.input))},
			} {
				got, err := readAll(NewReader(src.r, 0))
				if err != io.EOF {
					t.Fatalf("%s: error %v, want io.EOF", src.name, err)
				}
				if strings.Join(got, "|") != strings.Join(tt.want, "|") {
					t.Errorf("%s: got %q, want %q", src.name, got, tt.want)
				}
			}
		})
	}
}

// A value must be returned as soon as its last byte has arrived, without
// waiting for more input: a request over a socket has no terminator.
func TestReaderDoesNotWaitForMore(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr, 0)
	go func() { _, _ = pw.Write([]byte(`{"method":"echo","params":[],"id":1}`)) }()
	v, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if string(v) != `{"method":"echo","params":[],"id":1}` {
		t.Errorf("got %q", v)
	}
	pw.Close()
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after close: %v, want io.EOF", err)
	}
}

func TestReaderErrors(t *testing.T) {
	deep := strings.Repeat("[", maxDepth+1)
	tests := []struct {
		name    string
		input   string
		max     int
		wantN   int    // values read before the error
		wantErr string // substring of the error
		is      error
	}{
		{"not an object", `{"a":1} 17`, 0, 1, `must be a JSON object`, nil},
		{"string at top", `"x"`, 0, 0, `must be a JSON object`, nil},
		{"mismatched", `{"a":[1}`, 0, 0, `closes a bracket`, nil},
		{"truncated", `{"a":1}{"b":`, 0, 1, `inside a message`, io.ErrUnexpectedEOF},
		{"truncated string", `{"a":"}`, 0, 0, `inside a message`, io.ErrUnexpectedEOF},
		{"too large complete", `{"a":"0123456789"}`, 10, 0, `limit of 10 bytes`, ErrMessageTooLarge},
		{"too large streaming", `{"a":"` + strings.Repeat("x", 100000), 1000, 0, `limit of 1000 bytes`, ErrMessageTooLarge},
		{"second too large", `{}{"a":"0123456789"}`, 10, 1, `too large`, ErrMessageTooLarge},
		{"too deep", deep, 0, 0, `nests deeper`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(iotest.HalfReader(strings.NewReader(tt.input)), tt.max)
			got, err := readAll(r)
			if len(got) != tt.wantN {
				t.Errorf("read %d values %q before the error, want %d", len(got), got, tt.wantN)
			}
			if err == nil || err == io.EOF || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if _, again := r.Next(); again == nil || again.Error() != err.Error() {
				t.Errorf("second call: %v, want the same error again", again)
			}
		})
	}
}

func TestReaderLargeMessage(t *testing.T) {
	big := `{"a":"` + strings.Repeat("y", 3<<20) + `"}`
	r := NewReader(strings.NewReader(big+big), 4<<20)
	for i := range 2 {
		v, err := r.Next()
		if err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		if len(v) != len(big) {
			t.Fatalf("value %d: %d bytes, want %d", i, len(v), len(big))
		}
	}
}

func TestReadMessage(t *testing.T) {
	in := `{"method":"echo","params":[],"id":"x"}{"id":null,"method":"update","params":[1,{}]}{"id":"x","result":[],"error":null}{"nothing":1}`
	r := NewReader(strings.NewReader(in), 0)
	wantKinds := []Kind{KindRequest, KindNotification, KindResponse}
	for i, want := range wantKinds {
		m, err := r.ReadMessage()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.Kind() != want {
			t.Errorf("message %d: kind %v, want %v", i, m.Kind(), want)
		}
	}
	if _, err := r.ReadMessage(); err == nil || !strings.Contains(err.Error(), "neither") {
		t.Errorf("invalid message: error %v", err)
	}
	if _, err := r.ReadMessage(); err == nil {
		t.Error("reader continued after an invalid message")
	}
}

// FuzzReader feeds arbitrary bytes through the reader and the message
// decoder: they must never panic, must end with an error (io.EOF at a clean
// end), and every value they return must be valid JSON framing-wise.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		`{"method":"echo","params":[],"id":0}`,
		`{"id":1,"result":{"a":[1,2,{"b":"}"}]},"error":null}{"id":null,"method":"update","params":[null,{}]}`,
		`[1,2,3]`, `{"a":"\\\"}"}`, `{{`, `}`, ` "x"`, "\x00", `{"method":"","params":{}}`,
		`{"method":"m","params":[],"id":1,"result":2}`, `{"id":null,"error":"x"}`,
	} {
		f.Add([]byte(s), uint16(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, max uint16) {
		r := NewReader(iotest.HalfReader(bytes.NewReader(data)), int(max))
		total := 0
		for {
			v, err := r.Next()
			if err != nil {
				if err.Error() == "" {
					t.Fatal("empty error message")
				}
				break
			}
			total += len(v)
			if total > len(data) {
				t.Fatalf("returned %d bytes from %d of input", total, len(data))
			}
			if v[0] != '{' && v[0] != '[' {
				t.Fatalf("value %q does not start with a bracket", v)
			}
			if max > 0 && len(v) > int(max) {
				t.Fatalf("value of %d bytes exceeds limit %d", len(v), max)
			}
			m, err := ParseMessage(v)
			if err != nil {
				continue
			}
			// A message that parsed encodes to JSON that parses to the same.
			enc, _ := m.MarshalJSON()
			if !json.Valid(enc) {
				t.Fatalf("encoding of %q is invalid JSON: %q", v, enc)
			}
			m2, err := ParseMessage(enc)
			if err != nil {
				t.Fatalf("re-parsing %q: %v", enc, err)
			}
			if m2.Kind() != m.Kind() || m2.Method != m.Method {
				t.Fatalf("round trip of %q changed it to %q", v, enc)
			}
		}
	})
}

// TestReaderHandsOffLargeMessages checks that a message large enough to
// take the Reader's buffer keeps its bytes while the Reader goes on with the
// messages behind it, and that the Reader then holds a small buffer again.
func TestReaderHandsOffLargeMessages(t *testing.T) {
	big := `{"id":1,"method":"echo","params":["` + strings.Repeat("x", 2*handOffMin) + `"]}`
	small := `{"id":2,"method":"echo","params":["y"]}`
	for _, r := range []io.Reader{
		strings.NewReader(big + small + big + small),
		iotest.OneByteReader(strings.NewReader(big + small)),
		iotest.HalfReader(strings.NewReader(small + big + small)),
	} {
		rd := NewReader(r, 0)
		var msgs []*Message
		for {
			m, err := rd.ReadMessage()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
			// The new buffer holds what was read beyond the message.
			if len(m.Params) > handOffMin && len(rd.buf) > max(4096, rd.end) {
				t.Errorf("after a message of %d bytes the reader keeps a buffer of %d for %d unread bytes", len(m.Params), len(rd.buf), rd.end)
			}
		}
		for _, m := range msgs {
			want := `["y"]`
			if string(m.ID) == "1" {
				want = `["` + strings.Repeat("x", 2*handOffMin) + `"]`
			}
			if string(m.Params) != want {
				t.Errorf("message %s has params %.40s..., want %.40s...", m.ID, m.Params, want)
			}
		}
	}
}

// framesBytewise splits data into top-level values one byte at a time, the
// reference Reader's framing must agree with: the values, and whether the
// stream ended cleanly.
func framesBytewise(data []byte) (values []string, clean bool) {
	var stack []byte
	inString, escaped, start := false, false, -1
	for i, c := range data {
		switch {
		case start < 0:
			if isSpace(c) {
				continue
			}
			if c != '{' && c != '[' {
				return values, false
			}
			start, stack = i, []byte{c}
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if len(stack) >= maxDepth {
				return values, false
			}
			stack = append(stack, c)
		case c == '}' || c == ']':
			open := stack[len(stack)-1]
			if open == '{' && c != '}' || open == '[' && c != ']' {
				return values, false
			}
			if stack = stack[:len(stack)-1]; len(stack) == 0 {
				values = append(values, string(data[start:i+1]))
				start = -1
			}
		}
	}
	return values, start < 0
}

// FuzzReaderFraming compares the Reader's values, read in pieces of every
// size, with framesBytewise's.
func FuzzReaderFraming(f *testing.F) {
	for _, s := range []string{
		`{"a":"x\"}\\"}[1,"]"] {"b":"` + strings.Repeat("long string ", 50) + `"}`,
		`{"a":"\\\\"}{"b":"\\\""}`, `{"a":"unterminated`, `{"a":"x\`, `["{[\"]"]`, `{]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, clean := framesBytewise(data)
		for _, src := range []io.Reader{bytes.NewReader(data), iotest.OneByteReader(bytes.NewReader(data)), iotest.HalfReader(bytes.NewReader(data))} {
			r := NewReader(src, 0)
			var got []string
			var err error
			for {
				var v []byte
				if v, err = r.Next(); err != nil {
					break
				}
				got = append(got, string(v))
			}
			if !slices.Equal(got, want) || errors.Is(err, io.EOF) != clean {
				t.Fatalf("%q: values %q, %v; want %q, clean end %t", data, got, err, want, clean)
			}
		}
	})
}
