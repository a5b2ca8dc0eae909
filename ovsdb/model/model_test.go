package model

import (
	"reflect"
	"testing"

	"github.com/govn/govn/ovsdb"
)

const testSchema = `{"name":"T","version":"1.0.0","tables":{"R":{"columns":{
	"name":{"type":"string"},
	"count":{"type":"integer"},
	"ratio":{"type":"real"},
	"on":{"type":"boolean"},
	"peer":{"type":{"key":{"type":"uuid"},"min":0,"max":1}},
	"tags":{"type":{"key":"string","min":0,"max":"unlimited"}},
	"stats":{"type":{"key":"string","value":"integer","min":0,"max":"unlimited"}}}}}}`

// record is a model of table R as modelgen would generate it.
type record struct {
	UUID  ovsdb.UUID
	Name  string
	Count int64
	Ratio float64
	On    bool
	Peer  *ovsdb.UUID
	Tags  []string
	Stats map[string]int64
}

func (m *record) columns() []Column {
	return []Column{
		Scalar("name", &m.Name),
		Scalar("count", &m.Count),
		Scalar("ratio", &m.Ratio),
		Scalar("on", &m.On),
		Optional("peer", &m.Peer),
		Set("tags", &m.Tags),
		Map("stats", &m.Stats),
	}
}

// rowOf builds a row of t from named data, as the client cache holds it.
func rowOf(t *ovsdb.TableSchema, data map[string]ovsdb.Datum) *ovsdb.Row {
	r := ovsdb.NewRow(t, ovsdb.NewUUID())
	for name, d := range data {
		r.Data[t.Column(name).Index] = d
	}
	return r
}

func TestRoundTrip(t *testing.T) {
	table := ovsdb.MustParseSchema([]byte(testSchema)).Tables["R"]
	peer := ovsdb.NewUUID()
	for _, tc := range []struct {
		name string
		in   record
	}{
		{"zero", record{}},
		{"full", record{Name: "a", Count: -3, Ratio: 0.5, On: true, Peer: &peer,
			Tags: []string{"x", "y"}, Stats: map[string]int64{"rx": 1, "tx": 2}}},
		{"one element", record{Tags: []string{"only"}, Stats: map[string]int64{"k": 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			r := rowOf(table, Row(in.columns()))
			var out record
			Load(table, r, out.columns())
			if !reflect.DeepEqual(out, in) {
				t.Errorf("round trip: got %+v, want %+v", out, in)
			}
		})
	}
}

func TestRowData(t *testing.T) {
	peer := ovsdb.NewUUID()
	m := record{Name: "n", Count: 4, Peer: &peer, Tags: []string{"b", "a", "b"}, Stats: map[string]int64{"z": 1, "a": 2}}
	got := Row(m.columns())
	want := map[string]ovsdb.Datum{
		"name":  ovsdb.Scalar(ovsdb.String("n")),
		"count": ovsdb.Scalar(ovsdb.Integer(4)),
		"ratio": ovsdb.Scalar(ovsdb.Real(0)),
		"on":    ovsdb.Scalar(ovsdb.Boolean(false)),
		"peer":  ovsdb.Scalar(ovsdb.UUIDAtom(peer)),
		"tags":  ovsdb.Set(ovsdb.String("a"), ovsdb.String("b")),
		"stats": ovsdb.Map([]ovsdb.Atom{ovsdb.String("a"), ovsdb.String("z")}, []ovsdb.Atom{ovsdb.Integer(2), ovsdb.Integer(1)}),
	}
	if len(got) != len(want) {
		t.Fatalf("Row gave %d columns, want %d", len(got), len(want))
	}
	for name, w := range want {
		if g := got[name]; !g.Equal(w) {
			t.Errorf("column %s: got %v, want %v", name, g, w)
		}
	}
	var empty record
	for name, d := range Row(empty.columns()) {
		switch name {
		case "peer", "tags", "stats":
			if d.Len() != 0 {
				t.Errorf("empty %s: got %v", name, d)
			}
		}
	}
}

// TestLoadResets checks that loading overwrites every bound field: an
// empty column clears what the model held, and a column the table lacks
// leaves the field alone.
func TestLoadResets(t *testing.T) {
	table := ovsdb.MustParseSchema([]byte(testSchema)).Tables["R"]
	peer := ovsdb.NewUUID()
	m := record{Name: "old", Peer: &peer, Tags: []string{"t"}, Stats: map[string]int64{"k": 1}}
	cols := append(m.columns(), Scalar("not_in_schema", &m.Name))
	Load(table, ovsdb.NewRow(table, ovsdb.NewUUID()), cols)
	if m.Peer != nil || m.Tags != nil || m.Stats != nil {
		t.Errorf("empty columns did not clear the fields: %+v", m)
	}
	var other record
	Load(table, rowOf(table, map[string]ovsdb.Datum{"name": ovsdb.Scalar(ovsdb.String("new"))}),
		[]Column{Scalar("name", &other.Name), Scalar("missing", &other.Count)})
	if other.Name != "new" || other.Count != 0 {
		t.Errorf("got %+v", other)
	}
}

// TestLoadMalformedMap checks that a map datum without values (not one
// the server sends, but a caller can build it) loads as nil instead of
// crashing.
func TestLoadMalformedMap(t *testing.T) {
	table := ovsdb.MustParseSchema([]byte(testSchema)).Tables["R"]
	r := ovsdb.NewRow(table, ovsdb.NewUUID())
	r.Data[table.Column("stats").Index] = ovsdb.Datum{Keys: []ovsdb.Atom{ovsdb.String("k")}}
	var m record
	Load(table, r, m.columns())
	if m.Stats != nil {
		t.Errorf("got %v", m.Stats)
	}
}

func BenchmarkLoad(b *testing.B) {
	table := ovsdb.MustParseSchema([]byte(testSchema)).Tables["R"]
	peer := ovsdb.NewUUID()
	in := record{Name: "a", Count: 1, Peer: &peer, Tags: []string{"x", "y"}, Stats: map[string]int64{"rx": 1}}
	r := rowOf(table, Row(in.columns()))
	var out record
	b.ReportAllocs()
	for b.Loop() {
		Load(table, r, out.columns())
	}
}
