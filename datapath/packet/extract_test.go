package packet

import (
	"net/netip"
	"testing"

	"github.com/govn/govn/datapath/flow"
)

var (
	macA = [6]byte{0x00, 0x00, 0x00, 0x00, 0x00, 0x0a}
	macB = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x0b}
)

// fv is one expected field value.
type fv struct {
	f flow.Field
	v flow.U128
}

func u(v uint64) flow.U128      { return flow.U128{Lo: v} }
func v4(s string) flow.U128     { return u(flow.IPv4(netip.MustParseAddr(s))) }
func v6(s string) flow.U128     { return flow.IPv6(netip.MustParseAddr(s)) }
func mac(m [6]byte) flow.U128   { return u(flow.MAC(m)) }
func hopByHop() []byte          { return []byte{0, 0, 1, 4, 0, 0, 0, 0} }
func fragHdr(off uint16) []byte { return []byte{0, 0, byte(off >> 8), byte(off), 0, 0, 0, 1} }
func withL2(fs ...fv) []fv {
	return append([]fv{{flow.EthDst, mac(macB)}, {flow.EthSrc, mac(macA)}}, fs...)
}
func ip4(typ uint16, p []byte) []byte { return ethFrame(macB, macA, typ, p) }

func TestExtract(t *testing.T) {
	tests := []struct {
		name  string
		frame []byte
		want  []fv
		l3    uint16
		l4    uint16
	}{
		{"runt", []byte{1, 2, 3}, nil, 0, 0},
		{"llc", ethFrame(macB, macA, 0x0040, make([]byte, 64)),
			withL2(fv{flow.EthType, u(EtherTypeNone)}), 0, 0},
		{"ipv4/tcp", ip4(EtherTypeIPv4, ipv4Pkt("10.0.0.1", "10.0.0.2", ProtoTCP, v4opts{tos: 0xb9, ttl: 64}, tcpSeg(1234, 80, TCPSyn|TCPAck))),
			withL2(fv{flow.EthType, u(0x0800)}, fv{flow.NWSrc, v4("10.0.0.1")}, fv{flow.NWDst, v4("10.0.0.2")},
				fv{flow.NWProto, u(6)}, fv{flow.NWTOS, u(0xb8)}, fv{flow.NWECN, u(1)}, fv{flow.NWTTL, u(64)},
				fv{flow.TPSrc, u(1234)}, fv{flow.TPDst, u(80)}, fv{flow.TCPFlags, u(TCPSyn | TCPAck)}), 14, 34},
		{"ipv4 options/udp", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoUDP, v4opts{ttl: 1, options: []byte{1, 1, 1, 0}}, udpDgram(53, 5353, []byte("x")))),
			withL2(fv{flow.EthType, u(0x0800)}, fv{flow.NWSrc, v4("1.2.3.4")}, fv{flow.NWDst, v4("5.6.7.8")},
				fv{flow.NWProto, u(17)}, fv{flow.NWTTL, u(1)}, fv{flow.TPSrc, u(53)}, fv{flow.TPDst, u(5353)}), 14, 38},
		{"ipv4 first fragment", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoUDP, v4opts{frag: 0x2000}, udpDgram(1, 2, nil))),
			withL2(fv{flow.EthType, u(0x0800)}, fv{flow.NWSrc, v4("1.2.3.4")}, fv{flow.NWDst, v4("5.6.7.8")},
				fv{flow.NWProto, u(17)}, fv{flow.NWFrag, u(FragAny)}, fv{flow.TPSrc, u(1)}, fv{flow.TPDst, u(2)}), 14, 34},
		{"ipv4 later fragment", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoUDP, v4opts{frag: 0x0010}, udpDgram(1, 2, nil))),
			withL2(fv{flow.EthType, u(0x0800)}, fv{flow.NWSrc, v4("1.2.3.4")}, fv{flow.NWDst, v4("5.6.7.8")},
				fv{flow.NWProto, u(17)}, fv{flow.NWFrag, u(FragAny | FragLater)}), 14, 0},
		{"ipv4 truncated", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoUDP, v4opts{}, udpDgram(1, 2, nil)))[:30],
			withL2(fv{flow.EthType, u(0x0800)}), 0, 0},
		{"ipv4/tcp truncated L4", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoTCP, v4opts{}, []byte{0, 1, 0, 2})),
			withL2(fv{flow.EthType, u(0x0800)}, fv{flow.NWSrc, v4("1.2.3.4")}, fv{flow.NWDst, v4("5.6.7.8")}, fv{flow.NWProto, u(6)}), 14, 34},
		{"ipv4/icmp", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoICMP, v4opts{}, []byte{8, 0, 0, 0, 0, 1, 0, 1})),
			withL2(fv{flow.EthType, u(0x0800)}, fv{flow.NWSrc, v4("1.2.3.4")}, fv{flow.NWDst, v4("5.6.7.8")},
				fv{flow.NWProto, u(1)}, fv{flow.ICMPType, u(8)}), 14, 34},
		{"ipv4/igmp", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "224.0.0.1", ProtoIGMP, v4opts{}, []byte{0x16, 0, 0, 0, 239, 1, 2, 3})),
			withL2(fv{flow.EthType, u(0x0800)}, fv{flow.NWSrc, v4("1.2.3.4")}, fv{flow.NWDst, v4("224.0.0.1")},
				fv{flow.NWProto, u(2)}, fv{flow.ICMPType, u(0x16)}, fv{flow.IGMPGroup, v4("239.1.2.3")}), 14, 34},
		{"ipv4/sctp", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoSCTP, v4opts{}, append(udpDgram(7, 9, nil), 0, 0, 0, 0))),
			withL2(fv{flow.EthType, u(0x0800)}, fv{flow.NWSrc, v4("1.2.3.4")}, fv{flow.NWDst, v4("5.6.7.8")},
				fv{flow.NWProto, u(132)}, fv{flow.TPSrc, u(7)}, fv{flow.TPDst, u(9)}), 14, 34},
		{"802.1q", ethVLAN(macB, macA, [][]byte{vlanTag(0x8100, 0x2005)}, EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoTCP, v4opts{}, tcpSeg(1, 2, TCPFin))),
			withL2(fv{flow.VLANTCI, u(0x3005)}, fv{flow.EthType, u(0x0800)}, fv{flow.NWSrc, v4("1.2.3.4")}, fv{flow.NWDst, v4("5.6.7.8")},
				fv{flow.NWProto, u(6)}, fv{flow.TPSrc, u(1)}, fv{flow.TPDst, u(2)}, fv{flow.TCPFlags, u(TCPFin)}), 18, 38},
		{"802.1ad", ethVLAN(macB, macA, [][]byte{vlanTag(0x88a8, 0x0064), vlanTag(0x8100, 0x0007)}, EtherTypeARP,
			arpPkt(1, macA, "10.0.0.1", [6]byte{}, "10.0.0.2")),
			withL2(fv{flow.VLANTCI, u(0x1064)}, fv{flow.VLANTCIInner, u(0x1007)}, fv{flow.EthType, u(0x0806)},
				fv{flow.ARPOp, u(1)}, fv{flow.NWProto, u(1)}, fv{flow.ARPSPA, v4("10.0.0.1")}, fv{flow.ARPTPA, v4("10.0.0.2")},
				fv{flow.ARPSHA, mac(macA)}), 22, 0},
		{"arp reply", ethFrame(macB, macA, EtherTypeARP, arpPkt(2, macA, "10.0.0.1", macB, "10.0.0.2")),
			withL2(fv{flow.EthType, u(0x0806)}, fv{flow.ARPOp, u(2)}, fv{flow.NWProto, u(2)}, fv{flow.ARPSPA, v4("10.0.0.1")},
				fv{flow.ARPTPA, v4("10.0.0.2")}, fv{flow.ARPSHA, mac(macA)}, fv{flow.ARPTHA, mac(macB)}), 14, 0},
		{"rarp", ethFrame(macB, macA, EtherTypeRARP, arpPkt(3, macA, "0.0.0.0", macA, "0.0.0.0")),
			withL2(fv{flow.EthType, u(0x8035)}, fv{flow.ARPOp, u(3)}, fv{flow.NWProto, u(3)}, fv{flow.ARPSHA, mac(macA)}, fv{flow.ARPTHA, mac(macA)}), 14, 0},
		{"ipv6/tcp", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0x2d, 0x12345, 63, ProtoTCP, nil, nil, tcpSeg(443, 50000, TCPRst))),
			withL2(fv{flow.EthType, u(0x86dd)}, fv{flow.IPv6Src, v6("fd00::1")}, fv{flow.IPv6Dst, v6("fd00::2")},
				fv{flow.NWProto, u(6)}, fv{flow.NWTOS, u(0x2c)}, fv{flow.NWECN, u(1)}, fv{flow.NWTTL, u(63)}, fv{flow.IPv6Label, u(0x12345)},
				fv{flow.TPSrc, u(443)}, fv{flow.TPDst, u(50000)}, fv{flow.TCPFlags, u(TCPRst)}), 14, 54},
		{"ipv6 hop-by-hop/udp", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 1, ProtoUDP, [][]byte{hopByHop()}, []byte{ProtoIPv6Hop}, udpDgram(1, 2, nil))),
			withL2(fv{flow.EthType, u(0x86dd)}, fv{flow.IPv6Src, v6("fd00::1")}, fv{flow.IPv6Dst, v6("fd00::2")},
				fv{flow.NWProto, u(17)}, fv{flow.NWTTL, u(1)}, fv{flow.TPSrc, u(1)}, fv{flow.TPDst, u(2)}), 14, 62},
		{"ipv6 routing+dstopts/tcp", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 9, ProtoTCP,
			[][]byte{{0, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, []byte{ProtoRouting, ProtoDstOpts}, tcpSeg(5, 6, TCPAck))),
			withL2(fv{flow.EthType, u(0x86dd)}, fv{flow.IPv6Src, v6("fd00::1")}, fv{flow.IPv6Dst, v6("fd00::2")},
				fv{flow.NWProto, u(6)}, fv{flow.NWTTL, u(9)}, fv{flow.TPSrc, u(5)}, fv{flow.TPDst, u(6)}, fv{flow.TCPFlags, u(TCPAck)}), 14, 78},
		{"ipv6 ah/udp", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 9, ProtoUDP,
			[][]byte{{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, []byte{ProtoAH}, udpDgram(7, 8, nil))),
			withL2(fv{flow.EthType, u(0x86dd)}, fv{flow.IPv6Src, v6("fd00::1")}, fv{flow.IPv6Dst, v6("fd00::2")},
				fv{flow.NWProto, u(17)}, fv{flow.NWTTL, u(9)}, fv{flow.TPSrc, u(7)}, fv{flow.TPDst, u(8)}), 14, 66},
		{"ipv6 first fragment", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 1, ProtoUDP, [][]byte{fragHdr(1)}, []byte{ProtoFragment}, udpDgram(1, 2, nil))),
			withL2(fv{flow.EthType, u(0x86dd)}, fv{flow.IPv6Src, v6("fd00::1")}, fv{flow.IPv6Dst, v6("fd00::2")},
				fv{flow.NWProto, u(17)}, fv{flow.NWTTL, u(1)}, fv{flow.NWFrag, u(FragAny)}, fv{flow.TPSrc, u(1)}, fv{flow.TPDst, u(2)}), 14, 62},
		{"ipv6 later fragment", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 1, ProtoUDP, [][]byte{fragHdr(0x0100)}, []byte{ProtoFragment}, udpDgram(1, 2, nil))),
			withL2(fv{flow.EthType, u(0x86dd)}, fv{flow.IPv6Src, v6("fd00::1")}, fv{flow.IPv6Dst, v6("fd00::2")},
				fv{flow.NWProto, u(ProtoFragment)}, fv{flow.NWTTL, u(1)}, fv{flow.NWFrag, u(FragAny | FragLater)}), 14, 0},
		{"nd ns", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "ff02::1:ff00:2", 0, 0, 255, ProtoICMPv6, nil, nil, ndMsg(ICMPv6NS, "fd00::2", 1, macA))),
			withL2(fv{flow.EthType, u(0x86dd)}, fv{flow.IPv6Src, v6("fd00::1")}, fv{flow.IPv6Dst, v6("ff02::1:ff00:2")},
				fv{flow.NWProto, u(58)}, fv{flow.NWTTL, u(255)}, fv{flow.ICMPType, u(135)}, fv{flow.NDTarget, v6("fd00::2")}, fv{flow.NDSLL, mac(macA)}), 14, 54},
		{"nd na", ip4(EtherTypeIPv6, ipv6Pkt("fd00::2", "fd00::1", 0, 0, 255, ProtoICMPv6, nil, nil, ndMsg(ICMPv6NA, "fd00::2", 2, macB))),
			withL2(fv{flow.EthType, u(0x86dd)}, fv{flow.IPv6Src, v6("fd00::2")}, fv{flow.IPv6Dst, v6("fd00::1")},
				fv{flow.NWProto, u(58)}, fv{flow.NWTTL, u(255)}, fv{flow.ICMPType, u(136)}, fv{flow.NDTarget, v6("fd00::2")}, fv{flow.NDTLL, mac(macB)}), 14, 54},
		{"nd bad option", ip4(EtherTypeIPv6, ipv6Pkt("fd00::2", "fd00::1", 0, 0, 255, ProtoICMPv6, nil, nil, append(ndMsg(ICMPv6NA, "fd00::2", 0, macB), 2, 0, 0, 0, 0, 0, 0, 0))),
			withL2(fv{flow.EthType, u(0x86dd)}, fv{flow.IPv6Src, v6("fd00::2")}, fv{flow.IPv6Dst, v6("fd00::1")},
				fv{flow.NWProto, u(58)}, fv{flow.NWTTL, u(255)}, fv{flow.ICMPType, u(136)}), 14, 54},
		{"mld report", ip4(EtherTypeIPv6, ipv6Pkt("fe80::1", "ff02::16", 0, 0, 1, ProtoICMPv6, [][]byte{hopByHop()}, []byte{ProtoIPv6Hop}, ndMsg(ICMPv6MLDReport, "ff05::2", 0, macA))),
			withL2(fv{flow.EthType, u(0x86dd)}, fv{flow.IPv6Src, v6("fe80::1")}, fv{flow.IPv6Dst, v6("ff02::16")},
				fv{flow.NWProto, u(58)}, fv{flow.NWTTL, u(1)}, fv{flow.ICMPType, u(131)}, fv{flow.NDTarget, v6("ff05::2")}), 14, 62},
		{"icmpv6 echo", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 64, ProtoICMPv6, nil, nil, []byte{128, 0, 0, 0, 0, 1, 0, 1})),
			withL2(fv{flow.EthType, u(0x86dd)}, fv{flow.IPv6Src, v6("fd00::1")}, fv{flow.IPv6Dst, v6("fd00::2")},
				fv{flow.NWProto, u(58)}, fv{flow.NWTTL, u(64)}, fv{flow.ICMPType, u(128)}), 14, 54},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want, got flow.Key
			for _, f := range tt.want {
				want.SetU128(f.f, f.v)
			}
			// Metadata words must survive extraction.
			got.Set(flow.InPort, 9)
			got.Set(flow.TunID, 77)
			want.Set(flow.InPort, 9)
			want.Set(flow.TunID, 77)
			want.Set(flow.PktLen, uint64(len(tt.frame)))
			// Fill the packet words with garbage: Extract must clear them.
			for i := flow.StageStart(flow.StageL2); i < flow.NumWords; i++ {
				got.W[i] = 0x5555555555555555
			}
			off := Extract(tt.frame, &got)
			if got != want {
				for _, f := range flow.Fields() {
					if g, w := got.GetU128(f), want.GetU128(f); g != w {
						t.Errorf("%s = %x, want %x", f, g, w)
					}
				}
			}
			if off.L3 != tt.l3 || off.L4 != tt.l4 {
				t.Errorf("offsets = %+v, want L3 %d L4 %d", off, tt.l3, tt.l4)
			}
		})
	}
}

