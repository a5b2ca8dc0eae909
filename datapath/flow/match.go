package flow

import (
	"fmt"
	"net/netip"
	"strings"
)

// Match is a masked key: a packet matches when its key agrees with Key on
// every bit set in Mask. Key bits outside Mask are kept zero, so two equal
// matches are == as Go values. The zero Match matches every packet.
type Match struct {
	Key  Key
	Mask Mask
}

// Set makes m match f exactly equal to v.
func (m *Match) Set(f Field, v uint64) { m.SetMaskedU128(f, U128{0, v}, fieldOnes(f)) }

// SetU128 makes m match f exactly equal to v.
func (m *Match) SetU128(f Field, v U128) { m.SetMaskedU128(f, v, fieldOnes(f)) }

// SetMasked makes m match the bits of f selected by mask against v.
func (m *Match) SetMasked(f Field, v, mask uint64) { m.SetMaskedU128(f, U128{0, v}, U128{0, mask}) }

// SetMaskedU128 makes m match the bits of f selected by mask against v,
// replacing any earlier constraint on those bits.
func (m *Match) SetMaskedU128(f Field, v, mask U128) {
	mask = mask.And(fieldOnes(f))
	m.Mask.SetBits(f, mask)
	setU128(&m.Key.W, f, v.And(mask), mask)
}

// SetPrefix makes m match the first plen bits of f (an address) against v.
func (m *Match) SetPrefix(f Field, v U128, plen uint) {
	w := f.Bits()
	if plen > w {
		plen = w
	}
	m.SetMaskedU128(f, v, OnesU128(plen).Shl(w-plen))
}

// SetRange makes m match the subfield r against v (in r's own bit space).
func (m *Match) SetRange(r FieldRange, v U128) {
	m.SetMaskedU128(r.Field, v.Shl(r.Ofs), r.FieldMask())
}

// Matches reports whether k matches m.
func (m *Match) Matches(k *Key) bool { return k.EqualMasked(&m.Key, &m.Mask) }

// Normalize clears key bits outside the mask.
func (m *Match) Normalize() { m.Key = m.Key.And(&m.Mask) }

