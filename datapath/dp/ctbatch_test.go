package dp

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/govn/govn/datapath/conntrack"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
)

// recordPort keeps a copy of every frame it is sent.
type recordPort struct {
	nullPort
	frames []string
}

func (r *recordPort) Send(pkts []*port.Packet) error {
	for _, p := range pkts {
		r.frames = append(r.frames, string(p.Data))
	}
	return nil
}

// perPacketCT hides the tracker's batch method: the datapath then runs
// every ct() packet by packet, the reference for the batched path.
type perPacketCT struct{ Conntrack }

// countingCT counts the tracker batches and their packets.
type countingCT struct {
	*conntrack.Tracker
	batches, pkts int
}

func (c *countingCT) ProcessBatch(pkts [][]byte, l3offs []int, p conntrack.Params, now time.Duration, results []conntrack.Result) {
	c.batches++
	c.pkts += len(pkts)
	c.Tracker.ProcessBatch(pkts, l3offs, p, now, results)
}

// ctStatePipeline is OVN's shape: recirc_id 0 runs ct(zone=7) and
// recirculates; recirc_id 1 commits new connections and outputs every
// packet to port 100+ct_state, so the port says what conntrack answered.
func ctStatePipeline(k *flow.Key) (flow.Mask, []flow.DPAction) {
	var m flow.Mask
	if k.Get(flow.RecircID) == 0 {
		return m, []flow.DPAction{flow.DPCT{Zone: 7}, flow.DPRecirc{ID: 1}}
	}
	m.SetField(flow.CTState)
	st := k.Get(flow.CTState)
	out := flow.DPOutput{Port: 100 + uint32(st&0x3f)}
	if st&uint64(conntrack.StateNew) != 0 {
		return m, []flow.DPAction{flow.DPCT{Zone: 7, Commit: true}, out}
	}
	return m, []flow.DPAction{out}
}

// runCTWorkload runs the batches through one worker and returns the frames
// each output port received.
func runCTWorkload(t *testing.T, ct Conntrack, batches [][][]byte) map[uint32][]string {
	t.Helper()
	d, err := New(Config{Flows: &fakeFlows{translate: ctStatePipeline}, Conntrack: ct})
	if err != nil {
		t.Fatal(err)
	}
	outs := map[uint32]*recordPort{}
	for no := uint32(100); no < 164; no++ {
		outs[no] = &recordPort{}
		if err := d.AddPort(no, outs[no]); err != nil {
			t.Fatal(err)
		}
	}
	w := newWorker(d, &portEntry{no: 1, port: &nullPort{}})
	pkts := make([]*port.Packet, port.BatchSize)
	for i := range pkts {
		pkts[i] = port.NewPacket(port.MaxFrame)
	}
	for _, b := range batches {
		for i, f := range b {
			pkts[i].SetFrame(f)
			w.receive(pkts[i], time.Second)
		}
		w.drainCT(time.Second)
		w.flush()
	}
	got := map[uint32][]string{}
	for no, r := range outs {
		if len(r.frames) > 0 {
			got[no] = r.frames
		}
	}
	return got
}

