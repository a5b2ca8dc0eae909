package conntrack

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// flowGen makes a random but plausible stream of packets over a small set
// of connections: TCP handshakes, data both ways, FIN and RST, segments out
// of the window and with bad flags, UDP and ICMP echo both ways, ICMP errors
// quoting packets of the connections, and truncated packets. Many packets
// of one connection fall in one batch, in both directions.
type flowGen struct {
	rng   *rand.Rand
	flows []genFlow
}

type genFlow struct {
	proto            uint8
	client, server   string
	cport, sport     uint16
	cisn, sisn       uint32
	cnext, snext     uint32 // next sequence numbers, as if all passed
	started, replied bool
}

func newFlowGen(seed uint64, n int) *flowGen {
	g := &flowGen{rng: rand.New(rand.NewPCG(seed, 7))}
	for i := range n {
		f := families[i%2]
		fl := genFlow{client: f.client, server: f.server, cport: uint16(20000 + i), sport: 80}
		switch i % 4 {
		case 0, 1:
			fl.proto = protoTCP
			fl.cisn, fl.sisn = g.rng.Uint32(), g.rng.Uint32()
			fl.cnext, fl.snext = fl.cisn+1, fl.sisn+1
		case 2:
			fl.proto = protoUDP
		case 3:
			fl.proto = protoICMP
			if f.name == "ipv6" {
				fl.proto = protoICMPv6
			}
		}
		g.flows = append(g.flows, fl)
	}
	return g
}

func (g *flowGen) packet() []byte {
	f := &g.flows[g.rng.IntN(len(g.flows))]
	fromClient := g.rng.IntN(3) != 0
	s := spec{src: f.client, dst: f.server, proto: f.proto, sport: f.cport, dport: f.sport}
	if !fromClient {
		s.src, s.dst, s.sport, s.dport = s.dst, s.src, s.dport, s.sport
	}
	switch g.rng.IntN(20) {
	case 0: // an ICMP error about a packet of this flow, from either end
		icmp, typ := uint8(protoICMP), uint8(3)
		if netip.MustParseAddr(f.client).Is6() {
			icmp, typ = protoICMPv6, 1
		}
		q := s
		q.payload = 8
		return build(spec{src: s.dst, dst: s.src, proto: icmp, icmpType: typ, icmpCode: 3, quote: build(q)})
	case 1: // truncated
		p := build(s)
		return p[:g.rng.IntN(len(p))+1]
	}
	switch f.proto {
	case protoUDP:
		s.payload = g.rng.IntN(40)
	case protoICMP, protoICMPv6:
		s.icmpID = f.cport
		s.payload = 8
		req, rep := uint8(8), uint8(0)
		if f.proto == protoICMPv6 {
			req, rep = 128, 129
		}
		s.icmpType = req
		if !fromClient {
			s.icmpType = rep
		}
	case protoTCP:
		g.tcp(f, fromClient, &s)
	}
	return build(s)
}

func (g *flowGen) tcp(f *genFlow, fromClient bool, s *spec) {
	next, peerNext := &f.cnext, &f.snext
	if !fromClient {
		next, peerNext = &f.snext, &f.cnext
	}
	s.wscale = 3
	switch {
	case !f.started || g.rng.IntN(25) == 0:
		// A SYN (or its retransmission, or a new incarnation).
		s.src, s.dst, s.sport, s.dport = f.client, f.server, f.cport, f.sport
		s.flags, s.seq = tcpSYN, f.cisn
		f.started, f.replied = true, false
		f.cnext, f.snext = f.cisn+1, f.sisn+1
		return
	case !f.replied && !fromClient:
		s.flags, s.seq, s.ack = tcpSYN|tcpACK, f.sisn, f.cisn+1
		f.replied = true
		return
	}
	s.seq, s.ack, s.flags = *next, *peerNext, tcpACK
	switch g.rng.IntN(12) {
	case 0:
		s.flags |= tcpFIN
		*next++
	case 1:
		s.flags = tcpRST | tcpACK
		f.started = false
		f.cisn, f.sisn = g.rng.Uint32(), g.rng.Uint32()
	case 2:
		s.seq += 1 << 30 // far outside the window
	case 3:
		s.flags = tcpSYN | tcpFIN
	default:
		s.payload = g.rng.IntN(100)
		*next += uint32(s.payload)
	}
}

