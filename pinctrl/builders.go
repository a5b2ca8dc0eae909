package pinctrl

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net"
	"net/netip"
)

// The largest ICMP errors: RFC 1812 4.3.2.3 (IPv4) and RFC 4443 2.4 (IPv6)
// quote as much of the original datagram as fits.
const (
	maxICMP4Error = 576
	maxICMP6Error = 1280
)

// arpRequest is arp { }'s starting packet: an ARP request from the IPv4
// packet's source for its destination, Ethernet addresses unchanged.
func arpRequest(f *frame) ([]byte, error) {
	if f.etype != etherIPv4 {
		return nil, errors.New("not an IPv4 packet")
	}
	b := f.ethHeader(f.dst, f.src, etherARP)
	arp := make([]byte, 28)
	binary.BigEndian.PutUint16(arp[0:], 1) // Ethernet
	binary.BigEndian.PutUint16(arp[2:], etherIPv4)
	arp[4], arp[5] = 6, 4
	binary.BigEndian.PutUint16(arp[6:], 1) // request
	copy(arp[8:], f.src)
	copy(arp[14:], f.ipSrc.AsSlice())
	copy(arp[24:], f.ipDst.AsSlice())
	return append(b, arp...), nil
}

// neighborSolicitation is nd_ns { }'s starting packet: a solicitation for
// the IPv6 packet's destination, to its solicited-node address, with the
// source's link-layer address.
func neighborSolicitation(f *frame) ([]byte, error) {
	if f.etype != etherIPv6 {
		return nil, errors.New("not an IPv6 packet")
	}
	mc, mac := solicitedNode(f.ipDst)
	icmp := make([]byte, 32)
	icmp[0] = 135
	copy(icmp[8:], f.ipDst.AsSlice())
	icmp[24], icmp[25] = 1, 1 // source link-layer address
	copy(icmp[26:], f.src)
	return append(f.ethHeader(mac, f.src, etherIPv6), ipPacket(f.ipSrc, mc, protoICMPv6, 255, icmp, 2)...), nil
}

// neighborAdvertisement is nd_na { }'s starting packet: the answer to a
// neighbor solicitation (solicited, override; router for nd_na_router),
// from the target, with a target link-layer address option.
func neighborAdvertisement(f *frame, router bool) ([]byte, error) {
	if f.etype != etherIPv6 || f.proto != protoICMPv6 || len(f.l4) < 24 || f.l4[0] != 135 {
		return nil, errors.New("not a neighbor solicitation")
	}
	target := netip.AddrFrom16([16]byte(f.l4[8:24]))
	dst := f.ipSrc
	flags := byte(0x60) // solicited, override
	if dst.IsUnspecified() {
		// Duplicate address detection: the answer goes to all nodes,
		// unsolicited (RFC 4861 7.2.4).
		dst, flags = netip.MustParseAddr("ff02::1"), 0x20
	}
	if router {
		flags |= 0x80
	}
	icmp := make([]byte, 32)
	icmp[0] = 136
	icmp[4] = flags
	copy(icmp[8:], target.AsSlice())
	icmp[24], icmp[25] = 2, 1 // target link-layer address
	copy(icmp[26:], f.dst)
	return append(f.ethHeader(f.src, f.dst, etherIPv6), ipPacket(target, dst, protoICMPv6, 255, icmp, 2)...), nil
}

// icmp4Error is icmp4 { }'s starting packet: an ICMPv4 error of type and
// code quoting the datagram, addresses unchanged. mtu fills the next-hop
// MTU of "fragmentation needed" (icmp4.frag_mtu).
func icmp4Error(f *frame, typ, code uint8, mtu uint64) ([]byte, error) {
	if f.etype != etherIPv4 {
		return nil, errors.New("not an IPv4 packet")
	}
	quote := f.l3
	if n := maxICMP4Error - 20 - 8; len(quote) > n {
		quote = quote[:n]
	}
	icmp := make([]byte, 8, 8+len(quote))
	icmp[0], icmp[1] = typ, code
	binary.BigEndian.PutUint16(icmp[6:], uint16(mtu))
	icmp = append(icmp, quote...)
	ip := ipPacket(f.ipSrc, f.ipDst, protoICMP, 255, icmp, 2)
	setDF(ip) // as ovn-controller's (TestICMPDifferential)
	return append(f.ethHeader(f.dst, f.src, etherIPv4), ip...), nil
}

// icmp6Error is icmp6 { }'s starting packet; mtu fills "packet too big"
// (icmp6.frag_mtu).
func icmp6Error(f *frame, typ, code uint8, mtu uint64) ([]byte, error) {
	if f.etype != etherIPv6 {
		return nil, errors.New("not an IPv6 packet")
	}
	quote := f.l3
	if n := maxICMP6Error - 40 - 8; len(quote) > n {
		quote = quote[:n]
	}
	icmp := make([]byte, 8, 8+len(quote))
	icmp[0], icmp[1] = typ, code
	binary.BigEndian.PutUint32(icmp[4:], uint32(mtu))
	icmp = append(icmp, quote...)
	return append(f.ethHeader(f.dst, f.src, etherIPv6), ipPacket(f.ipSrc, f.ipDst, protoICMPv6, 255, icmp, 2)...), nil
}