func TestExtractLayout(t *testing.T) {
	for _, c := range []struct {
		f flow.Field
		w int
	}{{flow.EthSrc, wEthSrc}, {flow.EthDst, wEthDst}, {flow.VLANTCIInner, wVLANInner}, {flow.NWSrc, wNWAddr},
		{flow.IPv6Src, wIPv6Src}, {flow.IPv6Dst, wIPv6Dst}, {flow.NWProto, wNWMisc}, {flow.ARPSHA, wARPSHA},
		{flow.ARPTHA, wARPTHA}, {flow.TPSrc, wTP}, {flow.NDTarget, wNDTarget}, {flow.NDSLL, wNDSLL}, {flow.NDTLL, wNDTLL}} {
		if c.f.Info().Word != c.w {
			t.Errorf("%s: packet uses word %d, flow says %d", c.f, c.w, c.f.Info().Word)
		}
	}
	if firstWord != flow.StageStart(flow.StageL2) {
		t.Errorf("firstWord %d != L2 stage start", firstWord)
	}
}

func TestTunnels(t *testing.T) {
	inner := ethFrame(macB, macA, EtherTypeIPv4, ipv4Pkt("192.168.0.1", "192.168.0.2", ProtoTCP, v4opts{ttl: 64}, tcpSeg(1000, 22, TCPSyn)))
	var src flow.Key
	src.Set(flow.TunID, 0x123456)
	src.Set(flow.TunMetadata0, 0x00050007)
	for _, c := range []struct {
		name   string
		port   uint16
		header []byte
		md     uint64
	}{
		{"geneve", GenevePort, AppendGeneve(nil, &src), 0x00050007},
		{"geneve other options", GenevePort, append([]byte{4, 0, 0x65, 0x58, 0x12, 0x34, 0x56, 0}, 0x01, 0x02, 0x03, 1, 1, 2, 3, 4, 0x01, 0x02, 0x80, 1, 0, 5, 0, 7), 0x00050007},
		{"vxlan", VXLANPort, AppendVXLAN(nil, &src), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			outer := ethFrame(macA, macB, EtherTypeIPv4, ipv4Pkt("172.16.0.1", "172.16.0.2", ProtoUDP, v4opts{ttl: 9, tos: 4},
				udpDgram(40000, c.port, append(append([]byte{}, c.header...), inner...))))
			var k flow.Key
			k.Set(flow.InPort, 3)
			got, _, err := DecapFrame(outer, &k)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(inner) {
				t.Fatal("inner frame differs")
			}
			var want flow.Key
			Extract(inner, &want)
			want.Set(flow.InPort, 3)
			want.Set(flow.TunID, 0x123456)
			want.Set(flow.TunSrc, flow.IPv4(netip.MustParseAddr("172.16.0.1")))
			want.Set(flow.TunDst, flow.IPv4(netip.MustParseAddr("172.16.0.2")))
			want.Set(flow.TunTTL, 9)
			want.Set(flow.TunTOS, 4)
			want.Set(flow.TunMetadata0, c.md)
			if k != want {
				for _, f := range flow.Fields() {
					if g, w := k.GetU128(f), want.GetU128(f); g != w {
						t.Errorf("%s = %x, want %x", f, g, w)
					}
				}
			}
			// Recirculation re-extracts the (possibly rewritten) inner frame
			// into the same key: the tunnel fields must survive.
			Extract(inner, &k)
			if k != want {
				t.Error("re-extraction changed the tunnel metadata")
			}
		})
	}
	var k flow.Key
	if _, _, err := DecapFrame(inner, &k); err == nil {
		t.Error("DecapFrame accepted a non-tunnel frame")
	}
	if _, err := DecapGeneve([]byte{1, 0, 0x65, 0x58, 0, 0, 0, 0}, &k); err == nil {
		t.Error("DecapGeneve accepted options longer than the packet")
	}
}

