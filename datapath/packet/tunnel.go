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

// DecapGeneve reads the Geneve header at the start of a UDP payload into k's
// tunnel fields (tun_id from the VNI, tun_flags, tun_metadata0 from OVN's
// option) and returns the inner Ethernet frame. The caller sets tun_src,
// tun_dst, tun_tos and tun_ttl from the outer IP header (DecapFrame does).
func DecapGeneve(b []byte, k *flow.Key) ([]byte, error) {
	if len(b) < 8 {
		return nil, errShortTunnel
	}
	if b[0]>>6 != 0 {
		return nil, errBadTunnel
	}
	optLen := int(b[0]&0x3f) * 4
	if binary.BigEndian.Uint16(b[2:4]) != EtherTypeTEB {
		return nil, errBadTunnel
	}
	if len(b) < 8+optLen {
		return nil, errShortTunnel
	}
	var flags uint64
	if b[1]&0x80 != 0 {
		flags |= TunFlagOAM
	}
	vni := uint64(binary.BigEndian.Uint32(b[4:8]) >> 8)
	var md uint64
	for o := b[8 : 8+optLen]; len(o) >= 4; {
		n := 4 + int(o[3]&0x1f)*4
		if len(o) < n {
			return nil, errShortTunnel
		}
		if binary.BigEndian.Uint16(o[0:2]) == OVNGeneveClass && o[2] == OVNGeneveType && n == 8 {
			md = uint64(binary.BigEndian.Uint32(o[4:8]))
		}
		o = o[n:]
	}
	k.Set(flow.TunID, vni)
	k.Set(flow.TunFlags, flags)
	k.Set(flow.TunMetadata0, md)
	return b[8+optLen:], nil
}

// DecapVXLAN reads a VXLAN header at the start of a UDP payload into k's
// tun_id and returns the inner Ethernet frame.
func DecapVXLAN(b []byte, k *flow.Key) ([]byte, error) {
	if len(b) < 8 {
		return nil, errShortTunnel
	}
	if b[0]&0x08 == 0 {
		return nil, errBadTunnel
	}
	k.Set(flow.TunID, uint64(binary.BigEndian.Uint32(b[4:8])>>8))
	k.Set(flow.TunFlags, 0)
	k.Set(flow.TunMetadata0, 0)
	return b[8:], nil
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
	md := uint32(k.Get(flow.TunMetadata0))
	var optWords byte
	if md != 0 {
		optWords = 2
	}
	var flags byte
	if k.Get(flow.TunFlags)&TunFlagOAM != 0 {
		flags = 0x80
	}
	vni := uint32(k.Get(flow.TunID)) << 8
	dst = append(dst, optWords, flags, EtherTypeTEB>>8, EtherTypeTEB&0xff,
		byte(vni>>24), byte(vni>>16), byte(vni>>8), 0)
	if md != 0 {
		dst = append(dst, OVNGeneveClass>>8, OVNGeneveClass&0xff, OVNGeneveType, 1,
			byte(md>>24), byte(md>>16), byte(md>>8), byte(md))
	}
	return dst
}

// AppendVXLAN appends a VXLAN header with k's tun_id as VNI.
func AppendVXLAN(dst []byte, k *flow.Key) []byte {
	vni := uint32(k.Get(flow.TunID)) << 8
	return append(dst, 0x08, 0, 0, 0, byte(vni>>24), byte(vni>>16), byte(vni>>8), 0)
}
