package dp

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/govn/govn/datapath/conntrack"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/datapath/xlate"
)

// fakeFlows is a slow path for tests: a function of the key under a lock,
// whose generation the test bumps when it changes the function.
type fakeFlows struct {
	mu           sync.Mutex
	gen          atomic.Uint64
	translate    func(k *flow.Key) (flow.Mask, []flow.DPAction)
	translations atomic.Int64
}

func (f *fakeFlows) Translate(k *flow.Key, _ xlate.Options) xlate.Result {
	f.translations.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	m, a := f.translate(k)
	return xlate.Result{Key: k.And(&m), Mask: m, Actions: a, Generation: f.gen.Load()}
}

func (f *fakeFlows) Generation() uint64 { return f.gen.Load() }

func (f *fakeFlows) set(t func(k *flow.Key) (flow.Mask, []flow.DPAction)) {
	f.mu.Lock()
	f.translate = t
	f.mu.Unlock()
	f.gen.Add(1)
}

// macTable forwards by eth_dst: the megaflow matches in_port and eth_dst.
func macTable(table map[uint64]uint32) func(k *flow.Key) (flow.Mask, []flow.DPAction) {
	return func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		m.SetField(flow.EthDst)
		if out, ok := table[k.Get(flow.EthDst)]; ok {
			return m, []flow.DPAction{flow.DPOutput{Port: out}}
		}
		return m, nil
	}
}

const (
	mac1 = 0x020000000001
	mac2 = 0x020000000002
)

// udpFrame builds an Ethernet/IPv4/UDP frame from mac src to mac dst with
// complete checksums.
func udpFrame(dst, src uint64, sport, dport uint16, payload int) []byte {
	f := make([]byte, 42+payload)
	putMAC(f[0:], dst)
	putMAC(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], etherTypeIPv4)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(28+payload))
	ip[8], ip[9] = 64, protoUDP
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ^port.Checksum(ip[:20], 0))
	u := ip[20:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(8+payload))
	for i := range payload {
		u[8+i] = byte(i)
	}
	binary.BigEndian.PutUint16(u[6:], ^port.Checksum(u, pseudo(f)))
	return f
}

func pseudo(f []byte) uint32 {
	var s uint32
	for i := 26; i < 34; i += 2 {
		s += uint32(binary.BigEndian.Uint16(f[i:]))
	}
	return s + uint32(f[23]) + uint32(len(f)-34)
}

// checkIPv4L4 fails unless the IPv4 header and transport checksums of f
// verify.
func checkIPv4L4(t *testing.T, f []byte) {
	t.Helper()
	if port.Checksum(f[14:34], 0) != 0xffff {
		t.Errorf("bad IPv4 header checksum")
	}
	if port.Checksum(f[34:], pseudo(f)) != 0xffff {
		t.Errorf("bad L4 checksum %#04x", binary.BigEndian.Uint16(f[40:]))
	}
}

type rig struct {
	d     *Datapath
	flows *fakeFlows
	ports map[uint32]*port.Channel
}