// String formats m as comma-separated field=value[/mask] terms in field
// order, e.g. "eth_type=0x800,nw_dst=10.0.0.0/8"; the empty match is "".
func (m *Match) String() string {
	var b strings.Builder
	for f := FieldInvalid + 1; f < numFields; f++ {
		if isAliasSlot(f) {
			continue
		}
		mask := m.Mask.Get(f)
		if mask.IsZero() {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		name := m.contextName(f, mask)
		b.WriteString(name.String())
		b.WriteByte('=')
		b.WriteString(FormatValue(name, m.Key.GetU128(name), m.Mask.Get(name)))
	}
	return b.String()
}

// contextName returns the name under which f, a field that shares its
// storage, is written in m: the ICMP type and code for the transport ports
// of an ICMP match, the ARP addresses for the IPv4 addresses of an ARP
// one, so that the text has the prerequisites ParseRule asks for.
func (m *Match) contextName(f Field, mask U128) Field {
	v := matchView{m}
	switch {
	case (f == TPSrc || f == TPDst) && v.icmp() && mask.Lo&^0xff == 0:
		if f == TPSrc {
			return ICMPType
		}
		return ICMPCode
	case (f == NWSrc || f == NWDst) && v.arp():
		if f == NWSrc {
			return ARPSPA
		}
		return ARPTPA
	}
	return f
}

// isAliasSlot reports whether f shares storage with an earlier field or is a
// wider view that String shows through its parts.
func isAliasSlot(f Field) bool {
	switch f {
	case ARPSPA, ARPTPA, ICMPType, ICMPCode, XReg0, XReg1, XReg2, XReg3,
		XReg4, XReg5, XReg6, XReg7, XXReg0, XXReg1, XXReg2, XXReg3:
		return true
	}
	return false
}

// FormatValue formats v (masked by mask) the way the field is usually
// written: dotted quads for IPv4 fields, colon-hex for Ethernet and IPv6,
// decimal for ports and small numbers, hex otherwise. An exact mask is
// omitted; a prefix mask of an address is written as /len.
func FormatValue(f Field, v, mask U128) string {
	full := fieldOnes(f)
	exact := mask == full
	switch f {
	case NWSrc, NWDst, ARPSPA, ARPTPA, TunSrc, TunDst, CTNWSrc, CTNWDst, IGMPGroup:
		a := ipv4String(v.Lo)
		if exact {
			return a
		}
		if n, ok := prefixLen(mask, 32); ok {
			return fmt.Sprintf("%s/%d", a, n)
		}
		return a + "/" + ipv4String(mask.Lo)
	case IPv6Src, IPv6Dst, CTIPv6Src, CTIPv6Dst, NDTarget:
		a := IPv6Addr(v).String()
		if exact {
			return a
		}
		if n, ok := prefixLen(mask, 128); ok {
			return fmt.Sprintf("%s/%d", a, n)
		}
		return a + "/" + IPv6Addr(mask).String()
	case CTState:
		if mask.Hi == 0 && mask.Lo != 0 && mask.Lo&^0xff == 0 {
			return ctStateString(v.Lo, mask.Lo)
		}
	case EthSrc, EthDst, ARPSHA, ARPTHA, NDSLL, NDTLL:
		if exact {
			return macString(v.Lo)
		}
		return macString(v.Lo) + "/" + macString(mask.Lo)
	case InPort, TPSrc, TPDst, NWProto, NWTTL, CTZone, CTNWProto, CTTPSrc, CTTPDst, ARPOp, RecircID, ConjID, PktLen:
		if exact {
			return fmt.Sprintf("%d", v.Lo)
		}
	}
	if f.Bits() == 128 {
		if exact {
			return fmt.Sprintf("0x%x%016x", v.Hi, v.Lo)
		}
		return fmt.Sprintf("0x%x%016x/0x%x%016x", v.Hi, v.Lo, mask.Hi, mask.Lo)
	}
	if exact {
		return fmt.Sprintf("0x%x", v.Lo)
	}
	return fmt.Sprintf("0x%x/0x%x", v.Lo, mask.Lo)
}

// ctStateNames are the ct_state flags in bit order.
var ctStateNames = [8]string{"new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"}

// ctStateString writes ct_state as OVS does: "+trk+est-new".
func ctStateString(v, mask uint64) string {
	var b strings.Builder
	for i, name := range ctStateNames {
		bit := uint64(1) << i
		if mask&bit == 0 {
			continue
		}
		if v&bit != 0 {
			b.WriteByte('+')
		} else {
			b.WriteByte('-')
		}
		b.WriteString(name)
	}
	return b.String()
}

func prefixLen(m U128, width uint) (uint, bool) {
	for n := uint(0); n <= width; n++ {
		if OnesU128(n).Shl(width-n) == m {
			return n, true
		}
	}
	return 0, false
}

func ipv4String(v uint64) string {
	return fmt.Sprintf("%d.%d.%d.%d", byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func macString(v uint64) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x",
		byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// IPv4 returns the field value of an IPv4 address (0 if a is not IPv4).
func IPv4(a netip.Addr) uint64 {
	if !a.Is4() {
		return 0
	}
	b := a.As4()
	return uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
}

// IPv6 returns the field value of an IPv6 address (IPv4 addresses are
// mapped into ::ffff:0:0/96).
func IPv6(a netip.Addr) U128 {
	b := a.As16()
	var v U128
	for i := 0; i < 8; i++ {
		v.Hi = v.Hi<<8 | uint64(b[i])
		v.Lo = v.Lo<<8 | uint64(b[i+8])
	}
	return v
}

// IPv6Addr converts a field value back to an address.
func IPv6Addr(v U128) netip.Addr {
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[7-i] = byte(v.Hi >> (8 * i))
		b[15-i] = byte(v.Lo >> (8 * i))
	}
	return netip.AddrFrom16(b)
}

// IPv4Addr converts a field value back to an address.
func IPv4Addr(v uint64) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// MAC returns the field value of an Ethernet address.
func MAC(a [6]byte) uint64 {
	return uint64(a[0])<<40 | uint64(a[1])<<32 | uint64(a[2])<<24 |
		uint64(a[3])<<16 | uint64(a[4])<<8 | uint64(a[5])
}

// MACBytes converts a field value back to an Ethernet address.
func MACBytes(v uint64) [6]byte {
	return [6]byte{byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// String formats the nonzero fields of k as field=value terms, in field
// order, e.g. "in_port=1,eth_type=0x800,nw_src=10.0.0.1".
func (k *Key) String() string {
	var m Match
	for f := FieldInvalid + 1; f < numFields; f++ {
		if isAliasSlot(f) {
			continue
		}
		if v := k.GetU128(f); !v.IsZero() {
			m.SetU128(f, v)
		}
	}
	return m.String()
}

// String formats the fields m covers, with their masks, as field/mask terms.
func (m *Mask) String() string {
	var b strings.Builder
	for f := FieldInvalid + 1; f < numFields; f++ {
		if isAliasSlot(f) {
			continue
		}
		v := m.Get(f)
		if v.IsZero() {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.String())
		if v != fieldOnes(f) {
			b.WriteString("/" + FormatValue(f, v, fieldOnes(f)))
		}
	}
	return b.String()
}
