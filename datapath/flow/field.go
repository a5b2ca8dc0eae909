package flow

import (
	"fmt"
	"strconv"
	"strings"
)

// Field names one field of a Key. The zero Field is invalid.
type Field uint16

// The fields. Aliases (arp_spa for nw_src, icmp_type for the low byte of
// tp_src, ...) share storage with the field they alias, as in OVS: a rule's
// prerequisites (eth_type, nw_proto) tell the two apart.
const (
	FieldInvalid Field = iota
	InPort
	RecircID
	DPHash
	PktMark
	Metadata
	Reg0
	Reg1
	Reg2
	Reg3
	Reg4
	Reg5
	Reg6
	Reg7
	Reg8
	Reg9
	Reg10
	Reg11
	Reg12
	Reg13
	Reg14
	Reg15
	XReg0
	XReg1
	XReg2
	XReg3
	XReg4
	XReg5
	XReg6
	XReg7
	XXReg0
	XXReg1
	XXReg2
	XXReg3
	TunID
	TunSrc
	TunDst
	TunFlags
	TunTOS
	TunTTL
	TunMetadata0
	CTState
	CTZone
	CTNWProto
	CTMark
	ConjID
	CTNWSrc
	CTNWDst
	CTTPSrc
	CTTPDst
	CTLabel
	CTIPv6Src
	CTIPv6Dst
	EthSrc
	EthType
	EthDst
	VLANTCI
	VLANTCIInner
	NWSrc
	NWDst
	ARPSPA
	ARPTPA
	IPv6Src
	IPv6Dst
	NWProto
	NWTOS
	NWECN
	NWTTL
	IPv6Label
	ARPSHA
	ARPOp
	ARPTHA
	NWFrag
	TPSrc
	TPDst
	ICMPType
	ICMPCode
	IGMPGroup
	NDTarget
	NDSLL
	NDTLL
	TCPFlags
	PktLen
	numFields
)

// FieldInfo says where a field lives in a Key.
type FieldInfo struct {
	Name  string // OpenFlow-style name, e.g. "nw_src"
	Word  int    // word index; for 128-bit fields, the high word
	Shift uint   // bit offset of the field's least significant bit in Word
	Bits  uint   // width in bits: 1..64 or 128
	Stage int    // lookup stage (StageMeta ... StageL4)
}

// Word indexes of the layout. Each comment lists the word's fields from the
// most significant bits down.
const (
	wInPortRecirc = 0  // in_port(32) recirc_id(32)
	wHashMark     = 1  // dp_hash(32) pkt_mark(32)
	wMetadata     = 2  // metadata(64)
	wRegs         = 3  // 3..10: xreg0..xreg7 = reg(2i)(32) reg(2i+1)(32)
	wTunID        = 11 // tun_id(64)
	wTunAddr      = 12 // tun_src(32) tun_dst(32)
	wTunMisc      = 13 // tun_flags(16) tun_tos(8) tun_ttl(8) tun_metadata0(32)
	wCTState      = 14 // ct_state(32) ct_zone(16) ct_nw_proto(8) -
	wCTMark       = 15 // ct_mark(32) conj_id(32)
	wCTAddr       = 16 // ct_nw_src(32) ct_nw_dst(32)
	wCTPorts      = 17 // ct_tp_src(16) ct_tp_dst(16) -
	wCTLabel      = 18 // 18..19
	wCTIPv6Src    = 20 // 20..21
	wCTIPv6Dst    = 22 // 22..23
	wEthSrc       = 24 // eth_src(48) eth_type(16)
	wEthDst       = 25 // eth_dst(48) vlan_tci(16)
	wVLANInner    = 26 // pkt_len(32) - vlan_tci_inner(16)
	wNWAddr       = 27 // nw_src(32) nw_dst(32)
	wIPv6Src      = 28 // 28..29
	wIPv6Dst      = 30 // 30..31
	wNWMisc       = 32 // nw_proto(8) nw_tos(8) nw_ecn(8) nw_ttl(8) ipv6_label(32)
	wARPSHA       = 33 // arp_sha(48) arp_op(16)
	wARPTHA       = 34 // arp_tha(48) nw_frag(8) -
	wTP           = 35 // tp_src(16) tp_dst(16) igmp_group(32)
	wNDTarget     = 36 // 36..37
	wNDSLL        = 38 // nd_sll(48) tcp_flags(16)
	wNDTLL        = 39 // nd_tll(48) -
)

