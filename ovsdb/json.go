package ovsdb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// NameResolver maps the name of a ["named-uuid", NAME] to a UUID. Within a
// transaction it allocates the row's UUID on first use, so operations may
// refer to rows inserted later in the same transaction. A nil NameResolver
// rejects named-uuid.
type NameResolver func(name string) (UUID, error)

// DecodeJSON decodes JSON text into the generic form that the Decode
// functions accept (numbers as json.Number).
func DecodeJSON(data []byte) (any, error) { return parseJSON(data) }

// decodeGeneric is the encoding/json reference for DecodeJSON, kept for
// the fuzz test that cross-checks the two.
func decodeGeneric(data []byte) (any, error) {
	if !json.Valid(data) {
		return nil, fmt.Errorf("invalid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

// syntaxErr builds a "syntax error" whose "syntax" member is v, the JSON
// that was wrong.
func syntaxErr(v any, format string, args ...any) *Error {
	return &Error{Tag: ErrSyntax, Details: fmt.Sprintf(format, args...), Syntax: syntaxText(v)}
}

// syntaxText renders v as ovsdb-server echoes the offending JSON in an
// error's "syntax" member: compact, object members sorted by name,
// integers as integers and other numbers in the shortest form that reads
// back the same.
func syntaxText(v any) string { return string(appendSyntax(nil, v)) }

func appendSyntax(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case string:
		return AppendJSONString(b, v)
	case json.Number:
		if i, ok := numberAsInteger(string(v)); ok {
			return strconv.AppendInt(b, i, 10)
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return append(b, v...)
		}
		return syntaxReal(b, f)
	case float64:
		return syntaxReal(b, v)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendSyntax(b, e)
		}
		return append(b, ']')
	case map[string]any:
		b = append(b, '{')
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, k)
			b = append(b, ':')
			b = appendSyntax(b, v[k])
		}
		return append(b, '}')
	case *rawArray:
		if d, err := parseJSONWith(v.text, 0, 0); err == nil {
			return appendSyntax(b, d)
		}
		return append(b, v.text...)
	case *rawObject:
		if d, err := parseJSONWith(v.text, 0, 0); err == nil {
			return appendSyntax(b, d)
		}
		return append(b, v.text...)
	}
	e, err := json.Marshal(v)
	if err != nil {
		return fmt.Append(b, v)
	}
	return append(b, e...)
}

// syntaxReal formats f as ovsdb-server echoes a real: 15 significant
// digits.
func syntaxReal(b []byte, f float64) []byte {
	return strconv.AppendFloat(b, f, 'g', 15, 64)
}

// numberAsInteger reports the value of JSON number text s when it is an
// integer that fits in 64 bits, whatever its notation: ovsdb-server reads
// 1.0, 1e2 and 1.5e1 as the integers 1, 100 and 15.
func numberAsInteger(s string) (int64, bool) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, true
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expText)
		if err != nil || e > 400 || e < -400 {
			return 0, false
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	if digits == "" {
		return 0, true
	}
	if exp < 0 || len(digits)+exp > 19 {
		return 0, false
	}
	text := digits + strings.Repeat("0", exp)
	if neg {
		text = "-" + text
	}
	i, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, false
	}
	return i, true
}

// abbrevJSON renders v for an error message, cut short when long. It
// stops rendering once past the cut, so that a huge value costs no more
// than a small one.
func abbrevJSON(v any) string {
	const limit = 200
	b := appendAbbrev(nil, v, limit)
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}

