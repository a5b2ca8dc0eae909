package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Format rewrites an OVSDB schema in govn's canonical layout: object keys
// sorted; the top level, the "tables" object, each table and its "columns"
// object one member per line, indented by two spaces; everything else
// (a column definition, the index lists) on one line. Numbers keep their
// exact text. The optional "cksum" member is dropped, since it describes the
// layout of a different file.
//
// Format is idempotent, so a test can check that a committed file is
// canonical by formatting it again.
func Format(schema []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("parse schema: trailing data after the schema object")
	}
	delete(root, "cksum")
	var buf bytes.Buffer
	if err := writeExpanded(&buf, root, 0); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// writeExpanded writes obj one member per line at the given depth. Depth 0
// is the schema, 1 is "tables", 2 a table, 3 its "columns"; members at the
// depths the layout expands are expanded in turn, the rest are compact.
func writeExpanded(buf *bytes.Buffer, obj map[string]any, depth int) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	indent := bytes.Repeat([]byte("  "), depth+1)
	buf.WriteString("{\n")
	for i, k := range keys {
		buf.Write(indent)
		kb, _ := json.Marshal(k) // a string always marshals
		buf.Write(kb)
		buf.WriteString(": ")
		v := obj[k]
		sub, isObj := v.(map[string]any)
		switch {
		case isObj && expands(depth, k):
			if err := writeExpanded(buf, sub, depth+1); err != nil {
				return err
			}
		default:
			if err := writeCompact(buf, v); err != nil {
				return fmt.Errorf("member %q: %w", k, err)
			}
		}
		if i < len(keys)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.Write(indent[:2*depth])
	buf.WriteByte('}')
	return nil
}

// expands reports whether member key of an object at depth gets one member
// per line: "tables" at the top, every table, and each table's "columns".
func expands(depth int, key string) bool {
	switch depth {
	case 0:
		return key == "tables"
	case 1:
		return true
	case 2:
		return key == "columns"
	}
	return false
}

// writeCompact writes v on one line with sorted keys and ", " / ": "
// separators, which read better than encoding/json's bare commas.
func writeCompact(buf *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteString(", ")
			}
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteString(": ")
			if err := writeCompact(buf, v[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteString(", ")
			}
			if err := writeCompact(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	return nil
}
