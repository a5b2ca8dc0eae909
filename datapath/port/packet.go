package port

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
)

// Headroom is the free space kept in front of a received frame, so that
// pushing a VLAN tag or a tunnel header does not copy the frame.
const Headroom = 128

// MaxFrame is the largest frame a Packet holds: a 64 KiB GSO segment plus
// its headers.
const MaxFrame = 65536 + 256

// BatchSize is the number of frames the switch asks a port for at once.
const BatchSize = 32

// Packet is one frame with the metadata that travels with it outside the
// frame's bytes. The zero value is unusable; use NewPacket.
type Packet struct {
	buf  []byte // backing storage; Data is a window into it
	off  int    // start of Data within buf
	Data []byte // the Ethernet frame

	Offload Offload // checksum and segmentation offload state
	Tunnel  Tunnel  // outer header of a received tunnel frame, or the one to add
}

// NewPacket returns a packet able to hold a frame of up to size bytes
// behind Headroom bytes of headroom.
func NewPacket(size int) *Packet {
	p := &Packet{buf: make([]byte, Headroom+size)}
	p.Reset()
	return p
}

// Reset empties the packet for reuse by a receive. The tunnel options
// are emptied but keep their storage, for the options a tunnel port
// receives or an encapsulation sets: neither allocates per packet.
func (p *Packet) Reset() {
	p.off = Headroom
	p.Data = p.buf[Headroom:Headroom]
	p.Offload = Offload{}
	p.Tunnel = Tunnel{Options: p.Tunnel.Options[:0]}
}

// space is the storage a receive may fill, after the headroom.
func (p *Packet) space() []byte { return p.buf[Headroom:cap(p.buf)] }

// setLen makes Data the first n bytes after the headroom.
func (p *Packet) setLen(n int) {
	p.off = Headroom
	p.Data = p.buf[Headroom : Headroom+n]
}

// SetFrame copies frame into the packet, growing it if needed, and clears
// the metadata.
func (p *Packet) SetFrame(frame []byte) {
	if Headroom+len(frame) > len(p.buf) {
		p.buf = make([]byte, Headroom+len(frame))
	}
	p.Reset()
	p.setLen(copy(p.space(), frame))
}

// Push prepends n bytes to Data and returns them (their content is
// undefined). It copies the frame only when the headroom is used up.
func (p *Packet) Push(n int) []byte {
	if n > p.off {
		nb := make([]byte, Headroom+n+len(p.Data)+(len(p.buf)-p.off-len(p.Data)))
		copy(nb[Headroom+n:], p.Data)
		p.buf, p.off = nb, Headroom+n
	}
	p.off -= n
	p.Data = p.buf[p.off : p.off+n+len(p.Data)]
	return p.Data[:n]
}

// Pull removes n bytes from the front of Data.
func (p *Packet) Pull(n int) {
	if n > len(p.Data) {
		n = len(p.Data)
	}
	p.off += n
	p.Data = p.Data[n:]
}

// PushVLAN inserts a VLAN tag (tpid, then tci exactly as it goes on the
// wire) behind the MAC addresses, keeping the offload offsets pointing at
// the same headers. A frame too short for MAC addresses is left alone.
func (p *Packet) PushVLAN(tpid, tci uint16) {
	if len(p.Data) < 12 {
		return
	}
	p.Push(4)
	d := p.Data
	copy(d[0:12], d[4:16])
	binary.BigEndian.PutUint16(d[12:], tpid)
	binary.BigEndian.PutUint16(d[14:], tci)
	if p.Offload.NeedsCsum || p.Offload.IsGSO() {
		p.Offload.CsumStart += 4
		if p.Offload.HdrLen != 0 {
			p.Offload.HdrLen += 4
		}
	}
}

// PopVLAN removes the outermost 802.1Q or 802.1ad tag, if there is one,
// keeping the offload offsets pointing at the same headers.
func (p *Packet) PopVLAN() {
	d := p.Data
	if len(d) < 18 {
		return
	}
	if t := binary.BigEndian.Uint16(d[12:]); t != etherTypeVLAN && t != etherTypeQinQ {
		return
	}
	copy(d[4:16], d[0:12])
	p.Pull(4)
	if (p.Offload.NeedsCsum || p.Offload.IsGSO()) && p.Offload.CsumStart >= 4 {
		p.Offload.CsumStart -= 4
		if p.Offload.HdrLen >= 4 {
			p.Offload.HdrLen -= 4
		}
	}
}

// Clone returns a copy of p with its own storage.
func (p *Packet) Clone() *Packet {
	q := NewPacket(len(p.Data))
	q.setLen(copy(q.space(), p.Data))
	q.Offload, q.Tunnel = p.Offload, p.Tunnel
	q.Tunnel.Options = append([]byte(nil), p.Tunnel.Options...)
	return q
}

// GSOType says how a large segment must be split for the wire; the values
// are the virtio-net ones.
type GSOType uint8

// GSO types from the virtio-net header.
const (
	GSONone  GSOType = 0
	GSOTCPv4 GSOType = 1
	GSOUDP   GSOType = 3
	GSOTCPv6 GSOType = 4
	GSOUDPL4 GSOType = 5    // UDP segmentation (USO): each segment a whole datagram
	GSOECN   GSOType = 0x80 // flag: the sender may set ECN bits
)

