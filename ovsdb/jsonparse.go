package ovsdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds a small JSON decoder for the generic form (map[string]any,
// []any, json.Number, string, bool, nil) that transactions are parsed
// from. It produces exactly what encoding/json's Decoder with UseNumber
// produces (FuzzDecodeJSON checks this), at a fraction of the cost: it is
// the first thing every request goes through.

// maxJSONDepth bounds nesting, as encoding/json does, so hostile input
// cannot exhaust the stack.
const maxJSONDepth = 10000

type jsonParser struct {
	data  []byte
	pos   int
	depth int
}

var errJSONDepth = errors.New("JSON nested too deeply")

func parseJSON(data []byte) (any, error) {
	p := &jsonParser{data: data}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.errorf("trailing data after JSON value")
	}
	return v, nil
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (any, error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.str()
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	default:
		return nil, p.errorf("unexpected character %q", c)
	}
}

func (p *jsonParser) literal(word string) error {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return p.errorf("invalid literal")
	}
	p.pos += len(word)
	return nil
}

func (p *jsonParser) object() (any, error) {
	if p.depth++; p.depth > maxJSONDepth {
		return nil, errJSONDepth
	}
	p.pos++ // {
	m := map[string]any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return m, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("expected object key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf("expected ':'")
		}
		p.pos++
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		m[k] = v
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of input in object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			p.depth--
			return m, nil
		default:
			return nil, p.errorf("expected ',' or '}'")
		}
	}
}

func (p *jsonParser) array() (any, error) {
	if p.depth++; p.depth > maxJSONDepth {
		return nil, errJSONDepth
	}
	p.pos++ // [
	a := []any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return a, nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of input in array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			p.depth--
			return a, nil
		default:
			return nil, p.errorf("expected ',' or ']'")
		}
	}
}

func (p *jsonParser) number() (any, error) {
	start := p.pos
	d := p.data
	if p.pos < len(d) && d[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(d) && d[p.pos] == '0':
		p.pos++
	case p.pos < len(d) && '1' <= d[p.pos] && d[p.pos] <= '9':
		for p.pos < len(d) && '0' <= d[p.pos] && d[p.pos] <= '9' {
			p.pos++
		}
	default:
		return nil, p.errorf("invalid number")
	}
	if p.pos < len(d) && d[p.pos] == '.' {
		p.pos++
		if p.pos >= len(d) || d[p.pos] < '0' || d[p.pos] > '9' {
			return nil, p.errorf("invalid number")
		}
		for p.pos < len(d) && '0' <= d[p.pos] && d[p.pos] <= '9' {
			p.pos++
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		if p.pos >= len(d) || d[p.pos] < '0' || d[p.pos] > '9' {
			return nil, p.errorf("invalid number")
		}
		for p.pos < len(d) && '0' <= d[p.pos] && d[p.pos] <= '9' {
			p.pos++
		}
	}
	return json.Number(d[start:p.pos]), nil
}

func (p *jsonParser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	d := p.data
	// Fast path: no escapes, plain ASCII or valid UTF-8.
	for p.pos < len(d) {
		c := d[p.pos]
		if c == '"' {
			s := d[start:p.pos]
			p.pos++
			if !utf8.Valid(s) {
				return fixUTF8(s), nil
			}
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.errorf("control character in string")
		}
		p.pos++
	}
	var b []byte
	b = append(b, d[start:p.pos]...)
	for p.pos < len(d) {
		c := d[p.pos]
		switch {
		case c == '"':
			p.pos++
			if !utf8.Valid(b) {
				return fixUTF8(b), nil
			}
			return string(b), nil
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c != '\\':
			b = append(b, c)
			p.pos++
			continue
		}
		p.pos++
		if p.pos >= len(d) {
			break
		}
		e := d[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.errorf("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// A high surrogate followed by an escaped low one is one
				// character; anything else is U+FFFD.
				save := p.pos
				if p.pos+1 < len(d) && d[p.pos] == '\\' && d[p.pos+1] == 'u' {
					p.pos += 2
					if r2, ok := p.hex4(); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							b = utf8.AppendRune(b, dec)
							continue
						}
					}
				}
				p.pos = save
				r = utf8.RuneError
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", p.errorf("invalid escape")
		}
	}
	return "", p.errorf("unterminated string")
}

// fixUTF8 replaces each byte of b that is not part of valid UTF-8 with
// U+FFFD, as encoding/json does.
func fixUTF8(b []byte) string {
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return string(out)
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.data)-p.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		v, ok := fromHex(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	p.pos += 4
	return r, true
}
