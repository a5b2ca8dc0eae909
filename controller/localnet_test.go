package controller

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/switchd"
	"github.com/govn/govn/datapath/xlate"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// providerSwitch is switch pub (key 1) with localnet port ln (key 1,
// network physnet1, VLAN tag if tag > 0), vm1 here (port 1), vm2 on hv2
// and a localport lp (port 3); physnet1 is mapped to a bridge with ports
// 30 and 31. The logical flows forward by destination MAC, flood
// broadcasts and send unknown MACs to the localnet port.
func providerSwitch(tag int64) *Input {
	ls, hv1, hv2, enc2 := id(1), id(2), id(3), id(4)
	flows := []sb.LogicalFlow{
		{Pipeline: "ingress", TableID: 0, Priority: 0, Match: "1", Actions: "next;"},
		{Pipeline: "ingress", TableID: 1, Priority: 50, Match: "eth.dst == 0a:00:00:00:00:01", Actions: `outport = "vm1"; output;`},
		{Pipeline: "ingress", TableID: 1, Priority: 50, Match: "eth.dst == 0a:00:00:00:00:02", Actions: `outport = "vm2"; output;`},
		{Pipeline: "ingress", TableID: 1, Priority: 50, Match: "eth.dst == 0a:00:00:00:00:03", Actions: `outport = "lp"; output;`},
		{Pipeline: "ingress", TableID: 1, Priority: 70, Match: "eth.mcast", Actions: `outport = "_MC_flood"; output;`},
		{Pipeline: "ingress", TableID: 1, Priority: 0, Match: "1", Actions: `outport = "ln"; output;`},
		{Pipeline: "egress", TableID: 0, Priority: 0, Match: "1", Actions: "output;"},
	}
	for i := range flows {
		flows[i].UUID = id(byte(100 + i))
		flows[i].LogicalDatapath = &ls
	}
	ln := sb.PortBinding{UUID: id(10), LogicalPort: "ln", Datapath: ls, TunnelKey: 1, Type: "localnet", Options: map[string]string{"network_name": "physnet1"}}
	if tag > 0 {
		ln.Tag = &tag
	}
	return &Input{
		Chassis: "hv1", ChassisUUID: hv1,
		Datapaths: []sb.DatapathBinding{{UUID: ls, TunnelKey: 1}},
		Ports: []sb.PortBinding{ln,
			{UUID: id(11), LogicalPort: "vm1", Datapath: ls, TunnelKey: 2},
			{UUID: id(12), LogicalPort: "vm2", Datapath: ls, TunnelKey: 3, Chassis: &hv2},
			{UUID: id(13), LogicalPort: "lp", Datapath: ls, TunnelKey: 4, Type: "localport"},
		},
		Flows:      flows,
		Multicast:  []sb.MulticastGroup{{UUID: id(20), Datapath: ls, Name: "_MC_flood", TunnelKey: 32768, Ports: []ovsdb.UUID{id(10), id(11), id(12), id(13)}}},
		AllChassis: []sb.Chassis{{UUID: hv1, Name: "hv1"}, {UUID: hv2, Name: "hv2", Encaps: []ovsdb.UUID{enc2}}},
		Encaps:     []sb.Encap{{UUID: enc2, ChassisName: "hv2", IP: "192.168.0.12", Type: "geneve"}},
		VIFs:       map[string]uint32{"vm1": 1, "lp": 3},
		TunnelPort: 9,
		Physnets:   map[string][]uint32{"physnet1": {30, 31}},
		Hubs:       [][]uint32{{20, 21}},
	}
}

// packetCase is one packet and the datapath actions it must get.
type packetCase struct {
	name, packet, want string
}

func checkPackets(t *testing.T, in *Input, cases []packetCase) {
	t.Helper()
	tr, err := NewTranslator()
	if err != nil {
		t.Fatal(err)
	}
	out := tr.Translate(in)
	if len(out.Problems) > 0 {
		t.Fatalf("problems: %q", out.Problems)
	}
	p := install(t, out)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := parsePacket(tc.packet)
			if err != nil {
				t.Fatal(err)
			}
			res := p.Translate(&k, xlate.Options{})
			// What the packet learned applies to the next ones, as the
			// datapath installs it with the megaflow.
			if err := res.Learned.Install(); err != nil {
				t.Fatal(err)
			}
			if got := dpActions(res.Actions); got != tc.want {
				t.Errorf("%s:\n got %s\nwant %s (err %v)", tc.packet, got, tc.want, res.Err)
			}
		})
	}
}

