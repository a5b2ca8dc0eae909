package pinctrl

import (
	"context"
	"encoding/binary"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
)

// floodRig is a real datapath whose table 0 sends every packet from port
// 1 to the controller as an ARP miss of a router (arp { }), with pinctrl
// running on it; ARP requests leave by port 2.
type floodRig struct {
	d    *dp.Datapath
	pl   *dp.Pipeline
	in   *port.Channel
	out  *port.Channel
	pc   *Pinctrl
	stop func()
}

const floodAction = "arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.spa = reg1; arp.tpa = reg0; arp.op = 1; output; };"

func newFloodRig(tb testing.TB, limit Limit) *floodRig {
	tb.Helper()
	pl := dp.NewPipeline()
	var b flow.Bundle
	var m flow.Match
	m.Set(flow.InPort, 1)
	b.Add(flow.Rule{Table: 0, Priority: 100, Match: m, Actions: []flow.Action{
		flow.Load{Dst: flow.Whole(flow.Metadata), Value: flow.U128{Lo: 1}},
		flow.Load{Dst: flow.Whole(flow.Reg0 + 14), Value: flow.U128{Lo: 1}},
		flow.Resubmit{Table: 29}}})
	b.Add(flow.Rule{Table: 29, Priority: 100, Actions: []flow.Action{flow.Controller{UserData: []byte(floodAction)}}})
	b.Add(flow.Rule{Table: 37, Priority: 0, Actions: []flow.Action{flow.Output{Port: 2}}})
	if _, err := pl.Apply(b); err != nil {
		tb.Fatal(err)
	}
	d, err := dp.New(dp.Config{Flows: pl})
	if err != nil {
		tb.Fatal(err)
	}
	r := &floodRig{d: d, pl: pl, in: port.NewChannel("in", 256, false), out: port.NewChannel("out", 256, false)}
	if err := d.AddPort(1, r.in); err != nil {
		tb.Fatal(err)
	}
	if err := d.AddPort(2, r.out); err != nil {
		tb.Fatal(err)
	}
	r.pc, err = New(Config{Switch: d, Limits: map[string]Limit{"arp": limit}})
	if err != nil {
		tb.Fatal(err)
	}
	r.pc.fixedState = testState()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); d.Run(ctx) }()
	go func() { defer wg.Done(); r.pc.Run(ctx) }()
	go func() { // the wire beyond port 2 takes whatever comes
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.out.Out():
			}
		}
	}()
	r.stop = func() { cancel(); wg.Wait() }
	tb.Cleanup(r.stop)
	return r
}

// missFrame is an IPv4 packet to a destination nobody has resolved.
func missFrame(i int) []byte {
	dst := netip.AddrFrom4([4]byte{20, byte(i >> 16), byte(i >> 8), byte(i)})
	icmp := []byte{8, 0, 0, 0, 0, 1, 0, 0}
	binary.BigEndian.PutUint16(icmp[6:], uint16(i))
	return ethFrame(routerMAC, vmMAC, etherIPv4, ipPacket(vmIP, dst, protoICMP, 64, icmp, 2))
}

// TestFloodOfMisses: 20,000 ARP misses as fast as they come. The
// datapath never waits for pinctrl (what does not fit its queue is
// dropped and counted), pinctrl answers no more than its limit allows and
// counts the rest, every packet-in is accounted for, and memory stays
// bounded.
func TestFloodOfMisses(t *testing.T) {
	const n = 20000
	limit := Limit{Rate: 100, Burst: 100}
	r := newFloodRig(t, limit)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for i := range n {
		if err := r.in.Inject(missFrame(i), port.Offload{}); err != nil {
			t.Fatal(err)
		}
	}
	var ds dp.Stats
	var ks KindStats
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds = r.d.Stats()
		ks = r.pc.Stats().Kinds["arp"]
		if ds.PacketIns+ds.PacketInDrops == n && ks.Handled+ks.RateDropped+ks.Errors == ds.PacketIns {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all accounted for: datapath %d packet-ins + %d drops of %d; pinctrl %+v", ds.PacketIns, ds.PacketInDrops, n, ks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(start)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if max := uint64(limit.Burst + limit.Rate*elapsed.Seconds() + 1); ks.Handled > max {
		t.Errorf("pinctrl answered %d in %v, more than its limit allows (%d)", ks.Handled, elapsed, max)
	}
	if ks.Errors != 0 || ks.Handled == 0 {
		t.Errorf("pinctrl counters %+v", ks)
	}
	if ds.PacketOuts != ks.Handled {
		t.Errorf("%d packet-outs for %d answered misses", ds.PacketOuts, ks.Handled)
	}
	t.Logf("%d misses in %v: datapath dropped %d packet-ins (queue full), pinctrl answered %d and rate-dropped %d; heap %d KiB → %d KiB",
		n, elapsed.Round(time.Millisecond), ds.PacketInDrops, ks.Handled, ks.RateDropped, before.HeapInuse>>10, after.HeapInuse>>10)
}

// BenchmarkInstallUnderFlood: applying a new port's flows (a bundle of
// 20 rules) while the datapath floods pinctrl with ARP misses; ns/op is
// the time to install them.
func BenchmarkInstallUnderFlood(b *testing.B) {
	r := newFloodRig(b, defaultLimit)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			_ = r.in.Inject(missFrame(i), port.Offload{})
		}
	}()
	defer func() { cancel(); r.stop(); wg.Wait() }()
	time.Sleep(100 * time.Millisecond) // the flood is on
	i := 0
	for b.Loop() {
		var bd flow.Bundle
		for j := range 20 {
			var m flow.Match
			m.Set(flow.InPort, uint64(100+i%1000))
			m.Set(flow.EthDst, uint64(j))
			bd.Add(flow.Rule{Table: 1, Priority: 100, Match: m, Actions: []flow.Action{flow.Output{Port: 2}}})
		}
		if _, err := r.pl.Apply(bd); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	s := r.pc.Stats().Kinds["arp"]
	b.ReportMetric(float64(s.RateDropped), "rate-dropped")
	b.ReportMetric(float64(r.d.Stats().PacketInDrops), "queue-dropped")
}
