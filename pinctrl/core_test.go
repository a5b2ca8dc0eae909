package pinctrl

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
)

var (
	vmMAC     = net.HardwareAddr{0x50, 0x54, 0, 0, 0, 1}
	routerMAC = net.HardwareAddr{0, 0, 0, 0, 0xff, 1}
	vmIP      = netip.MustParseAddr("10.0.0.11")
	farIP     = netip.MustParseAddr("20.0.0.9")
	vmIP6     = netip.MustParseAddr("aef0::11")
	routerIP6 = netip.MustParseAddr("aef0::1")
)

// testState is one router (key 1, ports lr0-sw0 = 1, lr0-sw1 = 2) and
// one switch (key 2, port sw0-p1 = 1) with DNS records.
func testState() *State {
	return &State{
		Datapaths: map[uint32]*Datapath{
			1: {Key: 1, Router: true, Ports: map[string]uint32{"lr0-sw0": 1, "lr0-sw1": 2}, PortNames: map[uint32]string{1: "lr0-sw0", 2: "lr0-sw1"}},
			2: {Key: 2, Ports: map[string]uint32{"sw0-p1": 1}, PortNames: map[uint32]string{1: "sw0-p1"},
				DNS: map[string]string{"vm1.ovn.org": "10.0.0.11 aef0::11", "vm1": "10.0.0.11"}},
		},
		MACBindings: map[BindingKey]string{},
	}
}

// packetIn is a packet-in of frame on datapath dpKey at table, with
// registers regs (reg number → value).
func packetIn(userdata string, frame []byte, dpKey uint64, table uint8, regs map[int]uint64) *dp.PacketIn {
	pi := &dp.PacketIn{InPort: 1, UserData: []byte(userdata), Frame: frame, Table: table}
	pi.Key.Set(flow.InPort, 1)
	pi.Key.Set(flow.Metadata, dpKey)
	pi.Key.Set(flow.Reg0+14, 1) // inport
	for r, v := range regs {
		pi.Key.Set(flow.Reg0+flow.Field(r), v)
	}
	return pi
}

func ethFrame(dst, src net.HardwareAddr, etype uint16, payload []byte) []byte {
	b := append(append(append([]byte(nil), dst...), src...), byte(etype>>8), byte(etype))
	return append(b, payload...)
}

func udpFrame(dstMAC net.HardwareAddr, src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	et := uint16(etherIPv4)
	if src.Is6() {
		et = etherIPv6
	}
	return ethFrame(dstMAC, vmMAC, et, ipPacket(src, dst, protoUDP, 64, udpDatagram(sport, dport, payload), 6))
}

func tcpFrame(src, dst netip.Addr, flags byte, payload int) []byte {
	t := make([]byte, 20+payload)
	binary.BigEndian.PutUint16(t, 40000)
	binary.BigEndian.PutUint16(t[2:], 80)
	binary.BigEndian.PutUint32(t[4:], 1000)
	binary.BigEndian.PutUint32(t[8:], 5000)
	t[12], t[13] = 5<<4, flags
	et := uint16(etherIPv4)
	if src.Is6() {
		et = etherIPv6
	}
	return ethFrame(routerMAC, vmMAC, et, ipPacket(src, dst, protoTCP, 64, t, 16))
}

// sctpFrame is an SCTP packet (ports 40000 → 5000, verification tag
// vtag) holding one chunk.
func sctpFrame(src, dst netip.Addr, vtag uint32, chunk []byte) []byte {
	s := make([]byte, 12, 12+len(chunk))
	binary.BigEndian.PutUint16(s, 40000)
	binary.BigEndian.PutUint16(s[2:], 5000)
	binary.BigEndian.PutUint32(s[4:], vtag)
	s = append(s, chunk...)
	binary.LittleEndian.PutUint32(s[8:], crc32.Checksum(s, crc32.MakeTable(crc32.Castagnoli)))
	et := uint16(etherIPv4)
	if src.Is6() {
		et = etherIPv6
	}
	return ethFrame(routerMAC, vmMAC, et, ipPacket(src, dst, protoSCTP, 64, s, -1))
}

