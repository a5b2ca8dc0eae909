package switchd

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/govn/govn/datapath/flow"
)

func TestParsePortSpec(t *testing.T) {
	tests := []struct {
		in      string
		want    PortSpec
		wantErr bool
	}{
		{in: "veth0", want: PortSpec{Name: "veth0", Kind: KindAFPacket}},
		{in: "veth0=tap", want: PortSpec{Name: "veth0", Kind: KindTAP}},
		{in: "br-int:7=internal", want: PortSpec{Name: "br-int", No: 7, Kind: KindInternal}},
		{in: "eth1:65279", want: PortSpec{Name: "eth1", No: 65279, Kind: KindAFPacket}},
		{in: "eth1:65280", wantErr: true},
		{in: "eth1:0", wantErr: true},
		{in: "eth1:-1", wantErr: true},
		{in: "eth1:x", wantErr: true},
		{in: "eth1=vhost", wantErr: true},
		{in: "", wantErr: true},
		{in: ":3", wantErr: true},
		{in: "a/b", wantErr: true},
		{in: "sixteen-bytes-xx", wantErr: true},
		{in: "tun=geneve:192.168.1.1", want: PortSpec{Name: "tun", Kind: KindGeneve, Local: netip.MustParseAddrPort("192.168.1.1:6081")}},
		{in: "tun:9=vxlan:192.168.1.1", want: PortSpec{Name: "tun", No: 9, Kind: KindVXLAN, Local: netip.MustParseAddrPort("192.168.1.1:4789")}},
		{in: "t=geneve:10.0.0.1:7000", want: PortSpec{Name: "t", Kind: KindGeneve, Local: netip.MustParseAddrPort("10.0.0.1:7000")}},
		{in: "t=vxlan:fd00::1", want: PortSpec{Name: "t", Kind: KindVXLAN, Local: netip.MustParseAddrPort("[fd00::1]:4789")}},
		{in: "t=geneve:[fd00::1]:7000", want: PortSpec{Name: "t", Kind: KindGeneve, Local: netip.MustParseAddrPort("[fd00::1]:7000")}},
		{in: "t=geneve:0.0.0.0", want: PortSpec{Name: "t", Kind: KindGeneve, Local: netip.MustParseAddrPort("0.0.0.0:6081")}},
		{in: "t=geneve", wantErr: true},
		{in: "t=geneve:", wantErr: true},
		{in: "t=geneve:host.example", wantErr: true},
		{in: "t=geneve:10.0.0.1:0", wantErr: true},
		{in: "t=geneve:10.0.0.1:70000", wantErr: true},
		{in: "t=geneve:fe80::1%eth0", wantErr: true},
		{in: "t=geneve:[fe80::1%eth0]:6081", wantErr: true}, // a zone, with a port as without
		{in: "t=gre:10.0.0.1", wantErr: true},
		{in: "v=tap:10.0.0.1", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParsePortSpec(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
			t.Errorf("ParsePortSpec(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestNumberPorts(t *testing.T) {
	got, err := numberPorts([]PortSpec{{Name: "a"}, {Name: "b", No: 1}, {Name: "c"}, {Name: "d", No: 3}, {Name: "e"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint32{"a": 2, "b": 1, "c": 4, "d": 3, "e": 5}
	for _, s := range got {
		if want[s.Name] != s.No {
			t.Errorf("port %s numbered %d, want %d", s.Name, s.No, want[s.Name])
		}
	}
	if _, err := numberPorts([]PortSpec{{Name: "a", No: 2}, {Name: "b", No: 2}}); err == nil {
		t.Error("two ports numbered 2: no error")
	}
	if _, err := numberPorts([]PortSpec{{Name: "a"}, {Name: "a"}}); err == nil {
		t.Error("one device twice: no error")
	}
}

func TestParseArgs(t *testing.T) {
	opts, err := ParseArgs([]string{"--unixctl=/tmp/x.ctl", "--flows", "f.txt", "--port", "v1", "--port=v2:5=tap"})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Unixctl: "/tmp/x.ctl", Flows: "f.txt", Ports: []PortSpec{{Name: "v1", Kind: KindAFPacket}, {Name: "v2", No: 5, Kind: KindTAP}}}
	if !reflect.DeepEqual(opts, want) {
		t.Errorf("ParseArgs = %+v, want %+v", opts, want)
	}
	if opts, _ := ParseArgs(nil); opts.Unixctl != DefaultUnixctl {
		t.Errorf("default unixctl %q, want %q", opts.Unixctl, DefaultUnixctl)
	}
	for _, bad := range [][]string{{"extra"}, {"--port", "a:1", "--port", "b:1"}, {"--port", "a=x"}, {"--nosuch"}} {
		if _, err := ParseArgs(bad); err == nil {
			t.Errorf("ParseArgs(%q): no error", bad)
		}
	}
}

func TestParseFlows(t *testing.T) {
	in := `# comment
  # indented comment

table=0,priority=100,in_port=1 actions=output:2
 cookie=0x5, duration=12.5s, table=1, n_packets=10, n_bytes=840, idle_age=3, priority=7,ip actions=drop
`
	rules, err := ParseFlows(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 {
		t.Fatalf("%d rules, want 2", len(rules))
	}
	if r := rules[1]; r.Table != 1 || r.Priority != 7 || r.Cookie != 5 || r.Match.Key.Get(flow.EthType) != 0x800 {
		t.Errorf("ovs-ofctl style rule parsed as %s", r.String())
	}
	_, err = ParseFlows(strings.NewReader("in_port=1 actions=output:2\n\nin_port=2 actions=nosuch\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("bad line 3: error %v, want one naming line 3", err)
	}
	if _, err := ParseFlows(strings.NewReader("in_port=1\n")); err == nil {
		t.Error("a rule without actions: no error")
	}
}

func TestParseFlowSpecICMP(t *testing.T) {
	k, err := ParseFlowSpec("in_port=1,icmp,nw_src=10.0.0.1,icmp_type=8,icmp_code=0")
	if err != nil {
		t.Fatal(err)
	}
	if k.Get(flow.ICMPType) != 8 || k.Get(flow.NWProto) != 1 {
		t.Errorf("icmp_type %d, nw_proto %d", k.Get(flow.ICMPType), k.Get(flow.NWProto))
	}
	if _, err := ParseFlowSpec("in_port=1,tcp,tp_src=0x8/0xff"); err == nil {
		t.Error("a masked tp_src: no error")
	}
}

func TestParseFlowSpec(t *testing.T) {
	k, err := ParseFlowSpec("in_port=3,tcp,nw_src=10.0.0.1,tp_dst=443")
	if err != nil {
		t.Fatal(err)
	}
	if k.Get(flow.InPort) != 3 || k.Get(flow.EthType) != 0x800 || k.Get(flow.NWProto) != 6 || k.Get(flow.TPDst) != 443 || k.Get(flow.NWSrc) != 0x0a000001 {
		t.Errorf("key %s", k.String())
	}
	for _, bad := range []string{"", "  ", "in_port=1 actions=drop", "nw_src=10.0.0.0/8", "priority=5", "x=1", "tcp,tp_dst=0x10/0xf0"} {
		if _, err := ParseFlowSpec(bad); err == nil {
			t.Errorf("ParseFlowSpec(%q): no error", bad)
		}
	}
}

func FuzzParsePortSpec(f *testing.F) {
	for _, s := range []string{"veth0", "a:1=tap", "b=internal", "c:65279", ":", "=", "a:b:c=d=e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParsePortSpec(s)
		if err != nil {
			return
		}
		if spec.Name == "" || spec.No > maxPortNo || (spec.Kind != KindAFPacket && spec.Kind != KindTAP && spec.Kind != KindInternal) {
			t.Fatalf("ParsePortSpec(%q) = %+v", s, spec)
		}
	})
}

// FuzzParseFlows checks that a flow file either fails or yields rules that
// print as text ParseFlows reads back to the same rules.
func FuzzParseFlows(f *testing.F) {
	f.Add(testFlows)
	f.Add("cookie=0x1, duration=1s, table=2, n_packets=0, priority=5,udp,tp_dst=53 actions=ct(commit,zone=5),output:2\n")
	f.Add("# x\n\nin_port=1,dl_dst=02:00:00:00:00:01 actions=load:0x1->reg0[0..3],resubmit(,2)\n")
	f.Fuzz(func(t *testing.T, in string) {
		rules, err := ParseFlows(strings.NewReader(in))
		if err != nil {
			return
		}
		var b strings.Builder
		for i := range rules {
			b.WriteString(rules[i].String())
			b.WriteByte('\n')
		}
		again, err := ParseFlows(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("rules printed as\n%s\ndo not parse: %v", b.String(), err)
		}
		for i := range again {
			if again[i].String() != rules[i].String() {
				t.Fatalf("rule %d: %s reparsed as %s", i, rules[i].String(), again[i].String())
			}
		}
	})
}

func FuzzParseFlowSpec(f *testing.F) {
	for _, s := range []string{"in_port=1,icmp,nw_src=10.0.0.1", "tcp6,ipv6_dst=::1,tp_dst=80", "dl_dst=ff:ff:ff:ff:ff:ff", "reg0=5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseFlowSpec(s)
	})
}