func newRig(t *testing.T, cfg Config, n int) *rig {
	t.Helper()
	r := &rig{flows: &fakeFlows{translate: macTable(nil)}, ports: map[uint32]*port.Channel{}}
	if cfg.Flows == nil {
		cfg.Flows = r.flows
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	for no := uint32(1); no <= uint32(n); no++ {
		c := port.NewChannel("c", 64, false)
		r.ports[no] = c
		if err := d.AddPort(no, c); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func (r *rig) inject(t *testing.T, no uint32, f []byte, off port.Offload) {
	t.Helper()
	if err := r.ports[no].Inject(f, off); err != nil {
		t.Fatal(err)
	}
}

// expect waits for a frame on port no.
func (r *rig) expect(t *testing.T, no uint32) *port.Packet {
	t.Helper()
	select {
	case p := <-r.ports[no].Out():
		return p
	case <-time.After(5 * time.Second):
		t.Fatalf("no frame on port %d", no)
		return nil
	}
}

// expectNone checks that no frame arrives on port no for a short while.
func (r *rig) expectNone(t *testing.T, no uint32) {
	t.Helper()
	select {
	case p := <-r.ports[no].Out():
		t.Fatalf("unexpected frame on port %d: % x", no, p.Data)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestForwardAndCache(t *testing.T) {
	r := newRig(t, Config{}, 2)
	r.flows.set(macTable(map[uint64]uint32{mac1: 1, mac2: 2}))
	for i := range 5 {
		r.inject(t, 1, udpFrame(mac2, mac1, 1000, 2000, 10+i), port.Offload{})
		r.expect(t, 2)
	}
	r.inject(t, 2, udpFrame(mac1, mac2, 2000, 1000, 10), port.Offload{})
	r.expect(t, 1)
	s := r.d.Stats()
	if s.Upcalls != 2 || s.Installed != 2 || s.Megaflows != 2 {
		t.Errorf("upcalls %d installed %d megaflows %d, want 2, 2, 2", s.Upcalls, s.Installed, s.Megaflows)
	}
	// The key holds no length: the first frame is an upcall, the rest hit
	// the cache (the exact-match cache or, with few subtables, the
	// megaflow cache directly).
	if hits := s.EMCHits + s.MegaflowHits; hits != 4 {
		t.Errorf("cache hits %d, want 4", hits)
	}
	// A different source port is a different exact key but the same
	// megaflow, since the mask ignores L4.
	r.inject(t, 1, udpFrame(mac2, mac1, 1001, 2000, 10), port.Offload{})
	r.expect(t, 2)
	if s := r.d.Stats(); s.EMCHits+s.MegaflowHits != 5 || s.Upcalls != 2 {
		t.Errorf("cache hits %d upcalls %d, want 5, 2", s.EMCHits+s.MegaflowHits, s.Upcalls)
	}
	mfs := r.d.Megaflows()
	if len(mfs) != 2 {
		t.Fatalf("%d megaflows dumped, want 2", len(mfs))
	}
	for _, mf := range mfs {
		if mf.Match.Mask.Get(flow.TPSrc) != (flow.U128{}) || mf.Match.Mask.Get(flow.InPort).Lo != 0xffffffff {
			t.Errorf("megaflow mask: tp_src %v in_port %v", mf.Match.Mask.Get(flow.TPSrc), mf.Match.Mask.Get(flow.InPort))
		}
	}
	// Port 1's megaflow counted the frames that hit it (not the upcall's):
	// payloads 11..14, then the one from source port 1001.
	var wantBytes uint64
	for _, payload := range []int{11, 12, 13, 14, 10} {
		wantBytes += uint64(len(udpFrame(mac2, mac1, 1000, 2000, payload)))
	}
	for _, mf := range mfs {
		if mf.InPort == 1 && (mf.Hits != 5 || mf.Bytes != wantBytes) {
			t.Errorf("port 1 megaflow: %d packets %d bytes, want 5, %d", mf.Hits, mf.Bytes, wantBytes)
		}
	}
}

func TestFlushMegaflows(t *testing.T) {
	r := newRig(t, Config{}, 2)
	r.flows.set(macTable(map[uint64]uint32{mac1: 1, mac2: 2}))
	r.inject(t, 1, udpFrame(mac2, mac1, 1000, 2000, 0), port.Offload{})
	r.expect(t, 2)
	r.inject(t, 2, udpFrame(mac1, mac2, 2000, 1000, 0), port.Offload{})
	r.expect(t, 1)
	if n := r.d.FlushMegaflows(); n != 2 {
		t.Errorf("FlushMegaflows = %d, want 2", n)
	}
	if n := len(r.d.Megaflows()); n != 0 {
		t.Errorf("%d megaflows after the flush", n)
	}
	r.inject(t, 1, udpFrame(mac2, mac1, 1000, 2000, 0), port.Offload{})
	r.expect(t, 2)
	if s := r.d.Stats(); s.Upcalls != 3 || s.Megaflows != 1 {
		t.Errorf("after the flush: upcalls %d megaflows %d, want 3, 1", s.Upcalls, s.Megaflows)
	}
}

func TestRevalidation(t *testing.T) {
	r := newRig(t, Config{}, 3)
	r.flows.set(macTable(map[uint64]uint32{mac2: 2}))
	r.inject(t, 1, udpFrame(mac2, mac1, 1, 2, 0), port.Offload{})
	r.expect(t, 2)
	r.flows.set(macTable(map[uint64]uint32{mac2: 3}))
	r.inject(t, 1, udpFrame(mac2, mac1, 1, 2, 0), port.Offload{})
	r.expect(t, 3)
	r.expectNone(t, 2)
	s := r.d.Stats()
	if s.Invalidated != 1 {
		t.Errorf("invalidated %d, want 1", s.Invalidated)
	}
	// An unchanged megaflow survives revalidation.
	r.flows.set(macTable(map[uint64]uint32{mac2: 3}))
	r.d.Revalidate()
	if s2 := r.d.Stats(); s2.Invalidated != 1 || s2.Megaflows != 1 {
		t.Errorf("after a no-op change: invalidated %d megaflows %d, want 1, 1", s2.Invalidated, s2.Megaflows)
	}
}

func TestIdleExpiry(t *testing.T) {
	r := newRig(t, Config{IdleTimeout: 20 * time.Millisecond}, 2)
	r.flows.set(macTable(map[uint64]uint32{mac2: 2}))
	r.inject(t, 1, udpFrame(mac2, mac1, 1, 2, 0), port.Offload{})
	r.expect(t, 2)
	if n := r.d.Stats().Megaflows; n != 1 {
		t.Fatalf("%d megaflows, want 1", n)
	}
	time.Sleep(40 * time.Millisecond)
	r.d.ExpireIdle()
	if s := r.d.Stats(); s.Megaflows != 0 || s.Expired != 1 {
		t.Errorf("after idle: megaflows %d expired %d, want 0, 1", s.Megaflows, s.Expired)
	}
}

// TestPartialChecksum sends a frame whose UDP checksum holds only the
// pseudo-header sum, as a veth with transmit offload leaves it, to a port
// without offloads: it must come out with a valid checksum.
func TestPartialChecksum(t *testing.T) {
	r := newRig(t, Config{}, 2)
	r.flows.set(macTable(map[uint64]uint32{mac2: 2}))
	f := udpFrame(mac2, mac1, 1, 2, 33)
	ps := pseudo(f)
	for ps>>16 != 0 {
		ps = ps&0xffff + ps>>16
	}
	binary.BigEndian.PutUint16(f[40:], uint16(ps))
	r.inject(t, 1, f, port.Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 6})
	p := r.expect(t, 2)
	checkIPv4L4(t, p.Data)
	if p.Offload.NeedsCsum {
		t.Error("output still marked NeedsCsum")
	}
}

func TestSetFieldChecksums(t *testing.T) {
	r := newRig(t, Config{}, 2)
	r.flows.set(func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		return m, []flow.DPAction{
			flow.DPSetField{Field: flow.NWDst, Value: flow.U128{Lo: 0xc0a80109}, Mask: flow.U128{Lo: 0xffffffff}},
			flow.DPSetField{Field: flow.TPDst, Value: flow.U128{Lo: 8080}, Mask: flow.U128{Lo: 0xffff}},
			flow.DPSetField{Field: flow.NWTTL, Value: flow.U128{Lo: 7}, Mask: flow.U128{Lo: 0xff}},
			flow.DPSetField{Field: flow.EthSrc, Value: flow.U128{Lo: 0x0a0b0c0d0e0f}, Mask: flow.U128{Lo: 0xffffffffffff}},
			flow.DPOutput{Port: 2},
		}
	})
	r.inject(t, 1, udpFrame(mac2, mac1, 1, 2, 21), port.Offload{})
	d := r.expect(t, 2).Data
	checkIPv4L4(t, d)
	if got := binary.BigEndian.Uint32(d[30:]); got != 0xc0a80109 {
		t.Errorf("nw_dst %#x", got)
	}
	if got := binary.BigEndian.Uint16(d[36:]); got != 8080 {
		t.Errorf("tp_dst %d", got)
	}
	if d[22] != 7 || d[6] != 0x0a || d[11] != 0x0f {
		t.Errorf("ttl %d eth_src % x", d[22], d[6:12])
	}
}

// An ARP responder's rewrite (OVN's logical switch answering for a port):
// arp_spa and arp_tpa are written by their own names, not nw_src/nw_dst.
func TestSetFieldARP(t *testing.T) {
	r := newRig(t, Config{}, 2)
	r.flows.set(func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		return m, []flow.DPAction{
			flow.DPSetField{Field: flow.ARPOp, Value: flow.U128{Lo: 2}, Mask: flow.U128{Lo: 0xffff}},
			flow.DPSetField{Field: flow.ARPSPA, Value: flow.U128{Lo: 0x0a00000c}, Mask: flow.U128{Lo: 0xffffffff}},
			flow.DPSetField{Field: flow.ARPTPA, Value: flow.U128{Lo: 0x0a00000b}, Mask: flow.U128{Lo: 0xffffffff}},
			flow.DPSetField{Field: flow.ARPSHA, Value: flow.U128{Lo: 0x0a0000000002}, Mask: flow.U128{Lo: 0xffffffffffff}},
			flow.DPOutput{Port: 2},
		}
	})
	frame := make([]byte, 42)
	copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0a, 0, 0, 0, 0, 1, 0x08, 0x06,
		0, 1, 0x08, 0, 6, 4, 0, 1, 0x0a, 0, 0, 0, 0, 1, 10, 0, 0, 11, 0, 0, 0, 0, 0, 0, 10, 0, 0, 12})
	r.inject(t, 1, frame, port.Offload{})
	d := r.expect(t, 2).Data
	if op, spa, tpa := binary.BigEndian.Uint16(d[20:]), binary.BigEndian.Uint32(d[28:]), binary.BigEndian.Uint32(d[38:]); op != 2 || spa != 0x0a00000c || tpa != 0x0a00000b {
		t.Errorf("arp op %d spa %#x tpa %#x, want 2 0xa00000c 0xa00000b", op, spa, tpa)
	}
	if d[27] != 2 {
		t.Errorf("arp sha % x", d[22:28])
	}
}

