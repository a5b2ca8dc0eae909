package packet

import (
	"encoding/binary"
	"net/netip"
)

// Frame builders for tests: each returns the header followed by payload.

func ethFrame(dst, src [6]byte, typ uint16, payload []byte) []byte {
	b := append(append([]byte{}, dst[:]...), src[:]...)
	b = binary.BigEndian.AppendUint16(b, typ)
	return append(b, payload...)
}

func vlanTag(tpid, tci uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, tpid), tci)
}

// ethVLAN builds a frame with the given tags between the addresses and typ.
func ethVLAN(dst, src [6]byte, tags [][]byte, typ uint16, payload []byte) []byte {
	b := append(append([]byte{}, dst[:]...), src[:]...)
	for _, t := range tags {
		b = append(b, t...)
	}
	b = binary.BigEndian.AppendUint16(b, typ)
	return append(b, payload...)
}

type v4opts struct {
	tos, ttl byte
	frag     uint16 // flags+offset word
	options  []byte
}

func ipv4Pkt(src, dst string, proto byte, o v4opts, payload []byte) []byte {
	ihl := 20 + len(o.options)
	b := make([]byte, ihl, ihl+len(payload))
	b[0] = 0x40 | byte(ihl/4)
	b[1] = o.tos
	binary.BigEndian.PutUint16(b[2:], uint16(ihl+len(payload)))
	binary.BigEndian.PutUint16(b[6:], o.frag)
	b[8] = o.ttl
	b[9] = proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	copy(b[20:], o.options)
	return append(b, payload...)
}

// ipv6Pkt builds an IPv6 header; ext is a list of (next-header, bytes)
// extension headers inserted in order before the upper-layer payload.
func ipv6Pkt(src, dst string, tc byte, label uint32, hlim byte, proto byte, ext [][]byte, extTypes []byte, payload []byte) []byte {
	body := []byte{}
	next := proto
	for i := len(ext) - 1; i >= 0; i-- {
		h := append([]byte{}, ext[i]...)
		h[0] = next
		next = extTypes[i]
		body = append(h, body...)
	}
	body = append(body, payload...)
	b := make([]byte, 40)
	binary.BigEndian.PutUint32(b[0:], 6<<28|uint32(tc)<<20|label)
	binary.BigEndian.PutUint16(b[4:], uint16(len(body)))
	b[6] = next
	b[7] = hlim
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, body...)
}

func tcpSeg(sp, dp uint16, flags uint16) []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint16(b[0:], sp)
	binary.BigEndian.PutUint16(b[2:], dp)
	binary.BigEndian.PutUint16(b[12:], 5<<12|flags)
	return b
}

func udpDgram(sp, dp uint16, payload []byte) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint16(b[0:], sp)
	binary.BigEndian.PutUint16(b[2:], dp)
	binary.BigEndian.PutUint16(b[4:], uint16(8+len(payload)))
	return append(b, payload...)
}

func arpPkt(op uint16, sha [6]byte, spa string, tha [6]byte, tpa string) []byte {
	b := []byte{0, 1, 8, 0, 6, 4}
	b = binary.BigEndian.AppendUint16(b, op)
	s, t := netip.MustParseAddr(spa).As4(), netip.MustParseAddr(tpa).As4()
	b = append(b, sha[:]...)
	b = append(b, s[:]...)
	b = append(b, tha[:]...)
	return append(b, t[:]...)
}

func ndMsg(typ byte, target string, optType byte, ll [6]byte) []byte {
	b := []byte{typ, 0, 0, 0, 0, 0, 0, 0}
	t := netip.MustParseAddr(target).As16()
	b = append(b, t[:]...)
	if optType != 0 {
		b = append(b, optType, 1)
		b = append(b, ll[:]...)
	}
	return b
}