// sctpInit is an INIT chunk with initiate tag tag.
func sctpInit(tag uint32) []byte {
	c := []byte{1, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 1, 0, 1, 0, 0, 0, 1}
	binary.BigEndian.PutUint32(c[4:], tag)
	return c
}

func ip4u32(a netip.Addr) uint64 { return uint64(binary.BigEndian.Uint32(a.AsSlice())) }

// checkSums verifies the IPv4 header checksum and the L4 checksum of a
// frame, computed here independently of the code under test.
func checkSums(t *testing.T, b []byte) *frame {
	t.Helper()
	f, err := parseFrame(b)
	if err != nil {
		t.Fatalf("output frame: %v", err)
	}
	sum := func(s uint32, d []byte) uint32 {
		for i := 0; i+1 < len(d); i += 2 {
			s += uint32(d[i])<<8 | uint32(d[i+1])
		}
		if len(d)%2 == 1 {
			s += uint32(d[len(d)-1]) << 8
		}
		for s>>16 != 0 {
			s = s&0xffff + s>>16
		}
		return s
	}
	if f.etype == etherIPv4 && sum(0, f.ipHdr) != 0xffff {
		t.Errorf("bad IPv4 header checksum")
	}
	if f.l4 == nil {
		return f
	}
	var ps uint32
	if f.proto != protoICMP {
		ps = sum(sum(0, f.ipSrc.AsSlice()), f.ipDst.AsSlice()) + uint32(f.proto) + uint32(len(f.l4))
	}
	if f.proto == protoSCTP {
		if len(f.l4) < 12 {
			t.Fatalf("SCTP packet of %d bytes", len(f.l4))
		}
		c := append([]byte(nil), f.l4...)
		want := uint32(c[8]) | uint32(c[9])<<8 | uint32(c[10])<<16 | uint32(c[11])<<24
		clear(c[8:12])
		if crc32.Checksum(c, crc32.MakeTable(crc32.Castagnoli)) != want {
			t.Errorf("bad SCTP checksum")
		}
		return f
	}
	if f.etype != etherARP && sum(ps, f.l4) != 0xffff {
		t.Errorf("bad L4 checksum (proto %d)", f.proto)
	}
	return f
}

// rig runs nested actions' packet-outs through a real datapath whose
// ingress output stage (table 37) and egress output (64) send to port 2.
type rig struct {
	d   *dp.Datapath
	out *port.Channel
}

func newRig(t *testing.T) *rig {
	t.Helper()
	p := dp.NewPipeline()
	var b flow.Bundle
	for _, tb := range []uint8{37, 64} {
		b.Add(flow.Rule{Table: tb, Priority: 0, Actions: []flow.Action{flow.Output{Port: 2}}})
	}
	if _, err := p.Apply(b); err != nil {
		t.Fatal(err)
	}
	d, err := dp.New(dp.Config{Flows: p})
	if err != nil {
		t.Fatal(err)
	}
	out := port.NewChannel("out", 16, false)
	if err := d.AddPort(1, port.NewChannel("in", 16, false)); err != nil {
		t.Fatal(err)
	}
	if err := d.AddPort(2, out); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &rig{d: d, out: out}
}

// run executes the output's one packet-out and returns the frame sent.
func (r *rig) run(t *testing.T, out Output) []byte {
	t.Helper()
	if len(out.Packets) != 1 {
		t.Fatalf("%d packet-outs, want 1", len(out.Packets))
	}
	if err := r.d.Execute(out.Packets[0]); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-r.out.Out():
		return p.Data
	case <-time.After(5 * time.Second):
		t.Fatal("no frame out")
		return nil
	}
}

func newEngine(t *testing.T) *Engine {
	t.Helper()
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	e.now = func() time.Time { return time.UnixMilli(1700000000000) }
	return e
}

