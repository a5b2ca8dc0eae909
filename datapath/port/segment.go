package port

import (
	"encoding/binary"
	"fmt"
)

const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100
	etherTypeQinQ = 0x88a8
	protoTCP      = 6
	protoUDP      = 17
	tcpFlagFIN    = 0x01
	tcpFlagSYN    = 0x02
	tcpFlagRST    = 0x04
	tcpFlagPSH    = 0x08
	tcpFlagACK    = 0x10
	tcpFlagURG    = 0x20
	tcpFlagCWR    = 0x80
)

// Segment splits a GSO frame (TCP over IPv4 or IPv6, or UDP with
// GSOUDPL4) into frames of at most GSOSize payload bytes each, with
// complete IP and L4 checksums, as a NIC or the kernel would, and calls
// emit with each one. The frame passed to emit lives in scratch (grown if
// too small) and is valid only during the call. A frame that is not GSO
// is passed to emit whole after FinishChecksum.
func (p *Packet) Segment(scratch []byte, emit func(frame []byte) error) error {
	if !p.Offload.IsGSO() {
		if err := p.FinishChecksum(); err != nil {
			return err
		}
		return emit(p.Data)
	}
	s, err := newSegmenter(p.Data, p.Offload)
	if err != nil {
		return err
	}
	if need := s.hdrLen + s.mss; len(scratch) < need {
		scratch = make([]byte, need)
	}
	for s.more() {
		if err := emit(s.next(scratch[:0])); err != nil {
			return err
		}
	}
	return nil
}

// segmenter walks the segments of a GSO frame: each next appends one
// segment, ready for the wire, to a buffer. Its fields are the frame's
// layout, checked once by newSegmenter.
type segmenter struct {
	d        []byte
	l3, l4   int // where the IP and L4 headers start
	ipHdrLen int
	hdrLen   int // all headers, up to the payload
	v4, udp  bool
	mss      int
	seq      uint32 // TCP: the first segment's sequence number
	flags    byte   // TCP: the frame's flags
	ipID     uint16 // IPv4: the first segment's identification
	off, i   int    // payload offset and index of the next segment
}

// newSegmenter checks that o describes d as a GSO frame this package can
// split: TCP over IPv4 or IPv6 (GSOTCPv4, GSOTCPv6) or UDP over either
// (GSOUDPL4), behind Ethernet and any VLAN tags, with the L4 header at
// o.CsumStart after the whole IP header.
func newSegmenter(d []byte, o Offload) (segmenter, error) {
	gso := o.GSOType &^ GSOECN
	if gso != GSOTCPv4 && gso != GSOTCPv6 && gso != GSOUDPL4 {
		return segmenter{}, fmt.Errorf("segment GSO type %d: only TCP and UDP (L4) are supported: %w", o.GSOType, ErrBadOffload)
	}
	s := segmenter{d: d, udp: gso == GSOUDPL4, mss: int(o.GSOSize), l4: int(o.CsumStart)}
	l3, ok := networkOffset(d)
	s.l3 = l3
	minL4 := 20
	if s.udp {
		minL4 = 8
	}
	if !ok || s.mss == 0 || s.l4 < l3+20 || s.l4+minL4 > len(d) {
		return segmenter{}, fmt.Errorf("segment a %d-byte frame with L4 at %d: %w", len(d), s.l4, ErrBadOffload)
	}
	ver := d[l3] >> 4
	switch {
	case gso == GSOTCPv4:
		s.v4 = true
		if ver != 4 {
			return segmenter{}, fmt.Errorf("segment: GSO type %d does not match IP version %d: %w", gso, ver, ErrBadOffload)
		}
	case gso == GSOTCPv6:
		if ver != 6 {
			return segmenter{}, fmt.Errorf("segment: GSO type %d does not match IP version %d: %w", gso, ver, ErrBadOffload)
		}
	default: // UDP: the IP header says which
		if ver != 4 && ver != 6 {
			return segmenter{}, fmt.Errorf("segment: IP version %d: %w", ver, ErrBadOffload)
		}
		s.v4 = ver == 4
	}
	// The L4 header must start after the whole IP header, which the
	// segments' length and checksum updates rewrite.
	s.ipHdrLen = 40
	if s.v4 {
		s.ipHdrLen = int(d[l3]&0x0f) * 4
	}
	if s.ipHdrLen < 20 || s.l4 < l3+s.ipHdrLen {
		return segmenter{}, fmt.Errorf("segment: L4 at %d inside the %d-byte IP header at %d: %w", s.l4, s.ipHdrLen, l3, ErrBadOffload)
	}
	if s.v4 {
		if proto := d[l3+9]; (s.udp && proto != protoUDP) || (!s.udp && proto != protoTCP) {
			return segmenter{}, fmt.Errorf("segment: IP protocol %d does not match GSO type %d: %w", proto, gso, ErrBadOffload)
		}
	}
	if s.udp {
		s.hdrLen = s.l4 + 8
	} else {
		s.hdrLen = s.l4 + int(d[s.l4+12]>>4)*4
		if s.hdrLen > len(d) || s.hdrLen < s.l4+20 {
			return segmenter{}, fmt.Errorf("segment: TCP header past the %d-byte frame: %w", len(d), ErrBadOffload)
		}
		s.seq = binary.BigEndian.Uint32(d[s.l4+4:])
		s.flags = d[s.l4+13]
	}
	if s.v4 {
		s.ipID = binary.BigEndian.Uint16(d[l3+4:])
	}
	return s, nil
}