var fieldInfo = [numFields]FieldInfo{
	InPort:       {"in_port", wInPortRecirc, 32, 32, StageMeta},
	RecircID:     {"recirc_id", wInPortRecirc, 0, 32, StageMeta},
	DPHash:       {"dp_hash", wHashMark, 32, 32, StageMeta},
	PktMark:      {"pkt_mark", wHashMark, 0, 32, StageMeta},
	Metadata:     {"metadata", wMetadata, 0, 64, StageMeta},
	Reg0:         {"reg0", wRegs + 0, 32, 32, StageMeta},
	Reg1:         {"reg1", wRegs + 0, 0, 32, StageMeta},
	Reg2:         {"reg2", wRegs + 1, 32, 32, StageMeta},
	Reg3:         {"reg3", wRegs + 1, 0, 32, StageMeta},
	Reg4:         {"reg4", wRegs + 2, 32, 32, StageMeta},
	Reg5:         {"reg5", wRegs + 2, 0, 32, StageMeta},
	Reg6:         {"reg6", wRegs + 3, 32, 32, StageMeta},
	Reg7:         {"reg7", wRegs + 3, 0, 32, StageMeta},
	Reg8:         {"reg8", wRegs + 4, 32, 32, StageMeta},
	Reg9:         {"reg9", wRegs + 4, 0, 32, StageMeta},
	Reg10:        {"reg10", wRegs + 5, 32, 32, StageMeta},
	Reg11:        {"reg11", wRegs + 5, 0, 32, StageMeta},
	Reg12:        {"reg12", wRegs + 6, 32, 32, StageMeta},
	Reg13:        {"reg13", wRegs + 6, 0, 32, StageMeta},
	Reg14:        {"reg14", wRegs + 7, 32, 32, StageMeta},
	Reg15:        {"reg15", wRegs + 7, 0, 32, StageMeta},
	XReg0:        {"xreg0", wRegs + 0, 0, 64, StageMeta},
	XReg1:        {"xreg1", wRegs + 1, 0, 64, StageMeta},
	XReg2:        {"xreg2", wRegs + 2, 0, 64, StageMeta},
	XReg3:        {"xreg3", wRegs + 3, 0, 64, StageMeta},
	XReg4:        {"xreg4", wRegs + 4, 0, 64, StageMeta},
	XReg5:        {"xreg5", wRegs + 5, 0, 64, StageMeta},
	XReg6:        {"xreg6", wRegs + 6, 0, 64, StageMeta},
	XReg7:        {"xreg7", wRegs + 7, 0, 64, StageMeta},
	XXReg0:       {"xxreg0", wRegs + 0, 0, 128, StageMeta},
	XXReg1:       {"xxreg1", wRegs + 2, 0, 128, StageMeta},
	XXReg2:       {"xxreg2", wRegs + 4, 0, 128, StageMeta},
	XXReg3:       {"xxreg3", wRegs + 6, 0, 128, StageMeta},
	TunID:        {"tun_id", wTunID, 0, 64, StageMeta},
	TunSrc:       {"tun_src", wTunAddr, 32, 32, StageMeta},
	TunDst:       {"tun_dst", wTunAddr, 0, 32, StageMeta},
	TunFlags:     {"tun_flags", wTunMisc, 48, 16, StageMeta},
	TunTOS:       {"tun_tos", wTunMisc, 40, 8, StageMeta},
	TunTTL:       {"tun_ttl", wTunMisc, 32, 8, StageMeta},
	TunMetadata0: {"tun_metadata0", wTunMisc, 0, 32, StageMeta},
	CTState:      {"ct_state", wCTState, 32, 32, StageMeta},
	CTZone:       {"ct_zone", wCTState, 16, 16, StageMeta},
	CTNWProto:    {"ct_nw_proto", wCTState, 8, 8, StageMeta},
	CTMark:       {"ct_mark", wCTMark, 32, 32, StageMeta},
	ConjID:       {"conj_id", wCTMark, 0, 32, StageMeta},
	CTNWSrc:      {"ct_nw_src", wCTAddr, 32, 32, StageMeta},
	CTNWDst:      {"ct_nw_dst", wCTAddr, 0, 32, StageMeta},
	CTTPSrc:      {"ct_tp_src", wCTPorts, 48, 16, StageMeta},
	CTTPDst:      {"ct_tp_dst", wCTPorts, 32, 16, StageMeta},
	CTLabel:      {"ct_label", wCTLabel, 0, 128, StageMeta},
	CTIPv6Src:    {"ct_ipv6_src", wCTIPv6Src, 0, 128, StageMeta},
	CTIPv6Dst:    {"ct_ipv6_dst", wCTIPv6Dst, 0, 128, StageMeta},
	EthSrc:       {"eth_src", wEthSrc, 16, 48, StageL2},
	EthType:      {"eth_type", wEthSrc, 0, 16, StageL2},
	EthDst:       {"eth_dst", wEthDst, 16, 48, StageL2},
	VLANTCI:      {"vlan_tci", wEthDst, 0, 16, StageL2},
	VLANTCIInner: {"vlan_tci_inner", wVLANInner, 0, 16, StageL2},
	NWSrc:        {"nw_src", wNWAddr, 32, 32, StageL3},
	NWDst:        {"nw_dst", wNWAddr, 0, 32, StageL3},
	ARPSPA:       {"arp_spa", wNWAddr, 32, 32, StageL3},
	ARPTPA:       {"arp_tpa", wNWAddr, 0, 32, StageL3},
	IPv6Src:      {"ipv6_src", wIPv6Src, 0, 128, StageL3},
	IPv6Dst:      {"ipv6_dst", wIPv6Dst, 0, 128, StageL3},
	NWProto:      {"nw_proto", wNWMisc, 56, 8, StageL3},
	NWTOS:        {"nw_tos", wNWMisc, 48, 8, StageL3},
	NWECN:        {"nw_ecn", wNWMisc, 40, 8, StageL3},
	NWTTL:        {"nw_ttl", wNWMisc, 32, 8, StageL3},
	IPv6Label:    {"ipv6_label", wNWMisc, 0, 32, StageL3},
	ARPSHA:       {"arp_sha", wARPSHA, 16, 48, StageL3},
	ARPOp:        {"arp_op", wARPSHA, 0, 16, StageL3},
	ARPTHA:       {"arp_tha", wARPTHA, 16, 48, StageL3},
	NWFrag:       {"nw_frag", wARPTHA, 8, 8, StageL3},
	TPSrc:        {"tp_src", wTP, 48, 16, StageL4},
	TPDst:        {"tp_dst", wTP, 32, 16, StageL4},
	ICMPType:     {"icmp_type", wTP, 48, 8, StageL4},
	ICMPCode:     {"icmp_code", wTP, 32, 8, StageL4},
	IGMPGroup:    {"igmp_group", wTP, 0, 32, StageL4},
	NDTarget:     {"nd_target", wNDTarget, 0, 128, StageL4},
	NDSLL:        {"nd_sll", wNDSLL, 16, 48, StageL4},
	NDTLL:        {"nd_tll", wNDTLL, 16, 48, StageL4},
	TCPFlags:     {"tcp_flags", wNDSLL, 0, 16, StageL4},
	// pkt_len is the frame's length in bytes, for check_pkt_larger; no
	// OpenFlow match field, but a megaflow may match some of its bits.
	PktLen: {"pkt_len", wVLANInner, 32, 32, StageL2},
}

