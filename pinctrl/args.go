package pinctrl

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/govn/govn/lflow"
)

// argValue is one element of an action argument's value: a number or
// address (with its prefix length if one was written) or a string.
type argValue struct {
	num    lflow.U128
	format lflow.Format
	prefix int // -1: none written
	str    string
	isStr  bool
}

// argValues splits an argument's tokens into its elements: one for a
// plain value, one per element of a {set}.
func argValues(toks []lflow.ArgToken) ([]argValue, error) {
	var out []argValue
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t.Kind {
		case lflow.TokLCurly, lflow.TokRCurly, lflow.TokComma:
		case lflow.TokString:
			out = append(out, argValue{str: t.Str, isStr: true, prefix: -1})
		case lflow.TokInt:
			v := argValue{num: t.Value, format: t.Format, prefix: -1}
			if i+2 < len(toks) && toks[i+1].Kind == lflow.TokSlash && toks[i+2].Kind == lflow.TokInt {
				v.prefix = int(toks[i+2].Value.Lo)
				i += 2
			}
			out = append(out, v)
		case lflow.TokIdent:
			out = append(out, argValue{str: t.Text, isStr: true, prefix: -1})
		default:
			return nil, fmt.Errorf("unexpected %q in an option value", t.Text)
		}
	}
	return out, nil
}

func (v argValue) ipv4() netip.Addr {
	x := uint32(v.num.Lo)
	return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
}

func (v argValue) ipv6() netip.Addr {
	var b [16]byte
	for i := range 8 {
		b[i] = byte(v.num.Hi >> (56 - 8*i))
		b[8+i] = byte(v.num.Lo >> (56 - 8*i))
	}
	return netip.AddrFrom16(b)
}

func (v argValue) mac() []byte {
	x := v.num.Lo
	return []byte{byte(x >> 40), byte(x >> 32), byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)}
}

// text is the value as a string: a string's contents, or the number as
// written (an address).
func (v argValue) text() string {
	if v.isStr {
		return v.str
	}
	switch v.format {
	case lflow.FmtIPv4:
		return v.ipv4().String()
	case lflow.FmtIPv6:
		return v.ipv6().String()
	}
	return fmt.Sprint(v.num.Lo)
}

// encodeDomains encodes comma- or space-separated domain names as DNS
// names (RFC 1035 3.1, no compression), as DHCP option 119 (RFC 3397) and
// DHCPv6 option 24 carry them.
func encodeDomains(s string) ([]byte, error) {
	var b []byte
	for _, d := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := encodeName(d)
		if err != nil {
			return nil, err
		}
		b = append(b, n...)
	}
	return b, nil
}

// encodeName encodes one domain name in DNS wire format.
func encodeName(d string) ([]byte, error) {
	var b []byte
	for _, l := range strings.Split(strings.TrimSuffix(d, "."), ".") {
		if len(l) == 0 || len(l) > 63 {
			return nil, fmt.Errorf("bad domain name %q", d)
		}
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	return append(b, 0), nil
}

// parseIPv6 reads an IPv6 address written inside a string option.
func parseIPv6(s string) (argValue, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return argValue{}, fmt.Errorf("bad IPv6 address %q", s)
	}
	b := a.As16()
	var v argValue
	for i := range 8 {
		v.num.Hi = v.num.Hi<<8 | uint64(b[i])
		v.num.Lo = v.num.Lo<<8 | uint64(b[8+i])
	}
	v.format, v.prefix = lflow.FmtIPv6, -1
	return v, nil
}
