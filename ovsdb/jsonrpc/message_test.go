package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseMessage(t *testing.T) {
	tests := []struct {
		in      string
		kind    Kind
		method  string
		id      string
		wantErr string
	}{
		{in: `{"method":"echo","params":[],"id":0}`, kind: KindRequest, method: "echo", id: "0"},
		{in: `{"method":"transact","params":["OVN_Northbound"],"id":["a",{"b":1}]}`, kind: KindRequest, method: "transact", id: `["a",{"b":1}]`},
		{in: `{"method":"update2","params":[null,{}],"id":null}`, kind: KindNotification, method: "update2"},
		{in: `{"method":"locked","params":["l"]}`, kind: KindNotification, method: "locked"},
		{in: `{"result":{"x":1},"error":null,"id":7}`, kind: KindResponse, id: "7"},
		{in: `{"result":null,"error":"unknown method","id":"s"}`, kind: KindResponse, id: `"s"`},
		{in: `{"error":{"error":"x"},"id":1}`, kind: KindResponse, id: "1"},
		{in: `{"method":"m","params":{},"id":1}`, wantErr: `"params" must be an array`},
		{in: `{"method":"","params":[],"id":1}`, wantErr: `"method" is empty`},
		{in: `{"method":"m","params":[],"result":1,"id":1}`, wantErr: `also a "result"`},
		{in: `{"result":1,"error":null,"id":null}`, wantErr: `"id" is missing`},
		{in: `{"id":1}`, wantErr: `neither`},
		{in: `{"method":3}`, wantErr: `malformed message`},
		{in: `[1]`, wantErr: `malformed message`},
		{in: `{"a":}`, wantErr: `malformed message`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			m, err := ParseMessage([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind() != tt.kind || m.Method != tt.method || string(m.ID) != tt.id {
				t.Errorf("got kind %v method %q id %q, want %v %q %q", m.Kind(), m.Method, m.ID, tt.kind, tt.method, tt.id)
			}
		})
	}
}

func TestMarshalMessage(t *testing.T) {
	tests := []struct {
		m    Message
		want string
	}{
		{Message{Method: "echo", ID: json.RawMessage("1")}, `{"id":1,"method":"echo","params":[]}`},
		{Message{Method: "update", Params: json.RawMessage(`[null,{}]`)}, `{"id":null,"method":"update","params":[null,{}]}`},
		{Message{ID: json.RawMessage(`"x"`), Result: json.RawMessage(`[]`)}, `{"id":"x","result":[],"error":null}`},
		{Message{ID: json.RawMessage(`2`), Error: json.RawMessage(`{"error":"e"}`)}, `{"id":2,"error":{"error":"e"}}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(&tt.m)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("got %s, want %s", got, tt.want)
		}
	}
}

func TestError(t *testing.T) {
	tests := []struct {
		value   string
		name    string
		details string
		text    string
		unknown bool
	}{
		{`"unknown method"`, "unknown method", "", "m: unknown method", true},
		{`{"error":"syntax error","details":"bad"}`, "syntax error", "bad", "m: syntax error: bad", false},
		{`{"error":"unknown method"}`, "unknown method", "", "m: unknown method", true},
		{`17`, "", "", "m: error 17", false},
	}
	for _, tt := range tests {
		e := &Error{Method: "m", Value: json.RawMessage(tt.value)}
		if e.Name() != tt.name || e.Details() != tt.details || e.Error() != tt.text {
			t.Errorf("%s: got %q %q %q", tt.value, e.Name(), e.Details(), e.Error())
		}
		wrapped := fmt.Errorf("outer: %w", e)
		if IsUnknownMethod(wrapped) != tt.unknown {
			t.Errorf("%s: IsUnknownMethod = %v", tt.value, !tt.unknown)
		}
	}
	if IsUnknownMethod(errors.New("unknown method")) {
		t.Error("IsUnknownMethod true for a plain error")
	}
}

func TestParseAddresses(t *testing.T) {
	tests := []struct {
		fn      func(string) (string, string, error)
		in      string
		network string
		address string
		bad     bool
	}{
		{ParseTarget, "unix:/tmp/x.sock", "unix", "/tmp/x.sock", false},
		{ParseTarget, "tcp:127.0.0.1:6641", "tcp", "127.0.0.1:6641", false},
		{ParseTarget, "tcp:[::1]:6641", "tcp", "[::1]:6641", false},
		{ParseTarget, "tcp:10.0.0.1", "tcp", "10.0.0.1:6640", false},
		{ParseTarget, "ssl:1.2.3.4:5", "", "", true},
		{ParseTarget, "unix:", "", "", true},
		{ParseTarget, "nocolon", "", "", true},
		{ParseListen, "punix:/tmp/x.sock", "unix", "/tmp/x.sock", false},
		{ParseListen, "ptcp:6641", "tcp", ":6641", false},
		{ParseListen, "ptcp:6641:127.0.0.1", "tcp", "127.0.0.1:6641", false},
		{ParseListen, "ptcp:6641:[::1]", "tcp", "[::1]:6641", false},
		{ParseListen, "ptcp::1.2.3.4", "", "", true},
		{ParseListen, "tcp:1.2.3.4:5", "", "", true},
	}
	for _, tt := range tests {
		n, a, err := tt.fn(tt.in)
		if (err != nil) != tt.bad || n != tt.network || a != tt.address {
			t.Errorf("%s: got %q %q %v", tt.in, n, a, err)
		}
	}
}

// FuzzPlainString checks the fast decoding of method names against
// encoding/json: whatever plainString accepts, json.Unmarshal decodes to
// the same string.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"transact"`, `"update2"`, `"a\"b"`, `"é"`, `""`, `"x`, `"tab	"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := plainString(raw)
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("plainString accepted %q, which encoding/json rejects: %v", raw, err)
		}
		if got != want {
			t.Fatalf("plainString(%q) = %q, encoding/json says %q", raw, got, want)
		}
	})
}

// BenchmarkParseMessageTransact parses a small transact request, the
// message a server reads most.
func BenchmarkParseMessageTransact(b *testing.B) {
	msg := []byte(`{"id":17,"method":"transact","params":["Bench",{"op":"insert","table":"Item","row":{"name":"c3-42","n":42}}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseMessage(msg); err != nil {
			b.Fatal(err)
		}
	}
}
