package conntrack

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
)

func udpTo(zone uint16, i int) (spec, Params) {
	return spec{src: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), dst: "10.255.0.1",
		proto: protoUDP, sport: uint16(1000 + i%5000), dport: 53}, Params{Zone: zone, Commit: true}
}

func count(tr *Tracker, zone uint16) int {
	n := 0
	tr.Dump(zone, func(Entry) bool { n++; return true })
	return n
}

func waitReclaimed(t *testing.T, tr *Tracker) Stats {
	t.Helper()
	// Generous: the reclaimer is a goroutine, and CI machines are busy.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if s := tr.Stats(); s.PendingZones == 0 {
			return s
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("reclaimer did not finish within 20 s")
	return Stats{}
}

func TestFlush(t *testing.T) {
	tr := newTracker(t, Config{})
	for z := uint16(1); z <= 3; z++ {
		for i := range 700 {
			s, p := udpTo(z, i)
			tr.Process(build(s), 0, p, time.Second)
		}
	}
	if n := count(tr, 2); n != 700 {
		t.Fatalf("zone 2 has %d entries, want 700", n)
	}
	tr.Flush(2)
	if n := count(tr, 2); n != 0 {
		t.Errorf("after flush zone 2 has %d entries", n)
	}
	s, _ := udpTo(2, 5)
	if r := tr.Process(build(s), 0, Params{Zone: 2}, 2*time.Second); r.State != trkNew {
		t.Errorf("flushed connection is %v, want new", r.State)
	}
	if n := count(tr, 1) + count(tr, 3); n != 1400 {
		t.Errorf("other zones have %d entries, want 1400", n)
	}
	st := waitReclaimed(t, tr)
	if st.Reclaimed != 700 || st.Entries != 1400 {
		t.Errorf("stats after reclaim: %+v", st)
	}
	// Flushing one tuple, by either direction.
	s, _ = udpTo(1, 7)
	tup := Tuple{Src: netip.MustParseAddr(s.src), Dst: netip.MustParseAddr(s.dst), SrcPort: s.sport, DstPort: s.dport, Proto: protoUDP}
	if !tr.FlushTuple(1, tup.Reverse()) || tr.FlushTuple(1, tup) {
		t.Errorf("FlushTuple did not remove exactly once")
	}
	if n := count(tr, 1); n != 699 {
		t.Errorf("zone 1 has %d entries after FlushTuple", n)
	}
	tr.FlushAll()
	var all int
	tr.DumpAll(func(Entry) bool { all++; return true })
	if all != 0 {
		t.Errorf("%d entries after FlushAll", all)
	}
	if st := waitReclaimed(t, tr); st.Entries != 0 {
		t.Errorf("entries after FlushAll: %d", st.Entries)
	}
}

func TestZoneLimit(t *testing.T) {
	tr := newTracker(t, Config{DefaultZoneLimit: 5})
	tr.SetZoneLimit(8, 2)
	for _, tc := range []struct {
		zone uint16
		ok   int
	}{{7, 5}, {8, 2}} {
		for i := range 10 {
			s, p := udpTo(tc.zone, i)
			r := tr.Process(build(s), 0, p, time.Second)
			if i < tc.ok && r.State != trkNew || i >= tc.ok && r.Reason != ReasonZoneLimit {
				t.Errorf("zone %d conn %d: %v %q", tc.zone, i, r.State, r.Reason)
			}
		}
		if lim, n := tr.ZoneLimit(tc.zone); n != tc.ok || int(lim) != tc.ok {
			t.Errorf("ZoneLimit(%d) = %d, %d", tc.zone, lim, n)
		}
	}
}

