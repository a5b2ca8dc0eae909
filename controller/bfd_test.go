package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/pinctrl"
	"github.com/govn/govn/schema/sb"
)

func TestGatewayLiveness(t *testing.T) {
	// gatewaySetup: hv1 (here, priority prio1) and hv2 (priority 20).
	const viaTunnel = "clone(ct_clear,set(tun_id=0x2),set(tun_dst=192.168.0.12),set(tun_metadata0=0x10000/0x7fff0000),set(tun_metadata0=0x3/0xffff),9)"
	const outHere = "clone(ct_clear,set(eth_dst=0a:00:00:00:03:01),clone(ct_clear,30,31))"
	hv2 := id(5)
	for _, tc := range []struct {
		name    string
		prio1   int64
		bfd     map[string]bool
		claimed *ovsdb.UUID // Port_Binding.chassis of cr-lr-pub
		here    bool        // hv1 claims cr-lr-pub
		action  string
	}{
		{"standby, active alive", 10, map[string]bool{"hv2": true}, nil, false, viaTunnel},
		{"standby, active dead, another session up", 10, map[string]bool{"hv2": false, "hv3": true}, nil, true, outHere},
		{"standby, active dead, still claimed by it", 10, map[string]bool{"hv2": false, "hv3": true}, &hv2, true, outHere},
		{"standby cut off (no session up)", 10, map[string]bool{"hv2": false}, nil, false, viaTunnel},
		{"highest priority, a session up", 30, map[string]bool{"hv2": true}, nil, true, outHere},
		{"highest priority cut off", 30, map[string]bool{"hv2": false}, nil, false, viaTunnel},
		{"highest priority, no BFD", 30, nil, nil, true, outHere},
		{"standby, no BFD", 10, nil, nil, false, viaTunnel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := gatewaySetup(tc.prio1)
			in.BFD = tc.bfd
			for i := range in.Ports {
				if in.Ports[i].LogicalPort == "cr-lr-pub" {
					in.Ports[i].Chassis = tc.claimed
				}
			}
			tr, _ := NewTranslator()
			out := tr.Translate(in)
			if _, here := out.Bind["cr-lr-pub"]; here != tc.here {
				t.Errorf("hv1 claims cr-lr-pub: %v; want %v", here, tc.here)
			}
			checkPackets(t, in, []packetCase{{"to the external network", toExt, tc.action}})
		})
	}
}

func TestGatewayLivenessEngine(t *testing.T) {
	// The engine follows a BFD change as Translate does.
	in := gatewaySetup(10)
	in.BFD = map[string]bool{"hv2": true, "hv3": true}
	tr, _ := NewTranslator()
	e := NewEngine(tr, nil)
	for _, step := range []struct {
		bfd  map[string]bool
		here bool
	}{
		{map[string]bool{"hv2": true, "hv3": true}, false},
		{map[string]bool{"hv2": false, "hv3": true}, true},
		{map[string]bool{"hv2": true, "hv3": true}, false},
	} {
		in.BFD = step.bfd
		e.Load(in)
		if err := e.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, here := e.Bind()["cr-lr-pub"]; here != step.here {
			t.Errorf("BFD %v: hv1 claims cr-lr-pub: %v; want %v", step.bfd, here, step.here)
		}
	}
}