// payload is the frame's payload, which the segments share out.
func (s *segmenter) payload() []byte { return s.d[s.hdrLen:] }

// more reports whether a segment is left; a frame without payload is one
// segment of headers.
func (s *segmenter) more() bool { return s.i == 0 || s.off < len(s.payload()) }

// count is the number of segments.
func (s *segmenter) count() int {
	n := len(s.payload())
	if n == 0 {
		return 1
	}
	return (n + s.mss - 1) / s.mss
}

// nextLen is the length of the next segment's frame.
func (s *segmenter) nextLen() int { return s.hdrLen + min(s.mss, len(s.payload())-s.off) }

// next appends the next segment to dst and returns the extended slice.
func (s *segmenter) next(dst []byte) []byte {
	payload := s.payload()
	n := min(s.mss, len(payload)-s.off)
	last := s.off+n >= len(payload)
	base := len(dst)
	dst = append(dst, s.d[:s.hdrLen]...)
	dst = append(dst, payload[s.off:s.off+n]...)
	f := dst[base:]
	l3, l4 := s.l3, s.l4
	if s.v4 {
		binary.BigEndian.PutUint16(f[l3+2:], uint16(len(f)-l3))
		binary.BigEndian.PutUint16(f[l3+4:], s.ipID+uint16(s.i))
		f[l3+10], f[l3+11] = 0, 0
		binary.BigEndian.PutUint16(f[l3+10:], ^Checksum(f[l3:l3+s.ipHdrLen], 0))
	} else {
		binary.BigEndian.PutUint16(f[l3+4:], uint16(len(f)-l3-40))
	}
	if s.udp {
		binary.BigEndian.PutUint16(f[l4+4:], uint16(len(f)-l4))
		f[l4+6], f[l4+7] = 0, 0
		sum := ^Checksum(f[l4:], pseudoHeaderSum(f, l3, len(f)-l4, s.v4, protoUDP))
		if sum == 0 {
			sum = 0xffff
		}
		binary.BigEndian.PutUint16(f[l4+6:], sum)
	} else {
		binary.BigEndian.PutUint32(f[l4+4:], s.seq+uint32(s.off))
		fl := s.flags
		if !last {
			fl &^= tcpFlagFIN | tcpFlagPSH
		}
		if s.i > 0 {
			fl &^= tcpFlagCWR
		}
		f[l4+13] = fl
		f[l4+16], f[l4+17] = 0, 0
		binary.BigEndian.PutUint16(f[l4+16:], ^Checksum(f[l4:], pseudoHeaderSum(f, l3, len(f)-l4, s.v4, protoTCP)))
	}
	s.off += n
	s.i++
	return dst
}

// pseudoHeaderSum is the pseudo-header sum of protocol proto for an L4
// segment of length l4len behind the IP header at l3, not folded.
func pseudoHeaderSum(f []byte, l3, l4len int, v4 bool, proto uint8) uint32 {
	var s uint32
	addrs := f[l3+12 : l3+20]
	if !v4 {
		addrs = f[l3+8 : l3+40]
	}
	for i := 0; i+1 < len(addrs); i += 2 {
		s += uint32(binary.BigEndian.Uint16(addrs[i:]))
	}
	return s + uint32(proto) + uint32(l4len)&0xffff + uint32(l4len)>>16
}

// fold folds a 32-bit one's complement sum into 16 bits.
func fold(s uint32) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// networkOffset returns where the IP header starts behind the Ethernet
// header and any VLAN tags.
func networkOffset(d []byte) (int, bool) {
	off := 12
	for off+2 <= len(d) {
		switch binary.BigEndian.Uint16(d[off:]) {
		case etherTypeVLAN, etherTypeQinQ:
			off += 4
		case etherTypeIPv4, etherTypeIPv6:
			return off + 2, off+2 < len(d)
		default:
			return 0, false
		}
	}
	return 0, false
}
