package packet

import (
	"encoding/hex"
	"testing"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/internal/ovsref"
)

// TestExtractAgainstOVS feeds frames to the real ovs-vswitchd's
// ofproto/trace and compares the flow it extracts with Extract's key.
func TestExtractAgainstOVS(t *testing.T) {
	o := ovsref.Start(t, "vlan-limit=2")
	frames := []struct {
		name  string
		frame []byte
	}{
		{"ipv4/tcp", ip4(EtherTypeIPv4, ipv4Pkt("10.0.0.1", "10.0.0.2", ProtoTCP, v4opts{tos: 0xb9, ttl: 64}, tcpSeg(1234, 80, TCPSyn|TCPAck)))},
		{"ipv4 options/udp", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoUDP, v4opts{ttl: 1, options: []byte{1, 1, 1, 0}}, udpDgram(53, 5353, []byte("x"))))},
		{"ipv4 first fragment", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoUDP, v4opts{frag: 0x2000, ttl: 3}, udpDgram(1, 2, nil)))},
		{"ipv4 later fragment", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoUDP, v4opts{frag: 0x0010, ttl: 3}, udpDgram(1, 2, nil)))},
		{"ipv4/icmp", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoICMP, v4opts{ttl: 9}, []byte{8, 0, 0, 0, 0, 1, 0, 1}))},
		{"ipv4/igmp", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "224.0.0.1", ProtoIGMP, v4opts{ttl: 1}, []byte{0x16, 0, 0, 0, 239, 1, 2, 3}))},
		{"ipv4/sctp", ip4(EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoSCTP, v4opts{ttl: 9}, append(udpDgram(7, 9, nil), 0, 0, 0, 0)))},
		{"802.1q", ethVLAN(macB, macA, [][]byte{vlanTag(0x8100, 0x2005)}, EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoTCP, v4opts{ttl: 9}, tcpSeg(1, 2, TCPFin)))},
		{"802.1ad+802.1q", ethVLAN(macB, macA, [][]byte{vlanTag(0x88a8, 0x0064), vlanTag(0x8100, 0x0007)}, EtherTypeIPv4, ipv4Pkt("1.2.3.4", "5.6.7.8", ProtoUDP, v4opts{ttl: 9}, udpDgram(1, 2, nil)))},
		{"arp request", ethFrame(macB, macA, EtherTypeARP, arpPkt(1, macA, "10.0.0.1", [6]byte{}, "10.0.0.2"))},
		{"arp reply", ethFrame(macB, macA, EtherTypeARP, arpPkt(2, macA, "10.0.0.1", macB, "10.0.0.2"))},
		{"ipv6/tcp", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0x2d, 0x12345, 63, ProtoTCP, nil, nil, tcpSeg(443, 50000, TCPRst)))},
		{"ipv6 hop-by-hop/udp", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 1, ProtoUDP, [][]byte{hopByHop()}, []byte{ProtoIPv6Hop}, udpDgram(1, 2, nil)))},
		{"ipv6 routing+dstopts/tcp", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 9, ProtoTCP,
			[][]byte{{0, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, []byte{ProtoRouting, ProtoDstOpts}, tcpSeg(5, 6, TCPAck)))},
		{"ipv6 ah/udp", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 9, ProtoUDP,
			[][]byte{{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, []byte{ProtoAH}, udpDgram(7, 8, nil)))},
		{"ipv6 first fragment", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 1, ProtoUDP, [][]byte{fragHdr(1)}, []byte{ProtoFragment}, udpDgram(1, 2, nil)))},
		{"ipv6 later fragment", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 1, ProtoUDP, [][]byte{fragHdr(0x0100)}, []byte{ProtoFragment}, udpDgram(1, 2, nil)))},
		{"nd ns", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "ff02::1:ff00:2", 0, 0, 255, ProtoICMPv6, nil, nil, ndMsg(ICMPv6NS, "fd00::2", 1, macA)))},
		{"nd na", ip4(EtherTypeIPv6, ipv6Pkt("fd00::2", "fd00::1", 0, 0, 255, ProtoICMPv6, nil, nil, ndMsg(ICMPv6NA, "fd00::2", 2, macB)))},
		{"icmpv6 echo", ip4(EtherTypeIPv6, ipv6Pkt("fd00::1", "fd00::2", 0, 0, 64, ProtoICMPv6, nil, nil, []byte{128, 0, 0, 0, 0, 1, 0, 1}))},
	}
	compare := []flow.Field{flow.EthSrc, flow.EthDst, flow.EthType, flow.VLANTCI, flow.VLANTCIInner, flow.NWSrc, flow.NWDst,
		flow.IPv6Src, flow.IPv6Dst, flow.NWTOS, flow.NWECN, flow.NWTTL, flow.IPv6Label, flow.NWFrag,
		flow.ARPSHA, flow.ARPTHA, flow.TPSrc, flow.TPDst, flow.TCPFlags, flow.NDTarget, flow.NDSLL, flow.NDTLL}
	// OVS extracts the IGMP group too but does not print it: not compared.
	for _, c := range frames {
		t.Run(c.name, func(t *testing.T) {
			out := o.Trace(t, "in_port=1", hex.EncodeToString(c.frame))
			line, err := ovsref.Line(out, "Flow: ")
			if err != nil {
				t.Fatal(err)
			}
			m, _, err := ovsref.ParseFlow(line)
			if err != nil {
				t.Fatal(err)
			}
			var k flow.Key
			Extract(c.frame, &k)
			fs := compare
			if k.Get(flow.EthType) != EtherTypeARP {
				fs = append(fs, flow.NWProto) // OVS keeps the ARP opcode as arp_op only
			} else {
				fs = append(fs, flow.ARPOp)
			}
			for _, f := range fs {
				if g, w := k.GetU128(f), m.Key.GetU128(f); g != w {
					t.Errorf("%s: govn %s, OVS %s\n  OVS flow: %s", f, flow.FormatValue(f, g, flow.OnesU128(f.Bits())),
						flow.FormatValue(f, w, flow.OnesU128(f.Bits())), line)
				}
			}
		})
	}
}
