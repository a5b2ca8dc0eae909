package trace

import (
	"encoding/binary"
	"fmt"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/port"
)

// BuildFrame returns an Ethernet frame whose parsed key agrees with k on
// every bit of given: the packet a microflow describes. Fields it cannot
// express (an IPv6 extension header, say) make it fail rather than trace
// another packet.
func BuildFrame(k *flow.Key, given *flow.Mask) ([]byte, error) {
	b := make([]byte, 0, 128)
	b = be48(b, k.Get(flow.EthDst))
	b = be48(b, k.Get(flow.EthSrc))
	if tci := k.Get(flow.VLANTCI); tci&packet.VLANPresent != 0 {
		b = binary.BigEndian.AppendUint16(b, etherVLAN)
		b = binary.BigEndian.AppendUint16(b, uint16(tci&^packet.VLANPresent))
	}
	et := uint16(k.Get(flow.EthType))
	b = binary.BigEndian.AppendUint16(b, et)
	l3 := len(b)
	switch et {
	case etherIPv4:
		b = appendIPv4(b, k)
	case etherIPv6:
		b = appendIPv6(b, k)
	case etherARP:
		b = binary.BigEndian.AppendUint16(b, 1)      // Ethernet
		b = binary.BigEndian.AppendUint16(b, 0x0800) // IPv4
		b = append(b, 6, 4)
		b = binary.BigEndian.AppendUint16(b, uint16(k.Get(flow.ARPOp)))
		b = be48(b, k.Get(flow.ARPSHA))
		b = binary.BigEndian.AppendUint32(b, uint32(k.Get(flow.NWSrc)))
		b = be48(b, k.Get(flow.ARPTHA))
		b = binary.BigEndian.AppendUint32(b, uint32(k.Get(flow.NWDst)))
	}
	for len(b) < 60 {
		b = append(b, 0) // Ethernet padding
	}
	var got flow.Key
	packet.Extract(b, &got)
	for f := flow.InPort; f.Valid(); f++ {
		m := given.Get(f)
		if m.IsZero() || f == flow.InPort {
			continue
		}
		want, have := k.GetU128(f), got.GetU128(f)
		if want.Hi&m.Hi != have.Hi&m.Hi || want.Lo&m.Lo != have.Lo&m.Lo {
			return nil, fmt.Errorf("cannot build a packet with %s=%s (it parses as %s)", f,
				flow.FormatValue(f, want, m), flow.FormatValue(f, have, m))
		}
	}
	_ = l3
	return b, nil
}

func be48(b []byte, v uint64) []byte {
	return append(b, byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// payload is what a TCP, UDP or ICMP packet carries.
var payload = []byte("govn trace")

func appendIPv4(b []byte, k *flow.Key) []byte {
	start := len(b)
	proto := uint8(k.Get(flow.NWProto))
	l4 := appendL4(nil, k, proto, false)
	tos := uint8(k.Get(flow.NWTOS)&0xfc | k.Get(flow.NWECN)&3)
	b = append(b, 0x45, tos)
	b = binary.BigEndian.AppendUint16(b, uint16(20+len(l4)))
	b = append(b, 0, 1, 0x40, 0) // id 1, DF
	b = append(b, uint8(k.Get(flow.NWTTL)), proto, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(k.Get(flow.NWSrc)))
	b = binary.BigEndian.AppendUint32(b, uint32(k.Get(flow.NWDst)))
	binary.BigEndian.PutUint16(b[start+10:], ^port.Checksum(b[start:start+20], 0))
	if proto == protoTCP || proto == protoUDP {
		var ph []byte
		ph = append(ph, b[start+12:start+20]...)
		ph = append(ph, 0, proto)
		ph = binary.BigEndian.AppendUint16(ph, uint16(len(l4)))
		l4csum(l4, proto, ph)
	} else if proto == protoICMP && len(l4) >= 4 {
		binary.BigEndian.PutUint16(l4[2:], ^port.Checksum(l4, 0))
	}
	return append(b, l4...)
}

func appendIPv6(b []byte, k *flow.Key) []byte {
	proto := uint8(k.Get(flow.NWProto))
	l4 := appendL4(nil, k, proto, true)
	tc := uint32(k.Get(flow.NWTOS)&0xfc | k.Get(flow.NWECN)&3)
	b = binary.BigEndian.AppendUint32(b, 6<<28|tc<<20|uint32(k.Get(flow.IPv6Label))&0xfffff)
	b = binary.BigEndian.AppendUint16(b, uint16(len(l4)))
	b = append(b, proto, uint8(k.Get(flow.NWTTL)))
	src, dst := k.GetU128(flow.IPv6Src), k.GetU128(flow.IPv6Dst)
	for _, a := range []flow.U128{src, dst} {
		b = binary.BigEndian.AppendUint64(b, a.Hi)
		b = binary.BigEndian.AppendUint64(b, a.Lo)
	}
	var ph []byte
	ph = append(ph, b[len(b)-32:]...)
	ph = binary.BigEndian.AppendUint32(ph, uint32(len(l4)))
	ph = append(ph, 0, 0, 0, proto)
	l4csum(l4, proto, ph)
	return append(b, l4...)
}

// l4csum fills the checksum of a TCP, UDP or ICMPv6 header.
func l4csum(l4 []byte, proto uint8, pseudo []byte) {
	at := -1
	switch proto {
	case protoTCP:
		at = 16
	case protoUDP:
		at = 6
	case protoICMPv6:
		at = 2
	}
	if at < 0 || len(l4) < at+2 {
		return
	}
	var sum uint32
	for i := 0; i+1 < len(pseudo); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(pseudo[i:]))
	}
	c := ^port.Checksum(l4, sum)
	if c == 0 && proto == protoUDP {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(l4[at:], c)
}

// appendL4 appends the transport header and payload.
func appendL4(b []byte, k *flow.Key, proto uint8, v6 bool) []byte {
	switch proto {
	case protoTCP:
		b = binary.BigEndian.AppendUint16(b, uint16(k.Get(flow.TPSrc)))
		b = binary.BigEndian.AppendUint16(b, uint16(k.Get(flow.TPDst)))
		b = binary.BigEndian.AppendUint32(b, 1) // seq
		b = binary.BigEndian.AppendUint32(b, 0) // ack
		flags := uint16(k.Get(flow.TCPFlags)) & 0x0fff
		b = binary.BigEndian.AppendUint16(b, 5<<12|flags)
		b = binary.BigEndian.AppendUint16(b, 64240) // window
		b = append(b, 0, 0, 0, 0)                   // checksum, urgent
	case protoUDP, protoSCTP:
		b = binary.BigEndian.AppendUint16(b, uint16(k.Get(flow.TPSrc)))
		b = binary.BigEndian.AppendUint16(b, uint16(k.Get(flow.TPDst)))
		if proto == protoUDP {
			b = binary.BigEndian.AppendUint16(b, uint16(8+len(payload)))
			b = append(b, 0, 0)
		} else {
			b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
		}
	case protoICMP, protoICMPv6:
		if proto == protoICMP && v6 || proto == protoICMPv6 && !v6 {
			return b
		}
		b = append(b, uint8(k.Get(flow.ICMPType)), uint8(k.Get(flow.ICMPCode)), 0, 0)
		b = append(b, 0, 1, 0, 1) // identifier, sequence
	default:
		return b
	}
	return append(b, payload...)
}
