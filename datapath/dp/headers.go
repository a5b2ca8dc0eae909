package dp

import "encoding/binary"

// Ethernet, IP and transport numbers the executor needs to find and fix
// header fields in a frame.
const (
	etherTypeIPv4 = 0x0800
	etherTypeARP  = 0x0806
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100
	etherTypeQinQ = 0x88a8

	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoSCTP   = 132
	protoICMPv6 = 58
)

// headers are the offsets of a frame's headers, found by a quick walk that
// trusts nothing: an offset is -1 when the header is absent or truncated.
type headers struct {
	vlan    int    // first VLAN tag (TPID), or -1
	l3      int    // IP or ARP header
	l4      int    // TCP/UDP/SCTP/ICMP header, not for later fragments
	ethType uint16 // after any VLAN tags
	proto   uint8  // IP protocol at l4
	ipv4    bool
}

// findHeaders locates the headers of frame d.
func findHeaders(d []byte) headers {
	h := headers{vlan: -1, l3: -1, l4: -1}
	if len(d) < 14 {
		return h
	}
	off := 12
	for {
		if off+2 > len(d) {
			return h
		}
		t := binary.BigEndian.Uint16(d[off:])
		if t != etherTypeVLAN && t != etherTypeQinQ {
			h.ethType = t
			off += 2
			break
		}
		if off+4 > len(d) {
			return h // a truncated tag: no TCI to rewrite
		}
		if h.vlan < 0 {
			h.vlan = off
		}
		off += 4
	}
	switch h.ethType {
	case etherTypeARP:
		if off+28 <= len(d) {
			h.l3 = off
		}
	case etherTypeIPv4:
		if off+20 > len(d) || d[off]>>4 != 4 {
			return h
		}
		h.l3, h.ipv4 = off, true
		ihl := int(d[off]&0x0f) * 4
		fragOff := binary.BigEndian.Uint16(d[off+6:]) & 0x1fff
		if ihl >= 20 && off+ihl <= len(d) && fragOff == 0 {
			h.l4, h.proto = off+ihl, d[off+9]
		}
	case etherTypeIPv6:
		if off+40 > len(d) || d[off]>>4 != 6 {
			return h
		}
		h.l3 = off
		next, p := d[off+6], off+40
		for {
			switch next {
			case 0, 43, 60: // hop-by-hop, routing, destination options
				if p+8 > len(d) {
					return h
				}
				next, p = d[p], p+8+int(d[p+1])*8
				continue
			case 44: // fragment: only the first carries the L4 header
				if p+8 > len(d) || binary.BigEndian.Uint16(d[p+2:])&0xfff8 != 0 {
					return h
				}
				next, p = d[p], p+8
				continue
			}
			break
		}
		if p <= len(d) {
			h.l4, h.proto = p, next
		}
	}
	return h
}

// l4Len is the number of bytes the transport header needs to be present.
func l4Len(proto uint8) int {
	switch proto {
	case protoTCP:
		return 20
	case protoUDP, protoSCTP:
		return 8
	case protoICMP, protoICMPv6:
		return 4
	}
	return 0
}

// l4CsumOffset is the offset of the transport checksum within its header,
// or -1 if it has none that covers the pseudo-header.
func l4CsumOffset(proto uint8) int {
	switch proto {
	case protoTCP:
		return 16
	case protoUDP:
		return 6
	case protoICMPv6:
		return 2
	}
	return -1
}

// csumUpdate16 adjusts a complete Internet checksum for a 16-bit word of
// the covered data changing from old to new (RFC 1624, eqn. 3).
func csumUpdate16(csum, old, new uint16) uint16 {
	s := uint32(^csum) + uint32(^old) + uint32(new)
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return ^uint16(s)
}

// partialUpdate16 adjusts a partial checksum (a pseudo-header sum not yet
// complemented) for the same change.
func partialUpdate16(sum, old, new uint16) uint16 {
	return ^csumUpdate16(^sum, old, new)
}

// fixL4 updates the transport checksum at l4 of frame d for a 16-bit word
// of the pseudo-header or transport header changing from old to new.
func fixL4(d []byte, h headers, partial bool, old, new uint16) {
	off := l4CsumOffset(h.proto)
	if h.l4 < 0 || off < 0 || h.l4+off+2 > len(d) {
		return
	}
	c := binary.BigEndian.Uint16(d[h.l4+off:])
	if h.proto == protoUDP && c == 0 && !partial {
		return // no checksum in use
	}
	if partial {
		c = partialUpdate16(c, old, new)
	} else {
		c = csumUpdate16(c, old, new)
		if h.proto == protoUDP && c == 0 {
			c = 0xffff
		}
	}
	binary.BigEndian.PutUint16(d[h.l4+off:], c)
}
