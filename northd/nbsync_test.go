package northd

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
	"github.com/govn/govn/schema/sb"
)

// nbHarness is a harness whose State has a fixed clock and that commits
// WriteNB's operations to the Northbound.
func nbHarness(t *testing.T) (*harness, int64) {
	h := &harness{t: t, nb: newMemDB(t, NB, "nb"), sb: newMemDB(t, SB, "sb")}
	now := time.UnixMilli(1_700_000_000_000)
	h.s = New(h.nb.schema, h.sb.schema, Options{Now: func() time.Time { return now }})
	return h, now.UnixMilli()
}

// writeNB runs WriteNB, commits it and hands the events back; it returns
// the operations.
func (h *harness) writeNB() int {
	n := h.s.WriteNB(h.nb)
	h.s.Apply(h.nb.commit())
	return n
}

func (h *harness) global() nb.NBGlobal {
	h.t.Helper()
	var g nb.NBGlobal
	for _, r := range h.nb.rows[nb.NBGlobalTable] {
		g.LoadRow(h.nb.schema.Tables[nb.NBGlobalTable], r)
		return g
	}
	h.t.Fatal("no NB_Global")
	return g
}

func (h *harness) lspUp(name string) *bool {
	h.t.Helper()
	for _, r := range h.nb.rows[nb.LogicalSwitchPortTable] {
		var p nb.LogicalSwitchPort
		p.LoadRow(h.nb.schema.Tables[nb.LogicalSwitchPortTable], r)
		if p.Name == name {
			return p.Up
		}
	}
	h.t.Fatalf("no port %s", name)
	return nil
}

func TestWriteNBGlobal(t *testing.T) {
	h, now := nbHarness(t)
	// An empty Northbound gets its NB_Global, with the options northd
	// fills in.
	if n := h.writeNB(); n != 1 {
		t.Fatalf("WriteNB on an empty Northbound: %d operations, want 1", n)
	}
	g := h.global()
	for k, ok := range map[string]bool{
		"mac_prefix":              validMACPrefix(g.Options["mac_prefix"]),
		"svc_monitor_mac":         len(g.Options["svc_monitor_mac"]) == 17,
		"max_tunid":               g.Options["max_tunid"] == "16711680",
		"northd_internal_version": g.Options["northd_internal_version"] == northdInternalVersion,
	} {
		if !ok {
			t.Errorf("options:%s = %q", k, g.Options[k])
		}
	}
	prefix, mac := g.Options["mac_prefix"], g.Options["svc_monitor_mac"]
	h.s.Recompute()
	h.sync()
	if n := h.writeNB(); n != 0 {
		t.Errorf("second WriteNB: %d operations, want 0", n)
	}

	// ovn-nbctl --wait=sb: nb_cfg 1 reaches the Southbound, then sb_cfg.
	h.nb.Update(nb.NBGlobalTable, g.UUID, map[string]ovsdb.Datum{"nb_cfg": dInt(1)})
	h.nbCommit()
	if n := h.writeNB(); n != 1 {
		t.Fatalf("WriteNB before the Southbound caught up: %d operations, want 1 (nb_cfg_timestamp, hv_cfg)", n)
	}
	if g := h.global(); g.SBCfg != 0 || g.NBCfgTimestamp != now || g.HVCfg != 1 {
		t.Errorf("before the Southbound write: sb_cfg %d (want 0), nb_cfg_timestamp %d (want %d), hv_cfg %d (want 1 without chassis)",
			g.SBCfg, g.NBCfgTimestamp, now, g.HVCfg)
	}
	h.sync()
	h.writeNB()
	if g := h.global(); g.SBCfg != 1 || g.SBCfgTimestamp != now {
		t.Errorf("after the Southbound write: sb_cfg %d, sb_cfg_timestamp %d; want 1, %d", g.SBCfg, g.SBCfgTimestamp, now)
	}
	if g := h.global(); g.Options["mac_prefix"] != prefix || g.Options["svc_monitor_mac"] != mac {
		t.Errorf("generated options changed: %v", g.Options)
	}

	// --wait=hv: hv_cfg is the smallest nb_cfg of the local chassis.
	ch := h.sb.Insert(sb.ChassisTable, map[string]ovsdb.Datum{"name": dString("hv1")})
	remote := h.sb.Insert(sb.ChassisTable, map[string]ovsdb.Datum{"name": dString("hv2"),
		"other_config": dMap(map[string]string{"is-remote": "true"})})
	h.sb.Insert(sb.ChassisPrivateTable, map[string]ovsdb.Datum{"name": dString("hv1"), "chassis": dUUID(ch)})
	h.sb.Insert(sb.ChassisPrivateTable, map[string]ovsdb.Datum{"name": dString("hv2"), "chassis": dUUID(remote)})
	h.sb.Insert(sb.ChassisPrivateTable, map[string]ovsdb.Datum{"name": dString("gone")})
	h.s.Apply(h.sb.commit())
	h.writeNB()
	if g := h.global(); g.HVCfg != 0 {
		t.Errorf("hv_cfg %d with a chassis at nb_cfg 0, want 0", g.HVCfg)
	}
	var privID ovsdb.UUID
	for id, r := range h.sb.rows[sb.ChassisPrivateTable] {
		if stringColumn(h.s.sb, sb.ChassisPrivateTable, r, "name") == "hv1" {
			privID = id
		}
	}
	h.sb.Update(sb.ChassisPrivateTable, privID, map[string]ovsdb.Datum{"nb_cfg": dInt(1), "nb_cfg_timestamp": dInt(4242)})
	h.s.Apply(h.sb.commit())
	h.writeNB()
	if g := h.global(); g.HVCfg != 1 || g.HVCfgTimestamp != 4242 {
		t.Errorf("hv_cfg %d at %d, want 1 at 4242", g.HVCfg, g.HVCfgTimestamp)
	}
	if n := h.writeNB(); n != 0 {
		t.Errorf("WriteNB with nothing new: %d operations", n)
	}
}

