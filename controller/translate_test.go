package controller

import (
	"strings"
	"testing"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/switchd"
	"github.com/govn/govn/datapath/xlate"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// id makes a deterministic UUID from a small number.
func id(n byte) ovsdb.UUID {
	var b [16]byte
	b[0], b[15] = n, n
	return ovsdb.UUIDFromBytes(b)
}

// oneSwitch is a logical switch ls0 (key 1) with vm1 and vm2 bound here
// (ports 1 and 2) and vm3 on chassis hv2 (encap 192.168.0.12), and
// logical flows that forward by destination MAC and flood broadcasts.
func oneSwitch() *Input {
	ls, hv1, hv2, enc2 := id(1), id(2), id(3), id(4)
	pb := func(n byte, name string, key int64, ch *ovsdb.UUID) sb.PortBinding {
		return sb.PortBinding{UUID: id(n), LogicalPort: name, Datapath: ls, TunnelKey: key, Chassis: ch}
	}
	flows := []sb.LogicalFlow{
		{Pipeline: "ingress", TableID: 0, Priority: 0, Match: "1", Actions: "next;"},
		{Pipeline: "ingress", TableID: 1, Priority: 50, Match: "eth.dst == 0a:00:00:00:00:02", Actions: `outport = "vm2"; output;`},
		{Pipeline: "ingress", TableID: 1, Priority: 50, Match: "eth.dst == 0a:00:00:00:00:03", Actions: `outport = "vm3"; output;`},
		{Pipeline: "ingress", TableID: 1, Priority: 70, Match: "eth.mcast", Actions: `outport = "_MC_flood"; output;`},
		{Pipeline: "ingress", TableID: 1, Priority: 80, Match: `inport == "vm3" && eth.dst == 0a:00:00:00:00:01`, Actions: `drop;`},
		{Pipeline: "egress", TableID: 0, Priority: 0, Match: "1", Actions: "output;"},
	}
	for i := range flows {
		flows[i].UUID = id(byte(100 + i))
		flows[i].LogicalDatapath = &ls
	}
	return &Input{
		Chassis: "hv1", ChassisUUID: hv1,
		Datapaths:  []sb.DatapathBinding{{UUID: ls, TunnelKey: 1, ExternalIDs: map[string]string{"logical-switch": "x"}}},
		Ports:      []sb.PortBinding{pb(10, "vm1", 1, &hv1), pb(11, "vm2", 2, nil), pb(12, "vm3", 3, &hv2)},
		Flows:      flows,
		Multicast:  []sb.MulticastGroup{{UUID: id(20), Datapath: ls, Name: "_MC_flood", TunnelKey: 32768, Ports: []ovsdb.UUID{id(10), id(11), id(12)}}},
		AllChassis: []sb.Chassis{{UUID: hv1, Name: "hv1"}, {UUID: hv2, Name: "hv2", Encaps: []ovsdb.UUID{enc2}}},
		Encaps:     []sb.Encap{{UUID: enc2, ChassisName: "hv2", IP: "192.168.0.12", Type: "geneve"}},
		VIFs:       map[string]uint32{"vm1": 1, "vm2": 2},
		Zones:      map[string]uint16{"vm1": 5, "vm2": 6},
		TunnelPort: 9,
		Hubs:       [][]uint32{{20, 21}},
	}
}

// install loads out's rules into a fresh pipeline: the fake datapath.
func install(t *testing.T, out *Output) *dp.Pipeline {
	t.Helper()
	p := dp.NewPipeline()
	var b flow.Bundle
	for _, g := range out.Groups {
		b.AddGroup(g)
	}
	for _, r := range out.Rules {
		b.Add(r)
	}
	if _, err := p.Apply(b); err != nil {
		t.Fatalf("installing the translation: %v", err)
	}
	return p
}

func TestTranslateOneSwitch(t *testing.T) {
	tr, err := NewTranslator()
	if err != nil {
		t.Fatal(err)
	}
	in := oneSwitch()
	out := tr.Translate(in)
	if len(out.Problems) > 0 {
		t.Fatalf("problems: %q", out.Problems)
	}
	if _, ok := out.Bind["vm2"]; !ok || len(out.Bind) != 2 {
		t.Errorf("Bind = %v, want vm1 and vm2", out.Bind)
	}
	p := install(t, out)
	const arp = ",dl_type=0x0806"
	for _, tc := range []struct {
		name, packet string
		// want is the datapath actions, as printed; tunnel metadata
		// carries the inport key in bits 16-30, the outport in 0-15.
		want string
	}{
		{"unicast to a local VIF", "in_port=1,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:00:02" + arp, "2"},
		{"unknown destination", "in_port=1,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:00:09" + arp, "drop"},
		{"broadcast floods but not back to its port", "in_port=1,dl_src=0a:00:00:00:00:01,dl_dst=ff:ff:ff:ff:ff:ff" + arp,
			"clone(set(tun_id=0x1),set(tun_dst=192.168.0.12),set(tun_metadata0=0x10000/0x7fff0000),set(tun_metadata0=0x8000/0xffff),9),2"},
		{"unicast to a remote VIF", "in_port=2,dl_src=0a:00:00:00:00:02,dl_dst=0a:00:00:00:00:03" + arp,
			"set(tun_id=0x1),set(tun_dst=192.168.0.12),set(tun_metadata0=0x20000/0x7fff0000),set(tun_metadata0=0x3/0xffff),9"},
		{"from the tunnel to a local VIF", "in_port=9,tun_id=1,tun_metadata0=0x30002,dl_src=0a:00:00:00:00:03,dl_dst=0a:00:00:00:00:02" + arp, "2"},
		{"from the tunnel to an unknown datapath", "in_port=9,tun_id=7,tun_metadata0=0x30002" + arp, "drop"},
		{"hub port", "in_port=20" + arp, "21"},
		{"an unbound port's packets", "in_port=3,dl_dst=0a:00:00:00:00:02" + arp, "drop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := switchd.ParseFlowSpec(tc.packet)
			if err != nil {
				t.Fatal(err)
			}
			res := p.Translate(&k, xlate.Options{})
			got := dpActions(res.Actions)
			if got != tc.want {
				t.Errorf("%s:\n got %s\nwant %s", tc.packet, got, tc.want)
			}
		})
	}
}

