package ovsdb

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MemberKind is what a member of a JSON object must hold.
type MemberKind int

const (
	MemberString MemberKind = iota
	MemberID                // a string that is an identifier
	MemberArray
	MemberObject
	MemberBoolean
	MemberInteger
)

// MemberParser reads the members of a JSON object (an operation, a
// monitor request) as ovsdb-server does: the first member of the wrong
// type or missing is the object's error, and so, once the caller has
// read what it needs, is a member it never asked for. Either takes
// precedence over what the caller itself found wrong.
type MemberParser struct {
	op   map[string]any
	used map[string]bool
	// what names the object in errors ("table a"), or, when empty,
	// index and count do: "ovsdb operation 2 of 3".
	what         string
	index, count int
	err          *Error
}

// NewMemberParser returns a parser of obj, called what in its errors:
// "Parsing <what> failed: ...".
func NewMemberParser(obj map[string]any, what string) *MemberParser {
	return &MemberParser{op: obj, used: map[string]bool{}, what: what}
}

// fail records the object's first member error.
func (p *MemberParser) fail(format string, args ...any) {
	if p.err == nil {
		what := p.what
		if what == "" {
			what = fmt.Sprintf("ovsdb operation %d of %d", p.index, p.count)
		}
		p.err = &Error{Tag: ErrSyntax, Details: "Parsing " + what + " failed: " + fmt.Sprintf(format, args...), Syntax: syntaxText(p.op)}
	}
}

// Err returns the first member error, if any.
func (p *MemberParser) Err() error {
	if p.err == nil {
		return nil
	}
	return p.err
}

// Member returns member name, or nil when it is absent (recording an
// error unless optional) or of the wrong kind (recording an error).
func (p *MemberParser) Member(name string, kind MemberKind, optional bool) any {
	v, ok := p.op[name]
	if !ok {
		if !optional {
			p.fail("Required '%s' member is missing.", name)
		}
		return nil
	}
	p.used[name] = true
	if !kind.matches(v) {
		p.fail("Type mismatch for member '%s'.", name)
		return nil
	}
	return v
}

func (k MemberKind) matches(v any) bool {
	switch k {
	case MemberString:
		_, ok := v.(string)
		return ok
	case MemberID:
		s, ok := v.(string)
		return ok && isIdentifier(s)
	case MemberArray:
		switch v.(type) {
		case []any, *rawArray:
			return true
		}
	case MemberObject:
		_, ok := v.(map[string]any)
		return ok
	case MemberBoolean:
		_, ok := v.(bool)
		return ok
	case MemberInteger:
		switch v := v.(type) {
		case json.Number:
			_, ok := numberAsInteger(string(v))
			return ok
		case int64, int:
			return true
		}
	}
	return false
}

// table reads the "table" member and looks it up in schema.
func (p *MemberParser) table(schema *Schema) *TableSchema {
	v := p.Member("table", MemberString, false)
	if v == nil {
		return nil
	}
	ts := schema.Tables[v.(string)]
	if ts == nil {
		p.fail("No table named %s.", v.(string))
	}
	return ts
}

// Finish returns the object's error: the first member error, else a
// member that was present but not used, else execErr.
func (p *MemberParser) Finish(execErr error) error {
	if p.err != nil {
		return p.err
	}
	var unused []string
	for _, name := range serverOrder(p.op) {
		if !p.used[name] {
			unused = append(unused, name)
		}
	}
	switch len(unused) {
	case 0:
		return execErr
	case 1:
		p.fail("Member '%s' is present but not allowed here.", unused[0])
	case 2:
		p.fail("Member '%s' and 1 other member are present but not allowed here.", unused[0])
	default:
		p.fail("Member '%s' and %d other members are present but not allowed here.", unused[0], len(unused)-1)
	}
	return p.err
}

// typeEnglish describes a column type as ovsdb-server's error messages
// do: "integer", "set of up to 2 integers", "map of (string, string)
// pairs".
func (t *ColumnType) typeEnglish() string {
	if t.Min == 1 && t.Max == 1 {
		return t.Key.Type.String()
	}
	var count string
	switch {
	case t.Min == 0 && t.Max == Unlimited:
	case t.Min == 0:
		count = fmt.Sprintf("up to %d ", t.Max)
	case t.Max == Unlimited:
		count = fmt.Sprintf("%d or more ", t.Min)
	case t.Min == t.Max:
		count = fmt.Sprintf("exactly %d ", t.Min)
	default:
		count = fmt.Sprintf("%d to %d ", t.Min, t.Max)
	}
	if t.Value != nil {
		return fmt.Sprintf("map of %s(%s, %s) pairs", count, t.Key.Type, t.Value.Type)
	}
	return fmt.Sprintf("set of %s%ss", count, t.Key.Type)
}

// atomText writes an atom as ovsdb-server does in its messages: strings
// bare when they read as a plain word, quoted otherwise.
func atomText(a Atom) string {
	if a.t == TypeString {
		if stringNeedsQuotes(a.s) {
			return string(AppendJSONString(nil, a.s))
		}
		return a.s
	}
	if a.t == TypeReal {
		return strconv.FormatFloat(a.Float(), 'g', 15, 64)
	}
	return a.String()
}

// stringNeedsQuotes reports whether s would not read back as the same
// string unquoted: empty, not a word of letters, digits, '_', '-' and
// '.' starting with a letter or '_', or a boolean or UUID.
func stringNeedsQuotes(s string) bool {
	if s == "" || s == "true" || s == "false" {
		return true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
		if i == 0 && !letter {
			return true
		}
		if !letter && !(c >= '0' && c <= '9') && c != '-' && c != '.' {
			return true
		}
	}
	_, err := ParseUUID(s)
	return err == nil
}

// datumText writes a datum as ovsdb-server does in its messages: a
// scalar as its atom, a set as [a, b], a map as {k=v, ...}.
func datumText(d Datum, ct *ColumnType) string {
	if ct.IsMap() {
		parts := make([]string, len(d.Keys))
		for i, k := range d.Keys {
			parts[i] = atomText(k) + "=" + atomText(d.Values[i])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	if ct.Min == 1 && ct.Max == 1 && len(d.Keys) == 1 {
		return atomText(d.Keys[0])
	}
	parts := make([]string, len(d.Keys))
	for i, k := range d.Keys {
		parts[i] = atomText(k)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// englishList joins items as "a", "a and b", "a, b, and c".
func englishList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	case 2:
		return items[0] + " and " + items[1]
	}
	return strings.Join(items[:len(items)-1], ", ") + ", and " + items[len(items)-1]
}

// parseColumnSet parses a "columns" or "sort" array of distinct column
// names of ts.
func parseColumnSet(v any, ts *TableSchema) ([]*ColumnSchema, error) {
	arr, _ := v.([]any)
	cols := make([]*ColumnSchema, 0, len(arr))
	for _, e := range arr {
		n, ok := e.(string)
		if !ok {
			return nil, syntaxErr(v, "array of distinct column names expected")
		}
		c := ts.Column(n)
		if c == nil {
			return nil, syntaxErr(v, "%s is not a valid column name", n)
		}
		if slices.Contains(cols, c) {
			return nil, syntaxErr(v, "array of distinct column names expected")
		}
		cols = append(cols, c)
	}
	return cols, nil
}
