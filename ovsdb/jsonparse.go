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
// from. It produces what encoding/json's Decoder with UseNumber produces
// (FuzzDecodeJSON checks this), at a fraction of the cost: it is the first
// thing every request goes through. Three differences bound the memory a
// request can cost (see memory.go): the array inside a large ["set", [...]]
// or ["map", [...]] stays undecoded text (a *rawArray) for DecodeDatum to
// turn straight into atoms; in a large value, the operations of a
// transaction stay text (a *rawObject) for Database.Transact to decode one
// at a time; and a value whose tree would take more than
// maxTreeBytes(len(data)) of memory is refused.

// maxJSONDepth bounds nesting, as encoding/json does, so hostile input
// cannot exhaust the stack.
const maxJSONDepth = 10000

type jsonParser struct {
	data  []byte
	pos   int
	depth int

	// cost estimates the heap bytes of the tree built so far; budget is
	// the most it may reach.
	cost, budget int
	// rawMin is the length in bytes from which the array of a ["set", A]
	// or ["map", A] is kept as text (0: never).
	rawMin int
	// rawOps keeps the operations in a top-level array as text.
	rawOps bool
	// kept is a copy of data for the values kept as text.
	kept []byte
	// stack holds the elements of the arrays being parsed, innermost
	// last, so that each array is allocated once at its final length.
	stack []any
}

var errJSONDepth = errors.New("JSON nested too deeply")

func parseJSON(data []byte) (any, error) {
	return parseJSONWith(data, rawArrayMin, rawOperationsMin)
}

// parseJSONWith is parseJSON keeping datum arrays of at least rawMin bytes
// as text, and operations as text when data has at least rawOpsMin bytes
// (0: never).
func parseJSONWith(data []byte, rawMin, rawOpsMin int) (any, error) {
	p := &jsonParser{data: data, budget: maxTreeBytes(len(data)), rawMin: rawMin, rawOps: rawOpsMin > 0 && len(data) >= rawOpsMin}
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

// charge adds n bytes to the estimated size of the tree and fails once
// it is over budget.
func (p *jsonParser) charge(n int) error {
	p.cost += n
	if p.cost > p.budget {
		return &TooComplexError{Size: len(p.data), Limit: p.budget}
	}
	return nil
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
		if w, ok := p.word(); ok {
			return w, nil
		}
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		if len(s) > 0 {
			err = p.charge(boxBytes + roundUp8(len(s)))
		}
		return s, err
	case c == '-' || ('0' <= c && c <= '9'):
		n, err := p.number()
		if err != nil {
			return nil, err
		}
		return n, p.charge(boxBytes + roundUp8(len(n)))
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
	if err := p.charge(mapBytes); err != nil {
		return nil, err
	}
	m := map[string]any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return m, nil
	}
	if err := p.charge(mapGroupBytes); err != nil {
		return nil, err
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("expected object key")
		}
		var k string
		var err error
		if w, ok := p.word(); ok {
			k = w.(string)
		} else if k, err = p.str(); err != nil {
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
		entry := roundUp8(len(k))
		if len(m) >= 8 {
			entry += mapEntryBytes
		}
		if err := p.charge(entry); err != nil {
			return nil, err
		}
		m[k] = v
		if last, err := p.afterElement('}', " in object"); err != nil {
			return nil, err
		} else if last {
			return m, nil
		}
	}
}

func (p *jsonParser) array() (any, error) {
	if p.depth++; p.depth > maxJSONDepth {
		return nil, errJSONDepth
	}
	p.pos++ // [
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return []any{}, p.charge(sliceBoxBytes)
	}
	base := len(p.stack)
	defer func() {
		clear(p.stack[base:])
		p.stack = p.stack[:base]
	}()
	for {
		var v any
		var err error
		switch {
		case len(p.stack) == base+1 && p.depth <= rawArrayMaxDepth && isDatumTag(p.stack[base]):
			v, err = p.datumArray()
		case p.depth == 1 && p.rawOps:
			v, err = p.operation()
		default:
			v, err = p.value()
		}
		if err != nil {
			return nil, err
		}
		if len(p.stack) == cap(p.stack) {
			if err := p.growStack(); err != nil {
				return nil, err
			}
		}
		p.stack = append(p.stack, v)
		last, err := p.afterElement(']', " in array")
		if err != nil {
			return nil, err
		}
		if last {
			n := len(p.stack) - base
			if err := p.charge(sliceBoxBytes + n*ifaceBytes); err != nil {
				return nil, err
			}
			return append([]any(nil), p.stack[base:]...), nil
		}
	}
}

