package megaflow

import (
	"fmt"
	"testing"
	"time"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/xlate"
)

// ctPipeline sends every packet through conntrack after copying its TCP
// source port into reg3, so each connection freezes a state of its own;
// table 1 forwards by destination MAC to port out.
func ctPipeline(t testing.TB, out uint32) flow.Bundle {
	t.Helper()
	var b flow.Bundle
	b.Add(flow.Rule{Table: 0, Priority: 10, Actions: []flow.Action{
		flow.Move{Src: flow.Whole(flow.TPSrc), Dst: flow.FieldRange{Field: flow.Reg3, Bits: 16}},
		flow.CT{Zone: 1, Table: 1},
	}})
	b.Add(flow.Rule{Table: 1, Priority: 10, Actions: []flow.Action{flow.Output{Port: out}}})
	return b
}

// TestRecircStatesBounded churns short connections, each recirculating
// into a state of its own, through a cache with idle expiry and regular
// flow-table changes: the translator's states stay bounded by the
// connections of the last idle timeout plus grace period, instead of
// growing with every connection ever seen.
func TestRecircStatesBounded(t *testing.T) {
	const (
		conns     = 5000
		idle      = 200 * time.Microsecond // of the fake clock: ~25 connections' packets
		grace     = 100 * time.Microsecond
		expireGap = 50 * time.Microsecond
	)
	ts := classifier.NewTables()
	if _, err := ts.Apply(ctPipeline(t, 3)); err != nil {
		t.Fatal(err)
	}
	d := &datapath{cache: New(true), tables: ts}
	epoch := time.Unix(0, 0)
	// Each packet advances the fake clock by 1 µs (d.process: d.now++ is 1 ns; scale).
	d.tr = xlate.New(ts, xlate.WithClock(func() time.Time { return epoch.Add(d.now * 1000) }),
		xlate.WithRecircGrace(grace))
	maxStates, lastExpire := 0, time.Duration(0)
	for i := 0; i < conns; i++ {
		if i%500 == 499 {
			// A flow-table change: table 1 now outputs to another port.
			var b flow.Bundle
			b.Modify(flow.Rule{Table: 1, Priority: 10, Actions: []flow.Action{flow.Output{Port: uint32(3 + (i+1)/500%2)}}})
			if _, err := ts.Apply(b); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range connection {
			k := tcpKey(p.toServer, uint16(1024+i), p.flags)
			acts := d.process(t, &k)
			if len(acts) != 2 {
				t.Fatalf("connection %d: actions %s", i, flow.DPActionsString(acts))
			}
			// The datapath recirculates: conntrack fills ct_state.
			k.Set(flow.RecircID, uint64(acts[1].(flow.DPRecirc).ID))
			k.Set(flow.CTState, 0x21)
			if got := flow.DPActionsString(d.process(t, &k)); got != fmt.Sprint(3+(i+1)/500%2) {
				t.Fatalf("connection %d after recirculation: %s", i, got)
			}
		}
		if now := d.now * 1000; now-lastExpire >= expireGap {
			d.cache.Expire(d.now, idle/1000)
			lastExpire = now
		}
		maxStates = max(maxStates, d.tr.RecircStates())
	}
	t.Logf("%d connections: at most %d recirculation states alive", conns, maxStates)
	// Connections last 16 packets (16 µs); idle+grace+expiry gap covers
	// about 22 connections, one state each (the server direction shares one).
	if bound := 2 * 30; maxStates > bound {
		t.Errorf("up to %d recirculation states alive, want at most %d", maxStates, bound)
	}
	if maxStates < 2 {
		t.Errorf("max %d recirculation states: the test does not recirculate", maxStates)
	}
	// Once every megaflow is gone and the grace period passed, the next
	// freeze frees them all.
	d.cache.Flush()
	d.now += 2 * grace / 1000
	k := tcpKey(true, 1, packet.TCPSyn)
	d.tr.Translate(&k, xlate.Options{})
	if n := d.tr.RecircStates(); n != 1 {
		t.Errorf("%d states after flush and grace, want 1 (the new one)", n)
	}
}

// TestRecircStateHeldByMegaflow checks that a state a megaflow holds
// survives any number of sweeps, and is freed after its megaflow is.
func TestRecircStateHeldByMegaflow(t *testing.T) {
	ts := classifier.NewTables()
	if _, err := ts.Apply(ctPipeline(t, 3)); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 0)
	tr := xlate.New(ts, xlate.WithClock(func() time.Time { return now }), xlate.WithRecircGrace(time.Second))
	c := New(false)
	k := tcpKey(true, 7, packet.TCPSyn)
	res := tr.Translate(&k, xlate.Options{})
	if ids := res.Recircs.IDs(); len(ids) != 1 {
		t.Fatalf("recircs %v of %s", ids, res.String())
	}
	held := c.Insert(&res, 0)
	// Other connections' states come and go past many grace periods.
	for i := 0; i < 10; i++ {
		now = now.Add(2 * time.Second)
		k2 := tcpKey(true, uint16(100+i), packet.TCPSyn)
		tr.Translate(&k2, xlate.Options{})
	}
	if n := tr.RecircStates(); n != 2 {
		t.Errorf("%d states, want 2 (the held one and the latest)", n)
	}
	rk := k
	rk.Set(flow.RecircID, uint64(res.Recircs.IDs()[0]))
	if r := tr.Translate(&rk, xlate.Options{}); r.Err != nil {
		t.Fatalf("held state freed: %v", r.Err)
	}
	c.Remove(held)
	now = now.Add(2 * time.Second)
	k3 := tcpKey(true, 9999, packet.TCPSyn)
	tr.Translate(&k3, xlate.Options{})
	if r := tr.Translate(&rk, xlate.Options{}); r.Err == nil {
		t.Errorf("state of a removed megaflow still alive after the grace period")
	}
}
