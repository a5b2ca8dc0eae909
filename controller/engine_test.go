package controller

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/incproc"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// uid makes a deterministic UUID from a number.
func uid(n int) ovsdb.UUID {
	var b [16]byte
	binary.BigEndian.PutUint32(b[0:], uint32(n)*2654435761)
	binary.BigEndian.PutUint32(b[12:], uint32(n))
	return ovsdb.UUIDFromBytes(b)
}

// world is a Southbound and a chassis that the random test changes: two
// switches joined by a router (the patch ports come and go), a third
// switch with no port here, VIFs bound here or on hv2, address sets,
// port groups and logical flows that use them.
type world struct {
	rng  *rand.Rand
	in   *Input
	next int
}

func (w *world) uuid() ovsdb.UUID { w.next++; return uid(w.next) }

const (
	wLS1 = 1 + iota
	wLS2
	wLS3
	wLR
	wHV1
	wHV2
	wEnc2
	wGroup
	wFirstFree = 100
)

func newWorld(seed int64) *world {
	w := &world{rng: rand.New(rand.NewSource(seed)), next: wFirstFree}
	hv1, hv2 := uid(wHV1), uid(wHV2)
	in := &Input{
		Chassis: "hv1", ChassisUUID: hv1,
		Datapaths: []sb.DatapathBinding{
			{UUID: uid(wLS1), TunnelKey: 1, ExternalIDs: map[string]string{"logical-switch": "1"}},
			{UUID: uid(wLS2), TunnelKey: 2, ExternalIDs: map[string]string{"logical-switch": "2"}},
			{UUID: uid(wLS3), TunnelKey: 3, ExternalIDs: map[string]string{"logical-switch": "3"}},
			{UUID: uid(wLR), TunnelKey: 4, ExternalIDs: map[string]string{"logical-router": "r"}},
		},
		DPGroups:   []sb.LogicalDPGroup{{UUID: uid(wGroup), Datapaths: []ovsdb.UUID{uid(wLS1), uid(wLS3)}}},
		AllChassis: []sb.Chassis{{UUID: hv1, Name: "hv1"}, {UUID: hv2, Name: "hv2", Encaps: []ovsdb.UUID{uid(wEnc2)}}},
		Encaps:     []sb.Encap{{UUID: uid(wEnc2), ChassisName: "hv2", IP: "192.168.0.12", Type: "geneve"}},
		AddressSets: []sb.AddressSet{
			{UUID: uid(20), Name: "as1", Addresses: []string{"10.0.0.1", "10.0.0.2"}},
			{UUID: uid(21), Name: "as2", Addresses: []string{"10.0.1.0/24"}},
		},
		PortGroups: []sb.PortGroup{
			{UUID: uid(22), Name: "pg1", Ports: []string{"vm1", "vm2"}},
			{UUID: uid(23), Name: "1_pg2", Ports: []string{"vm3"}},
		},
		VIFs:       map[string]uint32{},
		Zones:      map[string]uint16{},
		TunnelPort: 9,
		Hubs:       [][]uint32{{20, 21}},
	}
	w.in = in
	// Six VIFs, two per switch.
	for i := 1; i <= 6; i++ {
		ls := uid(wLS1 + (i-1)/2)
		if i > 4 {
			ls = uid(wLS3)
		}
		in.Ports = append(in.Ports, sb.PortBinding{UUID: uid(30 + i), LogicalPort: fmt.Sprintf("vm%d", i), Datapath: ls, TunnelKey: int64(i)})
	}
	for _, dp := range []int{wLS1, wLS2, wLS3} {
		in.Multicast = append(in.Multicast, sb.MulticastGroup{UUID: uid(40 + dp), Datapath: uid(dp), Name: "_MC_flood", TunnelKey: 32768})
	}
	w.fixMulticast()
	w.bind(1, true)
	w.bind(3, true)
	w.remote(4)
	for i := 0; i < 30; i++ {
		w.addFlow()
	}
	return w
}

