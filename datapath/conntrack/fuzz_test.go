package conntrack

import (
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
