package trace

import (
	"context"
	"strings"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// uuid makes a deterministic UUID from a small number.
func uuid(n byte) ovsdb.UUID {
	var b [16]byte
	b[0], b[3], b[15] = n, n, n
	return ovsdb.UUIDFromBytes(b)
}

// oneSwitch is a Southbound by hand: switch ls0 with vm1 and vm2 bound
// on hv1 and vm3 on hv2, a flow forwarding by destination MAC, one that
// drops a source address (stage-hint of an "ACL"), and egress output.
func oneSwitch() *Southbound {
	ls, hv1, hv2, enc1, enc2 := uuid(1), uuid(2), uuid(3), uuid(4), uuid(5)
	pb := func(n byte, name string, key int64, ch ovsdb.UUID) sb.PortBinding {
		return sb.PortBinding{UUID: uuid(n), LogicalPort: name, Datapath: ls, TunnelKey: key, Chassis: &ch}
	}
	flows := []sb.LogicalFlow{
		{Pipeline: "ingress", TableID: 0, Priority: 100, Match: "ip4.src == 10.0.0.66", Actions: "drop;",
			ExternalIDs: map[string]string{"stage-name": "ls_in_acl", "stage-hint": "abcdef01"}},
		{Pipeline: "ingress", TableID: 0, Priority: 50, Match: "eth.dst == 0a:00:00:00:00:02", Actions: `outport = "vm2"; output;`,
			ExternalIDs: map[string]string{"stage-name": "ls_in_l2_lkup"}},
		{Pipeline: "ingress", TableID: 0, Priority: 50, Match: "eth.dst == 0a:00:00:00:00:03", Actions: `outport = "vm3"; output;`,
			ExternalIDs: map[string]string{"stage-name": "ls_in_l2_lkup"}},
		{Pipeline: "egress", TableID: 0, Priority: 0, Match: "1", Actions: "output;",
			ExternalIDs: map[string]string{"stage-name": "ls_out_apply_port_sec"}},
	}
	for i := range flows {
		flows[i].UUID = uuid(byte(100 + i))
		flows[i].LogicalDatapath = &ls
	}
	return &Southbound{
		Datapaths: []sb.DatapathBinding{{UUID: ls, TunnelKey: 1, ExternalIDs: map[string]string{"logical-switch": uuid(9).String(), "name": "ls0"}}},
		Ports: []sb.PortBinding{pb(10, "vm1", 1, hv1), pb(11, "vm2", 2, hv1), pb(12, "vm3", 3, hv2),
			{UUID: uuid(13), LogicalPort: "ls0-lr", Datapath: ls, TunnelKey: 4, Type: "patch"}},
		Flows:   flows,
		Chassis: []sb.Chassis{{UUID: hv1, Name: "hv1", Encaps: []ovsdb.UUID{enc1}}, {UUID: hv2, Name: "hv2", Encaps: []ovsdb.UUID{enc2}}},
		Encaps: []sb.Encap{{UUID: enc1, ChassisName: "hv1", IP: "192.168.0.1", Type: "geneve"},
			{UUID: enc2, ChassisName: "hv2", IP: "192.168.0.2", Type: "geneve"}},
	}
}

const (
	toVM2 = `inport == "vm1" && eth.src == 0a:00:00:00:00:01 && eth.dst == 0a:00:00:00:00:02 && ip4.src == 10.0.0.1 && ip4.dst == 10.0.0.2 && udp.dst == 53`
	toVM3 = `inport == "vm1" && eth.src == 0a:00:00:00:00:01 && eth.dst == 0a:00:00:00:00:03 && ip4.src == 10.0.0.1 && ip4.dst == 10.0.0.3 && udp.dst == 53`
	drop  = `inport == "vm1" && eth.src == 0a:00:00:00:00:01 && eth.dst == 0a:00:00:00:00:02 && ip4.src == 10.0.0.66 && ip4.dst == 10.0.0.2 && udp.dst == 53`
)

// TestRunOneSwitch traces on a hand-made Southbound (no OVN tools
// needed): delivery on the chassis, across a tunnel to the next one, and
// a drop, each explained.
func TestRunOneSwitch(t *testing.T) {
	ctx := context.Background()
	s := oneSwitch()

	r, err := Run(ctx, s, nil, Options{Datapath: "ls0", Microflow: toVM2})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hops) != 1 || r.Hops[0].Chassis != "hv1" {
		t.Fatalf("hops %+v, want one on hv1", r.Hops)
	}
	h := r.Hops[0]
	if len(h.Outputs) != 1 || h.Outputs[0].Name != "vm2" || !strings.Contains(h.Outputs[0].Packet, "nw_dst=10.0.0.2") {
		t.Errorf("outputs %+v, want the packet on vm2", h.Outputs)
	}
	var stages []string
	for _, f := range r.Logical {
		stages = append(stages, f.Stage)
	}
	if strings.Join(stages, " ") != "ls_in_l2_lkup ls_out_apply_port_sec" {
		t.Errorf("logical stages %v", stages)
	}
	if o := r.Logical[0].Owner; o == nil || o.Name != "vm2" || r.Logical[0].How != "port" {
		t.Errorf("the L2 lookup's owner %+v (%s), want port vm2", o, r.Logical[0].How)
	}
	if o := r.Logical[1].Owner; o == nil || o.Table != "Logical_Switch" || o.Name != "ls0" {
		t.Errorf("the egress flow's owner %+v, want Logical_Switch ls0", o)
	}
	// eth_dst is matched because of the L2 lookup's flow; nw_src because
	// the drop flow, of higher priority, had to be ruled out.
	why := map[string]string{}
	for _, f := range h.Megaflows[0].Fields {
		if f.Source != nil && f.Source.Flow != nil {
			why[f.Field] = f.Cause + " " + f.Source.Flow.Stage
		}
	}
	if why["eth_dst"] != "match ls_in_l2_lkup" || why["nw_src"] != "ruled out ls_in_acl" {
		t.Errorf("megaflow fields %v, want eth_dst matched by ls_in_l2_lkup, nw_src ruled out by ls_in_acl", why)
	}

	// To vm3 on hv2: out of hv1's tunnel, into hv2's, out to vm3.
	r, err = Run(ctx, s, nil, Options{Datapath: "ls0", Microflow: toVM3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hops) != 2 || r.Hops[1].Chassis != "hv2" || !strings.Contains(r.Hops[0].Outputs[0].Tunnel, "to hv2 (192.168.0.2)") {
		t.Fatalf("hops %+v, want hv1 then hv2 by the tunnel", r.Hops)
	}
	if o := r.Hops[1].Outputs; len(o) != 1 || o[0].Name != "vm3" {
		t.Errorf("hv2's outputs %+v, want vm3", o)
	}

	// Dropped by the "ACL": no output; its owner is named by the hint
	// alone (no Northbound).
	r, err = Run(ctx, s, nil, Options{Datapath: "ls0", Microflow: drop})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hops[0].Outputs) != 0 {
		t.Errorf("outputs %+v, want none", r.Hops[0].Outputs)
	}
	if f := r.Logical[0]; f.Stage != "ls_in_acl" || f.Owner == nil || f.Owner.UUID != "abcdef01..." || f.How != "stage-hint" {
		t.Errorf("first flow %+v, want ls_in_acl owned by stage-hint abcdef01", f)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"== Logical pipelines ==", "== Datapath ==", "== Megaflows ==", "out: nothing", "ls0 ingress table 0 (ls_in_acl) priority 100"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}

func TestRunErrors(t *testing.T) {
	ctx := context.Background()
	s := oneSwitch()
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Datapath: "nope", Microflow: toVM2}, `no logical datapath "nope"`},
		{Options{Datapath: "ls0", Microflow: strings.Replace(toVM2, `"vm1"`, `"vm9"`, 1)}, `no logical port "vm9"`},
		{Options{Datapath: "ls0", Microflow: strings.Replace(toVM2, `"vm1"`, `"ls0-lr"`, 1)}, `is a patch port`},
		{Options{Datapath: "ls0", Microflow: toVM2, Chassis: "hv7"}, `no chassis "hv7"`},
		{Options{Datapath: "ls0", Microflow: "eth.src == 0a:00:00:00:00:01"}, "inport"},
	} {
		if _, err := Run(ctx, s, nil, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want an error with %q", tc.opts, err, tc.want)
		}
	}
	// A port bound nowhere needs a chassis named.
	s.Ports[0].Chassis = nil
	if _, err := Run(ctx, s, nil, Options{Datapath: "ls0", Microflow: toVM2}); err == nil || !strings.Contains(err.Error(), "bound to no chassis") {
		t.Errorf("unbound vm1: %v", err)
	}
	if _, err := Run(ctx, s, nil, Options{Datapath: "ls0", Microflow: toVM2, Chassis: "hv1"}); err != nil {
		t.Errorf("unbound vm1 traced on hv1: %v", err)
	}
}
