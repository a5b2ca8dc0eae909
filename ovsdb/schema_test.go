package ovsdb

import (
	"os"
	"strings"
	"testing"
)

// testSchema is a small schema exercising every type feature.
const testSchema = `{
  "name": "Test",
  "version": "1.0.0",
  "tables": {
    "Root": {
      "isRoot": true,
      "maxRows": 2,
      "columns": {
        "name": {"type": "string"},
        "children": {"type": {"key": {"type": "uuid", "refTable": "Child"}, "min": 0, "max": "unlimited"}},
        "watch": {"type": {"key": {"type": "uuid", "refTable": "Child", "refType": "weak"}, "min": 0, "max": "unlimited"}},
        "n": {"type": {"key": {"type": "integer", "minInteger": 0, "maxInteger": 100}}},
        "r": {"type": {"key": {"type": "real", "minReal": -1.5, "maxReal": 1.5}, "min": 0, "max": 1}},
        "color": {"type": {"key": {"type": "string", "enum": ["set", ["red", "green"]]}, "min": 0, "max": 1}},
        "opts": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}},
        "flag": {"type": "boolean", "mutable": false},
        "tmp": {"type": "integer", "ephemeral": true}
      },
      "indexes": [["name"]]
    },
    "Enum": {
      "isRoot": true,
      "columns": {
        "kind": {"type": {"key": {"type": "string", "enum": ["set", ["a", "b"]]}}}
      }
    },
    "Child": {
      "columns": {
        "label": {"type": {"key": {"type": "string", "minLength": 1, "maxLength": 4}}},
        "peers": {"type": {"key": {"type": "uuid", "refTable": "Child", "refType": "weak"}, "min": 0, "max": 2}}
      }
    }
  }
}`

func TestParseSchema(t *testing.T) {
	s, err := ParseSchema([]byte(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	root := s.Table("Root")
	if root == nil || !root.IsRoot || root.MaxRows != 2 || !root.HasRefs {
		t.Fatalf("Root parsed wrong: %+v", root)
	}
	if s.Table("Child").IsRoot {
		t.Error("Child should not be a root table")
	}
	var names []string
	for i, c := range root.Columns {
		if c.Index != i {
			t.Errorf("column %s has index %d, want %d", c.Name, c.Index, i)
		}
		names = append(names, c.Name)
	}
	if got, want := strings.Join(names, ","), "children,color,flag,n,name,opts,r,tmp,watch"; got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
	tests := []struct {
		col  string
		want string
	}{
		{"name", "string"},
		{"children", "set of uuid (0 to unlimited)"},
		{"opts", "map of string to string (0 to unlimited)"},
		{"r", "set of real (0 to 1)"},
	}
	for _, tt := range tests {
		if got := root.Column(tt.col).Type.String(); got != tt.want {
			t.Errorf("%s: type %q, want %q", tt.col, got, tt.want)
		}
	}
	if c := root.Column("watch"); c.Type.Key.RefType != RefWeak || c.Type.Key.RefTable != "Child" {
		t.Errorf("watch: %+v", c.Type.Key)
	}
	if c := root.Column("flag"); c.Mutable {
		t.Error("flag should be immutable")
	}
	if c := root.Column("tmp"); !c.Ephemeral {
		t.Error("tmp should be ephemeral")
	}
	if c := root.Column("color"); c.Type.Key.Enum == nil || c.Type.Key.Enum.Len() != 2 {
		t.Errorf("color enum: %+v", c.Type.Key.Enum)
	}
	if len(root.Indexes) != 1 || root.Indexes[0][0].Name != "name" {
		t.Errorf("indexes: %v", root.Indexes)
	}
	if root.Column("_uuid").Index != ColumnIndexUUID || root.Column("nope") != nil {
		t.Error("implicit columns wrong")
	}
}

func TestParseSchemaErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"not json", `{`, "parsing schema"},
		{"no name", `{"tables":{}}`, "name"},
		{"bad type", `{"name":"x","tables":{"T":{"columns":{"c":{"type":"float"}}}}}`, "unknown atomic type"},
		{"bad ref", `{"name":"x","tables":{"T":{"columns":{"c":{"type":{"key":{"type":"uuid","refTable":"U"}}}}}}}`, "unknown table"},
		{"bad min", `{"name":"x","tables":{"T":{"columns":{"c":{"type":{"key":"integer","min":2,"max":3}}}}}}`, "min must be"},
		{"bad max", `{"name":"x","tables":{"T":{"columns":{"c":{"type":{"key":"integer","max":"lots"}}}}}}`, "max must be"},
		{"range", `{"name":"x","tables":{"T":{"columns":{"c":{"type":{"key":{"type":"integer","minInteger":5,"maxInteger":1}}}}}}}`, "exceeds"},
		{"index col", `{"name":"x","tables":{"T":{"columns":{"c":{"type":"integer"}},"indexes":[["d"]]}}}`, "unknown column"},
		{"col name", `{"name":"x","tables":{"T":{"columns":{"_c":{"type":"integer"}}}}}`, "invalid column name"},
		{"enum type", `{"name":"x","tables":{"T":{"columns":{"c":{"type":{"key":{"type":"integer","enum":["set",["a"]]}}}}}}}`, "enum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSchema([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestParseSchemaNoRoots(t *testing.T) {
	s := MustParseSchema([]byte(`{"name":"x","tables":{"A":{"columns":{"c":{"type":"integer"}}},"B":{"columns":{"c":{"type":"integer"}}}}}`))
	for _, n := range s.TableNames {
		if !s.Tables[n].IsRoot {
			t.Errorf("table %s: a schema with no isRoot makes every table a root", n)
		}
	}
}

// TestParseRealSchemas parses the schemas of the installed OVN/OVS.
func TestParseRealSchemas(t *testing.T) {
	for _, path := range []string{"/usr/share/ovn/ovn-nb.ovsschema", "/usr/share/ovn/ovn-sb.ovsschema", "/usr/share/openvswitch/vswitch.ovsschema"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Logf("skipping %s: %v", path, err)
			continue
		}
		s, err := ParseSchema(data)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if len(s.Tables) < 5 {
			t.Errorf("%s: only %d tables", path, len(s.Tables))
		}
	}
}
