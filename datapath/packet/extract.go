package packet

import (
	"encoding/binary"

	"github.com/govn/govn/datapath/flow"
)

// EtherTypes and IP protocol numbers, named as the IANA registries name them.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeRARP = 0x8035
	EtherTypeVLAN = 0x8100 // 802.1Q
	EtherTypeQinQ = 0x88a8 // 802.1ad
	EtherTypeIPv6 = 0x86dd
	// EtherTypeNone is the eth_type given to 802.2 (length-field) frames,
	// as OVS does.
	EtherTypeNone = 0x05ff
	// EtherTypeTEB is Transparent Ethernet Bridging, Geneve's inner type.
	EtherTypeTEB = 0x6558

	ProtoICMP     = 1
	ProtoIGMP     = 2
	ProtoTCP      = 6
	ProtoUDP      = 17
	ProtoIPv6Hop  = 0
	ProtoRouting  = 43
	ProtoFragment = 44
	ProtoESP      = 50
	ProtoAH       = 51
	ProtoICMPv6   = 58
	ProtoNoNext   = 59
	ProtoDstOpts  = 60
	ProtoSCTP     = 132
)

// VLANPresent is the bit of vlan_tci that says a VLAN header is present
// (the 802.1Q CFI/DEI bit, which OVS repurposes the same way).
const VLANPresent = 0x1000

// Values of nw_frag.
const (
	FragAny   = 1 // the packet is a fragment
	FragLater = 2 // the packet is a fragment with a nonzero offset
)

// ICMPv6 types of neighbor discovery and multicast listener discovery.
const (
	ICMPv6MLDQuery    = 130
	ICMPv6MLDReport   = 131
	ICMPv6MLDDone     = 132
	ICMPv6NS          = 135
	ICMPv6NA          = 136
	ICMPv6MLDv2Report = 143
)

// TCP flag bits as in tcp_flags.
const (
	TCPFin = 0x001
	TCPSyn = 0x002
	TCPRst = 0x004
	TCPPsh = 0x008
	TCPAck = 0x010
	TCPUrg = 0x020
)

// Offsets locates the headers Extract found; 0 means absent (no header
// starts at byte 0 except Ethernet).
type Offsets struct {
	L3 uint16 // IPv4/IPv6/ARP header
	L4 uint16 // TCP/UDP/SCTP/ICMP/IGMP header (0 for later fragments)
}

// The word indexes Extract writes; they mirror flow's layout, which
// TestExtractLayout cross-checks against the Field table.
const (
	wEthSrc    = 24
	wEthDst    = 25
	wVLANInner = 26
	wNWAddr    = 27
	wIPv6Src   = 28
	wIPv6Dst   = 30
	wNWMisc    = 32
	wARPSHA    = 33
	wARPTHA    = 34
	wTP        = 35
	wNDTarget  = 36
	wNDSLL     = 38
	wNDTLL     = 39
	firstWord  = wEthSrc
)

// Extract parses the Ethernet frame b into the packet fields of k (stages
// L2, L3 and L4), zeroing those fields first, and returns where the L3 and
// L4 headers are. It leaves k's metadata words alone. It does not allocate.
func Extract(b []byte, k *flow.Key) Offsets {
	clear(k.W[firstWord:])
	var off Offsets
	if len(b) < 14 {
		k.W[wVLANInner] = uint64(len(b)) << 32
		return off
	}
	dst := binary.BigEndian.Uint64(b[0:8]) >> 16
	src := binary.BigEndian.Uint64(b[4:12]) & (1<<48 - 1)
	typ := uint64(binary.BigEndian.Uint16(b[12:14]))
	p := 14
	var tci, tci2 uint64
	if typ == EtherTypeVLAN || typ == EtherTypeQinQ {
		if len(b) < p+4 {
			k.W[wEthSrc] = src<<16 | typ
			k.W[wEthDst] = dst << 16
			k.W[wVLANInner] = uint64(len(b)) << 32
			return off
		}
		tci = uint64(binary.BigEndian.Uint16(b[p:])) | VLANPresent
		typ = uint64(binary.BigEndian.Uint16(b[p+2:]))
		p += 4
		if typ == EtherTypeVLAN || typ == EtherTypeQinQ {
			if len(b) < p+4 {
				k.W[wEthSrc] = src<<16 | typ
				k.W[wEthDst] = dst<<16 | tci
				k.W[wVLANInner] = uint64(len(b)) << 32
				return off
			}
			tci2 = uint64(binary.BigEndian.Uint16(b[p:])) | VLANPresent
			typ = uint64(binary.BigEndian.Uint16(b[p+2:]))
			p += 4
		}
	}
	if typ < 0x600 {
		typ = EtherTypeNone
	}
	k.W[wEthSrc] = src<<16 | typ
	k.W[wEthDst] = dst<<16 | tci
	k.W[wVLANInner] = uint64(len(b))<<32 | tci2 // pkt_len shares the inner VLAN's word
	switch typ {
	case EtherTypeIPv4:
		return extractIPv4(b, p, k)
	case EtherTypeIPv6:
		return extractIPv6(b, p, k)
	case EtherTypeARP, EtherTypeRARP:
		extractARP(b[p:], k)
		off.L3 = uint16(p)
	}
	return off
}