func TestVLAN(t *testing.T) {
	r := newRig(t, Config{}, 3)
	r.flows.set(func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		m.SetField(flow.VLANTCI)
		if k.Get(flow.InPort) == 1 {
			return m, []flow.DPAction{flow.DPPushVLAN{TPID: 0x8100, TCI: 0x1000 | 42}, flow.DPOutput{Port: 2}}
		}
		return m, []flow.DPAction{flow.DPPopVLAN{}, flow.DPOutput{Port: 3}}
	})
	orig := udpFrame(mac2, mac1, 1, 2, 5)
	r.inject(t, 1, orig, port.Offload{})
	tagged := r.expect(t, 2).Data
	if len(tagged) != len(orig)+4 || binary.BigEndian.Uint16(tagged[12:]) != 0x8100 || binary.BigEndian.Uint16(tagged[14:]) != 42 {
		t.Fatalf("pushed frame % x", tagged[:18])
	}
	r.inject(t, 2, tagged, port.Offload{})
	if back := r.expect(t, 3).Data; string(back) != string(orig) {
		t.Errorf("popped frame differs:\n% x\n% x", back, orig)
	}
}

func TestController(t *testing.T) {
	r := newRig(t, Config{}, 1)
	r.flows.set(func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		return flow.Mask{}, []flow.DPAction{flow.DPUserspace{UserData: []byte{1, 2}}}
	})
	f := udpFrame(mac2, mac1, 1, 2, 5)
	r.inject(t, 1, f, port.Offload{})
	select {
	case pi := <-r.d.PacketIns():
		if pi.InPort != 1 || string(pi.Frame) != string(f) || string(pi.UserData) != "\x01\x02" {
			t.Errorf("packet-in %+v", pi)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no packet-in")
	}
}

