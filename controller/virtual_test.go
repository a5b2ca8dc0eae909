package controller

import (
	"slices"
	"testing"

	"github.com/govn/govn/datapath/switchd"
	"github.com/govn/govn/datapath/xlate"
	"github.com/govn/govn/schema/sb"
)

// TestTranslateVirtualPort: a virtual port (key 4, MAC :04) bound here,
// or to no chassis, behind vm2 is resident: it is bound, and traffic to
// it leaves by vm2's interface; behind a parent of another chassis, or
// bound to another chassis, it is not.
func TestTranslateVirtualPort(t *testing.T) {
	tr, err := NewTranslator()
	if err != nil {
		t.Fatal(err)
	}
	const toVIP = "in_port=1,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:00:04,dl_type=0x0806"
	for _, tc := range []struct {
		name    string
		parent  string
		chassis byte // id of the Port_Binding's chassis; 0 none
		bound   bool
		want    string
	}{
		{"behind vm2, bound here", "vm2", 2, true, "2"},
		{"behind vm3 (remote)", "vm3", 2, false, "drop"},
		{"bound to hv2", "vm2", 3, false,
			"set(tun_id=0x1),set(tun_dst=192.168.0.12),set(tun_metadata0=0x10000/0x7fff0000),set(tun_metadata0=0x4/0xffff),9"},
		{"not bound, behind vm2: claimed", "vm2", 0, true, "2"},
		{"not bound, behind vm3 (remote)", "vm3", 0, false, "drop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := oneSwitch()
			parent := tc.parent
			v := sb.PortBinding{UUID: id(13), LogicalPort: "vip", Type: "virtual", Datapath: in.Datapaths[0].UUID, TunnelKey: 4, VirtualParent: &parent}
			if tc.chassis != 0 {
				ch := id(tc.chassis)
				v.Chassis = &ch
			}
			in.Ports = append(in.Ports, v)
			in.Zones["vip"] = 7
			ls := in.Datapaths[0].UUID
			in.Flows = append(in.Flows, sb.LogicalFlow{UUID: id(120), LogicalDatapath: &ls, Pipeline: "ingress", TableID: 1, Priority: 50,
				Match: "eth.dst == 0a:00:00:00:00:04", Actions: `outport = "vip"; output;`})
			out := tr.Translate(in)
			if len(out.Problems) > 0 {
				t.Fatalf("problems: %q", out.Problems)
			}
			if _, ok := out.Bind["vip"]; ok != tc.bound {
				t.Errorf("vip bound %v, want %v (%v)", ok, tc.bound, out.Bind)
			}
			p := install(t, out)
			k, err := switchd.ParseFlowSpec(toVIP)
			if err != nil {
				t.Fatal(err)
			}
			if got := dpActions(p.Translate(&k, xlate.Options{}).Actions); got != tc.want {
				t.Errorf("to the virtual port:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestReleaseVirtualPort: releasing a virtual port clears its
// virtual_parent with its chassis, as ovn-controller does; releasing a
// VIF writes only chassis and up.
func TestReleaseVirtualPort(t *testing.T) {
	parent, ch, yes := "vm2", id(2), true
	for _, tc := range []struct {
		name string
		p    sb.PortBinding
		cols []string
	}{
		{"virtual", sb.PortBinding{LogicalPort: "vip", Type: "virtual", Chassis: &ch, Up: &yes, VirtualParent: &parent},
			[]string{"chassis", "up", "virtual_parent"}},
		{"vif", sb.PortBinding{LogicalPort: "vm1", Chassis: &ch, Up: &yes}, []string{"chassis", "up"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			cols := release(&p)
			if !slices.Equal(cols, tc.cols) {
				t.Errorf("columns %q, want %q", cols, tc.cols)
			}
			if p.Chassis != nil || p.VirtualParent != nil || p.Up == nil || *p.Up {
				t.Errorf("after release: chassis %v virtual_parent %v up %v", p.Chassis, p.VirtualParent, p.Up)
			}
		})
	}
}