// appendAbbrev appends v's JSON encoding, as encoding/json writes it, to b
// until b is longer than limit.
func appendAbbrev(b []byte, v any, limit int) []byte {
	switch v := v.(type) {
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if len(b) > limit {
				return b
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendAbbrev(b, e, limit)
		}
		return append(b, ']')
	case map[string]any:
		b = append(b, '{')
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if len(b) > limit {
				return b
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendAbbrev(b, k, limit)
			b = append(b, ':')
			b = appendAbbrev(b, v[k], limit)
		}
		return append(b, '}')
	case *rawArray:
		return append(b, v.text[:min(len(v.text), limit+1)]...)
	case *rawObject:
		return append(b, v.text[:min(len(v.text), limit+1)]...)
	case string:
		if len(v) > limit {
			v = v[:limit+1]
		}
	}
	e, err := json.Marshal(v)
	if err != nil {
		return fmt.Append(b, v)
	}
	return append(b, e...)
}

// DecodeAtom decodes a JSON atom of base type bt and checks bt's
// constraints.
func DecodeAtom(v any, bt *BaseType, names NameResolver) (Atom, error) {
	a, err := decodeAtomNoCheck(v, bt.Type, names)
	if err != nil {
		return Atom{}, err
	}
	if err := bt.Check(a); err != nil {
		return Atom{}, err
	}
	return a, nil
}

func decodeAtomNoCheck(v any, t AtomicType, names NameResolver) (Atom, error) {
	switch t {
	case TypeInteger:
		switch n := v.(type) {
		case json.Number:
			i, ok := numberAsInteger(string(n))
			if !ok {
				return Atom{}, syntaxErr(v, "expected integer")
			}
			return Integer(i), nil
		case float64:
			if n != math.Trunc(n) || math.Abs(n) > 1<<63 {
				return Atom{}, syntaxErr(v, "expected integer")
			}
			return Integer(int64(n)), nil
		case int64:
			return Integer(n), nil
		case int:
			return Integer(int64(n)), nil
		}
		return Atom{}, syntaxErr(v, "expected integer")
	case TypeReal:
		switch n := v.(type) {
		case json.Number:
			f, err := strconv.ParseFloat(string(n), 64)
			if err != nil || math.IsInf(f, 0) {
				return Atom{}, syntaxErr(v, "expected real")
			}
			return Real(f), nil
		case float64:
			return Real(n), nil
		case int64:
			return Real(float64(n)), nil
		case int:
			return Real(float64(n)), nil
		}
		return Atom{}, syntaxErr(v, "expected real")
	case TypeBoolean:
		if b, ok := v.(bool); ok {
			return Boolean(b), nil
		}
		return Atom{}, syntaxErr(v, "expected boolean")
	case TypeString:
		if s, ok := v.(string); ok {
			if !utf8.ValidString(s) {
				return Atom{}, syntaxErr(v, "string is not valid UTF-8")
			}
			return String(s), nil
		}
		return Atom{}, syntaxErr(v, "expected string")
	case TypeUUID:
		arr, ok := v.([]any)
		if !ok || len(arr) != 2 {
			return Atom{}, syntaxErr(v, "expected [\"uuid\", <string>]")
		}
		tag, _ := arr[0].(string)
		s, ok := arr[1].(string)
		if !ok {
			return Atom{}, syntaxErr(v, "expected [\"uuid\", <string>]")
		}
		switch tag {
		case "uuid":
			u, err := ParseUUID(s)
			if err != nil {
				return Atom{}, syntaxErr(v, "%s is not a valid UUID", AppendJSONString(nil, s))
			}
			return UUIDAtom(u), nil
		case "named-uuid":
			if names == nil {
				return Atom{}, syntaxErr(v, "named-uuid is not allowed here")
			}
			u, err := names(s)
			if err != nil {
				return Atom{}, err
			}
			return UUIDAtom(u), nil
		}
		return Atom{}, syntaxErr(v, "expected [\"uuid\", <string>]")
	}
	return Atom{}, syntaxErr(v, "invalid atomic type")
}

