package controller

import (
	"strings"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// lookupSwitch is switch ls (key 1) with vm1 (port 1) and vm2 (port 2)
// here, whose ingress table 0 runs actions and table 1 sends to vm2 the
// packets that pass test, dropping the others.
func lookupSwitch(match, actions, test string) *Input {
	ls, hv1 := id(1), id(2)
	var fs flowSet
	fs.add(ls, "ingress", 0, 100, match, actions)
	fs.add(ls, "ingress", 1, 100, test, `outport = "vm2"; output;`)
	fs.add(ls, "egress", 0, 0, "1", "output;")
	return &Input{
		Chassis: "hv1", ChassisUUID: hv1,
		Datapaths: []sb.DatapathBinding{{UUID: ls, TunnelKey: 1}},
		Ports: []sb.PortBinding{
			{UUID: id(10), LogicalPort: "vm1", Datapath: ls, TunnelKey: 1},
			{UUID: id(11), LogicalPort: "vm2", Datapath: ls, TunnelKey: 2},
		},
		Flows:      fs,
		AllChassis: []sb.Chassis{{UUID: hv1, Name: "hv1"}},
		VIFs:       map[string]uint32{"vm1": 1, "vm2": 2},
	}
}

func TestTranslateGetARP(t *testing.T) {
	in := lookupSwitch("ip4", `outport = "vm2"; reg0 = ip4.dst; get_arp(outport, reg0); next;`, "eth.dst != 00:00:00:00:00:00")
	ls := in.Datapaths[0].UUID
	in.MACBindings = []sb.MACBinding{
		{UUID: id(30), Datapath: ls, LogicalPort: "vm2", IP: "10.0.0.12", MAC: "0a:00:00:00:00:02"},
		{UUID: id(31), Datapath: ls, LogicalPort: "vm2", IP: "10.0.0.13", MAC: "0a:00:00:00:00:03"},
		{UUID: id(32), Datapath: ls, LogicalPort: "vm2", IP: "10.0.0.14", MAC: "0a:00:00:00:00:04"},
	}
	in.StaticMACBindings = []sb.StaticMACBinding{
		{UUID: id(33), Datapath: ls, LogicalPort: "vm2", IP: "10.0.0.13", MAC: "0a:00:00:00:00:33", OverrideDynamicMAC: true},
		{UUID: id(34), Datapath: ls, LogicalPort: "vm2", IP: "10.0.0.14", MAC: "0a:00:00:00:00:34"},
		{UUID: id(35), Datapath: ls, LogicalPort: "vm2", IP: "10.0.0.15", MAC: "0a:00:00:00:00:35"},
	}
	const ip = "in_port=1,ip,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:00:fe,nw_src=10.0.0.11,nw_dst="
	checkPackets(t, in, []packetCase{
		{"a learned binding", ip + "10.0.0.12", "set(eth_dst=0a:00:00:00:00:02),2"},
		{"a static binding overriding a learned one", ip + "10.0.0.13", "set(eth_dst=0a:00:00:00:00:33),2"},
		{"a learned binding over a static one", ip + "10.0.0.14", "set(eth_dst=0a:00:00:00:00:04),2"},
		{"a static binding alone", ip + "10.0.0.15", "set(eth_dst=0a:00:00:00:00:35),2"},
		// eth.dst is zero, and table 1 drops the packet.
		{"no binding", ip + "10.0.0.16", "set(eth_dst=00:00:00:00:00:00)"},
	})
}

func TestTranslateGetND(t *testing.T) {
	in := lookupSwitch("ip6", `outport = "vm2"; xxreg0 = ip6.dst; get_nd(outport, xxreg0); next;`, "eth.dst != 00:00:00:00:00:00")
	in.MACBindings = []sb.MACBinding{{UUID: id(30), Datapath: in.Datapaths[0].UUID, LogicalPort: "vm2", IP: "fd00::12", MAC: "0a:00:00:00:00:02"}}
	const ip = "in_port=1,ipv6,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:00:fe,ipv6_src=fd00::11,ipv6_dst="
	checkPackets(t, in, []packetCase{
		{"a learned binding", ip + "fd00::12", "set(eth_dst=0a:00:00:00:00:02),2"},
		{"no binding", ip + "fd00::13", "set(eth_dst=00:00:00:00:00:00)"},
	})
}

func TestTranslateLookupARP(t *testing.T) {
	in := lookupSwitch("arp", `reg9[2] = lookup_arp(inport, arp.spa, arp.sha); next;`, "reg9[2] == 1")
	in.MACBindings = []sb.MACBinding{{UUID: id(30), Datapath: in.Datapaths[0].UUID, LogicalPort: "vm1", IP: "10.0.0.11", MAC: "0a:00:00:00:00:01"}}
	const arp = "in_port=1,arp,dl_src=0a:00:00:00:00:01,dl_dst=ff:ff:ff:ff:ff:ff,arp_op=1,arp_spa=10.0.0.11,arp_tpa=10.0.0.1,arp_sha="
	// The lookup moves arp.sha into eth.src and back (no output: dropped).
	checkPackets(t, in, []packetCase{
		{"known", arp + "0a:00:00:00:00:01", "set(eth_src=0a:00:00:00:00:01),set(eth_src=0a:00:00:00:00:01),2"},
		{"another MAC", arp + "0a:00:00:00:00:09", "set(eth_src=0a:00:00:00:00:09),set(eth_src=0a:00:00:00:00:01)"},
		{"from another port", strings.Replace(arp, "in_port=1", "in_port=2", 1) + "0a:00:00:00:00:01", "set(eth_src=0a:00:00:00:00:01),set(eth_src=0a:00:00:00:00:01)"},
	})
}

func TestTranslateFDB(t *testing.T) {
	in := lookupSwitch("1", `outport = get_fdb(eth.dst); next;`, `outport == "vm2"`)
	in.FDBs = []sb.FDB{{UUID: id(30), DPKey: 1, MAC: "0a:00:00:00:00:02", PortKey: 2}, {UUID: id(31), DPKey: 7, MAC: "0a:00:00:00:00:07", PortKey: 2}}
	const pkt = "in_port=1,arp,dl_src=0a:00:00:00:00:01,dl_dst="
	checkPackets(t, in, []packetCase{
		{"learned", pkt + "0a:00:00:00:00:02", "2"},
		{"unknown", pkt + "0a:00:00:00:00:03", "drop"},
		{"learned on another datapath", pkt + "0a:00:00:00:00:07", "drop"},
	})
	in = lookupSwitch("1", `reg0[11] = lookup_fdb(inport, eth.src); next;`, "reg0[11] == 1")
	in.FDBs = []sb.FDB{{UUID: id(30), DPKey: 1, MAC: "0a:00:00:00:00:01", PortKey: 1}}
	checkPackets(t, in, []packetCase{
		{"learned here", "in_port=1,arp,dl_src=0a:00:00:00:00:01", "2"},
		{"learned on another port", "in_port=2,arp,dl_src=0a:00:00:00:00:01", "drop"},
		{"not learned", "in_port=1,arp,dl_src=0a:00:00:00:00:05", "drop"},
	})
}

// A backend that reaches itself through the VIP is hairpinned: detected,
// SNATed to the VIP, and its replies recognized by the rule the first
// packet learned.
func TestTranslateLBHairpin(t *testing.T) {
	// As northd's flows before ct_lb_mark do, reg1 and reg2[0..15] keep
	// the VIP and its port (the datapath starts with zero registers).
	in := lookupSwitch("ip4", `reg1 = 172.16.0.100; reg2[0..15] = 80; reg0[6] = chk_lb_hairpin(); reg0[12] = chk_lb_hairpin_reply(); next;`,
		"reg0[6] == 1 || reg0[12] == 1")
	tcp := "tcp"
	in.LoadBalancers = []sb.LoadBalancer{{UUID: id(40), Name: "lb0", Datapaths: []ovsdb.UUID{in.Datapaths[0].UUID}, Protocol: &tcp,
		VIPs: map[string]string{"172.16.0.100:80": "10.0.0.11:8080,10.0.0.12:8080"}, Options: map[string]string{"hairpin_orig_tuple": "true"}}}
	tr, _ := NewTranslator()
	out := tr.Translate(in)
	if len(out.Problems) > 0 {
		t.Fatal(out.Problems)
	}
	var snat int
	for _, r := range out.Rules {
		if r.Table == lookupTable("ct_snat_to_vip") && strings.Contains(r.String(), "nat(src=172.16.0.100)") {
			snat++
		}
	}
	if snat != 1 {
		t.Errorf("%d SNAT-to-VIP rules, want 1", snat)
	}
	const lb = "in_port=1,tcp,ct_mark=0x2,dl_src=0a:00:00:00:00:01,nw_src=10.0.0.11,tp_src=5555,"
	const reply = "in_port=1,tcp,dl_src=0a:00:00:00:00:01,nw_src=10.0.0.11,nw_dst=172.16.0.100,tp_src=8080,tp_dst=5555"
	checkPackets(t, in, []packetCase{
		{"a reply before any hairpin", reply, "drop"},
		{"to itself through the VIP", lb + "nw_dst=10.0.0.11,tp_dst=8080", "2"},
		{"its reply, learned", reply, "2"},
		{"to another backend", lb + "nw_dst=10.0.0.12,tp_dst=8080", "drop"},
		{"not load-balanced", "in_port=1,tcp,nw_src=10.0.0.11,nw_dst=10.0.0.11,tp_dst=8080", "drop"},
	})
}

func TestTranslateBadLookupRows(t *testing.T) {
	in := lookupSwitch("1", "next;", "1")
	ls := in.Datapaths[0].UUID
	in.MACBindings = []sb.MACBinding{
		{UUID: id(30), Datapath: ls, LogicalPort: "vm2", IP: "10.0.0.12", MAC: "not a mac"},
		{UUID: id(31), Datapath: ls, LogicalPort: "vm2", IP: "10.0.0.300", MAC: "0a:00:00:00:00:02"},
		{UUID: id(32), Datapath: ls, LogicalPort: "nosuch", IP: "10.0.0.12", MAC: "0a:00:00:00:00:02"},
	}
	in.FDBs = []sb.FDB{{UUID: id(33), DPKey: 1, MAC: "0a:00:00:00:00:zz", PortKey: 2}}
	in.LoadBalancers = []sb.LoadBalancer{{UUID: id(34), Name: "bad", Datapaths: []ovsdb.UUID{ls}, VIPs: map[string]string{"172.16.0.100:99999": "10.0.0.11"}}}
	tr, _ := NewTranslator()
	out := tr.Translate(in)
	want := []string{"bad MAC", "bad IP", "bad MAC", "Load_Balancer bad"}
	if len(out.Problems) != len(want) {
		t.Fatalf("problems %q, want %d", out.Problems, len(want))
	}
	for i, w := range want {
		if !strings.Contains(out.Problems[i], w) {
			t.Errorf("problem %d = %q, want it to say %q", i, out.Problems[i], w)
		}
	}
	install(t, out)
}

func TestParseVIPs(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]string
		want string
		err  bool
	}{
		{map[string]string{"10.0.0.1:80": "10.0.0.2:8080,10.0.0.3:8080"}, "10.0.0.1:80=10.0.0.2:8080,10.0.0.3:8080", false},
		{map[string]string{"10.0.0.1": "10.0.0.2"}, "10.0.0.1:0=10.0.0.2:0", false},
		{map[string]string{"[fd00::1]:80": "[fd00::2]:80"}, "[fd00::1]:80=[fd00::2]:80", false},
		{map[string]string{"fd00::1": "fd00::2"}, "[fd00::1]:0=[fd00::2]:0", false},
		{map[string]string{"10.0.0.1:80": ""}, "10.0.0.1:80=", false},
		{map[string]string{"10.0.0.1:80": "fd00::2"}, "", true},
		{map[string]string{"10.0.0.1:0": "10.0.0.2"}, "", true},
		{map[string]string{"x": "10.0.0.2"}, "", true},
	} {
		vips, err := parseVIPs(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("%v: err %v", tc.in, err)
			continue
		}
		if tc.err {
			continue
		}
		var b []string
		for _, be := range vips[0].backends {
			b = append(b, be.String())
		}
		if got := vips[0].vip.String() + "=" + strings.Join(b, ","); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.in, got, tc.want)
		}
	}
}