// TestNestedActions runs each nested action of ovn-northd's flows on a
// real packet, through a real datapath, and checks the packet that
// leaves.
func TestNestedActions(t *testing.T) {
	e := newEngine(t)
	r := newRig(t)
	st := testState()
	routerIP := netip.MustParseAddr("20.0.0.254")
	nextHop := netip.MustParseAddr("20.0.0.1")
	ping := ethFrame(routerMAC, vmMAC, etherIPv4, ipPacket(vmIP, farIP, protoICMP, 1, []byte{8, 0, 0, 0, 0, 1, 0, 1, 'h', 'i'}, 2))
	ns := ethFrame(routerMAC, vmMAC, etherIPv6, ipPacket(vmIP6, netip.MustParseAddr("ff02::1:ff00:1"), protoICMPv6, 255,
		append(append([]byte{135, 0, 0, 0, 0, 0, 0, 0}, routerIP6.AsSlice()...), append([]byte{1, 1}, vmMAC...)...), 2))
	ip6 := ethFrame(routerMAC, vmMAC, etherIPv6, ipPacket(vmIP6, netip.MustParseAddr("bef0::9"), protoUDP, 64, udpDatagram(1, 2, []byte("x")), 6))
	tests := []struct {
		name   string
		action string
		frame  []byte
		dpKey  uint64
		regs   map[int]uint64
		check  func(t *testing.T, f *frame)
	}{
		{"arp request for the next hop",
			"arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.spa = reg1; arp.tpa = reg0; arp.op = 1; output; };",
			ping, 1, map[int]uint64{0: ip4u32(nextHop), 1: ip4u32(routerIP)},
			func(t *testing.T, f *frame) {
				a := f.l3
				if f.etype != etherARP || !bytes.Equal(f.dst, broadcastMAC) || binary.BigEndian.Uint16(a[6:]) != 1 ||
					!bytes.Equal(a[8:14], vmMAC) || !bytes.Equal(a[14:18], routerIP.AsSlice()) || !bytes.Equal(a[24:28], nextHop.AsSlice()) {
					t.Errorf("ARP request % x", f.raw)
				}
			}},
		{"icmp4 time exceeded",
			`icmp4 {eth.dst <-> eth.src; icmp4.type = 11; /* Time exceeded */ icmp4.code = 0; ip4.dst = ip4.src; ip4.src = 20.0.0.254 ; ip.ttl = 254; outport = "lr0-sw0"; flags.loopback = 1; output; };`,
			ping, 1, nil,
			func(t *testing.T, f *frame) {
				if f.proto != protoICMP || f.l4[0] != 11 || f.l4[1] != 0 || f.ipSrc != routerIP || f.ipDst != vmIP || f.ttl != 254 ||
					!bytes.Equal(f.dst, vmMAC) || !bytes.Equal(f.l4[8:], ping[14:]) {
					t.Errorf("ICMP time exceeded % x", f.raw)
				}
			}},
		{"icmp4_error fragmentation needed with the MTU",
			`icmp4_error { icmp4.type = 3; icmp4.code = 4; icmp4.frag_mtu = 1400; eth.dst <-> eth.src; ip4.dst <-> ip4.src; output; };`,
			ping, 1, nil,
			func(t *testing.T, f *frame) {
				if f.l4[0] != 3 || f.l4[1] != 4 || binary.BigEndian.Uint16(f.l4[6:]) != 1400 || f.ipDst != vmIP {
					t.Errorf("frag needed % x", f.raw)
				}
			}},
		{"icmp6 packet too big",
			`icmp6_error { icmp6.type = 2; icmp6.code = 0; icmp6.frag_mtu = 1280; eth.dst <-> eth.src; ip6.dst <-> ip6.src; output; };`,
			ip6, 1, nil,
			func(t *testing.T, f *frame) {
				if f.proto != protoICMPv6 || f.l4[0] != 2 || binary.BigEndian.Uint32(f.l4[4:]) != 1280 || f.ipDst != vmIP6 || !bytes.Equal(f.l4[8:], ip6[14:]) {
					t.Errorf("packet too big % x", f.raw)
				}
			}},
		{"tcp_reset of a SYN",
			"tcp_reset { eth.dst <-> eth.src; ip4.dst <-> ip4.src; outport <-> inport; output; };",
			tcpFrame(vmIP, farIP, 0x02, 0), 2, nil,
			func(t *testing.T, f *frame) {
				tc := f.l4
				if f.ipDst != vmIP || tc[13] != 0x14 || binary.BigEndian.Uint32(tc[8:]) != 1001 || binary.BigEndian.Uint32(tc[4:]) != 0 ||
					f.ttl != 63 || f.ipHdr[6] != 0x40 || // as ovn-controller's

					binary.BigEndian.Uint16(tc[2:]) != 40000 || binary.BigEndian.Uint16(tc) != 80 {
					t.Errorf("RST % x", f.raw)
				}
			}},
		{"sctp_abort of an INIT: its initiate tag, T clear",
			"sctp_abort { eth.dst <-> eth.src; ip4.dst <-> ip4.src; outport <-> inport; output; };",
			sctpFrame(vmIP, farIP, 0, sctpInit(0xabcdef01)), 2, nil,
			func(t *testing.T, f *frame) {
				s := f.l4
				if f.proto != protoSCTP || f.ipDst != vmIP || f.ipSrc != farIP || !bytes.Equal(f.dst, vmMAC) || len(s) != 16 || f.ttl != 63 || f.ipHdr[6] != 0x40 ||
					binary.BigEndian.Uint16(s) != 5000 || binary.BigEndian.Uint16(s[2:]) != 40000 ||
					binary.BigEndian.Uint32(s[4:]) != 0xabcdef01 || s[12] != 6 || s[13] != 0 || binary.BigEndian.Uint16(s[14:]) != 4 {
					t.Errorf("ABORT % x", f.raw)
				}
			}},
		{"sctp_abort of DATA over IPv6: the packet's tag, T set",
			"sctp_abort { eth.dst <-> eth.src; ip6.dst <-> ip6.src; outport <-> inport; output; };",
			sctpFrame(vmIP6, netip.MustParseAddr("bef0::9"), 0x12345678, []byte{0, 3, 0, 17, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 'x', 0, 0, 0}), 2, nil,
			func(t *testing.T, f *frame) {
				s := f.l4
				if f.proto != protoSCTP || f.ipDst != vmIP6 || len(s) != 16 || binary.BigEndian.Uint32(s[4:]) != 0x12345678 || s[12] != 6 || s[13] != 1 {
					t.Errorf("ABORT % x", f.raw)
				}
			}},
		{"reject of SCTP: an ABORT, addresses exchanged",
			"reject { outport <-> inport; output; };",
			sctpFrame(vmIP, farIP, 0x12345678, []byte{0, 3, 0, 17, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 'x', 0, 0, 0}), 2, nil,
			func(t *testing.T, f *frame) {
				s := f.l4
				if f.proto != protoSCTP || f.ipDst != vmIP || f.ipSrc != farIP || !bytes.Equal(f.dst, vmMAC) || len(s) != 16 ||
					binary.BigEndian.Uint32(s[4:]) != 0x12345678 || s[12] != 6 || s[13] != 1 {
					t.Errorf("ABORT % x", f.raw)
				}
			}},
		{"reject of a TCP segment with ACK",
			"reject { /* eth.dst <-> eth.src; ip.dst <-> ip.src; is implicit. */ outport <-> inport; next(pipeline=egress,table=22); };",
			tcpFrame(vmIP, farIP, 0x10, 10), 2, nil,
			func(t *testing.T, f *frame) {
				tc := f.l4
				if f.ipDst != vmIP || f.ipSrc != farIP || !bytes.Equal(f.dst, vmMAC) || tc[13] != 0x04 || binary.BigEndian.Uint32(tc[4:]) != 5000 || len(tc) != 20 {
					t.Errorf("RST % x", f.raw)
				}
			}},
		{"reject of UDP: port unreachable",
			"reject { outport <-> inport; output; };",
			udpFrame(routerMAC, vmIP, farIP, 5000, 53, []byte("query")), 2, nil,
			func(t *testing.T, f *frame) {
				if f.proto != protoICMP || f.l4[0] != 3 || f.l4[1] != 3 || f.ipDst != vmIP || f.ipSrc != farIP {
					t.Errorf("unreachable % x", f.raw)
				}
			}},
		{"reject of IPv6 UDP",
			"reject { output; };", ip6, 2, nil,
			func(t *testing.T, f *frame) {
				if f.proto != protoICMPv6 || f.l4[0] != 1 || f.l4[1] != 4 || f.ipDst != vmIP6 {
					t.Errorf("unreachable % x", f.raw)
				}
			}},
		{"nd_na_router answers a solicitation",
			"nd_na_router { eth.src = xreg0[0..47]; ip6.src = nd.target; nd.tll = xreg0[0..47]; outport = inport; flags.loopback = 1; output; };",
			ns, 1, map[int]uint64{1: 0xff01}, // xreg0 = reg0:reg1
			func(t *testing.T, f *frame) {
				want := net.HardwareAddr{0, 0, 0, 0, 0xff, 1}
				if f.proto != protoICMPv6 || f.l4[0] != 136 || f.l4[4] != 0xe0 || f.ipSrc != routerIP6 || f.ipDst != vmIP6 ||
					!bytes.Equal(f.src, want) || !bytes.Equal(f.l4[26:32], want) || !bytes.Equal(f.l4[8:24], routerIP6.AsSlice()) {
					t.Errorf("NA % x", f.raw)
				}
			}},
		{"nd_ns for the next hop",
			"nd_ns { nd.target = xxreg0; output; };",
			ip6, 1, map[int]uint64{0: 0xbef00000, 3: 1}, // xxreg0 = bef0::1
			func(t *testing.T, f *frame) {
				if f.proto != protoICMPv6 || f.l4[0] != 135 || !bytes.Equal(f.l4[8:24], netip.MustParseAddr("bef0::1").AsSlice()) ||
					f.ipDst != netip.MustParseAddr("ff02::1:ff00:9") || !bytes.Equal(f.dst, net.HardwareAddr{0x33, 0x33, 0xff, 0, 0, 9}) {
					t.Errorf("NS % x", f.raw)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pi := packetIn(tc.action, tc.frame, tc.dpKey, 8+20, tc.regs)
			out, err := e.Handle(pi, st)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, checkSums(t, r.run(t, out)))
		})
	}
}

