package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Kind says what a Message is.
type Kind int

const (
	// KindRequest is a method call that expects a response.
	KindRequest Kind = iota + 1
	// KindNotification is a method call with a null id; nothing answers it.
	KindNotification
	// KindResponse answers a request: a result, or an error.
	KindResponse
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Message is one JSON-RPC 1.0 message. Method is set for requests and
// notifications and empty for responses. The raw members hold the JSON as
// received (or to be sent); a member that is absent or JSON null is nil.
type Message struct {
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  json.RawMessage
	ID     json.RawMessage
}

// Kind classifies m by its members.
func (m *Message) Kind() Kind {
	switch {
	case m.Method != "" && m.ID != nil:
		return KindRequest
	case m.Method != "":
		return KindNotification
	default:
		return KindResponse
	}
}

// ParseMessage decodes one message and checks that it is a request, a
// notification or a response. It does not retain b: the raw members of the
// result share one copy of it.
func ParseMessage(b []byte) (*Message, error) {
	return parseOwned(append([]byte(nil), b...))
}

// parseOwned is ParseMessage for bytes that the caller gives up: the
// message's raw members share b.
func parseOwned(b []byte) (*Message, error) {
	sc := scanner{b: b}
	start := sc.ws(0)
	if start >= len(b) || b[start] != '{' {
		return nil, fmt.Errorf("jsonrpc: malformed message: %w", errNotObject)
	}
	var method, params, result, errv, id []byte
	var hasMethod, hasResult, hasError bool
	end, err := sc.object(start, func(key []byte, vs, ve int) {
		v := b[vs:ve]
		name := key[1 : len(key)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			name = []byte(memberName(key))
		}
		switch string(name) { // no allocation for the comparison
		case "method":
			method, hasMethod = v, true
		case "params":
			params = v
		case "result":
			result, hasResult = v, true
		case "error":
			errv, hasError = v, true
		case "id":
			id = v
		}
	})
	if err != nil {
		return nil, fmt.Errorf("jsonrpc: malformed message: %w", err)
	}
	if sc.ws(end) != len(b) {
		return nil, fmt.Errorf("jsonrpc: malformed message: data after the message at byte %d", end)
	}
	m := &Message{Params: nonNull(params), ID: nonNull(id), Result: nonNull(result), Error: nonNull(errv)}
	switch {
	case hasMethod:
		name, ok := plainString(method)
		if !ok && (len(method) == 0 || method[0] != '"' || json.Unmarshal(method, &name) != nil) {
			return nil, fmt.Errorf(`jsonrpc: malformed message: "method" must be a string, not %.40s`, method)
		}
		if name == "" {
			return nil, errors.New(`jsonrpc: malformed message: "method" is empty`)
		}
		if hasResult || hasError {
			return nil, errors.New(`jsonrpc: malformed message: it has a "method" and also a "result" or "error"`)
		}
		if m.Params != nil && m.Params[0] != '[' {
			return nil, fmt.Errorf(`jsonrpc: malformed %s %q: "params" must be an array`, m.Kind(), name)
		}
		m.Method = name
	case hasResult || hasError:
		if m.ID == nil {
			return nil, errors.New(`jsonrpc: malformed response: "id" is missing or null`)
		}
	default:
		return nil, errors.New(`jsonrpc: malformed message: it has neither "method" nor "result"/"error"`)
	}
	return m, nil
}

// plainString decodes a JSON string made only of printable ASCII without
// escapes, the usual method name, without the cost of encoding/json; ok is
// false for anything else. OVSDB's method names come back as constants.
func plainString(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return "", false
		}
	}
	switch string(body) {
	case "transact":
		return "transact", true
	case "update":
		return "update", true
	case "update2":
		return "update2", true
	case "update3":
		return "update3", true
	case "echo":
		return "echo", true
	case "monitor_cond":
		return "monitor_cond", true
	case "monitor_cond_since":
		return "monitor_cond_since", true
	case "cancel":
		return "cancel", true
	}
	return string(body), true
}

// nonNull returns raw with surrounding whitespace removed, or nil if it is
// empty or JSON null.
func nonNull(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// MarshalJSON encodes m in OVSDB's shapes: requests and notifications as
// {"id","method","params"} (params [] when nil), responses as
// {"id","result","error"} with a null error, or {"id","error"}.
func (m *Message) MarshalJSON() ([]byte, error) {
	return m.appendJSON(nil), nil
}

// appendJSON appends m's encoding to b. The raw members must be valid JSON.
func (m *Message) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendRaw(b, m.ID)
	if m.Method != "" {
		b = append(b, `,"method":`...)
		b = appendJSONString(b, m.Method)
		b = append(b, `,"params":`...)
		if m.Params == nil {
			b = append(b, "[]"...)
		} else {
			b = append(b, m.Params...)
		}
	} else {
		// An error response has no "result", as ovsdb-server sends it.
		if isNull(m.Error) {
			b = append(b, `,"result":`...)
			b = appendRaw(b, m.Result)
		}
		b = append(b, `,"error":`...)
		b = appendRaw(b, m.Error)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string. strconv.AppendQuote is Go
// syntax (\x7f, \a) that JSON parsers reject; this escapes only what JSON
// requires and replaces invalid UTF-8 with U+FFFD, as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

func appendRaw(b []byte, raw json.RawMessage) []byte {
	if raw == nil {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// marshalParam encodes v, passing json.RawMessage through unchanged so that
// callers who encoded a large payload themselves do not pay for a second
// pass. nil encodes as absent (nil).
func marshalParam(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	}
	return json.Marshal(v)
}

// Error is an error response received for a Call. Value is the "error"
// member exactly as the peer sent it: for OVSDB usually an object such as
// {"error":"syntax error","details":"..."}, sometimes a bare string such as
// "unknown method".
type Error struct {
	Method string
	Value  json.RawMessage
}

// Name returns the error's name: the string itself when the peer sent a
// string, the "error" member when it sent an object, or "" otherwise.
func (e *Error) Name() string {
	name, _ := e.parts()
	return name
}

// Details returns the object's "details" member, if any.
func (e *Error) Details() string {
	_, details := e.parts()
	return details
}

func (e *Error) parts() (name, details string) {
	if json.Unmarshal(e.Value, &name) == nil {
		return name, ""
	}
	var obj struct {
		Error   string `json:"error"`
		Details string `json:"details"`
	}
	if json.Unmarshal(e.Value, &obj) == nil {
		return obj.Error, obj.Details
	}
	return "", ""
}

func (e *Error) Error() string {
	name, details := e.parts()
	switch {
	case name != "" && details != "":
		return fmt.Sprintf("%s: %s: %s", e.Method, name, details)
	case name != "":
		return fmt.Sprintf("%s: %s", e.Method, name)
	}
	return fmt.Sprintf("%s: error %s", e.Method, e.Value)
}

// IsUnknownMethod reports whether err is a peer's "unknown method" answer,
// which OVSDB clients use to fall back to older methods.
func IsUnknownMethod(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Name() == "unknown method"
}

func isNull(raw json.RawMessage) bool { return raw == nil || string(raw) == "null" }