// TestBatchMatchesSequential runs one random packet stream through two
// trackers, one packet at a time through Process and in batches of random
// length (some longer than MaxBatch) through ProcessBatch, and checks that
// every result, every packet (as NAT rewrote it) and the tracked state
// after each batch are identical. Batches mix new, established, reply,
// related and invalid packets and hold several packets of one connection,
// so the batch path must keep their order.
func TestBatchMatchesSequential(t *testing.T) {
	to := Timeouts{
		TCPSynSent: 2 * time.Second, TCPSynRecv: 2 * time.Second, TCPEstablished: 5 * time.Second,
		TCPFinWait: 3 * time.Second, TCPTimeWait: time.Second, TCPClose: time.Second,
		UDPFirst: 2 * time.Second, UDPSingle: 2 * time.Second, UDPMultiple: 3 * time.Second,
		ICMPFirst: time.Second, ICMPReply: time.Second,
		OtherFirst: time.Second, OtherSingle: time.Second, OtherMultiple: time.Second,
	}
	natRange := &NATRange{MinAddr: netip.MustParseAddr("10.0.0.100"), MinPort: 1024, MaxPort: 1030}
	params := []Params{
		{Zone: 1},
		{Zone: 1, Commit: true, Mark: 5, MarkMask: 0xf},
		{Zone: 1, Commit: true, Label: Label{Lo: 9}, LabelMask: Label{Lo: ^uint64(0)}},
		{Zone: 2, Commit: true, NAT: &NAT{Src: natRange}},
		{Zone: 2, NAT: &NAT{}},
		{Zone: 3, Commit: true, Force: true},
		{Zone: 4, Commit: true, LB: &LB{Backends: []Backend{
			{Addr: netip.MustParseAddr("10.0.1.2")}, {Addr: netip.MustParseAddr("10.0.1.3"), Port: 8080},
		}}},
	}
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			one := newTracker(t, Config{Timeouts: &to, DefaultZoneLimit: 40})
			many := newTracker(t, Config{Timeouts: &to, DefaultZoneLimit: 40})
			g := newFlowGen(seed, 4+int(seed)*6)
			rng := rand.New(rand.NewPCG(seed, 99))
			now := time.Duration(0)
			var (
				pkts, copies [][]byte
				l3offs       []int
				want, got    []Result
				saw          State
			)
			for b := range 200 {
				n := 1 + rng.IntN(2*MaxBatch+5)
				p := params[rng.IntN(len(params))]
				pkts, copies, l3offs = pkts[:0], copies[:0], l3offs[:0]
				for range n {
					pkt := g.packet()
					pkts = append(pkts, pkt)
					copies = append(copies, slices.Clone(pkt))
					l3offs = append(l3offs, 0)
				}
				want = want[:0]
				for _, pkt := range copies {
					want = append(want, one.Process(pkt, 0, p, now))
				}
				got = slices.Grow(got[:0], n)[:n]
				many.ProcessBatch(pkts, l3offs, p, now, got)
				for i := range n {
					if got[i] != want[i] {
						t.Fatalf("batch %d packet %d (%x): ProcessBatch gave\n%+v\nProcess gave\n%+v", b, i, copies[i], got[i], want[i])
					}
					if !slices.Equal(pkts[i], copies[i]) {
						t.Fatalf("batch %d packet %d: rewritten to %x by ProcessBatch, %x by Process", b, i, pkts[i], copies[i])
					}
					saw |= want[i].State
				}
				if seq, bat := dumpAll(one), dumpAll(many); !slices.Equal(seq, bat) {
					t.Fatalf("batch %d: state differs:\nProcess:\n%s\nProcessBatch:\n%s", b, seq, bat)
				}
				now += time.Duration(rng.IntN(400)) * time.Millisecond
				if rng.IntN(4) == 0 {
					if seq, bat := one.Expire(now), many.Expire(now); seq != bat {
						t.Fatalf("batch %d: Expire removed %d and %d", b, seq, bat)
					}
				}
			}
			all := StateNew | StateEstablished | StateReply | StateRelated | StateInvalid | StateSNAT | StateDNAT
			if saw&all != all {
				t.Errorf("the stream gave only the states %v", saw)
			}
		})
	}
}

func dumpAll(tr *Tracker) []string {
	var out []string
	tr.DumpAll(func(e Entry) bool {
		out = append(out, fmt.Sprintf("%v expires=%v", e, e.Expires))
		return true
	})
	return out
}

// TestBatchStateMix checks the states a batch reports for one mixed batch:
// several packets of one connection in both directions, an uncommitted new
// one, an ICMP error and a malformed packet.
func TestBatchStateMix(t *testing.T) {
	tr := newTracker(t, Config{})
	out := spec{src: "10.0.0.1", dst: "10.0.0.2", proto: protoUDP, sport: 1000, dport: 53}
	back := spec{src: "10.0.0.2", dst: "10.0.0.1", proto: protoUDP, sport: 53, dport: 1000}
	other := spec{src: "10.0.0.1", dst: "10.0.0.2", proto: protoUDP, sport: 1001, dport: 53}
	unreach := spec{src: "10.0.0.2", dst: "10.0.0.1", proto: protoICMP, icmpType: 3, icmpCode: 3, quote: build(out)}
	steps := []struct {
		pkt  []byte
		want State
	}{
		{build(out), StateTracked | StateNew},
		{build(out), StateTracked | StateNew},
		{build(back), StateTracked | StateEstablished | StateReply},
		{build(out), StateTracked | StateEstablished},
		{build(unreach), StateTracked | StateRelated | StateReply},
		{build(other), StateTracked | StateNew},
		{build(out)[:10], StateTracked | StateInvalid},
	}
	var pkts [][]byte
	for _, s := range steps {
		pkts = append(pkts, s.pkt)
	}
	res := make([]Result, len(pkts))
	tr.ProcessBatch(pkts, make([]int, len(pkts)), Params{Zone: 3, Commit: true}, time.Second, res)
	for i, s := range steps {
		if res[i].State != s.want {
			t.Errorf("packet %d: %v, want %v (%v)", i, res[i].State, s.want, res[i].Reason)
		}
	}
	if _, n := tr.ZoneLimit(3); n != 2 {
		t.Errorf("zone 3 holds %d connections, want 2", n)
	}
}