func TestWriteNBPortsUp(t *testing.T) {
	h, _ := nbHarness(t)
	vif := h.nb.Insert(nb.LogicalSwitchPortTable, (&nb.LogicalSwitchPort{Name: "vif"}).Row())
	rtr := h.nb.Insert(nb.LogicalSwitchPortTable, (&nb.LogicalSwitchPort{Name: "rtr", Type: "router"}).Row())
	h.nb.Insert(nb.LogicalSwitchTable, (&nb.LogicalSwitch{Name: "sw", Ports: []ovsdb.UUID{vif, rtr}}).Row())
	h.nbCommit()
	h.s.Recompute()
	h.sync()
	h.writeNB()
	if up := h.lspUp("rtr"); up == nil || !*up {
		t.Errorf("router port up = %v, want true", up)
	}
	if up := h.lspUp("vif"); up == nil || *up {
		t.Errorf("unbound port up = %v, want false", up)
	}
	// The chassis claims the port and reports it up.
	h.sb.Insert(sb.ChassisTable, map[string]ovsdb.Datum{"name": dString("hv1")})
	h.s.Apply(h.sb.commit())
	var chID, pbID ovsdb.UUID
	for id := range h.sb.rows[sb.ChassisTable] {
		chID = id
	}
	for id, r := range h.sb.rows[sb.PortBindingTable] {
		if stringColumn(h.s.sb, sb.PortBindingTable, r, "logical_port") == "vif" {
			pbID = id
		}
	}
	h.sb.Update(sb.PortBindingTable, pbID, map[string]ovsdb.Datum{"chassis": dUUID(chID), "up": ovsdb.Set(ovsdb.Boolean(true))})
	h.s.Apply(h.sb.commit())
	h.writeNB()
	if up := h.lspUp("vif"); up == nil || !*up {
		t.Errorf("port its chassis reports up: up = %v, want true", up)
	}
	// Down again, and the Northbound transaction fails: after ResyncNB
	// the next WriteNB writes it again.
	h.sb.Update(sb.PortBindingTable, pbID, map[string]ovsdb.Datum{"up": ovsdb.Set(ovsdb.Boolean(false))})
	h.s.Apply(h.sb.commit())
	if n := h.s.WriteNB(h.nb); n != 1 {
		t.Fatalf("port down: %d operations, want 1", n)
	}
	h.nb.ops = nil // the transaction failed
	if n := h.s.WriteNB(h.nb); n != 0 {
		t.Errorf("nothing changed since: %d operations, want 0", n)
	}
	h.s.ResyncNB()
	if n := h.writeNB(); n != 1 {
		t.Errorf("after ResyncNB: %d operations, want 1", n)
	}
	if up := h.lspUp("vif"); up == nil || *up {
		t.Errorf("port its chassis reports down: up = %v, want false", up)
	}
}

// BenchmarkWriteNB measures WriteNB with nothing to write, which the
// daemon pays on every iteration: 10,000 ports on 100 switches.
func BenchmarkWriteNB(b *testing.B) {
	h := &harness{nb: newMemDB(b, NB, "nb"), sb: newMemDB(b, SB, "sb")}
	h.s = New(h.nb.schema, h.sb.schema, Options{})
	for i := range 100 {
		var ports []ovsdb.UUID
		for j := range 100 {
			p := nb.LogicalSwitchPort{Name: fmt.Sprintf("p%d-%d", i, j)}
			ports = append(ports, h.nb.Insert(nb.LogicalSwitchPortTable, (&p).Row()))
		}
		h.nb.Insert(nb.LogicalSwitchTable, (&nb.LogicalSwitch{Name: fmt.Sprintf("sw%d", i), Ports: ports}).Row())
	}
	h.s.Apply(h.nb.commit())
	h.s.WriteNB(h.nb)
	h.s.Apply(h.nb.commit())
	b.ResetTimer()
	for range b.N {
		if n := h.s.WriteNB(h.nb); n != 0 {
			b.Fatalf("%d operations in the steady state", n)
		}
	}
}