func dpActions(acts []flow.DPAction) string {
	if len(acts) == 0 {
		return "drop"
	}
	var s []string
	for _, a := range acts {
		s = append(s, a.String())
	}
	return strings.Join(s, ",")
}

// A flow that does not compile is reported and the others still are.
func TestTranslateBadFlow(t *testing.T) {
	tr, err := NewTranslator()
	if err != nil {
		t.Fatal(err)
	}
	in := oneSwitch()
	ls := in.Datapaths[0].UUID
	in.Flows = append(in.Flows, sb.LogicalFlow{UUID: id(99), LogicalDatapath: &ls, Pipeline: "ingress", TableID: 2, Match: "eth.dst ==", Actions: "next;"})
	in.AddressSets = []sb.AddressSet{{Name: "bad", Addresses: []string{"not an address"}}}
	out := tr.Translate(in)
	if len(out.Problems) != 2 {
		t.Fatalf("problems = %q, want the flow and the address set", out.Problems)
	}
	p := install(t, out)
	k, _ := switchd.ParseFlowSpec("in_port=1,dl_dst=0a:00:00:00:00:02,dl_type=0x0806")
	if got := dpActions(p.Translate(&k, xlate.Options{}).Actions); got != "2" {
		t.Errorf("unicast after a bad flow: %s", got)
	}
}

// A port whose interface leaves is no longer bound nor reachable.
func TestTranslateUnbind(t *testing.T) {
	tr, err := NewTranslator()
	if err != nil {
		t.Fatal(err)
	}
	in := oneSwitch()
	delete(in.VIFs, "vm2")
	out := tr.Translate(in)
	if _, ok := out.Bind["vm2"]; ok {
		t.Errorf("vm2 still bound: %v", out.Bind)
	}
	p := install(t, out)
	k, _ := switchd.ParseFlowSpec("in_port=1,dl_dst=0a:00:00:00:00:02,dl_type=0x0806")
	if got := dpActions(p.Translate(&k, xlate.Options{}).Actions); got != "drop" {
		t.Errorf("unicast to an unbound port: %s", got)
	}
}