// fixMulticast makes each switch's flood group hold its ports.
func (w *world) fixMulticast() {
	for i := range w.in.Multicast {
		m := &w.in.Multicast[i]
		m.Ports = nil
		for _, p := range w.in.Ports {
			if p.Datapath == m.Datapath {
				m.Ports = append(m.Ports, p.UUID)
			}
		}
	}
}

func (w *world) port(n int) *sb.PortBinding {
	name := fmt.Sprintf("vm%d", n)
	for i := range w.in.Ports {
		if w.in.Ports[i].LogicalPort == name {
			return &w.in.Ports[i]
		}
	}
	return nil
}

// bind gives vmN an interface here (or takes it away).
func (w *world) bind(n int, on bool) {
	name := fmt.Sprintf("vm%d", n)
	p := w.port(n)
	if on {
		w.in.VIFs[name] = uint32(n)
		id := w.in.ChassisUUID
		p.Chassis = &id
		w.in.Zones[name] = uint16(10 + n)
	} else {
		delete(w.in.VIFs, name)
		p.Chassis = nil
	}
}

// remote binds vmN on hv2.
func (w *world) remote(n int) {
	delete(w.in.VIFs, fmt.Sprintf("vm%d", n))
	id := uid(wHV2)
	w.port(n).Chassis = &id
}

var (
	worldMatches = []string{
		"1",
		`inport == "vm1"`,
		`outport == "vm3" && ip4`,
		`inport == @pg1 && ip4.src == $as1`,
		`outport == @pg2 && ip4.dst == $as2`,
		`ip4.src == $as1 && tcp.dst == {80, 443, 8080}`,
		`inport == {"vm1", "vm2", "vm3"} && ip4.dst == {10.0.0.1, 10.0.0.5} && udp.dst == {53, 67}`,
		`is_chassis_resident("vm2") && eth.mcast`,
		`eth.dst == 0a:00:00:00:00:01`,
		`ip4.dst == $missing`,
		`ip4 &&`,
		`outport == "_MC_flood"`,
	}
	worldActions = []string{
		"next;",
		`outport = "vm2"; output;`,
		`outport = "_MC_flood"; output;`,
		"drop;",
		"ct_next;",
		"ct_lb_mark(backends=10.0.0.12:80,10.0.0.13:80);",
		"reg0[0] = 1; next;",
	}
)

func (w *world) addFlow() {
	lf := sb.LogicalFlow{UUID: w.uuid(), Pipeline: "ingress", TableID: int64(w.rng.Intn(4)), Priority: int64(w.rng.Intn(3) * 50),
		Match: worldMatches[w.rng.Intn(len(worldMatches))], Actions: worldActions[w.rng.Intn(len(worldActions))]}
	if w.rng.Intn(2) == 0 {
		lf.Pipeline = "egress"
	}
	if w.rng.Intn(4) == 0 {
		g := uid(wGroup)
		lf.LogicalDPGroup = &g
	} else {
		d := w.in.Datapaths[w.rng.Intn(len(w.in.Datapaths))].UUID
		lf.LogicalDatapath = &d
	}
	w.in.Flows = append(w.in.Flows, lf)
}

