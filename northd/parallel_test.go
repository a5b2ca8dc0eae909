package northd

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/govn/govn/bench/northdbench"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
	"github.com/govn/govn/schema/sb"
)

// sbText is the Southbound of h as text: every row of every table, rows in
// UUID order, columns in name order. memDB numbers its UUIDs in the order
// of the operations, so two texts are equal only if the same operations
// came in the same order.
func sbText(h *harness) string {
	var tables []string
	for tn := range h.sb.rows {
		tables = append(tables, tn)
	}
	sort.Strings(tables)
	var b strings.Builder
	for _, tn := range tables {
		ts := h.sb.schema.Tables[tn]
		var ids []ovsdb.UUID
		for id := range h.sb.rows[tn] {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i].Compare(ids[j]) < 0 })
		for _, id := range ids {
			r := h.sb.rows[tn][id]
			fmt.Fprintf(&b, "%s %s", tn, id)
			for _, c := range ts.Columns { // sorted by name
				fmt.Fprintf(&b, " %s=%v", c.Name, r.Get(c))
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// twins returns two harnesses on the same Northbound: one generating
// serially, one in parallel on 4 goroutines for every batch of at least
// minBatch owners.
func twins(t *testing.T, minBatch int) [2]*harness {
	var hs [2]*harness
	for i, workers := range []int{1, 4} {
		h := &harness{t: t, nb: newMemDB(t, NB, "nb"), sb: newMemDB(t, SB, "sb")}
		h.s = New(h.nb.schema, h.sb.schema, Options{Workers: workers})
		h.s.parallelMin = minBatch
		hs[i] = h
	}
	return hs
}

// sameSB fails the test if the twins' Southbounds differ.
func sameSB(t *testing.T, hs [2]*harness, when string) {
	t.Helper()
	serial, parallel := sbText(hs[0]), sbText(hs[1])
	if serial == parallel {
		return
	}
	a, b := strings.Split(serial, "\n"), strings.Split(parallel, "\n")
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			t.Fatalf("%s: the parallel generation's Southbound differs from the serial one's at line %d:\nserial:   %s\nparallel: %s", when, i+1, a[i], b[i])
		}
	}
	t.Fatalf("%s: the parallel generation's Southbound has %d lines, the serial one's %d", when, len(b), len(a))
}

// TestParallelEqualsSerial: a full compute and every change of govn bench
// northd on its cluster give, generated in parallel, byte for byte the
// Southbound (the same operations in the same order) that a serial
// generation gives.
func TestParallelEqualsSerial(t *testing.T) {
	hs := twins(t, 0)
	for _, h := range hs {
		h.s.Apply(loadOps(h, northdbench.Shape{Nodes: 12, Services: 15}.Northbound()))
		h.s.Recompute()
		h.sync()
	}
	sameSB(t, hs, "cold start")
	if hs[1].s.Stats().Generations != hs[0].s.Stats().Generations {
		t.Errorf("parallel: %d owners generated, serial: %d", hs[1].s.Stats().Generations, hs[0].s.Stats().Generations)
	}
	t.Logf("%d owners generated, %d of them again after speculation", hs[1].s.Stats().Generations, hs[1].s.Stats().Regenerated)
	if hs[1].s.Stats().Regenerated*10 > hs[1].s.Stats().Generations {
		t.Errorf("%d of %d owners generated again: the speculation fails too often", hs[1].s.Stats().Regenerated, hs[1].s.Stats().Generations)
	}
	for _, c := range k8sChanges {
		for _, h := range hs {
			c.do(h, &nbWorld{t: t, h: h}, 0)
			bumpNBCfg(h, &nbWorld{t: t, h: h})
			h.nbCommit()
			h.sync()
		}
		sameSB(t, hs, c.kind)
	}
	for _, h := range hs {
		h.s.Recompute()
		h.sync()
	}
	sameSB(t, hs, "a second full compute")
}

// TestParallelEqualsSerialRandom: random changes of every kind
// (nbWorld.step), each batch generated in parallel however small, give
// the serial generation's Southbound.
func TestParallelEqualsSerialRandom(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			hs := twins(t, 1)
			var ws [2]*nbWorld
			for i, h := range hs {
				ws[i] = &nbWorld{t: t, h: h, rnd: rand.New(rand.NewPCG(seed, 42))}
				h.nb.Insert(nb.NBGlobalTable, (&nb.NBGlobal{Options: map[string]string{"svc_monitor_mac": "0a:58:0a:00:00:fe"}}).Row())
				h.nbCommit()
				h.s.Recompute()
				h.sync()
			}
			for i := 0; i < 120; i++ {
				var did string
				for j, h := range hs {
					did = ws[j].step()
					h.sync()
				}
				sameSB(t, hs, fmt.Sprintf("change %d (%s)", i+1, did))
			}
		})
	}
}

