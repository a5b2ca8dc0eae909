package trace

import (
	"strings"
	"testing"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/lflow"
)

func symtab(t testing.TB) *lflow.Symtab {
	t.Helper()
	st, err := lflow.NewSymtab()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// microflowSeeds are microflows that parse; each also seeds the fuzz
// target.
var microflowSeeds = []string{
	`inport == "vm1" && eth.src == 0a:00:00:00:01:11 && eth.dst == 0a:00:00:00:01:01 && ip4.src == 10.0.1.11 && ip4.dst == 172.16.0.100 && tcp.src == 40000 && tcp.dst == 80`,
	`inport == "vm2" && eth.src == 0a:00:00:00:01:12 && eth.dst == 0a:00:00:00:01:01 && ip4.src == 10.0.1.12 && ip4.dst == 10.0.2.22 && icmp4`,
	`inport == "vm1" && eth.src == 0a:00:00:00:01:11 && ip4 && udp.dst == 53 && ip.ttl == 1`,
	`inport == "p" && eth.src == 00:00:00:00:00:01 && ip6.src == fe80::1 && ip6.dst == 2001:db8::2 && icmp6`,
	`inport == "p" && eth.src == 00:00:00:00:00:01 && ip6 && tcp.dst == 443 && tcp.flags == 0x12`,
	`inport == "p" && eth.dst == ff:ff:ff:ff:ff:ff && arp.op == 1 && arp.spa == 10.0.0.1 && arp.tpa == 10.0.0.2 && arp.sha == 00:00:00:00:00:01`,
	`inport == "p" && vlan.vid == 10 && eth.type == 0x800 && ip4.dst == 10.0.0.0/8`,
	`inport == "p" && ip4.dst == 10.0.0.1 && ip.dscp == 10 && ip.ecn == 1 && sctp.dst == 9`,
}

func TestParseMicroflow(t *testing.T) {
	st := symtab(t)
	m, err := ParseMicroflow(st, microflowSeeds[0])
	if err != nil {
		t.Fatal(err)
	}
	if m.Inport != "vm1" {
		t.Errorf("inport %q", m.Inport)
	}
	for f, want := range map[flow.Field]uint64{
		flow.EthType: 0x800, flow.NWProto: 6, flow.NWSrc: 0x0a00010b, flow.NWDst: 0xac100064,
		flow.TPSrc: 40000, flow.TPDst: 80, flow.NWTTL: 64, flow.TCPFlags: 0x002, flow.EthSrc: 0x0a0000000111,
	} {
		if got := m.Key.Get(f); got != want {
			t.Errorf("%s = %#x, want %#x", f, got, want)
		}
	}
	if strings.Join(m.Defaults, " ") != "nw_ttl=64 tcp_flags=2" {
		t.Errorf("defaults %v", m.Defaults)
	}
	// A value the expression gives is no default.
	m, err = ParseMicroflow(st, microflowSeeds[2])
	if err != nil {
		t.Fatal(err)
	}
	if m.Key.Get(flow.NWTTL) != 1 || strings.Contains(strings.Join(m.Defaults, " "), "nw_ttl") {
		t.Errorf("ip.ttl == 1: ttl %d, defaults %v", m.Key.Get(flow.NWTTL), m.Defaults)
	}
}

func TestParseMicroflowErrors(t *testing.T) {
	st := symtab(t)
	for _, tc := range []struct{ in, want string }{
		{``, "empty"},
		{`ip4.dst == 10.0.0.1`, "inport"},
		{`inport == "p" && tcp.dst == 80`, "eth.type must have one value"},
		{`inport == "p" && (ip4.dst == 10.0.0.1 || eth.src == 00:00:00:00:00:01)`, "more than one kind of packet"},
		{`inport == "p" && ip4.dst == {10.0.0.1, 10.0.0.2}`, "one value"},
		{`inport == "p" && ip4 && ip6`, "no packet"},
		{`inport == "p" && outport == "q"`, "computed by the pipeline"},
		{`inport == "p" && reg0 == 1`, "pipeline or connection-tracking"},
		{`inport == "p" && ct.est`, "pipeline or connection-tracking"},
		{`inport == {"p", "q"}`, "one port"},
		{`inport == "p" && ip4.dst ==`, "microflow"},
		{`inport == "p" && $set`, "microflow"},
	} {
		_, err := ParseMicroflow(st, tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMicroflow(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}

// TestBuildFrame checks that every seed's frame parses back to the key
// the microflow gave, on every field it set or defaulted.
func TestBuildFrame(t *testing.T) {
	st := symtab(t)
	for _, s := range microflowSeeds {
		m, err := ParseMicroflow(st, s)
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		b, err := BuildFrame(&m.Key, &m.Given)
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		var k flow.Key
		packet.Extract(b, &k)
		want := m.Given
		for _, d := range m.Defaults {
			name, _, _ := strings.Cut(d, "=")
			f, _ := flow.FieldByName(name)
			want.SetField(f)
		}
		for f := flow.EthSrc; f.Valid(); f++ {
			mask := want.Get(f)
			if got, want := k.GetU128(f).And(mask), m.Key.GetU128(f).And(mask); got != want {
				t.Errorf("%s: %s parses as %v, want %v", s, f, got, want)
			}
		}
	}
	// What the builder cannot express is refused, not traced wrongly.
	m, err := ParseMicroflow(st, `inport == "p" && ip4 && ip.frag == 1`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := BuildFrame(&m.Key, &m.Given); err == nil || !strings.Contains(err.Error(), "cannot build") {
		t.Errorf("a fragment: %v, want cannot build", err)
	}
}

// FuzzParseMicroflow: any text is parsed without a panic, and a
// microflow that parses builds a frame or says why not.
func FuzzParseMicroflow(f *testing.F) {
	for _, s := range microflowSeeds {
		f.Add(s)
	}
	st := symtab(f)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMicroflow(st, s)
		if err != nil {
			if m != nil {
				t.Fatalf("%q: error %v with a result", s, err)
			}
			return
		}
		if m.Inport == "" {
			t.Fatalf("%q: parsed without inport", s)
		}
		b, err := BuildFrame(&m.Key, &m.Given)
		if err == nil && len(b) < 60 {
			t.Fatalf("%q: %d-byte frame", s, len(b))
		}
	})
}