// afterElement steps past what follows an element of an array or object
// that closer ends: a comma, or closer, which makes it the last element.
// in completes the message for input that ends there.
func (p *jsonParser) afterElement(closer byte, in string) (last bool, err error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return false, p.errorf("unexpected end of input%s", in)
	}
	switch p.data[p.pos] {
	case ',':
		p.pos++
		return false, nil
	case closer:
		p.pos++
		p.depth--
		return true, nil
	}
	return false, p.errorf("expected ',' or %q", closer)
}

// keep returns data[start:end] for a value kept as text, charging for the
// text and for the value of size bytes that holds it. The text is a slice
// of one copy of the whole input, made the first time: the caller may
// reuse its buffer, and one copy costs less than many small ones.
func (p *jsonParser) keep(start, end, size int) ([]byte, error) {
	if p.kept == nil {
		if err := p.charge(roundUp8(len(p.data))); err != nil {
			return nil, err
		}
		p.kept = append([]byte(nil), p.data...)
	}
	if err := p.charge(size); err != nil {
		return nil, err
	}
	return p.kept[start:end:end], nil
}

// growStack doubles the capacity of p.stack, charging for it: the stack is
// as large as the largest array, so it counts in a request's memory, and
// the copy it replaces stays until the next collection.
func (p *jsonParser) growStack() error {
	n := max(2*cap(p.stack), 8)
	if err := p.charge(n * ifaceBytes); err != nil {
		return err
	}
	s := make([]any, len(p.stack), n)
	copy(s, p.stack)
	p.stack = s
	return nil
}

// operation parses an element of a top-level array. An object with an
// "op" member naming an operation is a transaction's operation: it is kept
// as text, a *rawObject, for Database.Transact to decode when it executes
// it, so that a transaction's operations are never all decoded at once.
func (p *jsonParser) operation() (any, error) {
	p.skipSpace()
	start, depth := p.pos, p.depth
	if start >= len(p.data) || p.data[start] != '{' {
		return p.value()
	}
	isOp, err := p.skipOperation()
	if err != nil || !isOp {
		p.pos, p.depth = start, depth
		return p.value()
	}
	end := p.pos
	text, err := p.keep(start, end, rawObjectBytes)
	if err != nil {
		return nil, err
	}
	return &rawObject{text: text}, nil
}

// skipOperation skips the object at p.pos as skipValue does and reports
// whether it has an "op" member whose value names an operation.
func (p *jsonParser) skipOperation() (isOp bool, err error) {
	p.depth++
	p.pos++ // {
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return false, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return false, p.errorf("expected object key")
		}
		keyStart := p.pos
		if err := p.skipString(); err != nil {
			return false, err
		}
		isOpKey := string(p.data[keyStart:p.pos]) == `"op"`
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return false, p.errorf("expected ':'")
		}
		p.pos++
		p.skipSpace()
		if isOpKey && p.pos < len(p.data) && p.data[p.pos] == '"' {
			if w, ok := p.word(); ok {
				isOp = isOperationName(w)
			} else if err := p.skipString(); err != nil {
				return false, err
			}
		} else if _, err := p.skipValue(); err != nil {
			return false, err
		}
		if last, err := p.afterElement('}', ""); err != nil {
			return false, err
		} else if last {
			return isOp, nil
		}
	}
}

func isOperationName(w any) bool {
	switch w {
	case "insert", "select", "update", "mutate", "delete", "wait", "commit", "abort", "comment", "assert":
		return true
	}
	return false
}

// isDatumTag reports whether v, the first element of an array, makes the
// array look like a set or map datum.
func isDatumTag(v any) bool {
	s, ok := v.(string)
	return ok && (s == "set" || s == "map")
}

// datumArray parses the second element of an array that starts with "set"
// or "map". When that element is an array of at least p.rawMin bytes and
// the last element, it is kept as text, a *rawArray.
func (p *jsonParser) datumArray() (any, error) {
	p.skipSpace()
	start := p.pos
	if p.rawMin <= 0 || start >= len(p.data) || p.data[start] != '[' {
		return p.value()
	}
	depth := p.depth
	n, err := p.skipValue()
	end := p.pos
	p.skipSpace()
	if err != nil || end-start < p.rawMin || p.pos >= len(p.data) || p.data[p.pos] != ']' {
		// Not a datum's array, or too small to matter: decode it
		// normally (which also reports any error the usual way).
		p.pos, p.depth = start, depth
		return p.value()
	}
	p.pos = end
	text, err := p.keep(start, end, rawArrayBytes)
	if err != nil {
		return nil, err
	}
	return &rawArray{text: text, n: n}, nil
}