// fakeCT answers every ct() with a fixed state and records the zones.
type fakeCT struct {
	state conntrack.State
	calls atomic.Int64
}

func (f *fakeCT) Expire(time.Duration) int { return 0 }

func (f *fakeCT) Process(pkt []byte, l3off int, p conntrack.Params, now time.Duration) conntrack.Result {
	f.calls.Add(1)
	if l3off != 14 || pkt[l3off]>>4 != 4 {
		return conntrack.Result{State: conntrack.StateTracked | conntrack.StateInvalid}
	}
	return conntrack.Result{State: f.state, Zone: p.Zone, Mark: p.Mark}
}

// TestConntrackRecirculation runs the ct(table=1) shape: recirc_id 0 sends
// the packet to conntrack and recirculates; recirc_id 1 forwards +trk+new.
func TestConntrackRecirculation(t *testing.T) {
	ct := &fakeCT{state: conntrack.StateTracked | conntrack.StateNew}
	r := newRig(t, Config{Conntrack: ct}, 2)
	r.flows.set(func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		if k.Get(flow.RecircID) == 0 {
			return m, []flow.DPAction{flow.DPCT{Zone: 5, Commit: true, Mark: 9, MarkMask: 0xff}, flow.DPRecirc{ID: 1}}
		}
		m.SetField(flow.CTState)
		m.SetField(flow.CTZone)
		if k.Get(flow.CTState)&uint64(conntrack.StateNew) != 0 && k.Get(flow.CTZone) == 5 {
			return m, []flow.DPAction{flow.DPOutput{Port: 2}}
		}
		return m, nil
	})
	for range 3 {
		r.inject(t, 1, udpFrame(mac2, mac1, 1, 2, 5), port.Offload{})
		r.expect(t, 2)
	}
	s := r.d.Stats()
	if ct.calls.Load() != 3 || s.Recirculated != 3 || s.Upcalls != 2 {
		t.Errorf("ct calls %d recirculations %d upcalls %d, want 3, 3, 2", ct.calls.Load(), s.Recirculated, s.Upcalls)
	}
}

