package xlate

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govn/govn/datapath/flow"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// lbTables is a small OVN-shaped pipeline: port admission, a load-balancer
// stage with a VIP rule, conntrack with recirculation, and forwarding by MAC.
func lbTables(t testing.TB) *Translator {
	vip := func(m *flow.Match) {
		m.Set(flow.EthType, 0x0800)
		m.Set(flow.NWDst, ip("10.0.0.100"))
		m.Set(flow.NWProto, 6)
		m.Set(flow.TPDst, 80)
	}
	return New(program(t,
		ruleSpec{0, 100, func(m *flow.Match) { m.Set(flow.InPort, 1) }, []flow.Action{
			flow.Load{Dst: flow.Whole(flow.Reg14), Value: flow.U128{Lo: 1}}, flow.GotoTable{Table: 1}}},
		ruleSpec{1, 120, vip, []flow.Action{
			flow.Load{Dst: flow.Whole(flow.Reg1), Value: flow.U128{Lo: ip("10.0.0.100")}},
			flow.Load{Dst: flow.FieldRange{Field: flow.Reg2, Bits: 16}, Value: flow.U128{Lo: 80}},
			flow.CT{Zone: 7, Table: 2, NAT: &flow.NAT{}}}},
		ruleSpec{1, 0, matchAll, []flow.Action{flow.GotoTable{Table: 3}}},
		ruleSpec{2, 10, func(m *flow.Match) { m.SetMasked(flow.CTState, 0x21, 0x21) }, []flow.Action{flow.GotoTable{Table: 3}}},
		ruleSpec{3, 50, func(m *flow.Match) { m.Set(flow.EthDst, 0x0b) }, []flow.Action{flow.Output{Port: 2}}},
		ruleSpec{3, 0, matchAll, []flow.Action{flow.Controller{UserData: []byte{1, 2}}}},
	))
}

func TestGoldenTraces(t *testing.T) {
	tr := lbTables(t)
	var out strings.Builder
	trace := func(name string, k flow.Key) {
		res := tr.Translate(&k, Options{Trace: true})
		out.WriteString("## " + name + "\n" + res.FormatTrace() + "\n")
	}
	trace("client to server, not the VIP", tcpKey(40000, 8080))
	vipKey := tcpKey(40001, 80)
	vipKey.Set(flow.NWDst, ip("10.0.0.100"))
	trace("client to the VIP", vipKey)
	vipKey.Set(flow.RecircID, 1)
	vipKey.Set(flow.CTState, 0x21)
	trace("client to the VIP, after conntrack", vipKey)
	unknown := tcpKey(1, 2)
	unknown.Set(flow.EthDst, 0x0c)
	trace("unknown destination", unknown)

	path := filepath.Join("testdata", "traces.golden")
	if *update {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if out.String() != string(want) {
		t.Errorf("traces differ from %s (go test -update rewrites it):\n%s", path, out.String())
	}
}

func BenchmarkTranslate(b *testing.B) {
	tr := lbTables(b)
	k := tcpKey(40000, 8080)
	b.ReportAllocs()
	for b.Loop() {
		tr.Translate(&k, Options{})
	}
}