func TestBFDPeers(t *testing.T) {
	ch := func(n int) sb.Chassis {
		return sb.Chassis{UUID: id(byte(n)), Name: fmt.Sprintf("hv%d", n)}
	}
	enc := func(n int) sb.Encap {
		return sb.Encap{UUID: id(byte(50 + n)), ChassisName: fmt.Sprintf("hv%d", n), Type: "geneve", IP: fmt.Sprintf("192.168.0.%d", n)}
	}
	chassis := []sb.Chassis{ch(1), ch(2), ch(3), ch(4)}
	encaps := []sb.Encap{enc(1), enc(2), enc(3), enc(4)}
	c1, c2, c4 := id(1), id(2), id(4)
	members := []sb.HAChassis{{UUID: id(20), Chassis: &c1, Priority: 20}, {UUID: id(21), Chassis: &c2, Priority: 10},
		{UUID: id(22), Chassis: &c4, Priority: 5}}
	names := func(ps []pinctrl.TunnelPeer) string {
		s := ""
		for _, p := range ps {
			s += p.Chassis + "=" + p.IP.String() + " "
		}
		return s
	}
	pair := sb.HAChassisGroup{UUID: id(30), Name: "g", HAChassis: []ovsdb.UUID{id(20), id(21)}}
	for _, tc := range []struct {
		name   string
		me     string
		groups []sb.HAChassisGroup
		want   string
	}{
		{"member, no ref_chassis: every chassis", "hv1", []sb.HAChassisGroup{pair}, "hv2=192.168.0.2 hv3=192.168.0.3 hv4=192.168.0.4 "},
		{"other chassis, no ref_chassis: the members", "hv3", []sb.HAChassisGroup{pair}, "hv1=192.168.0.1 hv2=192.168.0.2 "},
		{"member with ref_chassis", "hv2", []sb.HAChassisGroup{{UUID: id(30), HAChassis: pair.HAChassis, RefChassis: []ovsdb.UUID{id(3)}}}, "hv1=192.168.0.1 hv3=192.168.0.3 "},
		{"not in ref_chassis", "hv4", []sb.HAChassisGroup{{UUID: id(30), HAChassis: pair.HAChassis, RefChassis: []ovsdb.UUID{id(3)}}}, ""},
		{"a group of one needs none", "hv1", []sb.HAChassisGroup{{UUID: id(31), HAChassis: []ovsdb.UUID{id(20)}}}, ""},
		{"two groups", "hv4", []sb.HAChassisGroup{pair, {UUID: id(32), HAChassis: []ovsdb.UUID{id(20), id(22)}, RefChassis: []ovsdb.UUID{id(2)}}},
			"hv1=192.168.0.1 hv2=192.168.0.2 "},
		{"unregistered", "hv9", []sb.HAChassisGroup{pair}, ""},
	} {
		if got := names(BFDPeers(tc.me, tc.groups, members, chassis, encaps)); got != tc.want {
			t.Errorf("%s: peers %q; want %q", tc.name, got, tc.want)
		}
	}
}

func TestBFDSessionConfig(t *testing.T) {
	c := BFDSessionConfig(map[string]string{"bfd-min-rx": "300", "bfd-min-tx": "50", "bfd-mult": "5"})
	if c.MinRx != 300*time.Millisecond || c.MinTx != 50*time.Millisecond || c.DetectMult != 5 {
		t.Errorf("config %+v", c)
	}
	c = BFDSessionConfig(map[string]string{"bfd-min-rx": "x", "bfd-min-tx": "-1", "bfd-mult": "256"})
	if c.MinRx != 0 || c.MinTx != 0 || c.DetectMult != 0 {
		t.Errorf("bad values taken: %+v; want the defaults (zero)", c)
	}
}

func TestBFDFromTunnelToPinctrl(t *testing.T) {
	in := gatewaySetup(30)
	in.BFD = map[string]bool{"hv2": true}
	checkPackets(t, in, []packetCase{
		{"BFD from the tunnel", "in_port=9,tun_id=0,udp,nw_dst=169.254.1.0,tp_src=49152,tp_dst=3784", "userspace(userdata=6266645f74756e6e656c)"},
		{"UDP 3784 inside a logical datapath is logical traffic", "in_port=9,tun_id=2,tun_metadata0=0x10003,udp,dl_dst=0a:00:00:00:ff:01,nw_dst=192.168.50.1,tp_dst=3784", "clone(ct_clear,30,31)"},
	})
	in.BFD = nil
	checkPackets(t, in, []packetCase{{"no BFD: no rule", "in_port=9,tun_id=0,udp,tp_dst=3784", "drop"}})
}
