package packet

import (
	"encoding/binary"
	"errors"

	"github.com/govn/govn/datapath/flow"
)

// Tunnel constants.
const (
	GenevePort = 6081
	VXLANPort  = 4789

	// OVNGeneveClass and OVNGeneveType name the Geneve option in which OVN
	// carries the logical ingress and egress ports; govn keeps its 32 bits
	// in tun_metadata0.
	OVNGeneveClass = 0x0102
	OVNGeneveType  = 0x80

	// TunFlagOAM is the tun_flags bit for a Geneve OAM frame.
	TunFlagOAM = 1
)

var (
	errShortTunnel = errors.New("tunnel header truncated")
	errBadTunnel   = errors.New("unsupported tunnel header")
)

// Geneve is a parsed Geneve header (RFC 8926).
type Geneve struct {
	VNI      uint32 // 24 bits
	OAM      bool   // the O bit: a control frame, not data
	Critical bool   // the C bit: an option the receiver must understand
	Options  []byte // the option TLVs as on the wire; aliases the parsed bytes
}

// GeneveHeaderLen is the size of a Geneve header without options; options
// add at most MaxGeneveOptions bytes.
const (
	GeneveHeaderLen  = 8
	MaxGeneveOptions = 63 * 4
	VXLANHeaderLen   = 8
)

// ParseGeneve parses the Geneve header at the start of a UDP payload. It
// accepts version 0 carrying Ethernet (TEB) with a well-formed option
// list, and returns the header and the inner frame.
func ParseGeneve(b []byte) (Geneve, []byte, error) {
	if len(b) < GeneveHeaderLen {
		return Geneve{}, nil, errShortTunnel
	}
	if b[0]>>6 != 0 || binary.BigEndian.Uint16(b[2:4]) != EtherTypeTEB {
		return Geneve{}, nil, errBadTunnel
	}
	optLen := int(b[0]&0x3f) * 4
	if len(b) < GeneveHeaderLen+optLen {
		return Geneve{}, nil, errShortTunnel
	}
	opts := b[GeneveHeaderLen : GeneveHeaderLen+optLen]
	for o := opts; len(o) > 0; {
		if len(o) < 4 {
			return Geneve{}, nil, errShortTunnel
		}
		n := 4 + int(o[3]&0x1f)*4
		if len(o) < n {
			return Geneve{}, nil, errShortTunnel
		}
		o = o[n:]
	}
	return Geneve{
		VNI:      binary.BigEndian.Uint32(b[4:8]) >> 8,
		OAM:      b[1]&0x80 != 0,
		Critical: b[1]&0x40 != 0,
		Options:  opts,
	}, b[GeneveHeaderLen+optLen:], nil
}

// GeneveOption returns the data of the first option of class and type
// (its high bit, the critical flag, included) in an option list.
func GeneveOption(opts []byte, class uint16, typ uint8) ([]byte, bool) {
	for len(opts) >= 4 {
		n := 4 + int(opts[3]&0x1f)*4
		if len(opts) < n {
			return nil, false
		}
		if binary.BigEndian.Uint16(opts[0:2]) == class && opts[2] == typ {
			return opts[4:n], true
		}
		opts = opts[n:]
	}
	return nil, false
}

// OVNMetadata returns the 32 bits OVN carries in its Geneve option
// (logical ingress and egress port), if opts has that option.
func OVNMetadata(opts []byte) (uint32, bool) {
	d, ok := GeneveOption(opts, OVNGeneveClass, OVNGeneveType)
	if !ok || len(d) != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(d), true
}

// AppendGeneveHeader appends a Geneve header for an Ethernet payload with
// the low 24 bits of vni and the given option TLVs, whose length must be a
// multiple of 4 and at most MaxGeneveOptions.
func AppendGeneveHeader(dst []byte, vni uint32, oam bool, opts []byte) []byte {
	var flags byte
	if oam {
		flags = 0x80
	}
	for o := opts; len(o) >= 4; {
		n := 4 + int(o[3]&0x1f)*4
		if o[2]&0x80 != 0 {
			flags |= 0x40 // a critical option
		}
		if len(o) < n {
			break
		}
		o = o[n:]
	}
	v := vni << 8
	dst = append(dst, byte(len(opts)/4), flags, EtherTypeTEB>>8, EtherTypeTEB&0xff,
		byte(v>>24), byte(v>>16), byte(v>>8), 0)
	return append(dst, opts...)
}

// AppendOVNOption appends OVN's Geneve option carrying md.
func AppendOVNOption(dst []byte, md uint32) []byte {
	return append(dst, OVNGeneveClass>>8, OVNGeneveClass&0xff, OVNGeneveType, 1,
		byte(md>>24), byte(md>>16), byte(md>>8), byte(md))
}

