package conntrack

import (
	"encoding/binary"
	"net/netip"
)

// IP protocol numbers, as IANA names them.
const (
	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
	protoSCTP   = 132
)

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
	tcpURG = 0x20
)

// key is the compact, comparable form of a Tuple kept in entries: IPv4
// addresses are stored IPv4-mapped and v6 tells the families apart.
type key struct {
	src, dst     [16]byte
	sport, dport uint16
	proto        uint8
	v6           bool
}

func (k key) reverse() key {
	r := key{src: k.dst, dst: k.src, sport: k.dport, dport: k.sport, proto: k.proto, v6: k.v6}
	if k.proto == protoICMP || k.proto == protoICMPv6 {
		r.sport = k.sport
		r.dport = uint16(icmpReplyType(k.proto, uint8(k.dport>>8)))<<8 | k.dport&0xff
	}
	return r
}

func (k key) srcAddr() netip.Addr { return keyAddr(k.src, k.v6) }
func (k key) dstAddr() netip.Addr { return keyAddr(k.dst, k.v6) }

func keyAddr(a [16]byte, v6 bool) netip.Addr {
	if v6 {
		return netip.AddrFrom16(a)
	}
	return netip.AddrFrom4([4]byte(a[12:16])) // keys hold IPv4 as IPv4-mapped
}

// In a key, ICMP's identifier is the source "port" and type<<8|code the
// destination one, so that a query and its reply are reverse keys.
func (k key) tuple() Tuple {
	t := Tuple{Src: k.srcAddr(), Dst: k.dstAddr(), SrcPort: k.sport, DstPort: k.dport, Proto: k.proto}
	if isICMP(k.proto) {
		t.SrcPort, t.DstPort, t.ICMPID = k.dport>>8, k.dport&0xff, k.sport
	}
	return t
}

func tupleKey(t Tuple) (key, bool) {
	if !t.Src.IsValid() || !t.Dst.IsValid() || t.Src.Is4() != t.Dst.Is4() {
		return key{}, false
	}
	k := key{src: t.Src.As16(), dst: t.Dst.As16(), sport: t.SrcPort, dport: t.DstPort, proto: t.Proto, v6: !t.Src.Is4()}
	if isICMP(t.Proto) {
		k.sport, k.dport = t.ICMPID, t.SrcPort<<8|t.DstPort&0xff
	}
	return k, true
}

// icmpReplyType maps an ICMP query type to its reply type (and back).
func icmpReplyType(proto, typ uint8) uint8 {
	if proto == protoICMP {
		switch typ {
		case 8:
			return 0
		case 0:
			return 8
		case 13, 15, 17:
			return typ + 1
		case 14, 16, 18:
			return typ - 1
		}
		return typ
	}
	switch typ {
	case 128:
		return 129
	case 129:
		return 128
	}
	return typ
}

// icmpQuery reports whether typ is an ICMP query that starts a connection
// (echo, timestamp, information, address mask request).
func icmpQuery(proto, typ uint8) bool {
	if proto == protoICMP {
		return typ == 8 || typ == 13 || typ == 15 || typ == 17
	}
	return typ == 128
}

func icmpQueryReply(proto, typ uint8) bool {
	if proto == protoICMP {
		return typ == 0 || typ == 14 || typ == 16 || typ == 18
	}
	return typ == 129
}

func icmpError(proto, typ uint8) bool {
	if proto == protoICMP {
		return typ == 3 || typ == 4 || typ == 5 || typ == 11 || typ == 12
	}
	return typ >= 1 && typ <= 4
}

// packet is what Process parsed out of one packet.
type packet struct {
	k      key
	l3off  int
	l4off  int // start of the transport header
	l4end  int // end of the IP payload
	v6     bool
	ipSrc  int // offsets of the addresses in the packet
	ipDst  int
	tcpSeq uint32
	tcpAck uint32
	tcpWin uint16
	flags  uint8
	wscale int8 // window scale option of a SYN; -1 if absent
	// ICMP errors: the embedded packet's tuple and offsets.
	icmpErr bool
	inner   *packet
}

// parse reads the L3 and L4 headers of pkt[l3off:]. inner is set for the
// packet quoted inside an ICMP error, which may be truncated after 8 bytes
// of transport header.
func parse(pkt []byte, l3off int, inner bool, p *packet) Reason {
	if l3off < 0 || l3off >= len(pkt) {
		return ReasonMalformed
	}
	p.l3off = l3off
	p.wscale = -1
	var r Reason
	switch pkt[l3off] >> 4 {
	case 4:
		r = parseIPv4(pkt, inner, p)
	case 6:
		r = parseIPv6(pkt, inner, p)
	default:
		return ReasonMalformed
	}
	if r != ReasonNone {
		return r
	}
	return parseL4(pkt, inner, p)
}

// parseIPv4 reads the IPv4 header at p.l3off: addresses, protocol and
// where the payload lies.
func parseIPv4(pkt []byte, inner bool, p *packet) Reason {
	l3off := p.l3off
	b := pkt[l3off:]
	if len(b) < 20 {
		return ReasonMalformed
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:]))
	if ihl < 20 || total < ihl || len(b) < ihl {
		return ReasonMalformed
	}
	if total > len(b) {
		if !inner {
			return ReasonMalformed
		}
		total = len(b)
	}
	frag := binary.BigEndian.Uint16(b[6:])
	if frag&0x3fff != 0 && !(inner && frag&0x1fff == 0) {
		return ReasonFragment
	}
	p.v6 = false
	p.k.v6 = false
	p.k.proto = b[9]
	p.k.src = netip.AddrFrom4([4]byte(b[12:16])).As16()
	p.k.dst = netip.AddrFrom4([4]byte(b[16:20])).As16()
	p.ipSrc, p.ipDst = l3off+12, l3off+16
	p.l4off = l3off + ihl
	p.l4end = l3off + total
	return ReasonNone
}