func TestWriteNBTags(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	str := func(v string) *string { return &v }
	h, _ := nbHarness(t)
	var ports []ovsdb.UUID
	add := func(p nb.LogicalSwitchPort) {
		ports = append(ports, h.nb.Insert(nb.LogicalSwitchPortTable, p.Row()))
	}
	add(nb.LogicalSwitchPort{Name: "vm1"})
	add(nb.LogicalSwitchPort{Name: "vm2"})
	add(nb.LogicalSwitchPort{Name: "c-fixed", ParentName: str("vm1"), TagRequest: i64(1)})
	add(nb.LogicalSwitchPort{Name: "c-a", ParentName: str("vm1"), TagRequest: i64(0)})
	add(nb.LogicalSwitchPort{Name: "c-b", ParentName: str("vm1"), TagRequest: i64(0)})
	add(nb.LogicalSwitchPort{Name: "c-other", ParentName: str("vm2"), TagRequest: i64(0)})
	add(nb.LogicalSwitchPort{Name: "c-none", ParentName: str("vm2")})
	h.nb.Insert(nb.LogicalSwitchTable, (&nb.LogicalSwitch{Name: "sw", Ports: ports}).Row())
	h.nbCommit()
	h.s.Recompute()
	h.sync()
	h.writeNB()
	tags := func() map[string]int64 {
		got := map[string]int64{}
		for _, r := range h.nb.rows[nb.LogicalSwitchPortTable] {
			var lsp nb.LogicalSwitchPort
			lsp.LoadRow(h.nb.schema.Tables[nb.LogicalSwitchPortTable], r)
			if lsp.Tag != nil {
				got[lsp.Name] = *lsp.Tag
			}
		}
		return got
	}
	got := tags()
	// c-a and c-b share vm1 with c-fixed's tag 1; each parent counts
	// its tags on its own; a port without tag_request gets none.
	if got["c-fixed"] != 1 || got["c-other"] != 1 || got["c-none"] != 0 {
		t.Errorf("tags = %v, want c-fixed 1, c-other 1, c-none none", got)
	}
	if a, b := got["c-a"], got["c-b"]; a == b || min(a, b) != 2 || max(a, b) != 3 {
		t.Errorf("tags under vm1 = %v, want c-a and c-b to get 2 and 3", got)
	}
	if n := h.writeNB(); n != 0 {
		t.Errorf("second WriteNB wrote %d operations, want 0 (tags are kept)", n)
	}
	if again := tags(); !maps.Equal(again, got) {
		t.Errorf("tags changed from %v to %v", got, again)
	}
}

// TestWriteNBSBCfgAtCommit: sb_cfg follows the Southbound transaction that
// carried nb_cfg as soon as it has committed, before its updates come back
// (so the daemon writes it in the same iteration); a transaction that did
// not commit moves nothing.
func TestWriteNBSBCfgAtCommit(t *testing.T) {
	h, _ := nbHarness(t)
	h.writeNB()
	h.s.Recompute()
	h.sync()
	h.writeNB()
	g := h.global()

	bump := func(cfg int64) {
		h.nb.Update(nb.NBGlobalTable, g.UUID, map[string]ovsdb.Datum{"nb_cfg": dInt(cfg)})
		h.nbCommit()
		h.s.Process()
		if n := h.s.WriteSB(h.sb); n == 0 {
			t.Fatalf("nb_cfg %d: WriteSB wrote nothing", cfg)
		}
	}

	// The transaction fails: nothing is committed, sb_cfg stays.
	bump(1)
	h.sb.ops = nil
	h.writeNB()
	if got := h.global().SBCfg; got != 0 {
		t.Errorf("after a failed Southbound transaction: sb_cfg %d, want 0", got)
	}
	h.s.Resync()

	// It commits: sb_cfg follows at once.
	bump(2)
	evs := h.sb.commit()
	h.s.Committed(h.sb.realUUID)
	h.writeNB()
	if got := h.global().SBCfg; got != 2 {
		t.Errorf("after the commit, before its updates: sb_cfg %d, want 2", got)
	}
	// Its updates then change nothing more.
	h.s.Apply(evs)
	h.s.Process()
	if n := h.s.WriteSB(h.sb); n != 0 {
		t.Errorf("WriteSB after applying its own updates: %d operations", n)
	}
	if n := h.writeNB(); n != 0 {
		t.Errorf("WriteNB after the updates: %d operations, want 0", n)
	}
	if got := h.global().SBCfg; got != 2 {
		t.Errorf("after the updates: sb_cfg %d, want 2", got)
	}
}