// aliases are extra names accepted by FieldByName.
var aliases = map[string]Field{
	"tcp_src": TPSrc, "tcp_dst": TPDst, "udp_src": TPSrc, "udp_dst": TPDst,
	"sctp_src": TPSrc, "sctp_dst": TPDst, "icmpv6_type": ICMPType,
	"icmpv6_code": ICMPCode, "ip_src": NWSrc, "ip_dst": NWDst,
	"ip_frag": NWFrag, "dl_src": EthSrc, "dl_dst": EthDst, "dl_type": EthType,
	"mld_group": NDTarget, "tun_ipv4_src": TunSrc, "tun_ipv4_dst": TunDst,
}

// Info returns where f lives. It panics on an invalid Field, which is a
// programming error, never a consequence of input.
func (f Field) Info() FieldInfo { return fieldInfo[f] }

// Valid reports whether f names a field.
func (f Field) Valid() bool { return f > FieldInvalid && f < numFields }

// Bits returns the width of f in bits.
func (f Field) Bits() uint { return fieldInfo[f].Bits }

// Stage returns the lookup stage of f.
func (f Field) Stage() int { return fieldInfo[f].Stage }

// String returns the field's name.
func (f Field) String() string {
	if !f.Valid() {
		return fmt.Sprintf("field(%d)", uint16(f))
	}
	return fieldInfo[f].Name
}