// TestPutARP: put_arp and put_nd learn a binding for the input port.
func TestPutARP(t *testing.T) {
	e := newEngine(t)
	st := testState()
	arp := make([]byte, 28)
	binary.BigEndian.PutUint16(arp[6:], 2)
	copy(arp[8:], vmMAC)
	copy(arp[14:], vmIP.AsSlice())
	pi := packetIn("put_arp(inport, arp.spa, arp.sha);", ethFrame(routerMAC, vmMAC, etherARP, arp), 1, 10, nil)
	pi.Key.Set(flow.ARPSPA, ip4u32(vmIP))
	pi.Key.Set(flow.ARPSHA, 0x505400000001)
	out, err := e.Handle(pi, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.MACBindings) != 1 || len(out.Packets) != 0 {
		t.Fatalf("output %+v", out)
	}
	b := out.MACBindings[0]
	if b.LogicalPort != "lr0-sw0" || b.IP != vmIP || b.MAC.String() != "50:54:00:00:00:01" || b.Datapath.Key != 1 || b.Timestamp != 1700000000000 {
		t.Errorf("binding %+v", b)
	}
	pi = packetIn("put_nd(inport, nd.target, nd.tll);", ethFrame(routerMAC, vmMAC, etherIPv6, nil), 1, 10, map[int]uint64{14: 2})
	pi.Key.SetU128(flow.NDTarget, flow.U128{Hi: 0xaef0 << 48, Lo: 0x11})
	pi.Key.Set(flow.NDTLL, 0x505400000001)
	out, err = e.Handle(pi, st)
	if err != nil || len(out.MACBindings) != 1 || out.MACBindings[0].IP != vmIP6 || out.MACBindings[0].LogicalPort != "lr0-sw1" {
		t.Errorf("put_nd: %+v, %v", out, err)
	}
}