func TestRecirculationLoopIsBounded(t *testing.T) {
	r := newRig(t, Config{}, 2)
	r.flows.set(func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		return flow.Mask{}, []flow.DPAction{flow.DPRecirc{ID: uint32(k.Get(flow.RecircID)) + 1}}
	})
	r.inject(t, 1, udpFrame(mac2, mac1, 1, 2, 5), port.Offload{})
	deadline := time.Now().Add(5 * time.Second)
	for r.d.Stats().LoopDrops == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the looping packet was never dropped")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFastPathAllocs checks that a packet hitting the exact-match cache
// and going out of a port costs no allocation in the datapath.
func TestFastPathAllocs(t *testing.T) {
	flows := &fakeFlows{translate: macTable(map[uint64]uint32{mac2: 2})}
	sink := &nullPort{}
	w := newFastWorker(t, flows, sink, sink)
	p := port.NewPacket(port.MaxFrame)
	f := udpFrame(mac2, mac1, 1, 2, 18)
	run := func() {
		p.SetFrame(f)
		w.receive(p, 0)
		w.flush()
	}
	run()
	if a := testing.AllocsPerRun(100, run); a != 0 {
		t.Errorf("%v allocations per packet, want 0", a)
	}
	if sink.sent != 102 { // one run, AllocsPerRun's warm-up, 100 runs
		t.Errorf("sent %d, want 102", sink.sent)
	}
}

// newFastWorker makes a datapath on flows with outs added as ports 2, 3, …
// and a worker receiving on in as port 1, which the fast-path tests and
// benchmarks drive directly, without the datapath's goroutines.
func newFastWorker(tb testing.TB, flows *fakeFlows, in port.Port, outs ...port.Port) *worker {
	tb.Helper()
	d, err := New(Config{Flows: flows})
	if err != nil {
		tb.Fatal(err)
	}
	for i, o := range outs {
		if err := d.AddPort(uint32(2+i), o); err != nil {
			tb.Fatal(err)
		}
	}
	return newWorker(d, &portEntry{no: 1, port: in})
}