// Check reports whether atom a satisfies bt's constraints (enum, integer
// and real ranges, string lengths), as a "constraint violation".
func (bt *BaseType) Check(a Atom) error {
	if a.t != bt.Type {
		return Errorf(ErrSyntax, "expected %s, got %s", bt.Type, a.t)
	}
	if bt.Enum != nil {
		if !bt.Enum.Contains(a) {
			return Errorf(ErrConstraintViolation, "%s is not one of the allowed values (%s)", atomText(a), enumForMsg(bt.Enum))
		}
		return nil
	}
	switch a.t {
	case TypeInteger:
		lo, hi := bt.MinInteger, bt.MaxInteger
		if i := a.Int(); i < lo || i > hi {
			return rangeError(atomText(a), lo != math.MinInt64, hi != math.MaxInt64, i < lo, Integer(lo), Integer(hi))
		}
	case TypeReal:
		lo, hi := bt.MinReal, bt.MaxReal
		if f := a.Float(); f < lo || f > hi {
			return rangeError(atomText(a), !math.IsInf(lo, -1) && lo != -math.MaxFloat64, !math.IsInf(hi, 1) && hi != math.MaxFloat64, f < lo, Real(lo), Real(hi))
		}
	case TypeString:
		if bt.MinLength > 0 || bt.MaxLength != math.MaxInt {
			n := utf8.RuneCountInString(a.s)
			if n < bt.MinLength {
				return Errorf(ErrConstraintViolation, "%s length %d is less than minimum allowed length %d", AppendJSONString(nil, a.s), n, bt.MinLength)
			}
			if n > bt.MaxLength {
				return Errorf(ErrConstraintViolation, "%s length %d is greater than maximum allowed length %d", AppendJSONString(nil, a.s), n, bt.MaxLength)
			}
		}
	}
	return nil
}

// rangeError is ovsdb-server's message for a number v outside its
// column's bounds: a range when both are set, else the one it crosses.
func rangeError(v string, hasMin, hasMax, below bool, lo, hi Atom) error {
	switch {
	case hasMin && hasMax:
		return Errorf(ErrConstraintViolation, "%s is not in the valid range %s to %s (inclusive)", v, atomText(lo), atomText(hi))
	case below:
		return Errorf(ErrConstraintViolation, "%s is less than minimum allowed value %s", v, atomText(lo))
	}
	return Errorf(ErrConstraintViolation, "%s is greater than maximum allowed value %s", v, atomText(hi))
}