// skipValue checks the value at p.pos as value does, without building it,
// and moves past it. For an array it returns the number of elements.
func (p *jsonParser) skipValue() (n int, err error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return 0, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{', c == '[':
		return p.skipContainer()
	case c == '"':
		return 0, p.skipString()
	case c == '-' || ('0' <= c && c <= '9'):
		_, err := p.numberText()
		return 0, err
	case c == 't':
		return 0, p.literal("true")
	case c == 'f':
		return 0, p.literal("false")
	case c == 'n':
		return 0, p.literal("null")
	default:
		return 0, p.errorf("unexpected character %q", c)
	}
}

// skipContainer skips the object or array at p.pos and returns its number
// of members or elements.
func (p *jsonParser) skipContainer() (int, error) {
	if p.depth++; p.depth > maxJSONDepth {
		return 0, errJSONDepth
	}
	isObject := p.data[p.pos] == '{'
	closer := byte(']')
	if isObject {
		closer = '}'
	}
	p.pos++
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == closer {
		p.pos++
		p.depth--
		return 0, nil
	}
	for n := 1; ; n++ {
		if isObject {
			p.skipSpace()
			if p.pos >= len(p.data) || p.data[p.pos] != '"' {
				return 0, p.errorf("expected object key")
			}
			if err := p.skipString(); err != nil {
				return 0, err
			}
			p.skipSpace()
			if p.pos >= len(p.data) || p.data[p.pos] != ':' {
				return 0, p.errorf("expected ':'")
			}
			p.pos++
		}
		if _, err := p.skipValue(); err != nil {
			return 0, err
		}
		if last, err := p.afterElement(closer, ""); err != nil {
			return 0, err
		} else if last {
			return n, nil
		}
	}
}

// skipString checks the string at p.pos as str does, without decoding it.
func (p *jsonParser) skipString() error {
	p.pos++ // opening quote
	d := p.data
	for p.pos < len(d) {
		switch c := d[p.pos]; {
		case c == '"':
			p.pos++
			return nil
		case c < 0x20:
			return p.errorf("control character in string")
		case c != '\\':
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
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if _, ok := p.hex4(); !ok {
				return p.errorf("invalid \\u escape")
			}
		default:
			return p.errorf("invalid escape")
		}
	}
	return p.errorf("unterminated string")
}

func (p *jsonParser) number() (json.Number, error) {
	b, err := p.numberText()
	return json.Number(b), err
}

// numberText checks the number at p.pos, moves past it and returns its
// text, which shares p.data.
func (p *jsonParser) numberText() ([]byte, error) {
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
	return d[start:p.pos], nil
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

// word returns the string at p.pos and moves past it when it is one of
// the words of the OVSDB protocol, which requests repeat in every
// operation and condition. The value returned is a constant: it takes no
// memory, where decoding the string would allocate it and its box.
func (p *jsonParser) word() (any, bool) {
	const longest = len("named-uuid")
	d := p.data[p.pos+1:]
	end := 0
	for end < len(d) && end <= longest && d[end] != '"' && d[end] != '\\' {
		end++
	}
	if end > longest || end == len(d) || d[end] != '"' {
		return nil, false
	}
	var w any
	switch string(d[:end]) {
	case "uuid":
		w = "uuid"
	case "named-uuid":
		w = "named-uuid"
	case "set":
		w = "set"
	case "map":
		w = "map"
	case "op":
		w = "op"
	case "table":
		w = "table"
	case "row":
		w = "row"
	case "rows":
		w = "rows"
	case "where":
		w = "where"
	case "columns":
		w = "columns"
	case "mutations":
		w = "mutations"
	case "uuid-name":
		w = "uuid-name"
	case "until":
		w = "until"
	case "timeout":
		w = "timeout"
	case "insert":
		w = "insert"
	case "select":
		w = "select"
	case "update":
		w = "update"
	case "mutate":
		w = "mutate"
	case "delete":
		w = "delete"
	case "wait":
		w = "wait"
	case "comment":
		w = "comment"
	case "commit":
		w = "commit"
	case "abort":
		w = "abort"
	case "assert":
		w = "assert"
	case "_uuid":
		w = "_uuid"
	case "_version":
		w = "_version"
	case "==":
		w = "=="
	case "!=":
		w = "!="
	case "includes":
		w = "includes"
	case "excludes":
		w = "excludes"
	case "name":
		w = "name"
	default:
		return nil, false
	}
	p.pos += end + 2
	return w, true
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