// PipelineOnly reports whether f exists only inside the pipeline (metadata,
// registers, conj_id) and never in a datapath key.
func (f Field) PipelineOnly() bool {
	i := fieldInfo[f]
	return i.Word >= wMetadata && i.Word < wTunID || f == ConjID
}

// Fields returns every valid Field, in enumeration order.
func Fields() []Field {
	fs := make([]Field, 0, numFields-1)
	for f := FieldInvalid + 1; f < numFields; f++ {
		fs = append(fs, f)
	}
	return fs
}

// FieldByName looks a field up by its name or alias ("tcp_dst").
func FieldByName(name string) (Field, bool) {
	for f := FieldInvalid + 1; f < numFields; f++ {
		if fieldInfo[f].Name == name {
			return f, true
		}
	}
	if f, ok := aliases[name]; ok {
		return f, true
	}
	f, ok := nxmNames[name]
	return f, ok
}

// nxmNames are the NXM and OXM names ovs-ofctl prints in actions
// ("move:NXM_NX_REG0[]->NXM_OF_ETH_DST[]").
var nxmNames = func() map[string]Field {
	m := map[string]Field{
		"NXM_OF_IN_PORT": InPort, "NXM_OF_ETH_DST": EthDst, "NXM_OF_ETH_SRC": EthSrc,
		"NXM_OF_ETH_TYPE": EthType, "NXM_OF_VLAN_TCI": VLANTCI, "NXM_OF_IP_TOS": NWTOS,
		"NXM_OF_IP_PROTO": NWProto, "NXM_OF_IP_SRC": NWSrc, "NXM_OF_IP_DST": NWDst,
		"NXM_OF_TCP_SRC": TPSrc, "NXM_OF_TCP_DST": TPDst, "NXM_OF_UDP_SRC": TPSrc,
		"NXM_OF_UDP_DST": TPDst, "NXM_OF_ICMP_TYPE": ICMPType, "NXM_OF_ICMP_CODE": ICMPCode,
		"NXM_OF_ARP_OP": ARPOp, "NXM_OF_ARP_SPA": ARPSPA, "NXM_OF_ARP_TPA": ARPTPA,
		"NXM_NX_TUN_ID": TunID, "NXM_NX_ARP_SHA": ARPSHA, "NXM_NX_ARP_THA": ARPTHA,
		"NXM_NX_IPV6_SRC": IPv6Src, "NXM_NX_IPV6_DST": IPv6Dst, "NXM_NX_ICMPV6_TYPE": ICMPType,
		"NXM_NX_ICMPV6_CODE": ICMPCode, "NXM_NX_ND_TARGET": NDTarget, "NXM_NX_ND_SLL": NDSLL,
		"NXM_NX_ND_TLL": NDTLL, "NXM_NX_IP_FRAG": NWFrag, "NXM_NX_IPV6_LABEL": IPv6Label,
		"NXM_NX_IP_ECN": NWECN, "NXM_NX_IP_TTL": NWTTL, "NXM_NX_TUN_IPV4_SRC": TunSrc,
		"NXM_NX_TUN_IPV4_DST": TunDst, "NXM_NX_PKT_MARK": PktMark, "NXM_NX_TCP_FLAGS": TCPFlags,
		"NXM_NX_DP_HASH": DPHash, "NXM_NX_RECIRC_ID": RecircID, "NXM_NX_CONJ_ID": ConjID,
		"NXM_NX_CT_STATE": CTState, "NXM_NX_CT_ZONE": CTZone, "NXM_NX_CT_MARK": CTMark,
		"NXM_NX_CT_LABEL": CTLabel, "NXM_NX_CT_NW_PROTO": CTNWProto, "NXM_NX_CT_NW_SRC": CTNWSrc,
		"NXM_NX_CT_NW_DST": CTNWDst, "NXM_NX_CT_TP_SRC": CTTPSrc, "NXM_NX_CT_TP_DST": CTTPDst,
		"NXM_NX_CT_IPV6_SRC": CTIPv6Src, "NXM_NX_CT_IPV6_DST": CTIPv6Dst,
		"OXM_OF_METADATA": Metadata, "OXM_OF_SCTP_SRC": TPSrc, "OXM_OF_SCTP_DST": TPDst,
	}
	for i := range 16 {
		m[fmt.Sprintf("NXM_NX_REG%d", i)] = Reg0 + Field(i)
	}
	for i := range 8 {
		m[fmt.Sprintf("OXM_OF_PKT_REG%d", i)] = XReg0 + Field(i)
	}
	for i := range 4 {
		m[fmt.Sprintf("NXM_NX_XXREG%d", i)] = XXReg0 + Field(i)
	}
	return m
}()