func extractIPv4(b []byte, p int, k *flow.Key) Offsets {
	var off Offsets
	h := b[p:]
	if len(h) < 20 || h[0]>>4 != 4 {
		return off
	}
	ihl := int(h[0]&0xf) * 4
	tot := int(binary.BigEndian.Uint16(h[2:4]))
	if ihl < 20 || len(h) < ihl || tot < ihl || len(h) < tot {
		return off
	}
	off.L3 = uint16(p)
	k.W[wNWAddr] = binary.BigEndian.Uint64(h[12:20])
	proto := uint64(h[9])
	tos := uint64(h[1])
	fragWord := binary.BigEndian.Uint16(h[6:8])
	var frag uint64
	if fragWord&0x3fff != 0 { // MF or an offset
		frag = FragAny
		if fragWord&0x1fff != 0 {
			frag |= FragLater
		}
	}
	k.W[wNWMisc] = proto<<56 | (tos&0xfc)<<48 | (tos&3)<<40 | uint64(h[8])<<32
	k.W[wARPTHA] = frag << 8
	if frag&FragLater != 0 {
		return off
	}
	l4 := p + ihl
	extractL4(h[ihl:tot], uint8(proto), false, k)
	off.L4 = uint16(l4)
	return off
}

func extractIPv6(b []byte, p int, k *flow.Key) Offsets {
	var off Offsets
	h := b[p:]
	if len(h) < 40 || h[0]>>4 != 6 {
		return off
	}
	plen := int(binary.BigEndian.Uint16(h[4:6]))
	if len(h) < 40+plen {
		return off
	}
	off.L3 = uint16(p)
	vtf := binary.BigEndian.Uint32(h[0:4])
	tc := uint64(vtf>>20) & 0xff
	k.W[wIPv6Src] = binary.BigEndian.Uint64(h[8:16])
	k.W[wIPv6Src+1] = binary.BigEndian.Uint64(h[16:24])
	k.W[wIPv6Dst] = binary.BigEndian.Uint64(h[24:32])
	k.W[wIPv6Dst+1] = binary.BigEndian.Uint64(h[32:40])
	next := h[6]
	ttl := uint64(h[7])
	body := h[40 : 40+plen]
	q := 0
	var frag uint64
	// Walk the extension headers to the upper-layer protocol.
	for {
		switch next {
		case ProtoIPv6Hop, ProtoRouting, ProtoDstOpts, ProtoAH:
			if len(body) < q+8 {
				goto done
			}
			n := (int(body[q+1]) + 1) * 8
			if next == ProtoAH {
				n = (int(body[q+1]) + 2) * 4
			}
			if len(body) < q+n {
				goto done
			}
			next = body[q]
			q += n
			continue
		case ProtoFragment:
			if len(body) < q+8 {
				goto done
			}
			fo := binary.BigEndian.Uint16(body[q+2 : q+4])
			frag = FragAny
			if fo&0xfff8 != 0 {
				// A later fragment has no upper-layer header; like OVS,
				// report the fragment header itself as nw_proto.
				frag |= FragLater
				goto done
			}
			next = body[q]
			q += 8
			continue
		}
		break
	}
	k.W[wNWMisc] = uint64(next)<<56 | (tc&0xfc)<<48 | (tc&3)<<40 | ttl<<32 | uint64(vtf&0xfffff)
	k.W[wARPTHA] = frag << 8
	extractL4(body[q:], next, true, k)
	if l4 := p + 40 + q; l4 <= 0xffff { // absurd extension headers aside
		off.L4 = uint16(l4)
	}
	return off
done:
	// Truncated extension headers, or a later fragment: L3 only.
	k.W[wNWMisc] = uint64(next)<<56 | (tc&0xfc)<<48 | (tc&3)<<40 | ttl<<32 | uint64(vtf&0xfffff)
	k.W[wARPTHA] = frag << 8
	return off
}