// benchFastPath times w receiving a full batch of one UDP frame to mac2
// and flushing it, and reports the time per packet.
func benchFastPath(b *testing.B, w *worker) {
	batch := make([]*port.Packet, port.BatchSize)
	f := udpFrame(mac2, mac1, 1, 2, 18)
	for i := range batch {
		batch[i] = port.NewPacket(2048)
		batch[i].SetFrame(f)
	}
	b.ResetTimer()
	for b.Loop() {
		for _, p := range batch {
			w.receive(p, 0)
		}
		w.flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/packet")
}

// checkBatchAllocs has w receive pkts, each set to one UDP frame to mac2,
// and flush them, once and then under AllocsPerRun (its warm-up and 50
// runs), which must count no allocation: 52 batches in all.
func checkBatchAllocs(t *testing.T, w *worker, pkts []*port.Packet) {
	t.Helper()
	f := udpFrame(mac2, mac1, 1, 2, 18)
	run := func() {
		for _, p := range pkts {
			p.SetFrame(f)
			w.receive(p, 0)
		}
		w.flush()
	}
	run()
	if n := testing.AllocsPerRun(50, run); n != 0 {
		t.Errorf("%v allocations per batch, want 0", n)
	}
}

// nullPort counts what it is sent and never receives.
type nullPort struct{ sent int }

func (*nullPort) Name() string                     { return "null" }
func (*nullPort) Recv([]*port.Packet) (int, error) { return 0, port.ErrClosed }
func (n *nullPort) Send(pkts []*port.Packet) error { n.sent += len(pkts); return nil }
func (*nullPort) Offloads() bool                   { return true }
func (*nullPort) Stats() port.Stats                { return port.Stats{} }
func (*nullPort) Close() error                     { return nil }

func BenchmarkFastPathCacheHit(b *testing.B) {
	flows := &fakeFlows{translate: macTable(map[uint64]uint32{mac2: 2})}
	sink := &nullPort{}
	benchFastPath(b, newFastWorker(b, flows, sink, sink))
}

// TestSetFieldPartialChecksum rewrites a frame whose UDP checksum holds
// only the pseudo-header sum (a GSO frame keeps it so): addresses are in
// the pseudo-header and must update it, ports are not and must leave it,
// so that finishing the checksum afterwards gives a valid one.
func TestSetFieldPartialChecksum(t *testing.T) {
	for _, fields := range [][]flow.DPSetField{
		{{Field: flow.NWDst, Value: flow.U128{Lo: 0xc0a80109}, Mask: flow.U128{Lo: 0xffffffff}}},
		{{Field: flow.TPDst, Value: flow.U128{Lo: 8080}, Mask: flow.U128{Lo: 0xffff}}},
		{
			{Field: flow.TPSrc, Value: flow.U128{Lo: 4242}, Mask: flow.U128{Lo: 0xffff}},
			{Field: flow.NWSrc, Value: flow.U128{Lo: 0x0a000063}, Mask: flow.U128{Lo: 0xffffffff}},
		},
	} {
		f := udpFrame(mac2, mac1, 1, 2, 33)
		ps := pseudo(f)
		for ps>>16 != 0 {
			ps = ps&0xffff + ps>>16
		}
		binary.BigEndian.PutUint16(f[40:], uint16(ps))
		p := port.NewPacket(len(f))
		p.SetFrame(f)
		p.Offload = port.Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 6}
		var k flow.Key
		packet.Extract(p.Data, &k)
		for _, a := range fields {
			setField(p, &k, a)
		}
		if err := p.FinishChecksum(); err != nil {
			t.Fatal(err)
		}
		t.Run(fields[0].Field.String(), func(t *testing.T) { checkIPv4L4(t, p.Data) })
	}
}

// TestFastPathAllocsEncap checks that a packet from an ordinary port that
// the megaflow sends into a tunnel, with OVN's Geneve option, costs no
// allocation either: receives reuse the packet's option storage.
func TestFastPathAllocsEncap(t *testing.T) {
	all := flow.U128{Hi: ^uint64(0), Lo: ^uint64(0)}
	flows := &fakeFlows{translate: func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		m.SetField(flow.EthDst)
		return m, []flow.DPAction{
			flow.DPSetField{Field: flow.TunDst, Value: flow.U128{Lo: 0x0a000002}, Mask: all},
			flow.DPSetField{Field: flow.TunMetadata0, Value: flow.U128{Lo: 0x10002}, Mask: all},
			flow.DPOutput{Port: 2},
		}
	}}
	d, err := New(Config{Flows: flows})
	if err != nil {
		t.Fatal(err)
	}
	sink := &optionsSink{}
	if err := d.AddPort(2, sink); err != nil {
		t.Fatal(err)
	}
	(*d.ports.Load())[2].tunnel = true // as AddPort marks a *port.UDPTunnel
	w := newWorker(d, &portEntry{no: 1, port: sink})
	p := port.NewPacket(port.MaxFrame)
	f := udpFrame(mac2, mac1, 1, 2, 18)
	run := func() {
		p.SetFrame(f)
		w.receive(p, 0)
		w.flush()
	}
	run()
	if md, ok := packet.OVNMetadata(sink.last); !ok || md != 0x10002 {
		t.Fatalf("sent options %x, want OVN's option with 0x10002", sink.last)
	}
	if a := testing.AllocsPerRun(100, run); a != 0 {
		t.Errorf("%v allocations per packet, want 0", a)
	}
}

// optionsSink is a nullPort that keeps the last sent packet's options.
type optionsSink struct {
	nullPort
	last []byte
}

func (s *optionsSink) Send(pkts []*port.Packet) error {
	for _, p := range pkts {
		s.last = append(s.last[:0], p.Tunnel.Options...)
	}
	return nil
}

