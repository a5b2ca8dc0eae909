package dp

import (
	"encoding/binary"
	"net/netip"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/port"
)

// setField runs a set-field datapath action: it changes the field in the
// key and, for header fields, in the frame, fixing every checksum that
// covers it. Writes to a header the frame does not have change only the
// key, as a set on an absent header does nothing in OVS.
func setField(p *port.Packet, k *flow.Key, a flow.DPSetField) {
	old := k.GetU128(a.Field)
	k.SetMasked(a.Field, a.Value, a.Mask)
	v := k.GetU128(a.Field)
	if v == old {
		return
	}
	d := p.Data
	if len(d) < 14 {
		return
	}
	// Fields at fixed places, or outside the frame, first: the header walk
	// is most of the cost of a rewrite, and OVN's pipelines set these on
	// every routed or tunnelled packet.
	switch a.Field {
	case flow.EthDst:
		putMAC(d[0:], v.Lo)
		return
	case flow.EthSrc:
		putMAC(d[6:], v.Lo)
		return
	case flow.TunID:
		p.Tunnel.ID = v.Lo
		return
	case flow.TunSrc:
		p.Tunnel.Src = ipv4Addr(v.Lo)
		return
	case flow.TunDst:
		p.Tunnel.Dst = ipv4Addr(v.Lo)
		return
	case flow.TunTOS:
		p.Tunnel.TOS = uint8(v.Lo)
		return
	case flow.TunTTL:
		p.Tunnel.TTL = uint8(v.Lo)
		return
	case flow.TunMetadata0:
		p.Tunnel.Options = packet.AppendOVNOption(p.Tunnel.Options[:0], uint32(v.Lo))
		return
	}
	h := findHeaders(d)
	partial := p.Offload.NeedsCsum
	switch a.Field {
	case flow.VLANTCI:
		// OVS's vlan_tci has the CFI bit set for "a tag is present".
		if h.vlan >= 0 {
			binary.BigEndian.PutUint16(d[h.vlan+2:], uint16(v.Lo)&^0x1000)
		}
	case flow.NWSrc, flow.NWDst, flow.ARPSPA, flow.ARPTPA: // arp_spa, arp_tpa share nw_src's, nw_dst's storage
		isSrc := a.Field == flow.NWSrc || a.Field == flow.ARPSPA
		switch {
		case h.ethType == etherTypeARP && h.l3 >= 0:
			off := h.l3 + 24
			if isSrc {
				off = h.l3 + 14
			}
			binary.BigEndian.PutUint32(d[off:], uint32(v.Lo))
		case h.ipv4:
			off := h.l3 + 16
			if isSrc {
				off = h.l3 + 12
			}
			set32(d, off, uint32(v.Lo), func(o, n uint16) {
				fixIPv4Header(d, h.l3, o, n)
				fixL4(d, h, partial, o, n)
			})
		}
	case flow.IPv6Src, flow.IPv6Dst:
		if h.l3 >= 0 && h.ethType == etherTypeIPv6 {
			off := h.l3 + 24
			if a.Field == flow.IPv6Src {
				off = h.l3 + 8
			}
			var b [16]byte
			binary.BigEndian.PutUint64(b[:], v.Hi)
			binary.BigEndian.PutUint64(b[8:], v.Lo)
			for i := 0; i < 16; i += 2 {
				o, n := binary.BigEndian.Uint16(d[off+i:]), binary.BigEndian.Uint16(b[i:])
				binary.BigEndian.PutUint16(d[off+i:], n)
				fixL4(d, h, partial, o, n)
			}
		}
	case flow.NWTOS, flow.NWECN:
		// nw_tos is the DSCP bits of the TOS / traffic class byte, nw_ecn
		// its low two bits.
		tos := uint8(k.Get(flow.NWTOS))&0xfc | uint8(k.Get(flow.NWECN))&0x03
		switch {
		case h.ipv4:
			o := binary.BigEndian.Uint16(d[h.l3:])
			d[h.l3+1] = tos
			fixIPv4Header(d, h.l3, o, binary.BigEndian.Uint16(d[h.l3:]))
		case h.l3 >= 0 && h.ethType == etherTypeIPv6:
			w := binary.BigEndian.Uint32(d[h.l3:])
			w = w&^0x0ff00000 | uint32(tos)<<20
			binary.BigEndian.PutUint32(d[h.l3:], w)
		}
	case flow.NWTTL:
		switch {
		case h.ipv4:
			o := binary.BigEndian.Uint16(d[h.l3+8:])
			d[h.l3+8] = uint8(v.Lo)
			fixIPv4Header(d, h.l3, o, binary.BigEndian.Uint16(d[h.l3+8:]))
		case h.l3 >= 0 && h.ethType == etherTypeIPv6:
			d[h.l3+7] = uint8(v.Lo)
		}
	case flow.TPSrc, flow.TPDst, flow.ICMPType, flow.ICMPCode: // icmp_type, icmp_code share tp_src's, tp_dst's storage
		if h.l4 < 0 || h.l4+l4Len(h.proto) > len(d) {
			return
		}
		switch h.proto {
		case protoTCP, protoUDP, protoSCTP:
			off := h.l4 + 2
			if a.Field == flow.TPSrc {
				off = h.l4
			}
			o := binary.BigEndian.Uint16(d[off:])
			binary.BigEndian.PutUint16(d[off:], uint16(v.Lo))
			// SCTP's CRC32c is left to the receiver. A partial checksum
			// holds only the pseudo-header sum, which has no ports: the
			// new port is summed when the checksum is finished.
			if h.proto != protoSCTP && !partial {
				fixL4(d, h, partial, o, uint16(v.Lo))
			}
		case protoICMP, protoICMPv6:
			o := binary.BigEndian.Uint16(d[h.l4:])
			if a.Field == flow.TPSrc || a.Field == flow.ICMPType {
				d[h.l4] = uint8(v.Lo)
			} else {
				d[h.l4+1] = uint8(v.Lo)
			}
			if !partial { // as for ports: type and code are not in a partial sum
				n := binary.BigEndian.Uint16(d[h.l4:])
				c := binary.BigEndian.Uint16(d[h.l4+2:])
				binary.BigEndian.PutUint16(d[h.l4+2:], csumUpdate16(c, o, n))
			}
		}
	case flow.NDTarget, flow.NDSLL, flow.NDTLL:
		setND(d, h, partial, a.Field, v)
	case flow.ARPSHA, flow.ARPTHA:
		if h.ethType == etherTypeARP && h.l3 >= 0 {
			off := h.l3 + 18
			if a.Field == flow.ARPSHA {
				off = h.l3 + 8
			}
			putMAC(d[off:], v.Lo)
		}
	case flow.ARPOp:
		if h.ethType == etherTypeARP && h.l3 >= 0 {
			binary.BigEndian.PutUint16(d[h.l3+6:], uint16(v.Lo))
		}
	}
}