// step makes one random change.
func (w *world) step() string {
	in := w.in
	r := w.rng
	switch r.Intn(15) {
	case 0, 1:
		w.addFlow()
		return "add flow"
	case 2:
		if len(in.Flows) > 0 {
			i := r.Intn(len(in.Flows))
			in.Flows = slices.Delete(in.Flows, i, i+1)
		}
		return "delete flow"
	case 3:
		if len(in.Flows) > 0 {
			f := &in.Flows[r.Intn(len(in.Flows))]
			f.Match = worldMatches[r.Intn(len(worldMatches))]
			f.Actions = worldActions[r.Intn(len(worldActions))]
		}
		return "change flow"
	case 4:
		as := &in.AddressSets[r.Intn(len(in.AddressSets))]
		addr := fmt.Sprintf("10.0.0.%d", r.Intn(8))
		if i := slices.Index(as.Addresses, addr); i >= 0 {
			as.Addresses = slices.Delete(slices.Clone(as.Addresses), i, i+1)
		} else if r.Intn(10) == 0 {
			as.Addresses = append(slices.Clone(as.Addresses), "bad address")
		} else {
			as.Addresses = append(slices.Clone(as.Addresses), addr)
		}
		return "address set member"
	case 5:
		pg := &in.PortGroups[r.Intn(len(in.PortGroups))]
		name := fmt.Sprintf("vm%d", 1+r.Intn(6))
		if i := slices.Index(pg.Ports, name); i >= 0 {
			pg.Ports = slices.Delete(slices.Clone(pg.Ports), i, i+1)
		} else {
			pg.Ports = append(slices.Clone(pg.Ports), name)
		}
		return "port group member"
	case 6, 7:
		n := 1 + r.Intn(6)
		_, here := in.VIFs[fmt.Sprintf("vm%d", n)]
		w.bind(n, !here)
		return fmt.Sprintf("bind vm%d %v", n, !here)
	case 8:
		w.remote(1 + r.Intn(6))
		return "bind remotely"
	case 9:
		w.togglePatch(r.Intn(3))
		return "patch ports"
	case 10:
		g := &in.DPGroups[0]
		d := in.Datapaths[r.Intn(len(in.Datapaths))].UUID
		if i := slices.Index(g.Datapaths, d); i >= 0 {
			g.Datapaths = slices.Delete(slices.Clone(g.Datapaths), i, i+1)
		} else {
			g.Datapaths = append(slices.Clone(g.Datapaths), d)
		}
		return "datapath group"
	case 11:
		if as := in.AddressSets; r.Intn(2) == 0 && len(as) > 2 {
			in.AddressSets = as[:len(as)-1]
			return "delete address set"
		}
		if slices.IndexFunc(in.AddressSets, func(a sb.AddressSet) bool { return a.Name == "missing" }) < 0 {
			in.AddressSets = append(in.AddressSets, sb.AddressSet{UUID: w.uuid(), Name: "missing", Addresses: []string{"10.9.9.9"}})
		}
		return "add address set"
	case 12:
		// A MAC binding learnt, or forgotten.
		if len(in.MACBindings) > 0 && r.Intn(2) == 0 {
			in.MACBindings = in.MACBindings[1:]
			return "forget a MAC binding"
		}
		n := 1 + r.Intn(6)
		in.MACBindings = append(slices.Clone(in.MACBindings), sb.MACBinding{UUID: w.uuid(), Datapath: w.port(n).Datapath,
			LogicalPort: fmt.Sprintf("vm%d", n), IP: fmt.Sprintf("10.0.3.%d", r.Intn(5)), MAC: fmt.Sprintf("0a:00:00:00:03:%02x", r.Intn(200))})
		return "learn a MAC binding"
	case 13:
		// A localnet port on switch 2, mapped here or not.
		if i := slices.IndexFunc(in.Ports, func(p sb.PortBinding) bool { return p.Type == "localnet" }); i >= 0 && r.Intn(2) == 0 {
			in.Ports = slices.Delete(in.Ports, i, i+1)
		} else if i < 0 {
			in.Ports = append(in.Ports, sb.PortBinding{UUID: w.uuid(), LogicalPort: "ln2", Datapath: uid(wLS2), Type: "localnet",
				TunnelKey: 20, Options: map[string]string{"network_name": "physnet1"}})
		}
		if r.Intn(2) == 0 {
			in.Physnets = nil
		} else {
			in.Physnets = map[string][]uint32{"physnet1": {30, 31}}
		}
		w.fixMulticast()
		return "localnet"
	default:
		n := 1 + r.Intn(6)
		w.in.Zones[fmt.Sprintf("vm%d", n)] = uint16(100 + r.Intn(50))
		return "zone"
	}
}