// fieldOnes returns the mask of a whole field in its own bit space.
func fieldOnes(f Field) U128 { return OnesU128(fieldInfo[f].Bits) }

// fieldLoc is a field's place in a Key packed for the accessors, which the
// fast path calls per packet: FieldInfo carries the name and is too wide to
// copy on every call.
type fieldLoc struct {
	ones  uint64 // the field's width in ones, unshifted
	word  uint8
	shift uint8
	wide  bool // 128 bits: words word and word+1
}

// fieldLocs is computed once from fieldInfo and never written after.
var fieldLocs = func() (t [numFields]fieldLoc) {
	for f, i := range fieldInfo {
		t[f] = fieldLoc{ones: OnesU128(min(i.Bits, 64)).Lo, word: uint8(i.Word), shift: uint8(i.Shift), wide: i.Bits == 128}
	}
	return t
}()

func getU128(w *[NumWords]uint64, f Field) U128 {
	l := &fieldLocs[f]
	if l.wide {
		return U128{w[l.word], w[l.word+1]}
	}
	return U128{0, w[l.word] >> l.shift & l.ones}
}

// setU128 replaces the bits of f selected by m (in field space) with v.
func setU128(w *[NumWords]uint64, f Field, v, m U128) {
	l := &fieldLocs[f]
	if l.wide {
		w[l.word] = w[l.word]&^m.Hi | v.Hi&m.Hi
		w[l.word+1] = w[l.word+1]&^m.Lo | v.Lo&m.Lo
		return
	}
	mm := (m.Lo & l.ones) << l.shift
	w[l.word] = w[l.word]&^mm | (v.Lo<<l.shift)&mm
}

// Get returns the value of f (its low 64 bits for 128-bit fields).
func (k *Key) Get(f Field) uint64 {
	l := &fieldLocs[f]
	if l.wide {
		return k.W[l.word+1]
	}
	return k.W[l.word] >> l.shift & l.ones
}

// GetU128 returns the value of f.
func (k *Key) GetU128(f Field) U128 { return getU128(&k.W, f) }

// Set sets f to v (truncated to the field's width).
func (k *Key) Set(f Field, v uint64) {
	l := &fieldLocs[f]
	if l.wide {
		k.W[l.word], k.W[l.word+1] = 0, v
		return
	}
	mm := l.ones << l.shift
	k.W[l.word] = k.W[l.word]&^mm | v<<l.shift&mm
}

// SetU128 sets f to v.
func (k *Key) SetU128(f Field, v U128) { setU128(&k.W, f, v, fieldOnes(f)) }

// SetMasked sets the bits of f selected by m to those of v.
func (k *Key) SetMasked(f Field, v, m U128) { setU128(&k.W, f, v, m) }

// Get returns the mask bits of f.
func (m *Mask) Get(f Field) U128 { return getU128(&m.W, f) }