func extractARP(h []byte, k *flow.Key) {
	// Ethernet/IPv4 ARP only: htype 1, ptype 0x0800, hlen 6, plen 4.
	if len(h) < 28 || binary.BigEndian.Uint32(h[0:4]) != 0x00010800 || h[4] != 6 || h[5] != 4 {
		return
	}
	op := uint64(binary.BigEndian.Uint16(h[6:8]))
	sha := binary.BigEndian.Uint64(h[6:14]) & (1<<48 - 1)
	spa := uint64(binary.BigEndian.Uint32(h[14:18]))
	tha := binary.BigEndian.Uint64(h[16:24]) & (1<<48 - 1)
	tpa := uint64(binary.BigEndian.Uint32(h[24:28]))
	k.W[wARPSHA] = sha<<16 | op
	k.W[wARPTHA] = tha << 16
	k.W[wNWAddr] = spa<<32 | tpa
	// OVS also puts the low byte of the opcode in nw_proto.
	k.W[wNWMisc] = (op & 0xff) << 56
}

// extractL4 parses the upper-layer header h of protocol proto.
func extractL4(h []byte, proto uint8, v6 bool, k *flow.Key) {
	switch proto {
	case ProtoTCP:
		if len(h) >= 20 {
			k.W[wTP] = uint64(binary.BigEndian.Uint32(h[0:4])) << 32
			k.W[wNDSLL] = uint64(binary.BigEndian.Uint16(h[12:14]) & 0x0fff)
		}
	case ProtoUDP:
		if len(h) >= 8 {
			k.W[wTP] = uint64(binary.BigEndian.Uint32(h[0:4])) << 32
		}
	case ProtoSCTP:
		if len(h) >= 12 {
			k.W[wTP] = uint64(binary.BigEndian.Uint32(h[0:4])) << 32
		}
	case ProtoICMP:
		if !v6 && len(h) >= 4 {
			k.W[wTP] = uint64(h[0])<<48 | uint64(h[1])<<32
		}
	case ProtoIGMP:
		if !v6 && len(h) >= 8 {
			k.W[wTP] = uint64(h[0])<<48 | uint64(h[1])<<32 | uint64(binary.BigEndian.Uint32(h[4:8]))
		}
	case ProtoICMPv6:
		if v6 && len(h) >= 4 {
			extractICMPv6(h, k)
		}
	}
}

func extractICMPv6(h []byte, k *flow.Key) {
	typ := h[0]
	k.W[wTP] = uint64(typ)<<48 | uint64(h[1])<<32
	switch typ {
	case ICMPv6MLDQuery, ICMPv6MLDReport, ICMPv6MLDDone:
		if len(h) >= 24 {
			k.W[wNDTarget] = binary.BigEndian.Uint64(h[8:16])
			k.W[wNDTarget+1] = binary.BigEndian.Uint64(h[16:24])
		}
	case ICMPv6NS, ICMPv6NA:
		if len(h) < 24 || h[1] != 0 {
			return
		}
		k.W[wNDTarget] = binary.BigEndian.Uint64(h[8:16])
		k.W[wNDTarget+1] = binary.BigEndian.Uint64(h[16:24])
		var sll, tll uint64
		for o := h[24:]; len(o) >= 8; {
			n := int(o[1]) * 8
			if n == 0 || len(o) < n {
				// A malformed option invalidates all ND fields.
				k.W[wNDTarget], k.W[wNDTarget+1] = 0, 0
				return
			}
			switch {
			case o[0] == 1 && n == 8 && typ == ICMPv6NS && sll == 0:
				sll = binary.BigEndian.Uint64(o[0:8]) & (1<<48 - 1)
			case o[0] == 2 && n == 8 && typ == ICMPv6NA && tll == 0:
				tll = binary.BigEndian.Uint64(o[0:8]) & (1<<48 - 1)
			}
			o = o[n:]
		}
		k.W[wNDSLL] = sll << 16
		k.W[wNDTLL] = tll << 16
	}
}
