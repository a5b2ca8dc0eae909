package conntrack

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// spec describes a test packet; build turns it into bytes with correct
// checksums.
type spec struct {
	src, dst     string
	proto        uint8
	sport, dport uint16
	seq, ack     uint32
	flags        uint8
	win          uint16
	wscale       int // -1 or 0: no option; n>0: option with shift n-1
	payload      int
	icmpType     uint8
	icmpCode     uint8
	icmpID       uint16
	quote        []byte // ICMP error: the quoted packet
}

func build(s spec) []byte {
	src, dst := netip.MustParseAddr(s.src), netip.MustParseAddr(s.dst)
	var l4 []byte
	switch s.proto {
	case protoTCP:
		opts := 0
		if s.wscale > 0 {
			opts = 4
		}
		l4 = make([]byte, 20+opts+s.payload)
		binary.BigEndian.PutUint16(l4, s.sport)
		binary.BigEndian.PutUint16(l4[2:], s.dport)
		binary.BigEndian.PutUint32(l4[4:], s.seq)
		binary.BigEndian.PutUint32(l4[8:], s.ack)
		l4[12] = byte((20 + opts) / 4 << 4)
		l4[13] = s.flags
		win := s.win
		if win == 0 {
			win = 65535
		}
		binary.BigEndian.PutUint16(l4[14:], win)
		if opts > 0 {
			copy(l4[20:], []byte{1, 3, 3, byte(s.wscale - 1)})
		}
	case protoUDP, protoSCTP:
		l4 = make([]byte, 8+s.payload)
		binary.BigEndian.PutUint16(l4, s.sport)
		binary.BigEndian.PutUint16(l4[2:], s.dport)
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
	case protoICMP, protoICMPv6:
		l4 = make([]byte, 8+s.payload+len(s.quote))
		l4[0], l4[1] = s.icmpType, s.icmpCode
		binary.BigEndian.PutUint16(l4[4:], s.icmpID)
		copy(l4[8:], s.quote)
	default:
		l4 = make([]byte, s.payload)
	}
	var pkt []byte
	if src.Is4() {
		pkt = make([]byte, 20+len(l4))
		pkt[0] = 0x45
		binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
		pkt[8] = 64
		pkt[9] = s.proto
		a, b := src.As4(), dst.As4()
		copy(pkt[12:], a[:])
		copy(pkt[16:], b[:])
		binary.BigEndian.PutUint16(pkt[10:], ^fold(sumBytes(pkt[:20])))
		copy(pkt[20:], l4)
	} else {
		pkt = make([]byte, 40+len(l4))
		pkt[0] = 0x60
		binary.BigEndian.PutUint16(pkt[4:], uint16(len(l4)))
		pkt[6] = s.proto
		pkt[7] = 64
		a, b := src.As16(), dst.As16()
		copy(pkt[8:], a[:])
		copy(pkt[24:], b[:])
		copy(pkt[40:], l4)
	}
	setL4Checksum(pkt)
	return pkt
}

func l4Layout(pkt []byte) (l4 []byte, srcA, dstA []byte, proto uint8) {
	if pkt[0]>>4 == 4 {
		ihl := int(pkt[0]&15) * 4
		return pkt[ihl:binary.BigEndian.Uint16(pkt[2:])], pkt[12:16], pkt[16:20], pkt[9]
	}
	return pkt[40:], pkt[8:24], pkt[24:40], pkt[6]
}

func csumOffset(proto uint8) int {
	switch proto {
	case protoTCP:
		return 16
	case protoUDP:
		return 6
	case protoICMP, protoICMPv6:
		return 2
	}
	return -1
}

func l4Sum(pkt []byte) uint16 {
	l4, a, b, proto := l4Layout(pkt)
	var s uint32
	if proto != protoICMP {
		s = pseudoSum(a, b, uint32(len(l4)), proto)
	}
	return ^fold(s + sumBytes(l4))
}

func setL4Checksum(pkt []byte) {
	l4, _, _, proto := l4Layout(pkt)
	off := csumOffset(proto)
	if off < 0 {
		return
	}
	l4[off], l4[off+1] = 0, 0
	binary.BigEndian.PutUint16(l4[off:], l4Sum(pkt))
}

// checkChecksums fails the test if an IP or transport checksum is wrong.
func checkChecksums(t *testing.T, pkt []byte) {
	t.Helper()
	if pkt[0]>>4 == 4 && fold(sumBytes(pkt[:int(pkt[0]&15)*4])) != 0xffff {
		t.Errorf("bad IPv4 header checksum in %x", pkt)
	}
	_, _, _, proto := l4Layout(pkt)
	if csumOffset(proto) >= 0 && l4Sum(pkt) != 0 {
		t.Errorf("bad L4 checksum (proto %d) in %x", proto, pkt)
	}
}

func addrs(pkt []byte) (src, dst netip.Addr, sport, dport uint16) {
	l4, a, b, proto := l4Layout(pkt)
	s, _ := netip.AddrFromSlice(a)
	d, _ := netip.AddrFromSlice(b)
	if hasPorts(proto) {
		sport, dport = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
	}
	return s, d, sport, dport
}