func tcpFrame() []byte {
	return ethFrame(macB, macA, EtherTypeIPv4, ipv4Pkt("10.0.0.1", "10.0.0.2", ProtoTCP, v4opts{ttl: 64}, append(tcpSeg(1234, 80, TCPAck), make([]byte, 10)...)))
}

func TestExtractAllocs(t *testing.T) {
	frames := [][]byte{tcpFrame(),
		ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "ff02::1:ff00:2", 0, 0, 255, ProtoICMPv6, nil, nil, ndMsg(ICMPv6NS, "fd00::2", 1, macA)))}
	var k flow.Key
	for _, f := range frames {
		if n := testing.AllocsPerRun(100, func() { Extract(f, &k) }); n != 0 {
			t.Errorf("Extract allocates %v times per packet", n)
		}
	}
}

func BenchmarkExtractIPv4TCP(b *testing.B) {
	f := tcpFrame()
	var k flow.Key
	b.ReportAllocs()
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		Extract(f, &k)
	}
}

func BenchmarkExtractIPv6TCP(b *testing.B) {
	f := ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 64, ProtoTCP, nil, nil, tcpSeg(443, 50000, TCPAck)))
	var k flow.Key
	b.ReportAllocs()
	for b.Loop() {
		Extract(f, &k)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add(tcpFrame())
	f.Add(ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 1, ProtoUDP, [][]byte{hopByHop(), fragHdr(1)}, []byte{ProtoIPv6Hop, ProtoFragment}, udpDgram(1, 2, nil))))
	f.Add(ethVLAN(macB, macA, [][]byte{vlanTag(0x88a8, 1), vlanTag(0x8100, 2)}, EtherTypeARP, arpPkt(1, macA, "1.1.1.1", macB, "2.2.2.2")))
	f.Add(ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 255, ProtoICMPv6, nil, nil, ndMsg(ICMPv6NS, "fd00::2", 1, macA))))
	f.Fuzz(func(t *testing.T, b []byte) {
		var k flow.Key
		off := Extract(b, &k)
		if int(off.L3) > len(b) || int(off.L4) > len(b) {
			t.Fatalf("offsets %+v beyond %d bytes", off, len(b))
		}
		for i := 0; i < flow.StageStart(flow.StageL2); i++ {
			if k.W[i] != 0 {
				t.Fatalf("metadata word %d written", i)
			}
		}
		DecapFrame(b, &k)
		DecapGeneve(b, &k)
	})
}
