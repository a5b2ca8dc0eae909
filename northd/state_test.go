package northd

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// harness runs a State against an in-memory Northbound and Southbound.
type harness struct {
	t  testing.TB
	nb *memDB
	sb *memDB
	s  *State
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, nb: newMemDB(t, NB, "nb"), sb: newMemDB(t, SB, "sb")}
	h.s = New(h.nb.schema, h.sb.schema, Options{})
	return h
}

// nbCommit commits the pending Northbound operations and hands the events
// to the State.
func (h *harness) nbCommit() { h.s.Apply(h.nb.commit()) }

// sync processes what changed and writes the Southbound until nothing is
// left to write; it returns the operations of the first transaction.
func (h *harness) sync() int {
	h.t.Helper()
	h.s.Process()
	first := -1
	for i := 0; i < 5; i++ {
		n := h.s.WriteSB(h.sb)
		if first < 0 {
			first = n
		}
		evs := h.sb.commit()
		h.s.Committed(h.sb.realUUID)
		h.s.Apply(evs)
		h.s.Process()
		if n == 0 {
			return first
		}
	}
	h.t.Fatalf("Southbound writes did not settle")
	return first
}

func TestSwitchAndPorts(t *testing.T) {
	h := newHarness(t)
	ls := nb.LogicalSwitch{Name: "sw0"}
	p1 := nb.LogicalSwitchPort{Name: "p1", Addresses: []string{"00:00:00:00:00:01 10.0.0.1"}}
	p2 := nb.LogicalSwitchPort{Name: "p2", Addresses: []string{"00:00:00:00:00:02 10.0.0.2"}}
	id1 := h.nb.Insert(nb.LogicalSwitchPortTable, p1.Row())
	id2 := h.nb.Insert(nb.LogicalSwitchPortTable, p2.Row())
	ls.Ports = []ovsdb.UUID{id1, id2}
	lsID := h.nb.Insert(nb.LogicalSwitchTable, ls.Row())
	h.nbCommit()
	h.s.Recompute()
	if n := h.sync(); n == 0 {
		t.Fatal("nothing written")
	}
	if got := h.sb.count("Datapath_Binding"); got != 1 {
		t.Errorf("Datapath_Binding rows = %d, want 1", got)
	}
	if got := h.sb.count("Port_Binding"); got != 2 {
		t.Errorf("Port_Binding rows = %d, want 2", got)
	}
	flows := h.sb.count("Logical_Flow")
	if flows == 0 {
		t.Fatal("no logical flows")
	}
	// Writing again changes nothing.
	if n := h.s.WriteSB(h.sb); n != 0 {
		t.Errorf("second WriteSB: %d operations, want 0", n)
	}

	// Removing a port removes its binding and its flows, and only that.
	var realLS ovsdb.UUID
	for id := range h.nb.rows[nb.LogicalSwitchTable] {
		realLS = id
	}
	_ = lsID
	var realP2 ovsdb.UUID
	for id, r := range h.nb.rows[nb.LogicalSwitchPortTable] {
		var p nb.LogicalSwitchPort
		p.LoadRow(h.nb.schema.Tables[nb.LogicalSwitchPortTable], r)
		if p.Name == "p2" {
			realP2 = id
		}
	}
	cur := h.nb.rows[nb.LogicalSwitchTable][realLS]
	var sw nb.LogicalSwitch
	sw.LoadRow(h.nb.schema.Tables[nb.LogicalSwitchTable], cur)
	var keep []ovsdb.UUID
	for _, p := range sw.Ports {
		if p != realP2 {
			keep = append(keep, p)
		}
	}
	h.nb.Update(nb.LogicalSwitchTable, realLS, map[string]ovsdb.Datum{"ports": dUUIDs(keep)})
	h.nbCommit()
	before := h.s.Stats().Generations
	h.sync()
	if got := h.sb.count("Port_Binding"); got != 1 {
		t.Errorf("after delete: Port_Binding rows = %d, want 1", got)
	}
	// p2's own flows: its ARP reply, the ARP responder's skip of its own
	// requests, and its MAC's destination lookup.
	if got := h.sb.count("Logical_Flow"); got != flows-3 {
		t.Errorf("after delete: %d flows, want %d", got, flows-3)
	}
	if gens := h.s.Stats().Generations - before; gens > 2 {
		t.Errorf("deleting a port generated %d owners, want at most 2", gens)
	}

	// A fresh State on the same databases writes nothing: it keeps the
	// rows, their UUIDs and the tunnel keys.
	fresh := New(h.nb.schema, h.sb.schema, Options{})
	fresh.Apply(h.nb.diff(nil))
	fresh.Apply(h.sb.diff(nil))
	fresh.Recompute()
	if n := fresh.WriteSB(h.sb); n != 0 {
		t.Errorf("fresh State after restart: %d operations, want 0: %+v", n, h.sb.ops)
	}
}

