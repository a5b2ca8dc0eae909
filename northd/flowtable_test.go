package northd

import (
	"testing"
	"unsafe"
)

// TestFlowTextOnce: once the Southbound has a flow's row, the flow table
// holds the row's very strings (its generator's copy is garbage), so a
// flow's match and actions are in memory once; after a change and a full
// recompute too.
func TestFlowTextOnce(t *testing.T) {
	h := k8sCluster(t, 3)
	check := func(when string) {
		t.Helper()
		ts := h.sb.schema.Tables["Logical_Flow"]
		rows, shared := 0, 0
		for _, r := range h.sb.rows["Logical_Flow"] {
			k, ok := h.s.sbFlowKey(r)
			if !ok {
				continue
			}
			e := h.s.flows.entries[k]
			if e == nil {
				t.Fatalf("%s: no entry for the Southbound flow %v", when, r.Get(ts.Column("match")))
			}
			rows++
			if unsafe.StringData(e.key.match) == unsafe.StringData(r.Get(ts.Column("match")).Keys[0].Str()) {
				shared++
			}
		}
		if rows == 0 || shared != rows {
			t.Errorf("%s: %d of %d flows share their row's match", when, shared, rows)
		}
	}
	check("after the cold start")
	w := &nbWorld{t: t, h: h}
	k8sChanges[0].do(h, w, 0)
	h.nbCommit()
	h.sync()
	check("after a pod add")
	h.s.Recompute()
	h.sync()
	check("after a full recompute")
}