// Offload is the virtio-net header of a frame: a checksum left for someone
// else to finish, and a large segment left for someone else to split.
type Offload struct {
	// NeedsCsum means the L4 checksum is partial: the 16-bit field at
	// CsumStart+CsumOffset holds the pseudo-header sum, and the one's
	// complement sum from CsumStart to the end still has to be folded in.
	NeedsCsum  bool
	CsumValid  bool // the checksum was verified (CHECKSUM_UNNECESSARY)
	CsumStart  uint16
	CsumOffset uint16
	GSOType    GSOType
	HdrLen     uint16 // length of the headers in front of the payload
	GSOSize    uint16 // payload bytes per segment on the wire
}

// IsGSO reports whether the frame is a large segment still to be split.
func (o Offload) IsGSO() bool { return o.GSOType&^GSOECN != GSONone }

// vnetHdrLen is the size of struct virtio_net_hdr.
const vnetHdrLen = 10

const (
	vnetFlagNeedsCsum = 1
	vnetFlagDataValid = 2
)

// decodeVnetHdr reads a virtio_net_hdr (host byte order, as packet sockets
// and TAP devices use on little-endian hosts and legacy virtio elsewhere).
func decodeVnetHdr(b []byte) Offload {
	e := binary.NativeEndian
	return Offload{
		NeedsCsum:  b[0]&vnetFlagNeedsCsum != 0,
		CsumValid:  b[0]&vnetFlagDataValid != 0,
		GSOType:    GSOType(b[1]),
		HdrLen:     e.Uint16(b[2:]),
		GSOSize:    e.Uint16(b[4:]),
		CsumStart:  e.Uint16(b[6:]),
		CsumOffset: e.Uint16(b[8:]),
	}
}

func encodeVnetHdr(b []byte, o Offload) {
	e := binary.NativeEndian
	var flags byte
	if o.NeedsCsum {
		flags |= vnetFlagNeedsCsum
	}
	if o.CsumValid && !o.NeedsCsum {
		flags |= vnetFlagDataValid
	}
	b[0], b[1] = flags, byte(o.GSOType)
	e.PutUint16(b[2:], o.HdrLen)
	e.PutUint16(b[4:], o.GSOSize)
	e.PutUint16(b[6:], o.CsumStart)
	e.PutUint16(b[8:], o.CsumOffset)
}

// ErrBadOffload reports offload metadata that does not fit the frame.
var ErrBadOffload = errors.New("offload metadata does not fit the frame")

// FinishChecksum completes a partial L4 checksum so the frame is valid on
// any wire. It does nothing to a frame whose checksum is complete, and
// refuses a GSO frame (split it with Segment instead): the kernel needs
// the partial checksum to segment it.
func (p *Packet) FinishChecksum() error {
	o := p.Offload
	if !o.NeedsCsum {
		return nil
	}
	if o.IsGSO() {
		return fmt.Errorf("finish checksum of a %d-byte GSO frame: %w", len(p.Data), ErrBadOffload)
	}
	start, field := int(o.CsumStart), int(o.CsumStart)+int(o.CsumOffset)
	if start > len(p.Data) || field+2 > len(p.Data) || field < start {
		return fmt.Errorf("finish checksum at %d+%d of a %d-byte frame: %w", o.CsumStart, o.CsumOffset, len(p.Data), ErrBadOffload)
	}
	sum := ^Checksum(p.Data[start:], 0)
	if sum == 0 && o.CsumOffset == 6 { // UDP sends a zero sum as all ones
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(p.Data[field:], sum)
	p.Offload.NeedsCsum = false
	p.Offload.CsumValid = true
	return nil
}

// Checksum returns the 16-bit one's complement sum of b added to initial,
// folded but not complemented (RFC 1071). It adds 64-bit little-endian
// words with their carries and swaps the folded sum's bytes at the end,
// which gives the same sum as adding big-endian 16-bit words (RFC 1071's
// deferred carries and byte order independence) in a quarter of the
// additions, without swapping each word.
func Checksum(b []byte, initial uint32) uint16 {
	var sum, c uint64
	for len(b) >= 32 {
		sum, c = bits.Add64(sum, binary.LittleEndian.Uint64(b), c)
		sum, c = bits.Add64(sum, binary.LittleEndian.Uint64(b[8:]), c)
		sum, c = bits.Add64(sum, binary.LittleEndian.Uint64(b[16:]), c)
		sum, c = bits.Add64(sum, binary.LittleEndian.Uint64(b[24:]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		sum, c = bits.Add64(sum, binary.LittleEndian.Uint64(b), c)
		b = b[8:]
	}
	var tail [8]byte
	copy(tail[:], b) // an odd last byte is the high byte of its word, as RFC 1071 pads
	sum, c = bits.Add64(sum, binary.LittleEndian.Uint64(tail[:]), c)
	sum, c = bits.Add64(sum, 0, c)
	sum += c // sum was all ones at most: no carry out
	s := uint32(fold64(sum))
	s = uint32(bits.ReverseBytes16(uint16(s))) + initial&0xffff + initial>>16
	s = s&0xffff + s>>16
	return uint16(s&0xffff + s>>16)
}

// fold64 folds a 64-bit one's complement sum into 16 bits.
func fold64(s uint64) uint16 {
	s = s&0xffffffff + s>>32
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return uint16(s)
}

// Tunnel is the outer header of a tunnel frame: filled by a tunnel port on
// receive, read by it on send. The zero value means "no tunnel".
type Tunnel struct {
	ID      uint64 // VNI
	Src     netip.Addr
	Dst     netip.Addr
	TOS     uint8
	TTL     uint8
	Options []byte // Geneve options, TLVs exactly as on the wire; Reset keeps their storage for reuse
}

// Valid reports whether t describes a tunnel.
func (t Tunnel) Valid() bool { return t.Dst.IsValid() }