// TestBadACLMatchSkipped checks that an ACL whose match does not parse is
// warned about once and left out, and the other ACLs still apply.
func TestBadACLMatchSkipped(t *testing.T) {
	var logs strings.Builder
	h := newHarness(t)
	h.s = New(h.nb.schema, h.sb.schema, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	bad := h.nb.Insert(nb.ACLTable, (&nb.ACL{Direction: "from-lport", Priority: 10, Match: "ip4.src == ", Action: "drop"}).Row())
	good := h.nb.Insert(nb.ACLTable, (&nb.ACL{Direction: "from-lport", Priority: 11, Match: "ip4.src == 10.0.0.1", Action: "drop"}).Row())
	h.nb.Insert(nb.LogicalSwitchTable, (&nb.LogicalSwitch{Name: "sw", ACLs: []ovsdb.UUID{bad, good}}).Row())
	h.nbCommit()
	h.s.Recompute()
	h.sync()
	var matches []string
	tf := h.sb.schema.Tables["Logical_Flow"]
	for _, r := range h.sb.rows["Logical_Flow"] {
		if m := r.Get(tf.Column("match")).Keys[0].Str(); strings.Contains(m, "ip4.src") {
			matches = append(matches, m)
		}
	}
	if len(matches) != 1 || matches[0] != "ip4.src == 10.0.0.1" {
		t.Errorf("ACL flows with ip4.src: %q, want only the good ACL's", matches)
	}
	if n := strings.Count(logs.String(), "ACL match does not parse"); n != 1 {
		t.Errorf("%d warnings about the bad match, want 1:\n%s", n, logs.String())
	}
}

// TestPortAddIsLocal checks that adding a port to a switch with many ports
// regenerates the switch and the new port, not the other ports.
func TestPortAddIsLocal(t *testing.T) {
	h := newHarness(t)
	var ids []ovsdb.UUID
	for i := 0; i < 20; i++ {
		p := nb.LogicalSwitchPort{Name: fmt.Sprintf("p%d", i), Addresses: []string{fmt.Sprintf("00:00:00:00:00:%02x 10.0.0.%d", i+1, i+1)}}
		if i == 0 {
			p.Type, p.Addresses, p.Options = "router", []string{"router"}, map[string]string{"router-port": "lrp0"}
		}
		ids = append(ids, h.nb.Insert(nb.LogicalSwitchPortTable, p.Row()))
	}
	lrp := nb.LogicalRouterPort{Name: "lrp0", MAC: "00:00:00:00:ff:01", Networks: []string{"10.0.0.254/24"}}
	lrpID := h.nb.Insert(nb.LogicalRouterPortTable, lrp.Row())
	h.nb.Insert(nb.LogicalRouterTable, (&nb.LogicalRouter{Name: "lr0", Ports: []ovsdb.UUID{lrpID}}).Row())
	h.nb.Insert(nb.LogicalSwitchTable, (&nb.LogicalSwitch{Name: "sw0", Ports: ids}).Row())
	h.nbCommit()
	h.s.Recompute()
	h.sync()
	var ls ovsdb.UUID
	for id := range h.nb.rows[nb.LogicalSwitchTable] {
		ls = id
	}
	p := nb.LogicalSwitchPort{Name: "new", Addresses: []string{"00:00:00:00:01:01 10.0.1.1"}}
	id := h.nb.Insert(nb.LogicalSwitchPortTable, p.Row())
	cur := h.nb.rows[nb.LogicalSwitchTable][ls].Get(h.nb.schema.Tables[nb.LogicalSwitchTable].Column("ports"))
	h.nb.Update(nb.LogicalSwitchTable, ls, map[string]ovsdb.Datum{"ports": cur.Union(ovsdb.Set(ovsdb.UUIDAtom(id)))})
	h.nbCommit()
	before := h.s.Stats().Generations
	h.sync()
	// The switch, its memos, the new port; the Port_Binding write makes
	// nothing else stale.
	if gens := h.s.Stats().Generations - before; gens > 6 {
		t.Errorf("adding a port generated %d owners, want at most 6 (not the switch's other 20 ports)", gens)
	}
	if got := h.sb.count("Port_Binding"); got != 22 {
		t.Errorf("Port_Binding rows = %d, want 22 (21 switch ports, the router port)", got)
	}
}

// TestMACBindingsOfDeletedPortsAndDatapaths checks that MAC bindings
// learned on a port or a switch go with it (a MAC_Binding refers to its
// datapath strongly, so the switch could not go otherwise).
func TestMACBindingsOfDeletedPortsAndDatapaths(t *testing.T) {
	h := newHarness(t)
	p1 := h.nb.Insert(nb.LogicalSwitchPortTable, (&nb.LogicalSwitchPort{Name: "p1", Addresses: []string{"00:00:00:00:00:01 10.0.0.1"}}).Row())
	p2 := h.nb.Insert(nb.LogicalSwitchPortTable, (&nb.LogicalSwitchPort{Name: "p2", Addresses: []string{"00:00:00:00:00:02 10.0.0.2"}}).Row())
	h.nb.Insert(nb.LogicalSwitchTable, (&nb.LogicalSwitch{Name: "sw", Ports: []ovsdb.UUID{p1, p2}}).Row())
	h.nbCommit()
	h.s.Recompute()
	h.sync()
	var dp ovsdb.UUID
	for id := range h.sb.rows["Datapath_Binding"] {
		dp = id
	}
	for _, port := range []string{"p1", "p2"} {
		h.sb.Insert("MAC_Binding", map[string]ovsdb.Datum{"logical_port": dString(port), "ip": dString("10.0.0.9"), "mac": dString("00:00:00:00:00:09"), "datapath": dUUID(dp)})
	}
	h.s.Apply(h.sb.commit())
	// Delete p1: its binding goes, p2's stays.
	var swID, realP1 ovsdb.UUID
	for id := range h.nb.rows[nb.LogicalSwitchTable] {
		swID = id
	}
	for id, r := range h.nb.rows[nb.LogicalSwitchPortTable] {
		if r.Get(h.nb.schema.Tables[nb.LogicalSwitchPortTable].Column("name")).Keys[0].Str() == "p1" {
			realP1 = id
		}
	}
	ports := h.nb.rows[nb.LogicalSwitchTable][swID].Get(h.nb.schema.Tables[nb.LogicalSwitchTable].Column("ports"))
	h.nb.Update(nb.LogicalSwitchTable, swID, map[string]ovsdb.Datum{"ports": ports.Difference(ovsdb.Set(ovsdb.UUIDAtom(realP1)))})
	h.nbCommit()
	h.sync()
	if n := h.sb.count("MAC_Binding"); n != 1 {
		t.Fatalf("after deleting p1: %d MAC bindings, want 1", n)
	}
	// Delete the switch: the last binding goes with its datapath.
	h.nb.Delete(nb.LogicalSwitchTable, swID)
	h.nbCommit()
	h.sync()
	if n := h.sb.count("MAC_Binding"); n != 0 {
		t.Errorf("after deleting the switch: %d MAC bindings, want 0", n)
	}
	if n := h.sb.count("Datapath_Binding"); n != 0 {
		t.Errorf("after deleting the switch: %d datapath bindings, want 0", n)
	}
}

// TestResolveKeepsRealReferences checks that a set mixing a placeholder
// and a real row's UUID keeps both once resolved.
func TestResolveKeepsRealReferences(t *testing.T) {
	h := newHarness(t)
	g := &gen{s: h.s, o: &owner{}}
	ph := g.Ref("Datapath_Binding", "x")
	realID := ovsdb.MustParseUUID("11111111-2222-4333-8444-555555555555")
	w := &sbWriter{s: h.s, inserted: map[recordKey]ovsdb.UUID{{"Datapath_Binding", "x"}: ovsdb.MustParseUUID("aaaaaaaa-2222-4333-8444-555555555555")}}
	got, ok := w.resolve(dUUIDs([]ovsdb.UUID{ph, realID}))
	if !ok || got.Len() != 2 || !got.Contains(ovsdb.UUIDAtom(realID)) {
		t.Errorf("resolve = %v, %v; want both references", got, ok)
	}
}

// TestGatewayChassisAddedLater checks that giving an existing router port
// a gateway chassis (ovn-nbctl lrp-set-gateway-chassis, as a CMS does
// after creating the port) makes it a distributed gateway port at once:
// the port's reference columns are part of the row a generator reads.
func TestGatewayChassisAddedLater(t *testing.T) {
	h := newHarness(t)
	lrp := h.nb.Insert(nb.LogicalRouterPortTable, (&nb.LogicalRouterPort{Name: "lr-pub", MAC: "00:00:00:00:ff:01", Networks: []string{"192.168.0.1/24"}}).Row())
	h.nb.Insert(nb.LogicalRouterTable, (&nb.LogicalRouter{Name: "lr", Ports: []ovsdb.UUID{lrp}}).Row())
	h.nbCommit()
	h.s.Recompute()
	h.sync()
	var lrpID ovsdb.UUID
	for id := range h.nb.rows[nb.LogicalRouterPortTable] {
		lrpID = id
	}
	gc := h.nb.Insert(nb.GatewayChassisTable, (&nb.GatewayChassis{Name: "lr-pub-hv3", ChassisName: "hv3", Priority: 10}).Row())
	h.nb.Update(nb.LogicalRouterPortTable, lrpID, map[string]ovsdb.Datum{"gateway_chassis": dUUIDs([]ovsdb.UUID{gc})})
	h.nbCommit()
	h.sync()
	found := false
	tp := h.sb.schema.Tables["Port_Binding"]
	for _, r := range h.sb.rows["Port_Binding"] {
		if r.Get(tp.Column("logical_port")).Keys[0].Str() == "cr-lr-pub" {
			found = true
		}
	}
	if !found {
		t.Error("no chassisredirect port after the gateway chassis was set")
	}
}

// TestIGMPGroups checks the Multicast_Group rows and flows of IGMP groups
// that chassis report on a snooping switch, in the form the real
// ovn-northd 23.03 writes them for the same IGMP_Group rows (seen with a
// script that created them with ovn-sbctl): keys from 32774 in address
// order, the members of every chassis, and
//
//	ls_in_l2_lkup 90 (eth.mcast && ip4 && ip4.dst == 239.1.1.1 ) (outport = "239.1.1.1"; output; )
func TestIGMPGroups(t *testing.T) {
	h := newHarness(t)
	var ports []ovsdb.UUID
	for i := 1; i <= 3; i++ {
		ports = append(ports, h.nb.Insert(nb.LogicalSwitchPortTable, (&nb.LogicalSwitchPort{Name: fmt.Sprintf("p%d", i), Addresses: []string{fmt.Sprintf("50:54:00:00:0d:0%d 10.13.0.1%d", i, i)}}).Row()))
	}
	h.nb.Insert(nb.LogicalSwitchTable, (&nb.LogicalSwitch{Name: "sw", Ports: ports, OtherConfig: map[string]string{"mcast_snoop": "true"}}).Row())
	h.nbCommit()
	h.s.Recompute()
	h.sync()
	var dp ovsdb.UUID
	for id := range h.sb.rows["Datapath_Binding"] {
		dp = id
	}
	pb := map[string]ovsdb.UUID{}
	tp := h.sb.schema.Tables["Port_Binding"]
	for id, r := range h.sb.rows["Port_Binding"] {
		pb[r.Get(tp.Column("logical_port")).Keys[0].Str()] = id
	}
	hv1 := h.sb.Insert("Chassis", map[string]ovsdb.Datum{"name": dString("hv1"), "hostname": dString("hv1")})
	hv2 := h.sb.Insert("Chassis", map[string]ovsdb.Datum{"name": dString("hv2"), "hostname": dString("hv2")})
	for _, g := range []struct {
		addr    string
		chassis ovsdb.UUID
		ports   []string
	}{{"239.1.1.1", hv1, []string{"p1"}}, {"239.1.1.1", hv2, []string{"p2"}}, {"239.2.2.2", hv1, []string{"p3"}}} {
		var refs []ovsdb.UUID
		for _, p := range g.ports {
			refs = append(refs, pb[p])
		}
		h.sb.Insert("IGMP_Group", map[string]ovsdb.Datum{"address": dString(g.addr), "datapath": dUUID(dp), "chassis": dUUID(g.chassis), "ports": dUUIDs(refs)})
	}
	h.s.Apply(h.sb.commit())
	h.sync()
	tm := h.sb.schema.Tables["Multicast_Group"]
	got := map[string]string{}
	for _, r := range h.sb.rows["Multicast_Group"] {
		name := r.Get(tm.Column("name")).Keys[0].Str()
		if !strings.HasPrefix(name, "239.") {
			continue
		}
		var names []string
		for _, a := range r.Get(tm.Column("ports")).Keys {
			names = append(names, h.sb.rows["Port_Binding"][a.UUID()].Get(tp.Column("logical_port")).Keys[0].Str())
		}
		sort.Strings(names)
		got[name] = fmt.Sprintf("%d %v", r.Get(tm.Column("tunnel_key")).Keys[0].Int(), names)
	}
	want := map[string]string{"239.1.1.1": "32774 [p1 p2]", "239.2.2.2": "32775 [p3]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("IGMP Multicast_Groups = %v, want %v", got, want)
	}
	found := false
	tf := h.sb.schema.Tables["Logical_Flow"]
	for _, r := range h.sb.rows["Logical_Flow"] {
		if r.Get(tf.Column("match")).Keys[0].Str() == "eth.mcast && ip4 && ip4.dst == 239.1.1.1 " &&
			r.Get(tf.Column("actions")).Keys[0].Str() == `outport = "239.1.1.1"; output; ` {
			found = true
		}
	}
	if !found {
		t.Error("no l2_lkup flow for 239.1.1.1")
	}
	// A group whose last member leaves goes.
	for id, r := range h.sb.rows["IGMP_Group"] {
		if r.Get(h.sb.schema.Tables["IGMP_Group"].Column("address")).Keys[0].Str() == "239.2.2.2" {
			h.sb.Delete("IGMP_Group", id)
		}
	}
	h.s.Apply(h.sb.commit())
	h.sync()
	for _, r := range h.sb.rows["Multicast_Group"] {
		if r.Get(tm.Column("name")).Keys[0].Str() == "239.2.2.2" {
			t.Error("239.2.2.2's group stayed after its last member left")
		}
	}
}

// TestBFDKeptAcrossRestart checks that a BFD session keeps its Southbound
// src_port and disc when northd restarts on an existing Southbound (as
// ovn-northd reads them back): the peer knows the session by them. The
// session that remains after another is deleted holds the second source
// port, which a fresh allocation would not give it, and a discriminator
// another northd chose.
func TestBFDKeptAcrossRestart(t *testing.T) {
	h := newHarness(t)
	lrp := h.nb.Insert(nb.LogicalRouterPortTable, (&nb.LogicalRouterPort{Name: "lrp", MAC: "00:00:00:00:0b:01", Networks: []string{"10.11.0.1/24"}}).Row())
	h.nb.Insert(nb.LogicalRouterTable, (&nb.LogicalRouter{Name: "lr", Ports: []ovsdb.UUID{lrp}}).Row())
	h.nb.Insert(nb.BFDTable, (&nb.BFD{LogicalPort: "lrp", DstIP: "10.11.0.2"}).Row())
	h.nbCommit()
	h.s.Recompute()
	h.sync()
	h.nb.Insert(nb.BFDTable, (&nb.BFD{LogicalPort: "lrp", DstIP: "10.11.0.3"}).Row())
	h.nbCommit()
	h.sync()
	tb := h.sb.schema.Tables["BFD"]
	session := func(dst string) (id ovsdb.UUID, port, disc int64) {
		t.Helper()
		for id, r := range h.sb.rows["BFD"] {
			if r.Get(tb.Column("dst_ip")).Keys[0].Str() == dst {
				return id, r.Get(tb.Column("src_port")).Keys[0].Int(), r.Get(tb.Column("disc")).Keys[0].Int()
			}
		}
		t.Fatalf("no BFD row for %s", dst)
		return
	}
	if _, port, _ := session("10.11.0.3"); port != bfdSrcPortBase+1 {
		t.Fatalf("second session's src_port = %d, want %d", port, bfdSrcPortBase+1)
	}
	for id, r := range h.nb.rows[nb.BFDTable] {
		var b nb.BFD
		b.LoadRow(h.nb.schema.Tables[nb.BFDTable], r)
		if b.DstIP == "10.11.0.2" {
			h.nb.Delete(nb.BFDTable, id)
		}
	}
	h.nbCommit()
	h.sync()
	// Another northd (ovn-northd picks discriminators at random) wrote
	// this one.
	id, _, _ := session("10.11.0.3")
	h.sb.Update("BFD", id, map[string]ovsdb.Datum{"disc": dInt(123456789)})
	h.sb.commit()

	fresh := New(h.nb.schema, h.sb.schema, Options{})
	fresh.Apply(h.nb.diff(nil))
	fresh.Apply(h.sb.diff(nil))
	fresh.Recompute()
	if n := fresh.WriteSB(h.sb); n != 0 {
		t.Errorf("fresh State after restart: %d operations, want 0", n)
	}
	h.sb.commit()
	if _, port, disc := session("10.11.0.3"); port != bfdSrcPortBase+1 || disc != 123456789 {
		t.Errorf("after restart: src_port %d, disc %d; want %d, 123456789", port, disc, bfdSrcPortBase+1)
	}
}
