package pinctrl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Ethernet types and IP protocols pinctrl reads and builds.
const (
	etherIPv4 = 0x0800
	etherARP  = 0x0806
	etherIPv6 = 0x86dd
	etherVLAN = 0x8100
	etherQinQ = 0x88a8

	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoSCTP   = 132
	protoICMPv6 = 58
)

var errTruncated = errors.New("truncated packet")

// frame is a parsed Ethernet frame: the parts pinctrl needs to answer it.
type frame struct {
	raw      []byte
	dst, src net.HardwareAddr
	vlan     []byte // the VLAN tags, kept on every reply
	etype    uint16
	l3       []byte // from the IP or ARP header to the end of the frame

	// IP (either family)
	ipHdr    []byte // the IP header(s), options and IPv6 extension headers included
	proto    uint8
	ipSrc    netip.Addr
	ipDst    netip.Addr
	ttl      uint8
	fragment bool // not the first fragment: no L4 header
	l4       []byte
}

// parseFrame decodes the headers of b up to the transport layer.
func parseFrame(b []byte) (*frame, error) {
	if len(b) < 14 {
		return nil, errTruncated
	}
	f := &frame{raw: b, dst: net.HardwareAddr(b[0:6]), src: net.HardwareAddr(b[6:12])}
	p := 12
	for {
		if len(b) < p+2 {
			return nil, errTruncated
		}
		t := binary.BigEndian.Uint16(b[p:])
		if t != etherVLAN && t != etherQinQ {
			f.etype = t
			p += 2
			break
		}
		if len(b) < p+4 {
			return nil, errTruncated
		}
		p += 4
	}
	f.vlan = b[12 : p-2]
	f.l3 = b[p:]
	switch f.etype {
	case etherIPv4:
		return f, f.parseIPv4()
	case etherIPv6:
		return f, f.parseIPv6()
	}
	return f, nil
}

func (f *frame) parseIPv4() error {
	h := f.l3
	if len(h) < 20 || h[0]>>4 != 4 {
		return errors.New("bad IPv4 header")
	}
	hl := int(h[0]&0xf) * 4
	tl := int(binary.BigEndian.Uint16(h[2:]))
	if hl < 20 || tl < hl || len(h) < tl {
		return errors.New("bad IPv4 lengths")
	}
	f.l3 = h[:tl] // drop Ethernet padding
	f.ipHdr = h[:hl]
	f.proto = h[9]
	f.ttl = h[8]
	f.ipSrc = netip.AddrFrom4([4]byte(h[12:16]))
	f.ipDst = netip.AddrFrom4([4]byte(h[16:20]))
	f.fragment = binary.BigEndian.Uint16(h[6:])&0x1fff != 0
	f.l4 = h[hl:tl]
	return nil
}

func (f *frame) parseIPv6() error {
	h := f.l3
	if len(h) < 40 || h[0]>>4 != 6 {
		return errors.New("bad IPv6 header")
	}
	pl := int(binary.BigEndian.Uint16(h[4:]))
	if len(h) < 40+pl {
		return errTruncated
	}
	f.l3 = h[:40+pl]
	f.ttl = h[7]
	f.ipSrc = netip.AddrFrom16([16]byte(h[8:24]))
	f.ipDst = netip.AddrFrom16([16]byte(h[24:40]))
	next, p := h[6], 40
	// Skip the extension headers a reply must quote but not parse.
	for next == 0 || next == 43 || next == 60 || next == 44 {
		if len(f.l3) < p+8 {
			return errTruncated
		}
		if next == 44 {
			f.fragment = binary.BigEndian.Uint16(f.l3[p+2:])&0xfff8 != 0
			next, p = f.l3[p], p+8
			continue
		}
		n := int(f.l3[p+1])*8 + 8
		if len(f.l3) < p+n {
			return errTruncated
		}
		next, p = f.l3[p], p+n
	}
	f.ipHdr = f.l3[:p]
	f.proto = next
	f.l4 = f.l3[p:]
	return nil
}

// udp returns the ports and payload of a UDP datagram.
func (f *frame) udp() (sport, dport uint16, payload []byte, err error) {
	if f.proto != protoUDP || f.fragment || len(f.l4) < 8 {
		return 0, 0, nil, errors.New("not a UDP datagram")
	}
	ul := int(binary.BigEndian.Uint16(f.l4[4:]))
	if ul < 8 || ul > len(f.l4) {
		return 0, 0, nil, errors.New("bad UDP length")
	}
	return binary.BigEndian.Uint16(f.l4), binary.BigEndian.Uint16(f.l4[2:]), f.l4[8:ul], nil
}

// ethHeader returns an Ethernet header with f's VLAN tags.
func (f *frame) ethHeader(dst, src net.HardwareAddr, etype uint16) []byte {
	b := make([]byte, 0, 18+len(f.vlan))
	b = append(b, dst...)
	b = append(b, src...)
	b = append(b, f.vlan...)
	return binary.BigEndian.AppendUint16(b, etype)
}

// onesSum adds b to sum as big-endian 16-bit words (ones' complement).
func onesSum(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

func fold(sum uint32) uint16 {
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// pseudoSum is the sum of the IP pseudo-header for an L4 checksum.
func pseudoSum(src, dst netip.Addr, proto uint8, length int) uint32 {
	s := onesSum(0, src.AsSlice())
	s = onesSum(s, dst.AsSlice())
	return s + uint32(proto) + uint32(length)
}

// ipPacket returns an IP header for payload (with the right family,
// protocol and lengths, checksummed) followed by payload, whose L4
// checksum at csumOff (if >= 0) it fills.
func ipPacket(src, dst netip.Addr, proto, ttl uint8, payload []byte, csumOff int) []byte {
	if csumOff >= 0 {
		binary.BigEndian.PutUint16(payload[csumOff:], 0)
		var s uint32
		if proto != protoICMP {
			s = pseudoSum(src, dst, proto, len(payload))
		}
		c := fold(onesSum(s, payload))
		if c == 0 && proto == protoUDP {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(payload[csumOff:], c)
	}
	if src.Is4() {
		h := make([]byte, 20, 20+len(payload))
		h[0] = 0x45
		binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
		h[8], h[9] = ttl, proto
		copy(h[12:], src.AsSlice())
		copy(h[16:], dst.AsSlice())
		binary.BigEndian.PutUint16(h[10:], fold(onesSum(0, h)))
		return append(h, payload...)
	}
	h := make([]byte, 40, 40+len(payload))
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
	h[6], h[7] = proto, ttl
	copy(h[8:], src.AsSlice())
	copy(h[24:], dst.AsSlice())
	return append(h, payload...)
}

// udpDatagram returns a UDP header and payload (checksum left for ipPacket).
func udpDatagram(sport, dport uint16, payload []byte) []byte {
	b := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(b, sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(8+len(payload)))
	return append(b, payload...)
}

// solicitedNode returns the solicited-node multicast address of a and its
// Ethernet address (RFC 4291, RFC 2464).
func solicitedNode(a netip.Addr) (netip.Addr, net.HardwareAddr) {
	b := a.As16()
	m := [16]byte{0xff, 0x02, 11: 0x01, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]}
	return netip.AddrFrom16(m), multicastMAC(netip.AddrFrom16(m))
}

// multicastMAC is the Ethernet address of an IPv6 multicast address.
func multicastMAC(a netip.Addr) net.HardwareAddr {
	b := a.As16()
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

var broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

func must4(a netip.Addr) error {
	if !a.Is4() {
		return fmt.Errorf("%s is not an IPv4 address", a)
	}
	return nil
}
