package controller

import (
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// flowSet builds logical flows with deterministic UUIDs.
type flowSet []sb.LogicalFlow

func (fs *flowSet) add(dp ovsdb.UUID, pipeline string, table, prio int64, match, actions string) {
	d := dp
	*fs = append(*fs, sb.LogicalFlow{UUID: id(byte(100 + len(*fs))), LogicalDatapath: &d,
		Pipeline: pipeline, TableID: table, Priority: prio, Match: match, Actions: actions})
}

// gatewaySetup is switch ls1 (key 1) with vm1 here (port 1) and a
// router lr (key 2) between ls1 and the provider switch pub (key 3,
// localnet port ln on physnet1: ports 30 and 31) whose gateway port
// lr-pub has chassisredirect port cr-lr-pub, gateway chassis hv1 with
// priority prio1 and hv2 (encap 192.168.0.12) with 20. Traffic from vm1
// to the router's MAC is redirected to cr-lr-pub.
func gatewaySetup(prio1 int64) *Input {
	ls1, lr, pub, hv1, hv2, enc2 := id(1), id(2), id(3), id(4), id(5), id(6)
	grp, ha1, ha2 := id(7), id(8), id(9)
	var fs flowSet
	for _, dp := range []ovsdb.UUID{ls1, lr, pub} {
		fs.add(dp, "ingress", 0, 0, "1", "next;")
		fs.add(dp, "egress", 0, 0, "1", "output;")
	}
	fs.add(ls1, "ingress", 1, 50, "eth.dst == 0a:00:00:00:ff:01", `outport = "ls1-lr"; output;`)
	fs.add(lr, "ingress", 1, 50, `ip4.dst == 192.168.50.0/24 && is_chassis_resident("cr-lr-pub")`, `eth.dst = 0a:00:00:00:03:01; outport = "lr-pub"; output;`)
	fs.add(lr, "ingress", 1, 40, `ip4.dst == 192.168.50.0/24`, `outport = "cr-lr-pub"; output;`)
	fs.add(pub, "ingress", 1, 0, "1", `outport = "ln"; output;`)
	patch := func(n byte, dp ovsdb.UUID, name, peer string, key int64) sb.PortBinding {
		return sb.PortBinding{UUID: id(n), Datapath: dp, LogicalPort: name, Type: "patch", TunnelKey: key, Options: map[string]string{"peer": peer}}
	}
	return &Input{
		Chassis: "hv1", ChassisUUID: hv1,
		Datapaths: []sb.DatapathBinding{
			{UUID: ls1, TunnelKey: 1}, {UUID: pub, TunnelKey: 3},
			{UUID: lr, TunnelKey: 2, ExternalIDs: map[string]string{"logical-router": "x"}},
		},
		Ports: []sb.PortBinding{
			{UUID: id(10), Datapath: ls1, LogicalPort: "vm1", TunnelKey: 1},
			patch(11, ls1, "ls1-lr", "lr-ls1", 2),
			patch(12, lr, "lr-ls1", "ls1-lr", 1),
			patch(13, lr, "lr-pub", "pub-lr", 2),
			{UUID: id(14), Datapath: lr, LogicalPort: "cr-lr-pub", Type: "chassisredirect", TunnelKey: 3,
				Options: map[string]string{"distributed-port": "lr-pub"}, HAChassisGroup: &grp},
			patch(15, pub, "pub-lr", "lr-pub", 1),
			{UUID: id(16), Datapath: pub, LogicalPort: "ln", Type: "localnet", TunnelKey: 2, Options: map[string]string{"network_name": "physnet1"}},
		},
		Flows:           fs,
		HAChassisGroups: []sb.HAChassisGroup{{UUID: grp, Name: "lr-pub", HAChassis: []ovsdb.UUID{ha1, ha2}}},
		HAChassis:       []sb.HAChassis{{UUID: ha1, Chassis: &hv1, Priority: prio1}, {UUID: ha2, Chassis: &hv2, Priority: 20}},
		AllChassis:      []sb.Chassis{{UUID: hv1, Name: "hv1"}, {UUID: hv2, Name: "hv2", Encaps: []ovsdb.UUID{enc2}}},
		Encaps:          []sb.Encap{{UUID: enc2, ChassisName: "hv2", IP: "192.168.0.12", Type: "geneve"}},
		VIFs:            map[string]uint32{"vm1": 1},
		Zones:           map[string]uint16{"vm1": 5, "dnat:" + lr.String(): 7, "snat:" + lr.String(): 8},
		TunnelPort:      9,
		Physnets:        map[string][]uint32{"physnet1": {30, 31}},
	}
}

const toExt = "in_port=1,ip,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:ff:01,nw_src=10.0.1.11,nw_dst=192.168.50.1"

func TestTranslateGatewayHere(t *testing.T) {
	in := gatewaySetup(30)
	tr, _ := NewTranslator()
	if out := tr.Translate(in); out.Bind["cr-lr-pub"] != id(14) {
		t.Errorf("the active gateway does not claim cr-lr-pub: Bind = %v", out.Bind)
	}
	checkPackets(t, in, []packetCase{
		{"redirected here: out of the provider network", toExt,
			"clone(ct_clear,set(eth_dst=0a:00:00:00:03:01),clone(ct_clear,30,31))"},
		{"from the tunnel to the chassisredirect port", "in_port=9,tun_id=2,tun_metadata0=0x10003,ip,dl_dst=0a:00:00:00:ff:01,nw_dst=192.168.50.1",
			"clone(ct_clear,30,31)"},
	})
}

func TestTranslateGatewayElsewhere(t *testing.T) {
	in := gatewaySetup(10)
	tr, _ := NewTranslator()
	if out := tr.Translate(in); out.Bind["cr-lr-pub"] != (ovsdb.UUID{}) {
		t.Errorf("a standby gateway claims cr-lr-pub: Bind = %v", out.Bind)
	}
	checkPackets(t, in, []packetCase{
		{"redirected over the tunnel to the active gateway", toExt,
			"clone(ct_clear,set(tun_id=0x2),set(tun_dst=192.168.0.12),set(tun_metadata0=0x10000/0x7fff0000),set(tun_metadata0=0x3/0xffff),9)"},
	})
	// The other gateway has no Chassis row: this one takes over.
	in = gatewaySetup(10)
	in.AllChassis = in.AllChassis[:1]
	if out := tr.Translate(in); out.Bind["cr-lr-pub"] != id(14) {
		t.Errorf("the only live gateway does not claim cr-lr-pub: Bind = %v", out.Bind)
	}
}

// gatewayRouter is switch ls1 (key 1) with vm1 (port 1 if here) and a
// gateway router gr (key 2) on chassis hv1, joined by the l3gateway
// ports ls1-gr and gr-ls1; the router sends everything back to vm1.
func gatewayRouter(chassis string) *Input {
	ls1, gr, hv1, hv2, enc1, enc2 := id(1), id(2), id(3), id(4), id(5), id(6)
	var fs flowSet
	for _, dp := range []ovsdb.UUID{ls1, gr} {
		fs.add(dp, "ingress", 0, 0, "1", "next;")
		fs.add(dp, "egress", 0, 0, "1", "output;")
	}
	fs.add(ls1, "ingress", 1, 50, "eth.dst == 0a:00:00:00:ff:01", `outport = "ls1-gr"; output;`)
	fs.add(ls1, "ingress", 1, 50, "eth.dst == 0a:00:00:00:00:01", `outport = "vm1"; output;`)
	fs.add(gr, "ingress", 1, 50, "ip4", `eth.dst = 0a:00:00:00:00:01; outport = "gr-ls1"; flags.loopback = 1; output;`)
	l3gw := func(n byte, dp ovsdb.UUID, name, peer string, key int64) sb.PortBinding {
		return sb.PortBinding{UUID: id(n), Datapath: dp, LogicalPort: name, Type: "l3gateway", TunnelKey: key, Chassis: &hv1,
			Options: map[string]string{"peer": peer, "l3gateway-chassis": "hv1"}}
	}
	in := &Input{
		Datapaths: []sb.DatapathBinding{{UUID: ls1, TunnelKey: 1}, {UUID: gr, TunnelKey: 2, ExternalIDs: map[string]string{"logical-router": "x"}}},
		Ports: []sb.PortBinding{
			{UUID: id(10), Datapath: ls1, LogicalPort: "vm1", TunnelKey: 1},
			l3gw(11, ls1, "ls1-gr", "gr-ls1", 2),
			l3gw(12, gr, "gr-ls1", "ls1-gr", 1),
		},
		Flows:      fs,
		AllChassis: []sb.Chassis{{UUID: hv1, Name: "hv1", Encaps: []ovsdb.UUID{enc1}}, {UUID: hv2, Name: "hv2", Encaps: []ovsdb.UUID{enc2}}},
		Encaps:     []sb.Encap{{UUID: enc1, ChassisName: "hv1", IP: "192.168.0.11", Type: "geneve"}, {UUID: enc2, ChassisName: "hv2", IP: "192.168.0.12", Type: "geneve"}},
		VIFs:       map[string]uint32{"vm1": 1},
		TunnelPort: 9,
	}
	in.Chassis, in.ChassisUUID = chassis, hv1
	if chassis == "hv2" {
		in.ChassisUUID = hv2
	}
	return in
}

func TestTranslateGatewayRouter(t *testing.T) {
	const toRouter = "in_port=1,ip,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:ff:01,nw_src=10.0.1.11,nw_dst=10.0.9.9"
	tr, _ := NewTranslator()
	in := gatewayRouter("hv1")
	out := tr.Translate(in)
	if out.Bind["ls1-gr"] != id(11) || out.Bind["gr-ls1"] != id(12) {
		t.Errorf("the gateway chassis does not claim its l3gateway ports: Bind = %v", out.Bind)
	}
	checkPackets(t, in, []packetCase{
		{"on the gateway chassis the router runs here", toRouter, "clone(ct_clear,set(eth_dst=0a:00:00:00:00:01),clone(ct_clear,1))"},
	})
	in = gatewayRouter("hv2")
	if out := tr.Translate(in); len(out.Bind) != 1 {
		t.Errorf("another chassis claims l3gateway ports: Bind = %v", out.Bind)
	}
	checkPackets(t, in, []packetCase{
		{"elsewhere the router is over the tunnel", toRouter,
			"set(tun_id=0x1),set(tun_dst=192.168.0.11),set(tun_metadata0=0x10000/0x7fff0000),set(tun_metadata0=0x2/0xffff),9"},
	})
}

func TestTranslateRequestedChassis(t *testing.T) {
	tr, _ := NewTranslator()
	for _, tc := range []struct {
		name      string
		requested string
		column    bool
		bound     bool
	}{
		{"none", "", false, true},
		{"this chassis by name", "hv1", false, true},
		{"this chassis by hostname", "host1", false, true},
		{"another chassis", "hv2", false, false},
		{"this chassis first of a list", "hv1,hv2", false, true},
		{"the column names this chassis", "", true, true},
	} {
		in := oneSwitch()
		in.AllChassis[0].Hostname = "host1"
		p := &in.Ports[0] // vm1, here
		if tc.requested != "" {
			p.Options = map[string]string{"requested-chassis": tc.requested}
		}
		if tc.column {
			p.RequestedChassis = &in.ChassisUUID
		}
		_, bound := tr.Translate(in).Bind["vm1"]
		if bound != tc.bound {
			t.Errorf("%s: bound %v, want %v", tc.name, bound, tc.bound)
		}
	}
	in := oneSwitch()
	other := in.AllChassis[1].UUID
	in.Ports[0].RequestedChassis = &other
	if _, bound := tr.Translate(in).Bind["vm1"]; bound {
		t.Errorf("bound although requested-chassis (column) is another chassis")
	}
}