// TestStatsKeepRemovedPortsHits checks that removing a port keeps the
// cache hits of its worker in the datapath's totals, as it keeps its
// packets and upcalls.
func TestStatsKeepRemovedPortsHits(t *testing.T) {
	r := newRig(t, Config{}, 2)
	r.flows.set(macTable(map[uint64]uint32{mac1: 1}))
	for range 4 {
		r.inject(t, 2, udpFrame(mac1, mac2, 1, 2, 5), port.Offload{})
		r.expect(t, 1)
	}
	before := r.d.Stats()
	if hits := before.EMCHits + before.MegaflowHits; hits != 3 || before.Packets != 4 {
		t.Fatalf("before removal: %d packets, %d hits, want 4, 3", before.Packets, hits)
	}
	if err := r.d.RemovePort(2); err != nil {
		t.Fatal(err)
	}
	after := r.d.Stats()
	if after.Packets != before.Packets || after.Upcalls != before.Upcalls ||
		after.EMCHits != before.EMCHits || after.MegaflowHits != before.MegaflowHits {
		t.Errorf("after removing the port: %+v\nbefore: %+v", after, before)
	}
}

// TestFastPathClones sends every packet to two ports, so that each is
// copied once, and checks that a recycled copy carries its own batch's
// frame, not an earlier one's, and that the copies cost no allocation once
// the worker has spares.
func TestFastPathClones(t *testing.T) {
	twoPorts := func(p2, p3 port.Port) *worker {
		t.Helper()
		return newFastWorker(t, twoOutputs(), &nullPort{}, p2, p3)
	}
	pkts := make([]*port.Packet, 4)
	for i := range pkts {
		pkts[i] = port.NewPacket(2048)
	}

	a, b := &recordPort{}, &recordPort{}
	w := twoPorts(a, b)
	var want []string
	for batch := range 3 {
		for i, p := range pkts {
			f := udpFrame(mac2, mac1, uint16(100*batch+i), 2, 18+batch) // sizes differ per batch too
			want = append(want, string(f))
			p.SetFrame(f)
			w.receive(p, 0)
		}
		w.flush()
	}
	if !slices.Equal(a.frames, want) || !slices.Equal(b.frames, want) {
		t.Errorf("port 2 got %d frames, port 3 %d, want %d each, equal to those sent", len(a.frames), len(b.frames), len(want))
	}

	// Without recording, which allocates: the copies themselves must not.
	sink := &nullPort{}
	w = twoPorts(sink, sink)
	checkBatchAllocs(t, w, pkts)
	if sink.sent != 2*52*len(pkts) {
		t.Errorf("sent %d, want %d", sink.sent, 2*52*len(pkts))
	}
}

// BenchmarkFastPathTwoOutputs is BenchmarkFastPathCacheHit with a megaflow
// that outputs every packet to two ports, which copies each once.
func BenchmarkFastPathTwoOutputs(b *testing.B) {
	sink := &nullPort{}
	w := newFastWorker(b, twoOutputs(), sink, sink, sink)
	b.ReportAllocs()
	benchFastPath(b, w)
}

// twoOutputs is a megaflow table that outputs every packet to ports 2 and 3.
func twoOutputs() *fakeFlows {
	return &fakeFlows{translate: func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		m.SetField(flow.EthDst)
		return m, []flow.DPAction{flow.DPOutput{Port: 2}, flow.DPOutput{Port: 3}}
	}}
}

// TestFastPathAllocsRecircCopy recirculates a copy of every packet (a
// recirc that is not the last action) and outputs both: neither the copy
// of the packet nor that of its key may cost an allocation.
func TestFastPathAllocsRecircCopy(t *testing.T) {
	flows := &fakeFlows{translate: func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		if k.Get(flow.RecircID) == 0 {
			return m, []flow.DPAction{flow.DPRecirc{ID: 1}, flow.DPClone{Actions: []flow.DPAction{flow.DPOutput{Port: 2}}}, flow.DPOutput{Port: 3}}
		}
		return m, []flow.DPAction{flow.DPOutput{Port: 2}}
	}}
	sink := &nullPort{}
	w := newFastWorker(t, flows, &nullPort{}, sink, sink)
	pkts := make([]*port.Packet, 4)
	for i := range pkts {
		pkts[i] = port.NewPacket(2048)
	}
	checkBatchAllocs(t, w, pkts)
	if want := 3 * 52 * len(pkts); sink.sent != want {
		t.Errorf("sent %d, want %d", sink.sent, want)
	}
}