// enumForMsg lists an enum's values as ovsdb-server does: [a, b, c].
func enumForMsg(d *Datum) string {
	parts := make([]string, len(d.Keys))
	for i, k := range d.Keys {
		parts[i] = atomText(k)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// DecodeDatum decodes the JSON value of a column of type ct: an atom (a
// one-element set), ["set", [...]], or ["map", [[k, v], ...]], and checks
// the element count and every atom's constraints. Duplicate set elements or
// map keys are a syntax error, as in ovsdb-server.
func DecodeDatum(v any, ct *ColumnType, names NameResolver) (Datum, error) {
	var d Datum
	if ct.IsMap() {
		inner, raw, err := unwrap(v, "map")
		if err != nil {
			return Datum{}, err
		}
		var keys, values []Atom
		if raw != nil {
			if err := checkCount(v, ct, raw.n); err != nil {
				return Datum{}, err
			}
			keys, values, err = raw.decodeMap(ct, names)
		} else {
			if err := checkCount(v, ct, len(inner)); err != nil {
				return Datum{}, err
			}
			keys, values, err = decodePairs(inner, ct, names)
		}
		if err != nil {
			return Datum{}, err
		}
		if !isSortedUnique(keys) {
			sortPairs(keys, values)
			if !isSortedUnique(keys) {
				return Datum{}, Errorf(ErrOVSDB, "map contains duplicate key")
			}
		}
		return Datum{Keys: keys, Values: values}, nil
	} else if arr, ok := v.([]any); ok && len(arr) == 2 && arr[0] == "set" {
		var keys []Atom
		switch inner := arr[1].(type) {
		case []any:
			if err := checkCount(v, ct, len(inner)); err != nil {
				return Datum{}, err
			}
			keys = make([]Atom, len(inner))
			for i, e := range inner {
				var err error
				if keys[i], err = DecodeAtom(e, &ct.Key, names); err != nil {
					return Datum{}, err
				}
			}
		case *rawArray:
			if err := checkCount(v, ct, inner.n); err != nil {
				return Datum{}, err
			}
			var err error
			if keys, err = inner.decodeSet(&ct.Key, names); err != nil {
				return Datum{}, err
			}
		default:
			return Datum{}, syntaxErr(v, "expected [\"set\", <array>]")
		}
		d = Set(keys...)
		if len(d.Keys) != len(keys) {
			return Datum{}, Errorf(ErrOVSDB, "set contains duplicate")
		}
		return d, nil
	} else {
		a, err := DecodeAtom(v, &ct.Key, names)
		if err != nil {
			return Datum{}, err
		}
		d = Scalar(a)
	}
	if err := checkCount(v, ct, 1); err != nil {
		return Datum{}, err
	}
	return d, nil
}

// checkCount refuses a value v of n elements outside ct's bounds, with
// ovsdb-server's message ("unlimited" is its largest count).
func checkCount(v any, ct *ColumnType, n int) error {
	if n >= ct.Min && n <= ct.Max {
		return nil
	}
	if ct.Min == 1 && ct.Max == 1 {
		return syntaxErr(v, "%s must have exactly one member but %d are present", ct.describeKind(), n)
	}
	max := strconv.Itoa(ct.Max)
	if ct.Max == Unlimited {
		max = "4294967295"
	}
	return syntaxErr(v, "%s must have %d to %s members but %d are present", ct.describeKind(), ct.Min, max, n)
}

// decodePairs decodes the generic [key, value] pairs of a map.
func decodePairs(inner []any, ct *ColumnType, names NameResolver) (keys, values []Atom, err error) {
	keys = make([]Atom, len(inner))
	values = make([]Atom, len(inner))
	for i, e := range inner {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return nil, nil, syntaxErr(e, "expected 2-element array")
		}
		if keys[i], err = DecodeAtom(pair[0], &ct.Key, names); err != nil {
			return nil, nil, err
		}
		if values[i], err = DecodeAtom(pair[1], ct.Value, names); err != nil {
			return nil, nil, err
		}
	}
	return keys, values, nil
}

func (t *ColumnType) describeKind() string {
	if t.IsMap() {
		return "map"
	}
	return "set"
}

func maxString(n int) string {
	if n == Unlimited {
		return "unlimited"
	}
	return strconv.Itoa(n)
}

// unwrap returns the array of [tag, [...]]: generic, or as text when
// DecodeJSON left it so.
func unwrap(v any, tag string) ([]any, *rawArray, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 || arr[0] != tag {
		return nil, nil, syntaxErr(v, "expected [\"%s\", <array>]", tag)
	}
	switch inner := arr[1].(type) {
	case []any:
		return inner, nil, nil
	case *rawArray:
		return nil, inner, nil
	}
	return nil, nil, syntaxErr(v, "expected [\"%s\", <array>]", tag)
}

// AppendJSON appends d's JSON encoding for a column of type ct: a map as
// ["map", [[k, v], ...]], a one-element set as its atom, any other set as
// ["set", [...]].
func (d Datum) AppendJSON(b []byte, ct *ColumnType) []byte {
	if ct.IsMap() {
		b = append(b, `["map",[`...)
		for i, k := range d.Keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = k.AppendJSON(b)
			b = append(b, ',')
			b = d.Values[i].AppendJSON(b)
			b = append(b, ']')
		}
		return append(b, "]]"...)
	}
	if len(d.Keys) == 1 {
		return d.Keys[0].AppendJSON(b)
	}
	b = append(b, `["set",[`...)
	for i, k := range d.Keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = k.AppendJSON(b)
	}
	return append(b, "]]"...)
}

// AppendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		default:
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