// parsePacket reads a packet as ParseFlowSpec does, and a trailing
// ",icmp=TYPE/CODE", which ParseFlowSpec cannot take (ICMP type and code
// overlay the transport ports).
func parsePacket(s string) (flow.Key, error) {
	spec, icmp, ok := strings.Cut(s, ",icmp=")
	k, err := switchd.ParseFlowSpec(spec)
	if err != nil || !ok {
		return k, err
	}
	icmp, nd, _ := strings.Cut(icmp, ",")
	var ty, code uint64
	if _, err := fmt.Sscanf(icmp, "%d/%d", &ty, &code); err != nil {
		return k, fmt.Errorf("icmp=%s: %w", icmp, err)
	}
	k.Set(flow.ICMPType, ty)
	k.Set(flow.ICMPCode, code)
	// Then the ND fields, which need the ICMP type.
	for _, kv := range strings.Split(nd, ",") {
		name, v, _ := strings.Cut(kv, "=")
		switch name {
		case "":
		case "nd_target":
			ip, err := netip.ParseAddr(v)
			if err != nil {
				return k, err
			}
			b := ip.As16()
			k.SetU128(flow.NDTarget, flow.U128{Hi: binary.BigEndian.Uint64(b[:8]), Lo: binary.BigEndian.Uint64(b[8:])})
		case "nd_sll", "nd_tll":
			mac, err := net.ParseMAC(v)
			if err != nil {
				return k, err
			}
			f := flow.NDSLL
			if name == "nd_tll" {
				f = flow.NDTLL
			}
			k.Set(f, binary.BigEndian.Uint64(append([]byte{0, 0}, mac...)))
		default:
			return k, fmt.Errorf("after icmp=: %q", kv)
		}
	}
	return k, nil
}

func TestTranslateLocalnet(t *testing.T) {
	const arp = ",dl_type=0x0806"
	checkPackets(t, providerSwitch(0), []packetCase{
		{"provider network to a local VIF", "in_port=30,dl_src=0a:00:00:00:00:09,dl_dst=0a:00:00:00:00:01" + arp, "31,1"},
		{"tagged frames are not for an untagged localnet", "in_port=30,vlan_tci=0x1005,dl_dst=0a:00:00:00:00:01" + arp, "31"},
		{"a remote VIF is reached through the provider network, not the tunnel", "in_port=1,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:00:02" + arp, "30,31"},
		{"an unknown MAC goes out the localnet port", "in_port=1,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:00:09" + arp, "30,31"},
		{"a broadcast from the provider network does not go back", "in_port=31,dl_src=0a:00:00:00:00:09,dl_dst=ff:ff:ff:ff:ff:ff" + arp, "30,1,3"},
		{"a broadcast floods to the provider network, no tunnel", "in_port=1,dl_src=0a:00:00:00:00:01,dl_dst=ff:ff:ff:ff:ff:ff" + arp, "30,31,3"},
		{"a localport's broadcast stays here", "in_port=3,dl_src=0a:00:00:00:00:03,dl_dst=ff:ff:ff:ff:ff:ff" + arp, "1"},
		{"a localport's unicast to a remote VIF stays here", "in_port=3,dl_src=0a:00:00:00:00:03,dl_dst=0a:00:00:00:00:02" + arp, "drop"},
		{"a VIF reaches the localport", "in_port=1,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:00:03" + arp, "3"},
		{"other bridges stay hubs", "in_port=20" + arp, "21"},
	})
}

func TestTranslateLocalnetVLAN(t *testing.T) {
	const arp = ",dl_type=0x0806"
	checkPackets(t, providerSwitch(5), []packetCase{
		{"its VLAN is popped on the way in", "in_port=30,vlan_tci=0x1005,dl_src=0a:00:00:00:00:09,dl_dst=0a:00:00:00:00:01" + arp, "31,clone(pop_vlan,1)"},
		{"another VLAN is not its", "in_port=30,vlan_tci=0x1006,dl_dst=0a:00:00:00:00:01" + arp, "31"},
		{"untagged frames are not its", "in_port=30,dl_dst=0a:00:00:00:00:01" + arp, "31"},
		{"its VLAN is pushed on the way out", "in_port=1,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:00:02" + arp, "push_vlan(tpid=0x8100,tci=0x1000),set(vlan_tci=0x1005),30,31"},
	})
}

// A localnet port whose network is not mapped here is not plugged: a
// remote VIF is reached over the tunnel.
func TestTranslateLocalnetUnplugged(t *testing.T) {
	in := providerSwitch(0)
	in.Physnets = nil
	const arp = ",dl_type=0x0806"
	checkPackets(t, in, []packetCase{
		{"remote VIF over the tunnel", "in_port=1,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:00:02" + arp,
			"set(tun_id=0x1),set(tun_dst=192.168.0.12),set(tun_metadata0=0x20000/0x7fff0000),set(tun_metadata0=0x3/0xffff),9"},
		{"the bridge's ports lead nowhere", "in_port=30,dl_dst=0a:00:00:00:00:01" + arp, "drop"},
	})
}

func TestParseBridgeMappings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		err  bool
	}{
		{"", map[string]string{}, false},
		{"physnet1:br-ex", map[string]string{"physnet1": "br-ex"}, false},
		{"a:br1, b:br2", map[string]string{"a": "br1", "b": "br2"}, false},
		{"a", nil, true},
		{"a:", nil, true},
		{"a:br1,a:br2", nil, true},
	} {
		got, err := ParseBridgeMappings(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("%q: err %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if !tc.err && !sameMap(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		}
	}
}