// TestCTBatchMatchesPerPacket sends the first packet of 600 UDP
// connections, their replies, then a second original-direction packet,
// shuffled into batches, and checks that the batched ct() path gives every
// packet the state the per-packet path gives it, and that it batched.
func TestCTBatchMatchesPerPacket(t *testing.T) {
	const conns = 600
	rng := rand.New(rand.NewPCG(1, 2))
	var batches [][][]byte
	for phase := range 3 {
		var frames [][]byte
		for c := range conns {
			f := udpFrame(mac2, mac1, uint16(1000+c), 53, 8)
			if phase == 1 {
				f = udpReply(f)
			}
			frames = append(frames, f)
		}
		rng.Shuffle(len(frames), func(i, j int) { frames[i], frames[j] = frames[j], frames[i] })
		for len(frames) > 0 {
			n := min(len(frames), port.BatchSize)
			batches = append(batches, frames[:n])
			frames = frames[n:]
		}
	}
	ref := conntrack.New(conntrack.Config{})
	defer ref.Close()
	want := runCTWorkload(t, perPacketCT{ref}, batches)
	tr := conntrack.New(conntrack.Config{})
	defer tr.Close()
	cc := &countingCT{Tracker: tr}
	got := runCTWorkload(t, cc, batches)

	trk, est := uint32(conntrack.StateTracked), uint32(conntrack.StateEstablished)
	for no, n := range map[uint32]int{
		100 + trk | uint32(conntrack.StateNew):         conns,
		100 + trk | est | uint32(conntrack.StateReply): conns,
		100 + trk | est: conns,
	} {
		if len(want[no]) != n {
			t.Errorf("per-packet path: port %d got %d frames, want %d", no, len(want[no]), n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("batched path used %d output ports, per-packet %d", len(got), len(want))
	}
	for no, w := range want {
		g := slices.Sorted(slices.Values(got[no]))
		if !slices.Equal(g, slices.Sorted(slices.Values(w))) {
			t.Errorf("port %d: batched path sent %d frames, per-packet %d, or different ones", no, len(g), len(w))
		}
	}
	// Every packet passes ct(zone=7), new ones also ct(commit): all in
	// batches but those of the two upcalls (the slow path runs ct() packet
	// by packet).
	if cc.pkts != 4*conns-2 || cc.batches > cc.pkts/8 {
		t.Errorf("%d packets in %d tracker batches, want %d packets in batches of 8 or more on average", cc.pkts, cc.batches, 4*conns-2)
	}
	t.Logf("%d packets in %d tracker batches", cc.pkts, cc.batches)
}

// udpReply returns the reply-direction copy of a udpFrame: addresses and
// ports swapped (the checksums do not change).
func udpReply(f []byte) []byte {
	r := slices.Clone(f)
	copy(r[0:6], f[6:12])
	copy(r[6:12], f[0:6])
	copy(r[26:30], f[30:34])
	copy(r[30:34], f[26:30])
	copy(r[34:36], f[36:38])
	copy(r[36:38], f[34:36])
	return r
}

// benchCTEstablished runs batches of 32 packets of random established UDP
// connections (of conns) through ct(zone=7), recirculation and output;
// with nat, the ct() actions also carry a (plain) nat, as OVN's do on a
// switch with a load balancer.
func benchCTEstablished(b *testing.B, batched bool, conns int, nat bool) {
	tr := conntrack.New(conntrack.Config{})
	defer tr.Close()
	frames := make([][]byte, conns)
	for c := range frames {
		f := udpFrame(mac2, mac1, uint16(c), uint16(c>>16), 8)
		f[29] = byte(c >> 24) // spread over source addresses too
		frames[c] = f
		for _, p := range [][]byte{slices.Clone(f), udpReply(f)} {
			tr.Process(p, 14, conntrack.Params{Zone: 7, Commit: true}, time.Second)
		}
	}
	var ct Conntrack = tr
	if !batched {
		ct = perPacketCT{tr}
	}
	pipeline := ctStatePipeline
	if nat {
		n := &flow.NAT{}
		pipeline = func(k *flow.Key) (flow.Mask, []flow.DPAction) {
			m, actions := ctStatePipeline(k)
			for i, a := range actions {
				if ct, ok := a.(flow.DPCT); ok {
					ct.NAT = n
					actions[i] = ct
				}
			}
			return m, actions
		}
	}
	d, _ := New(Config{Flows: &fakeFlows{translate: pipeline}, Conntrack: ct})
	for no := uint32(100); no < 164; no++ {
		_ = d.AddPort(no, &nullPort{})
	}
	w := newWorker(d, &portEntry{no: 1, port: &nullPort{}})
	pkts := make([]*port.Packet, port.BatchSize)
	for i := range pkts {
		pkts[i] = port.NewPacket(2048)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, p := range pkts {
			p.SetFrame(frames[rng.IntN(conns)])
			w.receive(p, time.Second)
		}
		w.drainCT(time.Second)
		w.flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pkts)), "ns/packet")
}

func BenchmarkCTEstablished(b *testing.B) {
	for _, conns := range []int{1000, 500_000} {
		b.Run(fmt.Sprintf("conns=%d/per-packet", conns), func(b *testing.B) { benchCTEstablished(b, false, conns, false) })
		b.Run(fmt.Sprintf("conns=%d/batched", conns), func(b *testing.B) { benchCTEstablished(b, true, conns, false) })
		b.Run(fmt.Sprintf("conns=%d/batched-nat", conns), func(b *testing.B) { benchCTEstablished(b, true, conns, true) })
	}
}

// TestFastPathAllocsCTNAT checks that established packets through
// ct(zone=7,nat) (OVN's ct_next for a load-balanced or NATed switch),
// recirculation and output cost no allocation, batched or not: the
// tracker's NAT parameters are converted once per megaflow action, not
// once per packet or batch.
func TestFastPathAllocsCTNAT(t *testing.T) {
	nat := &flow.NAT{}
	pipeline := func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		if k.Get(flow.RecircID) == 0 {
			return m, []flow.DPAction{flow.DPCT{Zone: 7, NAT: nat}, flow.DPRecirc{ID: 1}}
		}
		m.SetField(flow.CTState)
		if k.Get(flow.CTState)&uint64(conntrack.StateNew) != 0 {
			return m, []flow.DPAction{flow.DPCT{Zone: 7, Commit: true, NAT: nat}, flow.DPOutput{Port: 2}}
		}
		return m, []flow.DPAction{flow.DPOutput{Port: 2}}
	}
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			tr := conntrack.New(conntrack.Config{})
			defer tr.Close()
			var ct Conntrack = tr
			if !batched {
				ct = perPacketCT{tr}
			}
			d, err := New(Config{Flows: &fakeFlows{translate: pipeline}, Conntrack: ct})
			if err != nil {
				t.Fatal(err)
			}
			sink := &nullPort{}
			if err := d.AddPort(2, sink); err != nil {
				t.Fatal(err)
			}
			w := newWorker(d, &portEntry{no: 1, port: &nullPort{}})
			f := udpFrame(mac2, mac1, 1000, 2000, 8)
			pkts := make([]*port.Packet, 8)
			for i := range pkts {
				pkts[i] = port.NewPacket(2048)
			}
			run := func() {
				for _, p := range pkts {
					p.SetFrame(f)
					w.receive(p, time.Second)
				}
				w.drainCT(time.Second)
				w.flush()
			}
			run() // commits the connection and installs the megaflows
			run()
			sent := sink.sent
			if a := testing.AllocsPerRun(20, run); a != 0 {
				t.Errorf("%v allocations per batch, want 0", a)
			}
			if got := sink.sent - sent; got != 21*len(pkts) {
				t.Errorf("sent %d, want %d", got, 21*len(pkts))
			}
		})
	}
}