// tcpReset is tcp_reset { }'s starting packet: the RST that answers the
// segment (ovn-sb(5)'s pseudocode), from its destination port to its
// source port, with no options or payload and TTL 255. With swap (reject
// { }) the Ethernet and IP addresses are exchanged too.
func tcpReset(f *frame, swap bool) ([]byte, error) {
	if f.proto != protoTCP || f.fragment || len(f.l4) < 20 {
		return nil, errors.New("not a TCP segment")
	}
	in := f.l4
	off := int(in[12]>>4) * 4
	if off < 20 || off > len(in) {
		return nil, errors.New("bad TCP header length")
	}
	seq := binary.BigEndian.Uint32(in[4:])
	ack := binary.BigEndian.Uint32(in[8:])
	flags := in[13]
	t := make([]byte, 20)
	binary.BigEndian.PutUint16(t[0:], binary.BigEndian.Uint16(in[2:]))
	binary.BigEndian.PutUint16(t[2:], binary.BigEndian.Uint16(in[0:]))
	t[12] = 5 << 4
	if flags&0x10 != 0 { // ACK
		binary.BigEndian.PutUint32(t[4:], ack)
		t[13] = 0x04
	} else {
		n := uint32(len(in) - off)
		if flags&0x02 != 0 { // SYN
			n++
		}
		if flags&0x01 != 0 { // FIN
			n++
		}
		binary.BigEndian.PutUint32(t[8:], seq+n)
		t[13] = 0x14 // RST, ACK
	}
	ethDst, ethSrc, src, dst := f.dst, f.src, f.ipSrc, f.ipDst
	if swap {
		ethDst, ethSrc, src, dst = f.src, f.dst, f.ipDst, f.ipSrc
	}
	return append(f.ethHeader(ethDst, ethSrc, etherType(src)), ownIPPacket(src, dst, protoTCP, t, 16)...), nil
}

// ownTTL is the TTL (hop limit) of the TCP resets and SCTP aborts
// pinctrl builds, as ovn-controller's (TestPinctrlWireDifferential).
const ownTTL = 63

// ownIPPacket is ipPacket with ownTTL and, for IPv4, DF set, as
// ovn-controller sends its resets and aborts.
func ownIPPacket(src, dst netip.Addr, proto uint8, payload []byte, csumOff int) []byte {
	p := ipPacket(src, dst, proto, ownTTL, payload, csumOff)
	if src.Is4() {
		setDF(p)
	}
	return p
}

func etherType(a netip.Addr) uint16 {
	if a.Is4() {
		return etherIPv4
	}
	return etherIPv6
}

// SCTP chunk types and the ABORT chunk's T bit (RFC 9260 3.2, 3.3.7).
const (
	sctpChunkInit  = 1
	sctpChunkAbort = 6
	sctpAbortT     = 0x01
)

// castagnoli is CRC32c's table: SCTP's checksum (RFC 9260 appendix A).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sctpAbort is sctp_abort { }'s starting packet: an ABORT answering the
// SCTP packet, ports exchanged, addresses left for the body to exchange
// (or exchanged, with swap: reject's).
// As RFC 9260 8.4 and 8.5.1 say for a packet of no association, the
// ABORT of an INIT carries the INIT's initiate tag and the T bit clear;
// of anything else, the packet's own verification tag with the T bit set.
func sctpAbort(f *frame, swap bool) ([]byte, error) {
	if f.proto != protoSCTP || f.fragment || len(f.l4) < 12 {
		return nil, errors.New("not an SCTP packet")
	}
	in := f.l4
	vtag, flags := binary.BigEndian.Uint32(in[4:]), byte(sctpAbortT)
	if len(in) >= 16 && in[12] == sctpChunkInit {
		if len(in) < 20 {
			return nil, errors.New("truncated SCTP INIT chunk")
		}
		vtag, flags = binary.BigEndian.Uint32(in[16:]), 0
	}
	s := make([]byte, 16)
	binary.BigEndian.PutUint16(s[0:], binary.BigEndian.Uint16(in[2:]))
	binary.BigEndian.PutUint16(s[2:], binary.BigEndian.Uint16(in[0:]))
	binary.BigEndian.PutUint32(s[4:], vtag)
	s[12], s[13] = sctpChunkAbort, flags
	binary.BigEndian.PutUint16(s[14:], 4)
	// The CRC32c goes on the wire least significant byte first.
	binary.LittleEndian.PutUint32(s[8:], crc32.Checksum(s, castagnoli))
	ethDst, ethSrc, src, dst := f.dst, f.src, f.ipSrc, f.ipDst
	if swap {
		ethDst, ethSrc, src, dst = f.src, f.dst, f.ipDst, f.ipSrc
	}
	return append(f.ethHeader(ethDst, ethSrc, etherType(src)), ownIPPacket(src, dst, protoSCTP, s, -1)...), nil
}

// reject is reject { }'s starting packet: a TCP RST for TCP, an SCTP
// ABORT for SCTP, otherwise ICMP port unreachable (ICMPv6 code 4),
// addresses already exchanged.
func reject(f *frame) ([]byte, error) {
	if f.etype != etherIPv4 && f.etype != etherIPv6 {
		return nil, errors.New("not an IP packet")
	}
	if f.proto == protoTCP && !f.fragment {
		return tcpReset(f, true)
	}
	if f.proto == protoSCTP && !f.fragment {
		return sctpAbort(f, true)
	}
	sw := *f
	sw.src, sw.dst = f.dst, f.src
	sw.ipSrc, sw.ipDst = f.ipDst, f.ipSrc
	if f.etype == etherIPv4 {
		return icmp4Error(&sw, 3, 3, 0)
	}
	return icmp6Error(&sw, 1, 4, 0)
}

var _ = net.HardwareAddr(nil)

// setDF sets an IPv4 header's don't-fragment flag, fixing its checksum.
func setDF(ip []byte) {
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], fold(onesSum(0, ip[:20])))
}
