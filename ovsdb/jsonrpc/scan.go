package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
)

// This file holds a validating JSON scanner for whole messages. It does one
// pass over the bytes and allocates nothing, several times faster than
// decoding into json.RawMessage members, which matters for the
// multi-megabyte monitor replies and transactions OVSDB exchanges.

// syntaxError describes invalid JSON at an offset.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.off, e.msg)
}

type scanner struct {
	b     []byte
	depth int
}

func (s *scanner) fail(i int, format string, args ...any) error {
	return &syntaxError{off: i, msg: fmt.Sprintf(format, args...)}
}

func (s *scanner) ws(i int) int {
	for i < len(s.b) {
		switch s.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value checks the JSON value starting at i (no leading space) and
// returns the index just past it.
func (s *scanner) value(i int) (int, error) {
	if i >= len(s.b) {
		return i, s.fail(i, "unexpected end of input")
	}
	switch c := s.b[i]; {
	case c == '{':
		return s.object(i, nil)
	case c == '[':
		return s.array(i)
	case c == '"':
		return s.str(i)
	case c == '-' || ('0' <= c && c <= '9'):
		return s.number(i)
	case c == 't':
		return s.literal(i, "true")
	case c == 'f':
		return s.literal(i, "false")
	case c == 'n':
		return s.literal(i, "null")
	default:
		return i, s.fail(i, "unexpected %q", c)
	}
}

func (s *scanner) literal(i int, lit string) (int, error) {
	if len(s.b)-i < len(lit) || string(s.b[i:i+len(lit)]) != lit {
		return i, s.fail(i, "invalid literal (want %s)", lit)
	}
	return i + len(lit), nil
}

func (s *scanner) number(i int) (int, error) {
	start := i
	if s.b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s.b) && '0' <= s.b[i] && s.b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(s.b) && s.b[i] == '0':
		i++
	case digits() == 0:
		return i, s.fail(start, "invalid number")
	}
	if i < len(s.b) && s.b[i] == '.' {
		i++
		if digits() == 0 {
			return i, s.fail(start, "invalid number: no digits after the point")
		}
	}
	if i < len(s.b) && (s.b[i] == 'e' || s.b[i] == 'E') {
		i++
		if i < len(s.b) && (s.b[i] == '+' || s.b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, s.fail(start, "invalid number: no digits in the exponent")
		}
	}
	return i, nil
}

// str checks the string starting at the quote at i.
func (s *scanner) str(i int) (int, error) {
	start := i
	i++
	for i < len(s.b) {
		c := s.b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(s.b) {
				return i, s.fail(start, "unterminated string")
			}
			switch s.b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(s.b)-i < 6 || !isHex(s.b[i+2]) || !isHex(s.b[i+3]) || !isHex(s.b[i+4]) || !isHex(s.b[i+5]) {
					return i, s.fail(i, "invalid \\u escape")
				}
				i += 6
			default:
				return i, s.fail(i, "invalid escape \\%c", s.b[i+1])
			}
		case c < 0x20:
			return i, s.fail(i, "control character in string")
		default:
			i++
		}
	}
	return i, s.fail(start, "unterminated string")
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (s *scanner) enter(i int) error {
	s.depth++
	if s.depth > maxDepth {
		return s.fail(i, "nested deeper than %d levels", maxDepth)
	}
	return nil
}

func (s *scanner) array(i int) (int, error) {
	if err := s.enter(i); err != nil {
		return i, err
	}
	defer func() { s.depth-- }()
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = s.value(i); err != nil {
			return i, err
		}
		i = s.ws(i)
		if i >= len(s.b) {
			return i, s.fail(i, "unterminated array")
		}
		switch s.b[i] {
		case ',':
			i = s.ws(i + 1)
		case ']':
			return i + 1, nil
		default:
			return i, s.fail(i, "want , or ] in array, not %q", s.b[i])
		}
	}
}

// object checks the object at i; member, if not nil, is called with the
// raw key (with quotes) and the value's bounds of each member.
func (s *scanner) object(i int, member func(key []byte, start, end int)) (int, error) {
	if err := s.enter(i); err != nil {
		return i, err
	}
	defer func() { s.depth-- }()
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(s.b) || s.b[i] != '"' {
			return i, s.fail(i, "want a member name")
		}
		keyStart := i
		var err error
		if i, err = s.str(i); err != nil {
			return i, err
		}
		key := s.b[keyStart:i]
		i = s.ws(i)
		if i >= len(s.b) || s.b[i] != ':' {
			return i, s.fail(i, "want : after member name")
		}
		i = s.ws(i + 1)
		start := i
		if i, err = s.value(i); err != nil {
			return i, err
		}
		if member != nil {
			member(key, start, i)
		}
		i = s.ws(i)
		if i >= len(s.b) {
			return i, s.fail(i, "unterminated object")
		}
		switch s.b[i] {
		case ',':
			i = s.ws(i + 1)
		case '}':
			return i + 1, nil
		default:
			return i, s.fail(i, "want , or } in object, not %q", s.b[i])
		}
	}
}

// valid reports whether b is exactly one JSON value, with optional
// surrounding space.
func valid(b []byte) bool {
	s := scanner{b: b}
	i, err := s.value(s.ws(0))
	return err == nil && s.ws(i) == len(b)
}

// memberName decodes a raw member name (with quotes).
func memberName(raw []byte) string {
	for _, c := range raw {
		if c == '\\' {
			var name string
			if json.Unmarshal(raw, &name) != nil {
				return ""
			}
			return name
		}
	}
	return string(raw[1 : len(raw)-1])
}

var errNotObject = errors.New("a message must be a JSON object")