// togglePatch joins switch i to the router by a pair of patch ports, or
// removes the pair.
func (w *world) togglePatch(i int) {
	in := w.in
	ls := fmt.Sprintf("ls%d-lr", i+1)
	lr := fmt.Sprintf("lr-ls%d", i+1)
	if j := slices.IndexFunc(in.Ports, func(p sb.PortBinding) bool { return p.LogicalPort == ls }); j >= 0 {
		in.Ports = slices.DeleteFunc(in.Ports, func(p sb.PortBinding) bool { return p.LogicalPort == ls || p.LogicalPort == lr })
	} else {
		in.Ports = append(in.Ports,
			sb.PortBinding{UUID: w.uuid(), LogicalPort: ls, Datapath: uid(wLS1 + i), Type: "patch", TunnelKey: int64(10 + i), Options: map[string]string{"peer": lr}},
			sb.PortBinding{UUID: w.uuid(), LogicalPort: lr, Datapath: uid(wLR), Type: "patch", TunnelKey: int64(1 + i), Options: map[string]string{"peer": ls}})
	}
	w.fixMulticast()
}

// clone deep-copies the input's slices that steps change in place, so
// that the engine's rows and the world's do not alias.
func (w *world) snapshot() *Input {
	in := *w.in
	in.Ports = slices.Clone(in.Ports)
	for i := range in.Ports {
		if c := in.Ports[i].Chassis; c != nil {
			id := *c
			in.Ports[i].Chassis = &id
		}
	}
	in.Flows = slices.Clone(in.Flows)
	in.Multicast = slices.Clone(in.Multicast)
	in.AddressSets = slices.Clone(in.AddressSets)
	in.PortGroups = slices.Clone(in.PortGroups)
	in.DPGroups = slices.Clone(in.DPGroups)
	in.MACBindings = slices.Clone(in.MACBindings)
	in.VIFs = maps2u(in.VIFs)
	in.Zones = maps2(in.Zones)
	return &in
}