// parseIPv6 reads the IPv6 header at p.l3off and walks its extension
// headers to the transport protocol.
func parseIPv6(pkt []byte, inner bool, p *packet) Reason {
	l3off := p.l3off
	b := pkt[l3off:]
	if len(b) < 40 {
		return ReasonMalformed
	}
	total := 40 + int(binary.BigEndian.Uint16(b[4:]))
	if total > len(b) {
		if !inner {
			return ReasonMalformed
		}
		total = len(b)
	}
	p.v6 = true
	p.k.v6 = true
	p.k.src = [16]byte(b[8:24])
	p.k.dst = [16]byte(b[24:40])
	p.ipSrc, p.ipDst = l3off+8, l3off+24
	next := b[6]
	off := 40
ext:
	for {
		switch next {
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if off+8 > total {
				return ReasonMalformed
			}
			next = b[off]
			off += (int(b[off+1]) + 1) * 8
		case 51: // authentication header
			if off+8 > total {
				return ReasonMalformed
			}
			next = b[off]
			off += (int(b[off+1]) + 2) * 4
		case 44: // fragment
			if off+8 > total {
				return ReasonMalformed
			}
			fo := binary.BigEndian.Uint16(b[off+2:])
			// An atomic fragment (offset 0, no more) is whole; so is
			// the first fragment quoted in an ICMP error.
			if fo&0xfff9 != 0 && !(inner && fo&0xfff8 == 0) {
				return ReasonFragment
			}
			next = b[off]
			off += 8
		default:
			break ext
		}
	}
	if off > total {
		return ReasonMalformed
	}
	p.k.proto = next
	p.l4off = l3off + off
	p.l4end = l3off + total
	return ReasonNone
}

// parseL4 reads the transport header between p.l4off and p.l4end; for an
// ICMP error it parses the quoted packet into p.inner.
func parseL4(pkt []byte, inner bool, p *packet) Reason {
	l4 := pkt[p.l4off:p.l4end]
	switch p.k.proto {
	case protoTCP:
		if inner {
			if len(l4) < 8 {
				return ReasonMalformed
			}
			p.k.sport = binary.BigEndian.Uint16(l4)
			p.k.dport = binary.BigEndian.Uint16(l4[2:])
			p.tcpSeq = binary.BigEndian.Uint32(l4[4:])
			return ReasonNone
		}
		if len(l4) < 20 {
			return ReasonMalformed
		}
		doff := int(l4[12]>>4) * 4
		if doff < 20 || doff > len(l4) {
			return ReasonMalformed
		}
		p.k.sport = binary.BigEndian.Uint16(l4)
		p.k.dport = binary.BigEndian.Uint16(l4[2:])
		p.tcpSeq = binary.BigEndian.Uint32(l4[4:])
		p.tcpAck = binary.BigEndian.Uint32(l4[8:])
		p.flags = l4[13]
		p.tcpWin = binary.BigEndian.Uint16(l4[14:])
		if p.flags&tcpSYN != 0 {
			p.wscale = tcpWindowScale(l4[20:doff])
		}
		if p.k.sport == 0 || p.k.dport == 0 {
			return ReasonMalformed
		}
	case protoUDP, protoSCTP:
		if len(l4) < 8 {
			return ReasonMalformed
		}
		p.k.sport = binary.BigEndian.Uint16(l4)
		p.k.dport = binary.BigEndian.Uint16(l4[2:])
	case protoICMP, protoICMPv6:
		if (p.k.proto == protoICMP) == p.v6 {
			return ReasonMalformed
		}
		if len(l4) < 8 {
			return ReasonMalformed
		}
		typ, code := l4[0], l4[1]
		switch {
		case icmpQuery(p.k.proto, typ), icmpQueryReply(p.k.proto, typ):
			p.k.sport = binary.BigEndian.Uint16(l4[4:])
			p.k.dport = uint16(typ)<<8 | uint16(code)
		case icmpError(p.k.proto, typ) && !inner:
			p.icmpErr = true
			in := new(packet)
			if r := parse(pkt[:p.l4end], p.l4off+8, true, in); r != ReasonNone {
				return r
			}
			if in.v6 != p.v6 || in.icmpErr {
				return ReasonMalformed
			}
			p.inner = in
		default:
			return ReasonUnsupported
		}
	}
	return ReasonNone
}

// tcpWindowScale returns the window-scale option in opts, or -1.
func tcpWindowScale(opts []byte) int8 {
	for len(opts) > 0 {
		switch opts[0] {
		case 0: // end of options
			return -1
		case 1: // no-op
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || int(opts[1]) < 2 || int(opts[1]) > len(opts) {
			return -1
		}
		if opts[0] == 3 && opts[1] == 3 {
			return int8(min(opts[2], 14))
		}
		opts = opts[opts[1]:]
	}
	return -1
}