func TestExpire(t *testing.T) {
	to := DefaultTimeouts()
	tr := newTracker(t, Config{})
	// 300 UDP connections at t=0, one-way: they expire after UDPFirst.
	for i := range 300 {
		s, p := udpTo(1, i)
		tr.Process(build(s), 0, p, 0)
	}
	// One kept alive by traffic in both directions.
	s, p := udpTo(1, 0)
	back := spec{src: s.dst, dst: s.src, proto: protoUDP, sport: s.dport, dport: s.sport}
	var now time.Duration
	for now = 0; now < 2*to.UDPFirst; now += 5 * time.Second {
		tr.Process(build(s), 0, p, now)
		tr.Process(build(back), 0, p, now)
		tr.Expire(now)
	}
	if n := count(tr, 1); n != 1 {
		t.Errorf("after %v: %d entries, want the one kept alive", now, n)
	}
	if n := tr.Expire(now + to.UDPMultiple + time.Second); n != 1 {
		t.Errorf("idle connection: expired %d, want 1", n)
	}
	// A long-lived TCP connection that closes is re-filed on its short
	// timeout.
	c := newConv(t, tr, "10.9.0.1", "10.9.0.2")
	c.now = now + time.Hour
	c.handshake()
	c.seg(true, tcpRST, 0)
	if n := tr.Expire(c.now + to.TCPClose + time.Second); n != 1 {
		t.Errorf("reset TCP connection: expired %d, want 1", n)
	}
	if st := tr.Stats(); st.Entries != 0 {
		t.Errorf("entries left: %d", st.Entries)
	}
}

func TestWheelLongTimeouts(t *testing.T) {
	// Entries far in the future cascade down the levels and expire on
	// time, not a full rotation late.
	for _, d := range []time.Duration{time.Second, time.Minute, 3 * time.Hour, 30 * time.Hour, 40 * 24 * time.Hour} {
		to := DefaultTimeouts()
		to.UDPFirst = d
		tr := newTracker(t, Config{Timeouts: &to})
		s, p := udpTo(1, 1)
		start := 17 * time.Hour
		tr.Expire(start)
		tr.Process(build(s), 0, p, start)
		step := d / 50
		for now := start; now < start+d-step; now += step {
			if n := tr.Expire(now); n != 0 {
				t.Fatalf("timeout %v: expired early at +%v", d, now-start)
			}
		}
		if n := tr.Expire(start + d + time.Second); n != 1 {
			t.Errorf("timeout %v: not expired after it passed", d)
		}
	}
}

func TestDump(t *testing.T) {
	tr := newTracker(t, Config{})
	s := spec{src: "10.0.0.1", dst: "10.0.0.2", proto: protoTCP, sport: 33000, dport: 22, seq: 9, flags: tcpSYN}
	tr.Process(build(s), 0, Params{Zone: 12, Commit: true, Mark: 5, MarkMask: 0xf, Label: Label{Hi: 1, Lo: 2}, LabelMask: Label{Hi: ^uint64(0), Lo: ^uint64(0)}}, time.Second)
	var got []string
	tr.DumpAll(func(e Entry) bool { got = append(got, e.String()); return true })
	want := "tcp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=33000,dport=22),reply=(src=10.0.0.2,dst=10.0.0.1,sport=22,dport=33000),zone=12,mark=5,labels=0x10000000000000002,protoinfo=(state=SYN_SENT)"
	if len(got) != 1 || got[0] != want {
		t.Errorf("dump:\n%q\nwant\n%q", got, want)
	}
}