// ParseVXLAN parses the VXLAN header (RFC 7348) at the start of a UDP
// payload and returns its 24-bit VNI and the inner frame. The I flag must
// be set; other flags are ignored, as the RFC asks.
func ParseVXLAN(b []byte) (vni uint32, inner []byte, err error) {
	if len(b) < VXLANHeaderLen {
		return 0, nil, errShortTunnel
	}
	if b[0]&0x08 == 0 {
		return 0, nil, errBadTunnel
	}
	return binary.BigEndian.Uint32(b[4:8]) >> 8, b[VXLANHeaderLen:], nil
}

// AppendVXLANHeader appends a VXLAN header with the low 24 bits of vni.
func AppendVXLANHeader(dst []byte, vni uint32) []byte {
	v := vni << 8
	return append(dst, 0x08, 0, 0, 0, byte(v>>24), byte(v>>16), byte(v>>8), 0)
}

// DecapGeneve reads the Geneve header at the start of a UDP payload into k's
// tunnel fields (tun_id from the VNI, tun_flags, tun_metadata0 from OVN's
// option) and returns the inner Ethernet frame. The caller sets tun_src,
// tun_dst, tun_tos and tun_ttl from the outer IP header (DecapFrame does).
func DecapGeneve(b []byte, k *flow.Key) ([]byte, error) {
	h, inner, err := ParseGeneve(b)
	if err != nil {
		return nil, err
	}
	var flags uint64
	if h.OAM {
		flags |= TunFlagOAM
	}
	md, _ := OVNMetadata(h.Options)
	k.Set(flow.TunID, uint64(h.VNI))
	k.Set(flow.TunFlags, flags)
	k.Set(flow.TunMetadata0, uint64(md))
	return inner, nil
}

// DecapVXLAN reads a VXLAN header at the start of a UDP payload into k's
// tun_id and returns the inner Ethernet frame.
func DecapVXLAN(b []byte, k *flow.Key) ([]byte, error) {
	vni, inner, err := ParseVXLAN(b)
	if err != nil {
		return nil, err
	}
	k.Set(flow.TunID, uint64(vni))
	k.Set(flow.TunFlags, 0)
	k.Set(flow.TunMetadata0, 0)
	return inner, nil
}

// DecapFrame decapsulates a whole Ethernet/IPv4/UDP frame addressed to the
// Geneve or VXLAN port: the outer addresses, TOS and TTL go into k's tunnel
// fields, then the inner frame is extracted into k's packet fields. It
// returns the inner frame and its header offsets.
func DecapFrame(b []byte, k *flow.Key) ([]byte, Offsets, error) {
	var outer flow.Key
	off := Extract(b, &outer)
	if outer.Get(flow.EthType) != EtherTypeIPv4 || outer.Get(flow.NWProto) != ProtoUDP ||
		off.L4 == 0 || outer.Get(flow.NWFrag) != 0 || len(b) < int(off.L4)+8 {
		return nil, Offsets{}, errBadTunnel
	}
	payload := b[off.L4+8:]
	var inner []byte
	var err error
	switch outer.Get(flow.TPDst) {
	case GenevePort:
		inner, err = DecapGeneve(payload, k)
	case VXLANPort:
		inner, err = DecapVXLAN(payload, k)
	default:
		err = errBadTunnel
	}
	if err != nil {
		return nil, Offsets{}, err
	}
	k.Set(flow.TunSrc, outer.Get(flow.NWSrc))
	k.Set(flow.TunDst, outer.Get(flow.NWDst))
	k.Set(flow.TunTOS, outer.Get(flow.NWTOS)|outer.Get(flow.NWECN))
	k.Set(flow.TunTTL, outer.Get(flow.NWTTL))
	return inner, Extract(inner, k), nil
}

// AppendGeneve appends a Geneve header for k's tunnel fields: VNI from
// tun_id and, if tun_metadata0 is nonzero, OVN's option carrying it.
func AppendGeneve(dst []byte, k *flow.Key) []byte {
	var opt [8]byte
	var opts []byte
	if md := uint32(k.Get(flow.TunMetadata0)); md != 0 {
		opts = AppendOVNOption(opt[:0], md)
	}
	return AppendGeneveHeader(dst, uint32(k.Get(flow.TunID)), k.Get(flow.TunFlags)&TunFlagOAM != 0, opts)
}

// AppendVXLAN appends a VXLAN header with k's tun_id as VNI.
func AppendVXLAN(dst []byte, k *flow.Key) []byte {
	return AppendVXLANHeader(dst, uint32(k.Get(flow.TunID)))
}
