package conntrack

import (
	"net/netip"
	"testing"
	"time"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestSNATPortExhaustion(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tr := newTracker(t, Config{})
			nat := &NAT{Src: &NATRange{MinAddr: mustAddr(f.router), MinPort: 5000, MaxPort: 5001}}
			used := map[uint16]bool{}
			clients := []string{f.client, f.other, f.backend}
			for i, cl := range clients {
				pkt := build(spec{src: cl, dst: f.server, proto: protoUDP, sport: 1000, dport: 53})
				res := tr.Process(pkt, 0, Params{Zone: 3, Commit: true, NAT: nat}, time.Second)
				if i < 2 {
					if res.State != StateTracked|StateNew|StateSNAT {
						t.Fatalf("client %d: %v (%v)", i, res.State, res.Reason)
					}
					src, _, sport, _ := addrs(pkt)
					if src != mustAddr(f.router) || sport < 5000 || sport > 5001 || used[sport] {
						t.Fatalf("client %d translated to %v:%d (used %v)", i, src, sport, used)
					}
					used[sport] = true
					checkChecksums(t, pkt)
					continue
				}
				if res.State != trkInv || res.Reason != ReasonNATExhausted {
					t.Fatalf("third client: %v, reason %q; want invalid with %q", res.State, res.Reason, ReasonNATExhausted)
				}
				if got := res.Reason.String(); got != "nat: no free address/port in the range" {
					t.Errorf("reason text %q", got)
				}
			}
		})
	}
}

// TestHairpin: client and backend sit on the same side of a router; the
// client reaches the backend through a VIP, so the connection is DNATed to
// the backend and SNATed to the router, in one commit, and replies are
// translated back.
func TestHairpin(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tr := newTracker(t, Config{})
			nat := &NAT{
				Dst: &NATRange{MinAddr: mustAddr(f.backend), MinPort: 8080, MaxPort: 8080},
				Src: &NATRange{MinAddr: mustAddr(f.router)},
			}
			var now time.Duration
			send := func(s spec, p Params) ([]byte, Result) {
				now += time.Millisecond
				pkt := build(s)
				res := tr.Process(pkt, 0, p, now)
				checkChecksums(t, pkt)
				return pkt, res
			}
			bare := Params{Zone: 9, NAT: &NAT{}}
			syn := spec{src: f.client, dst: f.vip, proto: protoTCP, sport: 40000, dport: 80, seq: 1, flags: tcpSYN}
			pkt, res := send(syn, Params{Zone: 9, Commit: true, NAT: nat})
			if res.State != trkNew|StateSNAT|StateDNAT {
				t.Fatalf("SYN: %v (%v)", res.State, res.Reason)
			}
			src, dst, sport, dport := addrs(pkt)
			if src != mustAddr(f.router) || dst != mustAddr(f.backend) || dport != 8080 {
				t.Fatalf("SYN out: %v:%d -> %v:%d", src, sport, dst, dport)
			}
			if res.Orig.Dst != mustAddr(f.vip) || res.Orig.DstPort != 80 {
				t.Errorf("orig tuple %v", res.Orig)
			}
			routerPort := sport
			synack := spec{src: f.backend, dst: f.router, proto: protoTCP, sport: 8080, dport: routerPort, seq: 500, ack: 2, flags: tcpSYN | tcpACK}
			pkt, res = send(synack, bare)
			if res.State != trkRpl|StateSNAT|StateDNAT {
				t.Fatalf("SYN-ACK: %v (%v)", res.State, res.Reason)
			}
			src, dst, sport, dport = addrs(pkt)
			if src != mustAddr(f.vip) || sport != 80 || dst != mustAddr(f.client) || dport != 40000 {
				t.Fatalf("SYN-ACK back: %v:%d -> %v:%d", src, sport, dst, dport)
			}
			ack := spec{src: f.client, dst: f.vip, proto: protoTCP, sport: 40000, dport: 80, seq: 2, ack: 501, flags: tcpACK, payload: 20}
			pkt, res = send(ack, bare)
			if res.State != trkEst|StateSNAT|StateDNAT {
				t.Fatalf("ACK: %v (%v)", res.State, res.Reason)
			}
			if src, dst, sport, dport = addrs(pkt); src != mustAddr(f.router) || sport != routerPort || dst != mustAddr(f.backend) || dport != 8080 {
				t.Fatalf("ACK out: %v:%d -> %v:%d", src, sport, dst, dport)
			}
			// Without a nat argument the packet is tracked but untouched.
			pkt, res = send(ack, Params{Zone: 9})
			if res.State != trkEst {
				t.Errorf("no nat: %v", res.State)
			}
			if src, _, _, _ = addrs(pkt); src != mustAddr(f.client) {
				t.Errorf("no nat rewrote the packet")
			}
			var entries []Entry
			tr.Dump(9, func(e Entry) bool { entries = append(entries, e); return true })
			if len(entries) != 1 || !entries[0].SNAT || !entries[0].DNAT || entries[0].Reply.Src != mustAddr(f.backend) {
				t.Errorf("dump: %v", entries)
			}
		})
	}
}

