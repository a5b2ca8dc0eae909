package ovsdb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Schema is a parsed database schema (an .ovsschema file).
type Schema struct {
	Name    string
	Version string
	Cksum   string
	// Tables maps each table name to its schema.
	Tables map[string]*TableSchema
	// TableNames lists the tables sorted by name.
	TableNames []string

	raw []byte
}

// TableSchema is the schema of one table.
type TableSchema struct {
	Name string
	// Columns lists the user columns sorted by name; Row.Data is indexed
	// the same way ([ColumnSchema.Index]).
	Columns []*ColumnSchema
	// MaxRows bounds the number of rows (0: unbounded).
	MaxRows int
	// IsRoot marks tables whose rows live without being referenced; rows of
	// other tables are garbage collected once nothing refers to them.
	IsRoot bool
	// Indexes lists sets of columns whose values must be unique together.
	Indexes [][]*ColumnSchema
	// HasRefs reports whether any column holds references to other rows.
	HasRefs bool

	byName map[string]*ColumnSchema
}

// Indexes of the two implicit columns in ColumnSchema.Index.
const (
	ColumnIndexUUID    = -1
	ColumnIndexVersion = -2
)

// The implicit columns every table has.
var (
	uuidColumn    = &ColumnSchema{Name: "_uuid", Index: ColumnIndexUUID, Type: ColumnType{Key: NewBaseType(TypeUUID), Min: 1, Max: 1}}
	versionColumn = &ColumnSchema{Name: "_version", Index: ColumnIndexVersion, Type: ColumnType{Key: NewBaseType(TypeUUID), Min: 1, Max: 1}}
)

// ColumnSchema is the schema of one column.
type ColumnSchema struct {
	Name string
	// Index is the column's position in TableSchema.Columns and Row.Data,
	// or ColumnIndexUUID / ColumnIndexVersion for _uuid and _version.
	Index int
	Type  ColumnType
	// Ephemeral columns are not written to disk.
	Ephemeral bool
	// Mutable is false for columns that may be set only on insert.
	Mutable bool
}

// Column returns the named column, including the implicit _uuid and
// _version, or nil.
func (t *TableSchema) Column(name string) *ColumnSchema {
	if c, ok := t.byName[name]; ok {
		return c
	}
	switch name {
	case "_uuid":
		return uuidColumn
	case "_version":
		return versionColumn
	}
	return nil
}