// TestRecomputeKeepsUnchangedOwners: a full recompute of an unchanged
// Northbound, generated in parallel, leaves almost every owner's recorded
// output as it is (the very same dependency records and flow
// contributions, not copies made again) and writes nothing; one after a
// change still writes that change.
func TestRecomputeKeepsUnchangedOwners(t *testing.T) {
	h := &harness{t: t, nb: newMemDB(t, NB, "nb"), sb: newMemDB(t, SB, "sb")}
	h.s = New(h.nb.schema, h.sb.schema, Options{Workers: 2})
	h.s.parallelMin = 1
	h.s.Apply(loadOps(h, northdbench.Shape{Nodes: 6}.Northbound()))
	h.s.Recompute()
	h.sync()
	type output struct {
		dep  *depEntry
		flow *flowEntry
	}
	before := make(map[*owner]output)
	for _, o := range h.s.owners {
		var out output
		if len(o.deps) > 0 {
			out.dep = o.deps[0]
		}
		if len(o.flows) > 0 {
			out.flow = o.flows[0].e
		}
		before[o] = out
	}
	h.s.Recompute()
	if n := h.s.WriteSB(h.sb); n != 0 {
		t.Fatalf("a recompute of an unchanged Northbound wrote %d operations", n)
	}
	kept := 0
	for o, out := range before {
		if len(o.deps) > 0 && o.deps[0] == out.dep && (len(o.flows) == 0 || o.flows[0].e == out.flow) {
			kept++
		}
	}
	if kept*10 < len(before)*9 {
		t.Errorf("%d of %d owners kept their output", kept, len(before))
	}

	// A change the recompute alone sees: a pod's port security.
	w := &nbWorld{t: t, h: h}
	k8sChanges[0].do(h, w, 0)
	h.s.Apply(h.nb.commit())
	h.s.Recompute()
	if n := h.s.WriteSB(h.sb); n == 0 {
		t.Fatal("a recompute after a pod add wrote nothing")
	}
	h.s.Apply(h.sb.commit())
	h.s.Process()
	h.s.Recompute()
	if n := h.s.WriteSB(h.sb); n != 0 {
		t.Fatalf("a second recompute after a pod add wrote %d operations", n)
	}
}

// TestReadsDecodeOnce: every reader of a Northbound row gets the one model
// decoded for that version of the row, in a parallel batch or not (its
// maps are the same), and a new version of the row a new model; a
// Southbound row is decoded once per batch, and afresh outside batches.
func TestReadsDecodeOnce(t *testing.T) {
	h := k8sCluster(t, 2)
	id := h.byName(nb.LogicalSwitchPortTable, "ns0_pod-0-0")
	sh := &specShared{memos: make(map[string]*specMemo), sets: make(map[string]*specSet)}
	read := func(x *specLog) nb.LogicalSwitchPort {
		t.Helper()
		o := &owner{key: ownerKey{kind: kindMemo}}
		m, ok := Read[nb.LogicalSwitchPort](&gen{s: h.s, o: o, x: x}, NB, id)
		if !ok || len(m.Options) == 0 {
			t.Fatalf("pod's port not read: %+v", m)
		}
		return m
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
	}
	a, b, c := read(&specLog{sh: sh}), read(&specLog{sh: sh}), read(nil)
	if !same(a.Options, b.Options) || !same(a.Options, c.Options) {
		t.Error("readers of one version of a Northbound row decoded it more than once")
	}
	h.nb.Update(nb.LogicalSwitchPortTable, id, map[string]ovsdb.Datum{
		"options": ovsdb.Map([]ovsdb.Atom{ovsdb.String("requested-chassis")}, []ovsdb.Atom{ovsdb.String("elsewhere")}),
	})
	h.nbCommit()
	d := read(nil)
	if same(d.Options, a.Options) || d.Options["requested-chassis"] != "elsewhere" {
		t.Errorf("the port's new version read as %v, the old model's maps", d.Options)
	}

	readPB := func(x *specLog, pid ovsdb.UUID) map[string]string {
		t.Helper()
		o := &owner{key: ownerKey{kind: kindMemo}}
		m, ok := Read[sb.PortBinding](&gen{s: h.s, o: o, x: x}, SB, pid)
		if !ok {
			t.Fatal("port binding not read")
		}
		return m.Options
	}
	var pb ovsdb.UUID
	for pid := range h.s.sb.rows[sb.PortBindingTable] {
		if len(readPB(nil, pid)) > 0 {
			pb = pid
			break
		}
	}
	if pb.IsZero() {
		t.Fatal("no Port_Binding with options in the Southbound")
	}
	e, f, g := readPB(&specLog{sh: sh}, pb), readPB(&specLog{sh: sh}, pb), readPB(nil, pb)
	if !same(e, f) {
		t.Error("two readers in one batch decoded a Southbound row twice")
	}
	if same(g, e) {
		t.Error("an ordinary generation got the batch's model of a Southbound row")
	}
}