// TestConcurrent runs packet goroutines against flushes, tuple flushes and
// expiry; run it with -race.
func TestConcurrent(t *testing.T) {
	tr := newTracker(t, Config{DefaultZoneLimit: 400})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				zone := uint16(i % 7)
				s, p := udpTo(zone, (i*7+g)%1000)
				p.NAT = &NAT{Src: &NATRange{MinAddr: netip.MustParseAddr("192.0.2.1"), MinPort: 2000, MaxPort: 2500}}
				r := tr.Process(build(s), 0, p, time.Duration(i)*time.Millisecond)
				if r.State&StateTracked == 0 {
					t.Error("untracked result")
					return
				}
				back := spec{src: s.dst, dst: s.src, proto: protoUDP, sport: s.dport, dport: s.sport}
				tr.Process(build(back), 0, Params{Zone: zone, NAT: &NAT{}}, time.Duration(i)*time.Millisecond)
			}
		}()
	}
	// Replies in batches, as the datapath hands them over.
	wg.Add(1)
	go func() {
		defer wg.Done()
		pkts, l3offs, res := make([][]byte, 8), make([]int, 8), make([]Result, 8)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			zone := uint16(i % 7)
			for j := range pkts {
				s, _ := udpTo(zone, (i*7+j)%1000)
				pkts[j] = build(spec{src: s.dst, dst: s.src, proto: protoUDP, sport: s.dport, dport: s.sport})
			}
			tr.ProcessBatch(pkts, l3offs, Params{Zone: zone, NAT: &NAT{}}, time.Duration(i)*time.Millisecond, res)
			for _, r := range res {
				if r.State&StateTracked == 0 {
					t.Error("untracked result in a batch")
					return
				}
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tr.Flush(uint16(i % 7))
			s, _ := udpTo(uint16(i%7), i%1000)
			tr.FlushTuple(uint16(i%7), Tuple{Src: netip.MustParseAddr(s.src), Dst: netip.MustParseAddr(s.dst), SrcPort: s.sport, DstPort: s.dport, Proto: protoUDP})
			tr.Expire(time.Duration(i) * time.Second)
			tr.Dump(uint16(i%7), func(Entry) bool { return true })
			time.Sleep(100 * time.Microsecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	tr.FlushAll()
	if st := waitReclaimed(t, tr); st.Entries != 0 {
		t.Errorf("entries after FlushAll: %d", st.Entries)
	}
}

func TestEstablishedPathAllocs(t *testing.T) {
	tr := newTracker(t, Config{})
	s := spec{src: "10.0.0.1", dst: "10.0.0.2", proto: protoUDP, sport: 1, dport: 2}
	pkt := build(s)
	tr.Process(pkt, 0, Params{Zone: 1, Commit: true}, 0)
	if n := testing.AllocsPerRun(100, func() { tr.Process(pkt, 0, Params{Zone: 1}, 1) }); n != 0 {
		t.Errorf("established lookup allocates %v times", n)
	}
	pkts, l3offs, res := [][]byte{pkt, pkt, pkt}, make([]int, 3), make([]Result, 3)
	if n := testing.AllocsPerRun(100, func() { tr.ProcessBatch(pkts, l3offs, Params{Zone: 1}, 1, res) }); n != 0 {
		t.Errorf("established batch allocates %v times", n)
	}
}

// TestPooledChunks: a zone built from a flushed zone's recycled chunks shows
// only its own entries.
func TestPooledChunks(t *testing.T) {
	tr := newTracker(t, Config{})
	for i := range 600 {
		s, p := udpTo(1, i)
		tr.Process(build(s), 0, p, time.Second)
	}
	tr.Flush(1)
	waitReclaimed(t, tr)
	for i := range 10 {
		s, p := udpTo(2, 1000+i)
		tr.Process(build(s), 0, p, time.Second)
	}
	if n := count(tr, 2); n != 10 {
		t.Errorf("zone on recycled chunks dumps %d entries, want 10", n)
	}
	s, _ := udpTo(2, 5)
	if r := tr.Process(build(s), 0, Params{Zone: 2}, 2*time.Second); r.State != trkNew {
		t.Errorf("stale entry visible: %v", r.State)
	}
}

func TestTupleRoundTrip(t *testing.T) {
	for _, tup := range []Tuple{
		{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 8, DstPort: 0, ICMPID: 9, Proto: protoICMP},
		{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 128, ICMPID: 1, Proto: protoICMPv6},
		{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 1, DstPort: 2, Proto: protoTCP},
	} {
		k, ok := tupleKey(tup)
		if !ok || k.tuple() != tup {
			t.Errorf("%v -> %+v -> %v", tup, k, k.tuple())
		}
		if rk, _ := tupleKey(tup.Reverse()); rk != k.reverse() {
			t.Errorf("reverse of %v: %+v, key reverse %+v", tup, rk, k.reverse())
		}
	}
	// ct_tp_src/ct_tp_dst of an ICMP echo are its type and code.
	tr := newTracker(t, Config{})
	r := tr.Process(build(spec{src: "10.0.0.1", dst: "10.0.0.2", proto: protoICMP, icmpType: 8, icmpID: 4}), 0, Params{}, 0)
	if r.Orig.SrcPort != 8 || r.Orig.DstPort != 0 || r.Orig.ICMPID != 4 {
		t.Errorf("ICMP orig tuple %+v", r.Orig)
	}
}