// ParseSchema parses an .ovsschema document.
func ParseSchema(data []byte) (*Schema, error) {
	var doc struct {
		Name    *string                    `json:"name"`
		Version string                     `json:"version"`
		Cksum   string                     `json:"cksum"`
		Tables  map[string]json.RawMessage `json:"tables"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parsing schema: %w", err)
	}
	if doc.Name == nil || !isIdentifier(*doc.Name) {
		return nil, fmt.Errorf("parsing schema: missing or invalid \"name\"")
	}
	if doc.Tables == nil {
		return nil, fmt.Errorf("schema %s: missing \"tables\"", *doc.Name)
	}
	s := &Schema{Name: *doc.Name, Version: doc.Version, Cksum: doc.Cksum, Tables: map[string]*TableSchema{}}
	anyRoot := false
	isRootGiven := map[string]bool{}
	for name, raw := range doc.Tables {
		if !isIdentifier(name) || name[0] == '_' {
			return nil, fmt.Errorf("schema %s: invalid table name %q", s.Name, name)
		}
		t, rootGiven, err := parseTableSchema(name, raw)
		if err != nil {
			return nil, fmt.Errorf("schema %s: table %s: %w", s.Name, name, err)
		}
		anyRoot = anyRoot || t.IsRoot
		isRootGiven[name] = rootGiven
		s.Tables[name] = t
		s.TableNames = append(s.TableNames, name)
	}
	sort.Strings(s.TableNames)
	// Schemas from before isRoot existed mark no table as root; then every
	// table is a root (ovsdb(5)).
	if !anyRoot {
		for _, t := range s.Tables {
			t.IsRoot = true
		}
	}
	for _, t := range s.Tables {
		for _, c := range t.Columns {
			for _, b := range []*BaseType{&c.Type.Key, c.Type.Value} {
				if b == nil || b.RefTable == "" {
					continue
				}
				if _, ok := s.Tables[b.RefTable]; !ok {
					return nil, fmt.Errorf("schema %s: table %s column %s refers to unknown table %q", s.Name, t.Name, c.Name, b.RefTable)
				}
				t.HasRefs = true
			}
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, err
	}
	s.raw = buf.Bytes()
	return s, nil
}

// MustParseSchema is ParseSchema for tests; it panics on error.
func MustParseSchema(data []byte) *Schema {
	s, err := ParseSchema(data)
	if err != nil {
		panic(err)
	}
	return s
}

// JSON returns the schema document, compacted. The caller must not modify it.
func (s *Schema) JSON() []byte { return s.raw }

// Table returns the named table or nil.
func (s *Schema) Table(name string) *TableSchema { return s.Tables[name] }

func parseTableSchema(name string, raw json.RawMessage) (*TableSchema, bool, error) {
	var doc struct {
		Columns map[string]json.RawMessage `json:"columns"`
		MaxRows *int                       `json:"maxRows"`
		IsRoot  *bool                      `json:"isRoot"`
		Indexes [][]string                 `json:"indexes"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, false, err
	}
	if len(doc.Columns) == 0 {
		return nil, false, fmt.Errorf("no columns")
	}
	t := &TableSchema{Name: name, byName: map[string]*ColumnSchema{}}
	if doc.MaxRows != nil {
		if *doc.MaxRows < 1 {
			return nil, false, fmt.Errorf("maxRows must be at least 1")
		}
		t.MaxRows = *doc.MaxRows
	}
	if doc.IsRoot != nil {
		t.IsRoot = *doc.IsRoot
	}
	names := make([]string, 0, len(doc.Columns))
	for n := range doc.Columns {
		if !isIdentifier(n) || n[0] == '_' {
			return nil, false, fmt.Errorf("invalid column name %q", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		var cdoc struct {
			Type      json.RawMessage `json:"type"`
			Ephemeral *bool           `json:"ephemeral"`
			Mutable   *bool           `json:"mutable"`
		}
		if err := json.Unmarshal(doc.Columns[n], &cdoc); err != nil {
			return nil, false, fmt.Errorf("column %s: %w", n, err)
		}
		if cdoc.Type == nil {
			return nil, false, fmt.Errorf("column %s: missing type", n)
		}
		ct, err := parseColumnType(cdoc.Type)
		if err != nil {
			return nil, false, fmt.Errorf("column %s: %w", n, err)
		}
		c := &ColumnSchema{Name: n, Index: i, Type: ct, Mutable: true}
		if cdoc.Ephemeral != nil {
			c.Ephemeral = *cdoc.Ephemeral
		}
		if cdoc.Mutable != nil {
			c.Mutable = *cdoc.Mutable
		}
		t.Columns = append(t.Columns, c)
		t.byName[n] = c
	}
	for _, idx := range doc.Indexes {
		if len(idx) == 0 {
			return nil, false, fmt.Errorf("empty index")
		}
		var cols []*ColumnSchema
		for _, n := range idx {
			c := t.Column(n)
			if c == nil {
				return nil, false, fmt.Errorf("index refers to unknown column %q", n)
			}
			if c.Ephemeral {
				return nil, false, fmt.Errorf("index column %q is ephemeral", n)
			}
			cols = append(cols, c)
		}
		t.Indexes = append(t.Indexes, cols)
	}
	return t, doc.IsRoot != nil, nil
}

// IsIdentifier reports whether s is an <id> of RFC 7047: a letter or '_'
// followed by letters, digits and '_'.
func IsIdentifier(s string) bool { return isIdentifier(s) }

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
