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
	tcpFlagFIN    = 0x01
	tcpFlagPSH    = 0x08
	tcpFlagCWR    = 0x80
)

// SegmentTCP splits a GSO TCP frame into frames of at most GSOSize payload
// bytes each, with complete IP and TCP checksums, and calls emit with each
// one. The frame passed to emit lives in scratch (grown if too small) and is
// valid only during the call. A frame that is not GSO is passed to emit
// whole after FinishChecksum.
func (p *Packet) SegmentTCP(scratch []byte, emit func(frame []byte) error) error {
	o := p.Offload
	if !o.IsGSO() {
		if err := p.FinishChecksum(); err != nil {
			return err
		}
		return emit(p.Data)
	}
	d := p.Data
	gso := o.GSOType &^ GSOECN
	if gso != GSOTCPv4 && gso != GSOTCPv6 {
		return fmt.Errorf("segment GSO type %d: only TCP is supported: %w", o.GSOType, ErrBadOffload)
	}
	l3, ok := networkOffset(d)
	l4 := int(o.CsumStart)
	if !ok || o.GSOSize == 0 || l4 < l3+20 || l4+20 > len(d) {
		return fmt.Errorf("segment a %d-byte frame with L4 at %d: %w", len(d), l4, ErrBadOffload)
	}
	v4 := gso == GSOTCPv4
	if v4 != (d[l3]>>4 == 4) || (!v4 && d[l3]>>4 != 6) {
		return fmt.Errorf("segment: GSO type %d does not match IP version %d: %w", gso, d[l3]>>4, ErrBadOffload)
	}
	// The TCP header must start after the whole IP header, which the
	// segments' length and checksum updates rewrite.
	ipHdrLen := 40
	if v4 {
		ipHdrLen = int(d[l3]&0x0f) * 4
	}
	if ipHdrLen < 20 || l4 < l3+ipHdrLen {
		return fmt.Errorf("segment: L4 at %d inside the %d-byte IP header at %d: %w", l4, ipHdrLen, l3, ErrBadOffload)
	}
	hdrLen := l4 + int(d[l4+12]>>4)*4
	if hdrLen > len(d) || hdrLen < l4+20 {
		return fmt.Errorf("segment: TCP header past the %d-byte frame: %w", len(d), ErrBadOffload)
	}
	payload := d[hdrLen:]
	mss := int(o.GSOSize)
	if need := hdrLen + mss; len(scratch) < need {
		scratch = make([]byte, need)
	}
	seq := binary.BigEndian.Uint32(d[l4+4:])
	flags := d[l4+13]
	var ipID uint16
	if v4 {
		ipID = binary.BigEndian.Uint16(d[l3+4:])
	}
	for i, off := 0, 0; off < len(payload) || (off == 0 && len(payload) == 0); i++ {
		n := min(mss, len(payload)-off)
		last := off+n >= len(payload)
		f := scratch[:hdrLen+n]
		copy(f, d[:hdrLen])
		copy(f[hdrLen:], payload[off:off+n])
		if v4 {
			binary.BigEndian.PutUint16(f[l3+2:], uint16(len(f)-l3))
			binary.BigEndian.PutUint16(f[l3+4:], ipID+uint16(i))
			f[l3+10], f[l3+11] = 0, 0
			binary.BigEndian.PutUint16(f[l3+10:], ^Checksum(f[l3:l3+ipHdrLen], 0))
		} else {
			binary.BigEndian.PutUint16(f[l3+4:], uint16(len(f)-l3-40))
		}
		binary.BigEndian.PutUint32(f[l4+4:], seq+uint32(off))
		fl := flags
		if !last {
			fl &^= tcpFlagFIN | tcpFlagPSH
		}
		if i > 0 {
			fl &^= tcpFlagCWR
		}
		f[l4+13] = fl
		f[l4+16], f[l4+17] = 0, 0
		binary.BigEndian.PutUint16(f[l4+16:], ^Checksum(f[l4:], pseudoHeaderSum(f, l3, len(f)-l4, v4)))
		if err := emit(f); err != nil {
			return err
		}
		off += n
		if len(payload) == 0 {
			break
		}
	}
	return nil
}

// pseudoHeaderSum is the TCP pseudo-header sum for an L4 segment of length
// l4len behind the IP header at l3.
func pseudoHeaderSum(f []byte, l3, l4len int, v4 bool) uint32 {
	var s uint32
	addrs := f[l3+12 : l3+20]
	if !v4 {
		addrs = f[l3+8 : l3+40]
	}
	for i := 0; i+1 < len(addrs); i += 2 {
		s += uint32(binary.BigEndian.Uint16(addrs[i:]))
	}
	return s + protoTCP + uint32(l4len)&0xffff + uint32(l4len)>>16
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
