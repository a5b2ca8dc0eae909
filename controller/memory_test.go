package controller

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/schema/sb"
)

// heapBytes is the live heap after two collections.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// addressSetACL loads a switch with a bound port into an engine and a
// datapath, then adds an address set of n addresses and an ACL-like flow
// over it (one datapath rule per address, as "govn bench chassis" adds),
// and returns the live heap this cost per rule added, with the engine
// and the datapath still holding their state.
func addressSetACL(tb testing.TB, n int) (bytesPerRule float64, rules int) {
	tb.Helper()
	tr, err := NewTranslator()
	if err != nil {
		tb.Fatal(err)
	}
	w := bigWorld(20)
	w.bind(9, true)
	e := NewEngine(tr, nil)
	pipe := dp.NewPipeline()
	apply := func(b flow.Bundle) error { _, err := pipe.Apply(b); return err }
	run := func() {
		e.Load(w.snapshot())
		if err := e.Run(context.Background()); err != nil {
			tb.Fatal(err)
		}
		if _, err := e.Commit(apply); err != nil {
			tb.Fatal(err)
		}
	}
	count := func() int {
		k := 0
		for _, c := range pipe.Tables().RuleCounts() {
			k += c
		}
		return k
	}
	run()
	before, rules0 := heapBytes(), count()
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.128.%d.%d", i>>8&255, i&255)
	}
	w.in.AddressSets = append(w.in.AddressSets, sb.AddressSet{UUID: w.uuid(), Name: "as_big", Addresses: addrs})
	ls := uid(wLS1)
	w.in.Flows = append(w.in.Flows, sb.LogicalFlow{UUID: w.uuid(), LogicalDatapath: &ls, Pipeline: "egress",
		TableID: 4, Priority: 2001, Match: `outport == "vm9" && ip4.src == $as_big && tcp.dst == 8080`,
		Actions: "reg0[1] = 1; next;"})
	run()
	after, rules1 := heapBytes(), count()
	runtime.KeepAlive(e)
	runtime.KeepAlive(pipe)
	added := rules1 - rules0
	if added < n {
		tb.Fatalf("the ACL over %d addresses added %d rules", n, added)
	}
	return float64(int64(after)-int64(before)) / float64(added), added
}

// TestAddressSetACLMemory bounds what the chassis keeps per rule of an
// ACL over a large address set: the datapath's rule, the engine's
// compiled rule and its desired and installed state (which share it).
// It was 5.1 KB a rule when the engine kept two more copies and the
// compiler's scratch stayed as big as the largest flow.
func TestAddressSetACLMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles 10,000 rules")
	}
	per, rules := addressSetACL(t, 10000)
	t.Logf("%d rules, %.0f bytes of live heap each", rules, per)
	const budget = 3500
	if per > budget {
		t.Errorf("%.0f bytes of live heap a rule, budget %d", per, budget)
	}
}

// BenchmarkAddressSetACL reports the live heap per rule of an ACL over a
// 10,000-address set (heap-bytes/rule).
func BenchmarkAddressSetACL(b *testing.B) {
	var per float64
	for b.Loop() {
		per, _ = addressSetACL(b, 10000)
	}
	b.ReportMetric(per, "heap-bytes/rule")
}
