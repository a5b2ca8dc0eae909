package conntrack

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// FuzzProcess feeds arbitrary packets to a tracker, with and without commit
// and NAT, and checks the ct_state invariants of ovs-fields(7).
func FuzzProcess(f *testing.F) {
	seeds := []spec{
		{src: "10.0.0.1", dst: "10.0.0.2", proto: protoTCP, sport: 1, dport: 2, flags: tcpSYN, wscale: 3},
		{src: "10.0.0.2", dst: "10.0.0.1", proto: protoTCP, sport: 2, dport: 1, flags: tcpSYN | tcpACK, ack: 1},
		{src: "fd00::1", dst: "fd00::2", proto: protoUDP, sport: 1, dport: 2, payload: 3},
		{src: "10.0.0.1", dst: "10.0.0.2", proto: protoICMP, icmpType: 8, icmpID: 3},
		{src: "fd00::1", dst: "fd00::2", proto: protoICMPv6, icmpType: 128, icmpID: 3},
		{src: "10.0.0.1", dst: "10.0.0.2", proto: 47, payload: 10},
	}
	for _, s := range seeds {
		f.Add(build(s), uint8(0))
	}
	udp := build(spec{src: "10.0.0.1", dst: "10.0.0.2", proto: protoUDP, sport: 1, dport: 2})
	f.Add(build(spec{src: "10.0.0.2", dst: "10.0.0.1", proto: protoICMP, icmpType: 3, quote: udp}), uint8(3))
	udp6 := build(spec{src: "fd00::1", dst: "fd00::2", proto: protoUDP, sport: 1, dport: 2})
	f.Add(build(spec{src: "fd00::2", dst: "fd00::1", proto: protoICMPv6, icmpType: 1, quote: udp6}), uint8(7))

	f.Fuzz(func(t *testing.T, pkt []byte, mode uint8) {
		tr := New(Config{DefaultZoneLimit: 4})
		defer tr.Close()
		nat := &NAT{Src: &NATRange{MinAddr: netip.MustParseAddr("192.0.2.1"), MinPort: 100, MaxPort: 101}}
		if mode&4 != 0 {
			nat = &NAT{Dst: &NATRange{MinAddr: netip.MustParseAddr("fd00::9"), MaxAddr: netip.MustParseAddr("fd00::f")}, Src: &NATRange{MinAddr: netip.MustParseAddr("fd00::1")}}
		}
		for i, p := range []Params{
			{Zone: 1},
			{Zone: 1, Commit: true, NAT: nat, Force: mode&1 != 0},
			{Zone: 1, NAT: &NAT{}},
			{Zone: 1, Commit: true, LB: &LB{Backends: []Backend{{Addr: netip.MustParseAddr("10.9.9.9"), Port: 9}}}},
		} {
			buf := append([]byte(nil), pkt...)
			res := tr.Process(buf, int(mode>>4), p, time.Duration(i))
			if len(buf) != len(pkt) {
				t.Fatalf("packet length changed")
			}
			s := res.State
			switch {
			case s&StateTracked == 0:
				t.Fatalf("untracked result %v", s)
			case s&StateInvalid != 0 && s != StateTracked|StateInvalid:
				t.Fatalf("invalid with other bits: %v", s)
			case s&StateInvalid != 0 && res.Reason == ReasonNone:
				t.Fatalf("invalid without reason")
			case s&StateNew != 0 && s&(StateEstablished|StateReply) != 0:
				t.Fatalf("new with est or rpl: %v", s)
			}
			// Reprocessing the (possibly translated) packet must not crash.
			tr.Process(buf, int(mode>>4), Params{Zone: 1, NAT: &NAT{}}, time.Duration(i))
		}
		tr.Expire(time.Hour * 48)
		tr.DumpAll(func(e Entry) bool { _ = e.String(); return true })
		tr.FlushAll()
	})
}

// FuzzProcessBatch splits the input into packets (each prefixed by its
// length byte), runs them through one tracker with Process and through
// another with ProcessBatch, under several ct() parameters, and checks that
// results, rewritten packets and dumped state are identical.
func FuzzProcessBatch(f *testing.F) {
	seed := func(pkts ...[]byte) []byte {
		var b []byte
		for _, p := range pkts {
			b = append(append(b, byte(len(p))), p...)
		}
		return b
	}
	syn := build(spec{src: "10.0.0.1", dst: "10.0.0.2", proto: protoTCP, sport: 1, dport: 2, flags: tcpSYN, wscale: 3})
	synAck := build(spec{src: "10.0.0.2", dst: "10.0.0.1", proto: protoTCP, sport: 2, dport: 1, flags: tcpSYN | tcpACK, ack: 1})
	ack := build(spec{src: "10.0.0.1", dst: "10.0.0.2", proto: protoTCP, sport: 1, dport: 2, flags: tcpACK, seq: 1, ack: 1})
	udp := build(spec{src: "fd00::1", dst: "fd00::2", proto: protoUDP, sport: 1, dport: 2, payload: 3})
	udpBack := build(spec{src: "fd00::2", dst: "fd00::1", proto: protoUDP, sport: 2, dport: 1})
	f.Add(seed(syn, synAck, ack, syn, udp, udpBack, udp), uint8(0))
	f.Add(seed(udp, udp[:30], udpBack), uint8(1))
	f.Fuzz(fuzzBatchBody)
}

// fuzzBatchBody is FuzzProcessBatch's body.
func fuzzBatchBody(t *testing.T, data []byte, mode uint8) {
	var pkts [][]byte
	for len(data) > 0 && len(pkts) < 2*MaxBatch+3 {
		n := min(int(data[0]), len(data)-1)
		pkts = append(pkts, data[1:1+n])
		data = data[1+n:]
	}
	one, many := New(Config{DefaultZoneLimit: 6}), New(Config{DefaultZoneLimit: 6})
	defer one.Close()
	defer many.Close()
	nat := &NAT{Src: &NATRange{MinAddr: netip.MustParseAddr("192.0.2.1"), MinPort: 100, MaxPort: 102}}
	l3offs := make([]int, len(pkts))
	for i := range l3offs {
		l3offs[i] = int(mode >> 5)
	}
	for i, p := range []Params{
		{Zone: 1, Commit: true, NAT: nat, Force: mode&1 != 0},
		{Zone: 1},
		{Zone: 1, NAT: &NAT{}, Commit: mode&2 != 0},
	} {
		now := time.Duration(i) * time.Second
		seq := make([][]byte, len(pkts))
		bat := make([][]byte, len(pkts))
		want := make([]Result, len(pkts))
		for j, pkt := range pkts {
			seq[j], bat[j] = append([]byte(nil), pkt...), append([]byte(nil), pkt...)
			want[j] = one.Process(seq[j], l3offs[j], p, now)
		}
		got := make([]Result, len(pkts))
		many.ProcessBatch(bat, l3offs, p, now, got)
		for j := range pkts {
			if got[j] != want[j] {
				t.Fatalf("params %d packet %d: batch %+v, one by one %+v", i, j, got[j], want[j])
			}
			if string(seq[j]) != string(bat[j]) {
				t.Fatalf("params %d packet %d: rewritten differently", i, j)
			}
		}
		if a, b := dumpAll(one), dumpAll(many); fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("params %d: state differs:\n%s\n%s", i, a, b)
		}
	}
}
