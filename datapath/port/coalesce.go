package port

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// Coalescing received TCP segments
//
// A tunnel port receives a TCP stream as a run of datagrams, one segment
// of at most the sender's MSS each. Handed to the switch one by one, each
// costs a lookup, the actions and a send; handed to the VM one by one,
// each costs its stack a receive. The tunnel port therefore joins the
// consecutive segments of one flow into one GSO frame, as GRO does in the
// kernel, which a virtio-net header carries to the VM whole (and which
// Segment splits again for a port without offloads): the frame keeps the
// segments' size as its GSOSize, so splitting it gives back exactly the
// segments that were joined. A segment joins the frame before it only if
// splitting could have made it: the same headers but for the IP length,
// ID and checksum and the TCP sequence number, flags and checksum; the
// next sequence number and the next IPv4 ID; a size equal to the first
// one's (the last may be shorter); no SYN, RST or URG, no CWR but on the
// first, and nothing after a PSH or FIN. Every joined segment's checksum
// is verified first: the frame goes on with a partial checksum, which
// nobody checks again.

// errNotTCPSegment says a frame is not one the coalescer joins.
var errNotTCPSegment = errors.New("not a plain TCP segment")

// tcpSeg is the layout of a TCP segment in an Ethernet frame, as
// parseTCPSeg checked it.
type tcpSeg struct {
	l3, l4  int // where the IP and TCP headers start
	hdrLen  int // all headers, up to the payload
	v4      bool
	seq     uint32
	flags   byte
	ipID    uint16
	payload int // payload bytes
}

// parseTCPSeg parses an untagged Ethernet frame carrying one whole TCP
// segment in IPv4 without options or fragmentation (and with a right
// header checksum), or in IPv6 without extension headers, whose IP length
// accounts for the frame exactly (no padding). Refusals are all
// errNotTCPSegment, unwrapped: the receive path must not allocate.
func parseTCPSeg(f []byte) (tcpSeg, error) {
	if len(f) < 14+20+20 {
		return tcpSeg{}, errNotTCPSegment
	}
	s := tcpSeg{l3: 14}
	switch binary.BigEndian.Uint16(f[12:]) {
	case etherTypeIPv4:
		ip := f[14:]
		if ip[0] != 0x45 || ip[9] != protoTCP || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
			return tcpSeg{}, errNotTCPSegment
		}
		if tl := int(binary.BigEndian.Uint16(ip[2:])); 14+tl != len(f) {
			return tcpSeg{}, errNotTCPSegment
		}
		if Checksum(ip[:20], 0) != 0xffff {
			return tcpSeg{}, errNotTCPSegment
		}
		s.v4, s.l4, s.ipID = true, 34, binary.BigEndian.Uint16(ip[4:])
	case etherTypeIPv6:
		if len(f) < 14+40+20 {
			return tcpSeg{}, errNotTCPSegment
		}
		ip := f[14:]
		if ip[0]>>4 != 6 || ip[6] != protoTCP {
			return tcpSeg{}, errNotTCPSegment
		}
		if pl := int(binary.BigEndian.Uint16(ip[4:])); 14+40+pl != len(f) {
			return tcpSeg{}, errNotTCPSegment
		}
		s.l4 = 54
	default:
		return tcpSeg{}, errNotTCPSegment
	}
	tcp := f[s.l4:]
	doff := int(tcp[12]>>4) * 4
	if doff < 20 || s.l4+doff > len(f) {
		return tcpSeg{}, errNotTCPSegment
	}
	s.hdrLen = s.l4 + doff
	s.seq = binary.BigEndian.Uint32(tcp[4:])
	s.flags = tcp[13]
	s.payload = len(f) - s.hdrLen
	return s, nil
}

// checksumOK reports whether the segment's TCP checksum is right.
func (s *tcpSeg) checksumOK(f []byte) bool {
	return Checksum(f[s.l4:], pseudoHeaderSum(f, s.l3, len(f)-s.l4, s.v4, protoTCP)) == 0xffff
}

// sameHeaders reports whether frames a and b, both of layout s, have the
// same headers but for the fields splitting changes: IP length, ID and
// checksum; TCP sequence number, flags and checksum.
func (s *tcpSeg) sameHeaders(a, b []byte) bool {
	if len(a) < s.hdrLen || len(b) < s.hdrLen {
		return false
	}
	l3, l4 := s.l3, s.l4
	var ipSame bool
	if s.v4 {
		// version..TOS; flags..protocol; addresses
		ipSame = bytes.Equal(a[l3:l3+2], b[l3:l3+2]) && bytes.Equal(a[l3+6:l3+10], b[l3+6:l3+10]) &&
			bytes.Equal(a[l3+12:l4], b[l3+12:l4])
	} else {
		// version, class, label; next header, hop limit, addresses
		ipSame = bytes.Equal(a[l3:l3+4], b[l3:l3+4]) && bytes.Equal(a[l3+6:l4], b[l3+6:l4])
	}
	return ipSame && bytes.Equal(a[:l3], b[:l3]) &&
		bytes.Equal(a[l4:l4+4], b[l4:l4+4]) && // ports
		bytes.Equal(a[l4+8:l4+13], b[l4+8:l4+13]) && // ack, data offset
		bytes.Equal(a[l4+14:l4+16], b[l4+14:l4+16]) && // window
		bytes.Equal(a[l4+18:s.hdrLen], b[l4+18:s.hdrLen]) // urgent pointer, options
}