func TestLoadBalancer(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tr := newTracker(t, Config{})
			b0, b1 := mustAddr(f.backend), mustAddr(f.server)
			lb := &LB{Backends: []Backend{{Addr: b0, Port: 8080}, {Addr: b1, Port: 8081}}}
			seen := map[int]int{}
			for port := uint16(1000); port < 1040; port++ {
				s := spec{src: f.client, dst: f.vip, proto: protoUDP, sport: port, dport: 80}
				pkt := build(s)
				res := tr.Process(pkt, 0, Params{Zone: 4, Commit: true, LB: lb}, time.Second)
				if res.Backend < 0 || res.State != trkNew|StateDNAT {
					t.Fatalf("port %d: %v backend %d", port, res.State, res.Backend)
				}
				_, dst, _, dport := addrs(pkt)
				want := lb.Backends[res.Backend]
				if dst != want.Addr || dport != want.Port {
					t.Fatalf("port %d: sent to %v:%d, backend %v", port, dst, dport, want)
				}
				seen[res.Backend]++
				// Every later packet reaches the same backend.
				for range 3 {
					pkt = build(s)
					res2 := tr.Process(pkt, 0, Params{Zone: 4, NAT: &NAT{}}, 2*time.Second)
					if _, dst2, _, dport2 := addrs(pkt); dst2 != dst || dport2 != dport || res2.Backend != res.Backend {
						t.Fatalf("port %d: later packet to %v:%d", port, dst2, dport2)
					}
				}
				checkChecksums(t, pkt)
			}
			if len(seen) != 2 {
				t.Errorf("40 connections used backends %v, want both", seen)
			}
			// Hashing on the source address alone keeps a client on one
			// backend.
			lb.Hash = HashSrcAddr
			first := -1
			for port := uint16(2000); port < 2020; port++ {
				pkt := build(spec{src: f.other, dst: f.vip, proto: protoUDP, sport: port, dport: 80})
				res := tr.Process(pkt, 0, Params{Zone: 4, Commit: true, LB: lb}, time.Second)
				if first < 0 {
					first = res.Backend
				}
				if res.Backend != first {
					t.Fatalf("source-hashed LB moved client from %d to %d", first, res.Backend)
				}
			}
		})
	}
}

func quote(t *testing.T, s spec) []byte {
	t.Helper()
	return build(s)
}

func TestICMP(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tr := newTracker(t, Config{})
			icmp, echoReq, echoRep, unreach, timeExceeded := uint8(protoICMP), uint8(8), uint8(0), uint8(3), uint8(11)
			if f.name == "ipv6" {
				icmp, echoReq, echoRep, unreach, timeExceeded = protoICMPv6, 128, 129, 1, 3
			}
			p := Params{Zone: 2, Commit: true}
			req := spec{src: f.client, dst: f.server, proto: icmp, icmpType: echoReq, icmpID: 77, payload: 16}
			rep := spec{src: f.server, dst: f.client, proto: icmp, icmpType: echoRep, icmpID: 77, payload: 16}
			if r := tr.Process(build(req), 0, p, 1); r.State != trkNew {
				t.Errorf("echo request: %v (%v)", r.State, r.Reason)
			}
			if r := tr.Process(build(rep), 0, p, 2); r.State != trkRpl {
				t.Errorf("echo reply: %v (%v)", r.State, r.Reason)
			}
			stray := rep
			stray.icmpID = 78
			if r := tr.Process(build(stray), 0, p, 3); r.State != trkInv {
				t.Errorf("unsolicited echo reply: %v", r.State)
			}

			udp := spec{src: f.client, dst: f.server, proto: protoUDP, sport: 5000, dport: 53, payload: 30}
			tr.Process(build(udp), 0, Params{Zone: 2, Commit: true, Mark: 42, MarkMask: ^uint32(0)}, 4)
			// Port unreachable from the server and time exceeded from a
			// router, both back to the client: related, reply direction.
			for _, from := range []string{f.server, f.router} {
				typ := unreach
				if from == f.router {
					typ = timeExceeded
				}
				e := spec{src: from, dst: f.client, proto: icmp, icmpType: typ, icmpCode: 3, quote: quote(t, udp)}
				r := tr.Process(build(e), 0, Params{Zone: 2}, 5)
				if r.State != StateTracked|StateRelated|StateReply || r.Mark != 42 || r.Orig.DstPort != 53 {
					t.Errorf("ICMP error from %s: %v mark %d orig %v (%v)", from, r.State, r.Mark, r.Orig, r.Reason)
				}
			}
			// An error about a reply packet travels in the original direction.
			rudp := spec{src: f.server, dst: f.client, proto: protoUDP, sport: 53, dport: 5000, payload: 30}
			e := spec{src: f.client, dst: f.server, proto: icmp, icmpType: unreach, quote: quote(t, rudp)}
			if r := tr.Process(build(e), 0, Params{Zone: 2}, 6); r.State != StateTracked|StateRelated {
				t.Errorf("error in original direction: %v (%v)", r.State, r.Reason)
			}
			// An error about no tracked connection is invalid.
			other := udp
			other.sport = 5001
			e = spec{src: f.server, dst: f.client, proto: icmp, icmpType: unreach, quote: quote(t, other)}
			if r := tr.Process(build(e), 0, Params{Zone: 2}, 7); r.State != trkInv || r.Reason != ReasonICMPNoConnection {
				t.Errorf("unrelated error: %v (%v)", r.State, r.Reason)
			}
			// In another zone the same error is unrelated too.
			e = spec{src: f.server, dst: f.client, proto: icmp, icmpType: unreach, quote: quote(t, udp)}
			if r := tr.Process(build(e), 0, Params{Zone: 3}, 8); r.State != trkInv {
				t.Errorf("error in other zone: %v", r.State)
			}
		})
	}
}