func ipv4Addr(v uint64) netip.Addr {
	if v == 0 {
		return netip.Addr{}
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func putMAC(b []byte, v uint64) {
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

// set32 writes a 32-bit value at off and reports each changed 16-bit half
// to fix, for checksum updates.
func set32(d []byte, off int, v uint32, fix func(old, new uint16)) {
	for i, n := range [2]uint16{uint16(v >> 16), uint16(v)} {
		o := binary.BigEndian.Uint16(d[off+2*i:])
		binary.BigEndian.PutUint16(d[off+2*i:], n)
		if o != n {
			fix(o, n)
		}
	}
}

// fixIPv4Header updates the IPv4 header checksum for one changed word.
func fixIPv4Header(d []byte, l3 int, old, new uint16) {
	c := binary.BigEndian.Uint16(d[l3+10:])
	binary.BigEndian.PutUint16(d[l3+10:], csumUpdate16(c, old, new))
}

// setND rewrites the target or a link-layer address option of an IPv6
// neighbor solicitation or advertisement (the controller's nd_ns { } and
// nd_na { } set them); a message without the option is left alone.
func setND(d []byte, h headers, partial bool, f flow.Field, v flow.U128) {
	if h.l4 < 0 || h.proto != protoICMPv6 || h.l4+24 > len(d) || d[h.l4] != 135 && d[h.l4] != 136 {
		return
	}
	put := func(off int, b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			o := binary.BigEndian.Uint16(d[off+i:])
			n := binary.BigEndian.Uint16(b[i:])
			binary.BigEndian.PutUint16(d[off+i:], n)
			fixL4(d, h, partial, o, n)
		}
	}
	if f == flow.NDTarget {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:], v.Hi)
		binary.BigEndian.PutUint64(b[8:], v.Lo)
		put(h.l4+8, b[:])
		return
	}
	want := byte(1) // source link-layer address
	if f == flow.NDTLL {
		want = 2
	}
	for off := h.l4 + 24; off+8 <= len(d); {
		n := int(d[off+1]) * 8
		if n == 0 {
			return
		}
		if d[off] == want && n == 8 {
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], v.Lo<<16)
			put(off+2, b[:6])
			return
		}
		off += n
	}
}