// maxCoalesced bounds a joined frame's IP packet: its length field has 16
// bits.
const maxCoalesced = 65535

// tcpCoalescer joins consecutive segments of one TCP flow into the frame
// of its open packet. It does no I/O: the tunnel port feeds it the inner
// frames it receives, in order.
type tcpCoalescer struct {
	p       *Packet // the open frame; nil if none
	first   tcpSeg  // its first segment's layout
	ok      bool    // the open frame may take more segments
	checked bool    // the first segment's checksum was verified
	segs    int
	next    uint32 // sequence number the next segment must have
	last    byte   // flags of the last segment joined
}

// start opens p, which holds one received frame, for the segments that
// follow it. A frame that is not a TCP segment with payload, or that
// nothing may follow, is left as it is and closes nothing more.
func (c *tcpCoalescer) start(p *Packet) {
	c.p, c.ok, c.checked, c.segs = p, false, false, 1
	s, err := parseTCPSeg(p.Data)
	if err != nil || s.payload == 0 || p.Offload.NeedsCsum || p.Offload.IsGSO() ||
		s.flags&(tcpFlagSYN|tcpFlagRST|tcpFlagURG|tcpFlagPSH|tcpFlagFIN) != 0 {
		return
	}
	c.first, c.ok = s, true
	c.next = s.seq + uint32(s.payload)
	c.last = s.flags
}

// add appends frame's payload to the open frame if frame is the segment
// that continues it, and reports whether it did. The caller has checked
// that both came through the same tunnel.
func (c *tcpCoalescer) add(f []byte) bool {
	if c.p == nil || !c.ok {
		return false
	}
	s, err := parseTCPSeg(f)
	first := &c.first
	d := c.p.Data
	switch {
	case err != nil, s.v4 != first.v4, s.hdrLen != first.hdrLen,
		s.payload == 0, s.payload > first.payload, s.seq != c.next,
		s.flags&(tcpFlagSYN|tcpFlagRST|tcpFlagURG|tcpFlagCWR) != 0,
		(s.flags^first.flags)&^(tcpFlagCWR|tcpFlagPSH|tcpFlagFIN) != 0,
		s.v4 && s.ipID != first.ipID+uint16(c.segs),
		len(d)-first.l3+s.payload > maxCoalesced,
		c.p.off+len(d)+s.payload > len(c.p.buf),
		!first.sameHeaders(d, f):
		return false
	}
	if !s.checksumOK(f) {
		return false
	}
	if !c.checked {
		if !first.checksumOK(d) {
			c.ok = false
			return false
		}
		c.checked = true
	}
	c.p.Data = d[:len(d)+s.payload]
	copy(c.p.Data[len(d):], f[s.hdrLen:])
	c.segs++
	c.next += uint32(s.payload)
	c.last = s.flags
	if s.payload < first.payload || s.flags&(tcpFlagPSH|tcpFlagFIN) != 0 {
		c.ok = false
	}
	return true
}

// finish completes the open frame, if it joined segments, and closes it:
// the IP length (and IPv4 checksum) cover the whole, the flags are the
// first segment's with the last one's PSH and FIN, the TCP checksum is
// left partial and the offload says how to split the frame again.
func (c *tcpCoalescer) finish() {
	p := c.p
	c.p = nil
	if p == nil || c.segs < 2 {
		return
	}
	s, d := &c.first, p.Data
	l3, l4 := s.l3, s.l4
	gso := GSOTCPv6
	if s.v4 {
		gso = GSOTCPv4
		binary.BigEndian.PutUint16(d[l3+2:], uint16(len(d)-l3))
		d[l3+10], d[l3+11] = 0, 0
		binary.BigEndian.PutUint16(d[l3+10:], ^Checksum(d[l3:l4], 0))
	} else {
		binary.BigEndian.PutUint16(d[l3+4:], uint16(len(d)-l4))
	}
	if s.flags&tcpFlagCWR != 0 {
		gso |= GSOECN
	}
	d[l4+13] = s.flags&^(tcpFlagPSH|tcpFlagFIN) | c.last&(tcpFlagPSH|tcpFlagFIN)
	binary.BigEndian.PutUint16(d[l4+16:], fold(pseudoHeaderSum(d, l3, len(d)-l4, s.v4, protoTCP)))
	p.Offload = Offload{NeedsCsum: true, CsumStart: uint16(l4), CsumOffset: 16,
		GSOType: gso, HdrLen: uint16(s.hdrLen), GSOSize: uint16(s.payload)}
}