// TestICMPErrorNAT: an error about an SNATed packet comes back to the
// router's address and must reach the client with the quoted packet
// restored.
func TestICMPErrorNAT(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tr := newTracker(t, Config{})
			icmp, unreach := uint8(protoICMP), uint8(3)
			if f.name == "ipv6" {
				icmp, unreach = protoICMPv6, 1
			}
			nat := &NAT{Src: &NATRange{MinAddr: mustAddr(f.router), MinPort: 7000, MaxPort: 7000}}
			pkt := build(spec{src: f.client, dst: f.server, proto: protoUDP, sport: 5000, dport: 53, payload: 12})
			tr.Process(pkt, 0, Params{Zone: 1, Commit: true, NAT: nat}, 1)
			// pkt is now the translated packet the server saw.
			e := build(spec{src: f.server, dst: f.router, proto: icmp, icmpType: unreach, icmpCode: 3, quote: pkt})
			r := tr.Process(e, 0, Params{Zone: 1, NAT: &NAT{}}, 2)
			if r.State != StateTracked|StateRelated|StateReply|StateDNAT {
				t.Fatalf("error: %v (%v)", r.State, r.Reason)
			}
			checkChecksums(t, e)
			if _, dst, _, _ := addrs(e); dst != mustAddr(f.client) {
				t.Errorf("outer destination %v, want the client", dst)
			}
			l4, _, _, _ := l4Layout(e)
			inner := l4[8:]
			checkChecksums(t, inner)
			if src, dst, sport, dport := addrs(inner); src != mustAddr(f.client) || sport != 5000 || dst != mustAddr(f.server) || dport != 53 {
				t.Errorf("quoted packet %v:%d -> %v:%d", src, sport, dst, dport)
			}
		})
	}
}

func TestPartialChecksum(t *testing.T) {
	tr := newTracker(t, Config{})
	s := spec{src: "10.0.0.1", dst: "10.0.1.1", proto: protoTCP, sport: 1000, dport: 80, seq: 1, flags: tcpSYN}
	pkt := build(s)
	// Offload leaves the pseudo-header sum, uncomplemented, in the field.
	l4, a, b, _ := l4Layout(pkt)
	l4[16], l4[17] = 0, 0
	ps := fold(pseudoSum(a, b, uint32(len(l4)), protoTCP))
	l4[16], l4[17] = byte(ps>>8), byte(ps)
	nat := &NAT{Src: &NATRange{MinAddr: mustAddr("192.0.2.7")}}
	tr.Process(pkt, 0, Params{Commit: true, NAT: nat, PartialChecksum: true}, 1)
	l4, a, b, _ = l4Layout(pkt)
	if got, want := uint16(l4[16])<<8|uint16(l4[17]), fold(pseudoSum(a, b, uint32(len(l4)), protoTCP)); got != want {
		t.Errorf("partial checksum %#x, want pseudo-header sum %#x", got, want)
	}
}
