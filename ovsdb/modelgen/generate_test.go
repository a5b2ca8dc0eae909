package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
	"github.com/govn/govn/schema/vswitch"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestGenerateGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/small.ovsschema")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Generate("small", data)
	if err != nil {
		t.Fatal(err)
	}
	golden := "testdata/small_model.go.golden"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("generated code differs from %s (run go test -update after checking the change)", golden)
	}
}

func TestGenerateErrors(t *testing.T) {
	for _, bad := range []string{``, `{}`, `{"name":"X","tables":{"T":{"columns":{"c":{"type":"nope"}}}}}`} {
		if _, err := Generate("x", []byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{
		"Logical_Switch_Port": "LogicalSwitchPort", "external_ids": "ExternalIDs", "ACL": "ACL",
		"NB_Global": "NBGlobal", "sFlow": "SFlow", "dhcpv4_options": "DHCPv4Options",
		"ipv6_ra_configs": "IPv6RAConfigs", "hv_cfg": "HVCfg", "Open_vSwitch": "OpenVSwitch", "_x": "X",
	} {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGeneratedFilesUpToDate regenerates every schema/*/model_gen.go as its
// generate.go says and compares.
func TestGeneratedFilesUpToDate(t *testing.T) {
	dirs, err := filepath.Glob("../../schema/*/generate.go")
	if err != nil || len(dirs) < 3 {
		t.Fatalf("found %v (%v), want the nb, sb and vswitch generate.go files", dirs, err)
	}
	for _, gen := range dirs {
		src, err := os.ReadFile(gen)
		if err != nil {
			t.Fatal(err)
		}
		var args []string
		for _, line := range strings.Split(string(src), "\n") {
			if rest, ok := strings.CutPrefix(line, "//go:generate go run ../../ovsdb/modelgen "); ok {
				args = strings.Fields(rest)
			}
		}
		fs := flag.NewFlagSet("modelgen", flag.ContinueOnError)
		pkg := fs.String("package", "", "")
		out := fs.String("o", "model_gen.go", "")
		if err := fs.Parse(args); err != nil || fs.NArg() != 1 || *pkg == "" {
			t.Fatalf("%s: cannot understand the go:generate line (args %q)", gen, args)
		}
		dir := filepath.Dir(gen)
		schema, err := os.ReadFile(filepath.Join(dir, fs.Arg(0)))
		if err != nil {
			t.Fatal(err)
		}
		want, err := Generate(*pkg, schema)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, *out))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./schema/...", filepath.Join(dir, *out))
		}
	}
}

// rowFrom builds an ovsdb.Row of table t from named column data, as the
// client cache would hold it.
func rowFrom(t *ovsdb.TableSchema, id ovsdb.UUID, cols map[string]ovsdb.Datum) *ovsdb.Row {
	r := ovsdb.NewRow(t, id)
	for name, d := range cols {
		r.Data[t.Column(name).Index] = d
	}
	return r
}

func TestModelRoundTrip(t *testing.T) {
	nbSchema := ovsdb.MustParseSchema(mustRead(t, "../../schema/nb/ovn-nb.ovsschema"))
	tag := int64(7)
	lsp := nb.LogicalSwitchPort{
		UUID:         ovsdb.NewUUID(),
		Name:         "lsp1",
		Addresses:    []string{"00:00:00:00:00:01 10.0.0.1", "router"},
		ExternalIDs:  map[string]string{"k": "v", "a": "b"},
		Options:      map[string]string{"requested-chassis": "hv1"},
		Tag:          &tag,
		Type:         "",
		PortSecurity: []string{"00:00:00:00:00:01"},
	}
	up := true
	lsp.Up = &up
	hc := ovsdb.NewUUID()
	lsp.HAChassisGroup = &hc
	row := rowFrom(nbSchema.Tables[nb.LogicalSwitchPortTable], lsp.UUID, lsp.Row())
	var back nb.LogicalSwitchPort
	back.LoadRow(nbSchema.Tables[nb.LogicalSwitchPortTable], row)
	if !reflect.DeepEqual(back, lsp) {
		t.Errorf("round trip changed the row:\n got %+v\nwant %+v", back, lsp)
	}

	// Reals, integers and booleans in maps and scalars (vswitch has them).
	vsSchema := ovsdb.MustParseSchema(mustRead(t, "../../schema/vswitch/vswitch.ovsschema"))
	iface := vswitch.Interface{
		UUID:       ovsdb.NewUUID(),
		Name:       "veth1",
		Statistics: map[string]int64{"rx_packets": 5, "tx_packets": -1},
		Ofport:     &tag,
		Type:       "system",
	}
	row = rowFrom(vsSchema.Tables[vswitch.InterfaceTable], iface.UUID, iface.Row())
	var iback vswitch.Interface
	iback.LoadRow(vsSchema.Tables[vswitch.InterfaceTable], row)
	if !reflect.DeepEqual(iback, iface) {
		t.Errorf("round trip changed the interface:\n got %+v\nwant %+v", iback, iface)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