// A packet crosses switch, router and switch through patch ports: the
// router's datapath is local because a local switch's patch port leads
// to it.
func TestTranslatePatchPorts(t *testing.T) {
	tr, err := NewTranslator()
	if err != nil {
		t.Fatal(err)
	}
	ls1, ls2, lr, hv1 := id(1), id(2), id(3), id(4)
	var flows []sb.LogicalFlow
	add := func(dp ovsdb.UUID, pipeline string, table, prio int64, match, actions string) {
		d := dp
		flows = append(flows, sb.LogicalFlow{UUID: id(byte(100 + len(flows))), LogicalDatapath: &d,
			Pipeline: pipeline, TableID: table, Priority: prio, Match: match, Actions: actions})
	}
	for _, dp := range []ovsdb.UUID{ls1, ls2, lr} {
		add(dp, "ingress", 0, 0, "1", "next;")
		add(dp, "egress", 0, 0, "1", "output;")
	}
	add(ls1, "ingress", 1, 50, "eth.dst == 0a:00:00:00:ff:01", `outport = "ls1-lr"; output;`)
	add(lr, "ingress", 1, 50, "ip4.dst == 10.0.2.0/24", `ip.ttl--; eth.src = 0a:00:00:00:ff:02; eth.dst = 0a:00:00:00:00:02; outport = "lr-ls2"; output;`)
	add(ls2, "ingress", 1, 50, "eth.dst == 0a:00:00:00:00:02", `outport = "vm2"; output;`)
	patch := func(n byte, dp ovsdb.UUID, name, peer string, key int64) sb.PortBinding {
		return sb.PortBinding{UUID: id(n), Datapath: dp, LogicalPort: name, Type: "patch", TunnelKey: key, Options: map[string]string{"peer": peer}}
	}
	in := &Input{
		Chassis: "hv1", ChassisUUID: hv1,
		Datapaths: []sb.DatapathBinding{
			{UUID: ls1, TunnelKey: 1}, {UUID: ls2, TunnelKey: 2},
			{UUID: lr, TunnelKey: 3, ExternalIDs: map[string]string{"logical-router": "x"}},
		},
		Ports: []sb.PortBinding{
			{UUID: id(10), Datapath: ls1, LogicalPort: "vm1", TunnelKey: 1},
			patch(11, ls1, "ls1-lr", "lr-ls1", 2),
			patch(12, lr, "lr-ls1", "ls1-lr", 1),
			patch(13, lr, "lr-ls2", "ls2-lr", 2),
			patch(14, ls2, "ls2-lr", "lr-ls2", 1),
			{UUID: id(15), Datapath: ls2, LogicalPort: "vm2", TunnelKey: 2},
		},
		Flows: flows,
		VIFs:  map[string]uint32{"vm1": 1, "vm2": 2},
	}
	out := tr.Translate(in)
	if len(out.Problems) > 0 {
		t.Fatalf("problems: %q", out.Problems)
	}
	p := install(t, out)
	k, err := switchd.ParseFlowSpec("in_port=1,ip,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:ff:01,nw_src=10.0.1.11,nw_dst=10.0.2.12,nw_ttl=64")
	if err != nil {
		t.Fatal(err)
	}
	res := p.Translate(&k, xlate.Options{})
	got := dpActions(res.Actions)
	// Each patch port enters its peer's pipeline in a clone, without
	// conntrack state.
	const want = "clone(ct_clear,set(nw_ttl=63),set(eth_src=0a:00:00:00:ff:02),set(eth_dst=0a:00:00:00:00:02),clone(ct_clear,2))"
	if got != want {
		t.Errorf("routed packet (err %v):\n got %s\nwant %s", res.Err, got, want)
	}
}