func maps2u(m map[string]uint32) map[string]uint32 {
	out := map[string]uint32{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// translated is Translate's output as the engine holds it.
func translated(out *Output) (map[string]string, map[uint32]string) {
	rules := map[string]string{}
	for _, r := range out.Rules {
		rules[ruleKey(&r)] = r.String()
	}
	groups := map[uint32]string{}
	for _, g := range out.Groups {
		groups[g.ID] = fmt.Sprint(g)
	}
	return rules, groups
}

func engineState(e *Engine) (map[string]string, map[uint32]string) {
	rules := map[string]string{}
	for k, r := range e.Rules() {
		rules[k] = r.String()
	}
	groups := map[uint32]string{}
	for id, g := range e.Groups() {
		groups[id] = fmt.Sprint(g)
	}
	return rules, groups
}

func diffMaps[K comparable](want, got map[K]string) []string {
	var d []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			d = append(d, fmt.Sprintf("missing %v: %s", k, w))
		} else if g != w {
			d = append(d, fmt.Sprintf("differs %v:\n   got %s\n  want %s", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("extra %v: %s", k, g))
		}
	}
	sort.Strings(d)
	return d
}

func runEngine(t *testing.T, e *Engine) {
	t.Helper()
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// After each of a seeded random sequence of Southbound and local
// changes, the engine's rules, groups, bindings and problems equal
// Translate's for the same input, and the datapath it installed into
// (by differences) holds exactly those rules.
func TestEngineEqualsTranslate(t *testing.T) {
	tr, err := NewTranslator()
	if err != nil {
		t.Fatal(err)
	}
	for seed := int64(1); seed <= 4; seed++ {
		w := newWorld(seed)
		e := NewEngine(tr, nil)
		pipe := dp.NewPipeline()
		apply := func(b flow.Bundle) error { _, err := pipe.Apply(b); return err }
		for step := 0; step < 150; step++ {
			what := "initial"
			if step > 0 {
				// Several changes between runs, sometimes.
				var whats []string
				for n := 1 + w.rng.Intn(3); n > 0; n-- {
					whats = append(whats, w.step())
				}
				what = strings.Join(whats, ", ")
			}
			in := w.snapshot()
			e.Load(in)
			runEngine(t, e)
			// govn chassis may run the engine more than once before it
			// commits (when new datapaths become local).
			committed := w.rng.Intn(3) > 0
			if committed {
				if _, err := e.Commit(apply); err != nil {
					t.Fatalf("seed %d step %d (%s): commit: %v", seed, step, what, err)
				}
			}
			ref := tr.Translate(w.snapshot())
			wantRules, wantGroups := translated(ref)
			gotRules, gotGroups := engineState(e)
			if d := diffMaps(wantRules, gotRules); len(d) > 0 {
				t.Fatalf("seed %d step %d (%s): rules differ from Translate's:\n%s", seed, step, what, strings.Join(d[:min(len(d), 10)], "\n"))
			}
			if d := diffMaps(wantGroups, gotGroups); len(d) > 0 {
				t.Fatalf("seed %d step %d (%s): groups differ from Translate's:\n%s", seed, step, what, strings.Join(d, "\n"))
			}
			if fmt.Sprint(ref.Bind) != fmt.Sprint(e.Bind()) {
				t.Fatalf("seed %d step %d (%s): Bind = %v, want %v", seed, step, what, e.Bind(), ref.Bind)
			}
			wantProblems := slices.Clone(ref.Problems)
			sort.Strings(wantProblems)
			if got := e.Problems(); !slices.Equal(got, wantProblems) {
				t.Fatalf("seed %d step %d (%s): problems\n got %q\nwant %q", seed, step, what, got, wantProblems)
			}
			if !committed {
				continue
			}
			installed := map[string]string{}
			for _, r := range pipe.Tables().Dump(flow.NumTables) {
				installed[ruleKey(&r)] = r.String()
			}
			if d := diffMaps(wantRules, installed); len(d) > 0 {
				t.Fatalf("seed %d step %d (%s): datapath differs:\n%s", seed, step, what, strings.Join(d[:min(len(d), 10)], "\n"))
			}
		}
	}
}

// stats returns the counters of the named nodes.
func stats(e *Engine) map[string]incproc.NodeStats {
	m := map[string]incproc.NodeStats{}
	for _, s := range e.Stats() {
		m[s.Name] = s
	}
	return m
}

// Acceptance (d) of issue 11: binding a port, adding an ACL (a new
// logical flow) and adding an address-set member are handled without
// recomputing the logical flows, and compile only what they touch.
func TestEngineNoRecompute(t *testing.T) {
	tr, err := NewTranslator()
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(7)
	for i := 0; i < 200; i++ {
		w.addFlow()
	}
	e := NewEngine(tr, nil)
	e.Load(w.snapshot())
	runEngine(t, e)
	for _, tc := range []struct {
		name   string
		change func()
		// maxCompiles bounds the flows compiled again.
		maxCompiles int
	}{
		{"bind a port", func() { w.bind(2, true) }, 60},
		{"add an ACL", func() {
			d := uid(wLS1)
			w.in.Flows = append(w.in.Flows, sb.LogicalFlow{UUID: w.uuid(), LogicalDatapath: &d, Pipeline: "ingress", TableID: 9, Priority: 2001,
				Match: `outport == @pg1 && ip4 && ip4.src == $as1 && tcp.dst == 22`, Actions: `reg0[1] = 1; next;`})
		}, 1},
		{"add an address-set member", func() {
			as := &w.in.AddressSets[0]
			as.Addresses = append(slices.Clone(as.Addresses), "10.0.0.77")
		}, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.eng.ClearStats()
			compiles := e.lf.compiles
			tc.change()
			e.Load(w.snapshot())
			runEngine(t, e)
			st := stats(e)
			for _, node := range []string{"addr_sets", "port_groups", "runtime_data", "lflow_output", "flow_output"} {
				if st[node].Recompute != 0 {
					t.Errorf("%s recomputed %d times", node, st[node].Recompute)
				}
			}
			if st["lflow_output"].Compute == 0 {
				t.Errorf("lflow_output did not run: %+v", st["lflow_output"])
			}
			if n := e.lf.compiles - compiles; n > tc.maxCompiles || n == 0 {
				t.Errorf("compiled %d flows, want 1 to %d (of %d)", n, tc.maxCompiles, len(e.lf.compiled))
			}
			ref := tr.Translate(w.snapshot())
			wantRules, _ := translated(ref)
			gotRules, _ := engineState(e)
			if d := diffMaps(wantRules, gotRules); len(d) > 0 {
				t.Errorf("rules differ from Translate's:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// Rules computed by a Run that is not followed by a Commit are installed
// by the next Commit: the chassis runs the engine again (after widening
// its monitor conditions) before it commits, and a datapath that became
// local in the first run lost its rules (TestLocalnetAndMove's provider
// switch had none).
func TestEngineCommitAfterTwoRuns(t *testing.T) {
	tr, err := NewTranslator()
	if err != nil {
		t.Fatal(err)
	}
	in := providerSwitch(0)
	vifs := in.VIFs
	in.VIFs = map[string]uint32{}
	e := NewEngine(tr, nil)
	pipe := dp.NewPipeline()
	apply := func(b flow.Bundle) error { _, err := pipe.Apply(b); return err }
	e.Load(in)
	runEngine(t, e)
	if _, err := e.Commit(apply); err != nil {
		t.Fatal(err)
	}
	// The switch becomes local; then a second run with another change
	// before the commit.
	in.VIFs = vifs
	e.Load(in)
	runEngine(t, e)
	in.Hubs = [][]uint32{{20, 21, 22}}
	e.Load(in)
	runEngine(t, e)
	if _, err := e.Commit(apply); err != nil {
		t.Fatal(err)
	}
	want, _ := translated(tr.Translate(in))
	installed := map[string]string{}
	for _, r := range pipe.Tables().Dump(flow.NumTables) {
		installed[ruleKey(&r)] = r.String()
	}
	if d := diffMaps(want, installed); len(d) > 0 {
		t.Fatalf("datapath differs from Translate's:\n%s", strings.Join(d[:min(len(d), 10)], "\n"))
	}
}

// A load balancer on a datapath group gets its hairpin rules from the
// engine as from Translate (the engine's physical stage had no groups,
// and TestLogicalSwitch's hairpin failed on govn chassis).
func TestEngineLoadBalancerGroup(t *testing.T) {
	tr, err := NewTranslator()
	if err != nil {
		t.Fatal(err)
	}
	in := lookupSwitch("ip4", "next;", "1")
	g, tcp := id(41), "tcp"
	in.DPGroups = []sb.LogicalDPGroup{{UUID: g, Datapaths: []ovsdb.UUID{in.Datapaths[0].UUID}}}
	in.LoadBalancers = []sb.LoadBalancer{{UUID: id(40), Name: "lb0", DatapathGroup: &g, Protocol: &tcp,
		VIPs: map[string]string{"172.16.0.100:80": "10.0.0.11:80"}, Options: map[string]string{"hairpin_orig_tuple": "true"}}}
	e := NewEngine(tr, nil)
	e.Load(in)
	runEngine(t, e)
	want, _ := translated(tr.Translate(in))
	got, _ := engineState(e)
	if d := diffMaps(want, got); len(d) > 0 {
		t.Fatalf("engine differs from Translate:\n%s", strings.Join(d, "\n"))
	}
	hairpin := 0
	for k := range got {
		if strings.HasPrefix(k, fmt.Sprintf("%d/", lookupTable("chk_lb_hairpin"))) {
			hairpin++
		}
	}
	if hairpin != 1 {
		t.Errorf("%d hairpin rules, want 1", hairpin)
	}
}