// SetField sets every bit of f in m.
func (m *Mask) SetField(f Field) { setU128(&m.W, f, fieldOnes(f), fieldOnes(f)) }

// SetBits sets in m the bits of f that are set in b (field space).
func (m *Mask) SetBits(f Field, b U128) { setU128(&m.W, f, getU128(&m.W, f).Or(b), fieldOnes(f)) }

// FieldMask returns a Mask with every bit of f set.
func FieldMask(f Field) Mask {
	var m Mask
	m.SetField(f)
	return m
}

// FieldRange is a subfield: Bits bits of Field starting at bit Ofs (0 is the
// least significant). The zero Bits means the whole field.
type FieldRange struct {
	Field Field
	Ofs   uint
	Bits  uint
}

// Whole returns the range covering all of f.
func Whole(f Field) FieldRange { return FieldRange{Field: f, Bits: f.Bits()} }

// Width returns the number of bits of r, resolving Bits == 0.
func (r FieldRange) Width() uint {
	if r.Bits == 0 {
		return r.Field.Bits()
	}
	return r.Bits
}

// FieldMask returns the mask of r in its field's bit space.
func (r FieldRange) FieldMask() U128 { return OnesU128(r.Width()).Shl(r.Ofs) }

// Validate reports an error if r does not fit in its field.
func (r FieldRange) Validate() error {
	if !r.Field.Valid() {
		return fmt.Errorf("invalid field %d", r.Field)
	}
	if r.Ofs+r.Width() > r.Field.Bits() {
		return fmt.Errorf("%s[%d..%d] exceeds its %d bits", r.Field, r.Ofs, r.Ofs+r.Width()-1, r.Field.Bits())
	}
	return nil
}

// String formats r as OVS does: "reg0[8..15]", or "reg0" if whole.
func (r FieldRange) String() string {
	if r.Ofs == 0 && r.Width() == r.Field.Bits() {
		return r.Field.String()
	}
	if r.Width() == 1 {
		return fmt.Sprintf("%s[%d]", r.Field, r.Ofs)
	}
	return fmt.Sprintf("%s[%d..%d]", r.Field, r.Ofs, r.Ofs+r.Width()-1)
}

// GetRange returns the bits of r, shifted down to bit 0.
func (k *Key) GetRange(r FieldRange) U128 {
	return k.GetU128(r.Field).Shr(r.Ofs).And(OnesU128(r.Width()))
}

// SetRange stores v (its low Width bits) into r.
func (k *Key) SetRange(r FieldRange, v U128) {
	k.SetMasked(r.Field, v.Shl(r.Ofs), r.FieldMask())
}

// SetRange sets in m the bits of r.
func (m *Mask) SetRange(r FieldRange) { m.SetBits(r.Field, r.FieldMask()) }

// ParseFieldRange parses "reg0", "reg0[5]" or "reg0[8..15]" (field names
// or aliases, as FieldByName takes them).
func ParseFieldRange(s string) (FieldRange, error) {
	name, sub, hasSub := strings.Cut(s, "[")
	f, ok := FieldByName(name)
	if !ok {
		return FieldRange{}, fmt.Errorf("unknown field %q", name)
	}
	r := Whole(f)
	if hasSub {
		body, ok := strings.CutSuffix(sub, "]")
		if !ok {
			return FieldRange{}, fmt.Errorf("%q: missing ]", s)
		}
		if body == "" { // NXM_NX_REG0[]: the whole field
			return r, nil
		}
		lo, hi, isRange := strings.Cut(body, "..")
		a, err := strconv.ParseUint(lo, 10, 8)
		if err != nil {
			return FieldRange{}, fmt.Errorf("%q: bad bit index: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 8); err != nil {
				return FieldRange{}, fmt.Errorf("%q: bad bit index: %w", s, err)
			}
		}
		if b < a {
			return FieldRange{}, fmt.Errorf("%q: empty bit range", s)
		}
		r = FieldRange{Field: f, Ofs: uint(a), Bits: uint(b - a + 1)}
	}
	if err := r.Validate(); err != nil {
		return FieldRange{}, err
	}
	return r, nil
}
