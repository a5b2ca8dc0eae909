package pinctrl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/govn/govn/lflow"
)

// Router advertisement constants (RFC 4861 4.2, 4.6).
const (
	icmp6RouterSolicit = 133
	icmp6RouterAdvert  = 134
	raRouterLifetime   = 0xffff // seconds, as ovn-controller 23.03 sends it (TestIPv6Differential)
	ndOptSLL           = 1
	ndOptPrefix        = 3
	ndOptMTU           = 5
	ndOptRouteInfo     = 24
	ndOptRDNSS         = 25
	ndOptDNSSL         = 31
)

// putNDRAOpts answers a router solicitation with a router advertisement
// built from the action's options; the nd_ra_response stage addresses it.
func (h *handling) putNDRAOpts(a *lflow.CallAction) ([]byte, error) {
	f := h.f
	if f.etype != etherIPv6 || f.proto != protoICMPv6 || len(f.l4) < 8 || f.l4[0] != icmp6RouterSolicit {
		return nil, errNotApplicable
	}
	o, err := raOptionsOf(a)
	if err != nil {
		return nil, fmt.Errorf("put_nd_ra_opts: %w", err)
	}
	ra, err := routerAdvertisement(o)
	if err != nil {
		return nil, fmt.Errorf("put_nd_ra_opts: %w", err)
	}
	return append(f.ethHeader(f.dst, f.src, etherIPv6), ipPacket(f.ipSrc, f.ipDst, protoICMPv6, 255, ra, 2)...), nil
}

// raOptions are the contents of a router advertisement.
type raOptions struct {
	mode, preference string // addr_mode, router_preference
	slla             []byte
	mtu              uint32
	prefixes         []netip.Prefix
	rdnss            []netip.Addr
	dnssl, routeInfo string
}

// raOptionsOf reads put_nd_ra_opts' arguments.
func raOptionsOf(a *lflow.CallAction) (raOptions, error) {
	var o raOptions
	for _, arg := range a.Args {
		if _, ok := lflow.RAOption(arg.Key); !ok {
			return o, fmt.Errorf("unknown option %q", arg.Key)
		}
		vals, err := argValues(arg.Value)
		if err != nil || len(vals) == 0 {
			return o, fmt.Errorf("option %s: bad value", arg.Key)
		}
		switch arg.Key {
		case "addr_mode":
			o.mode = vals[0].text()
		case "router_preference":
			o.preference = vals[0].text()
		case "slla":
			o.slla = vals[0].mac()
		case "mtu":
			o.mtu = uint32(vals[0].num.Lo)
		case "prefix":
			for _, v := range vals {
				if v.prefix < 0 || v.prefix > 128 {
					return o, errors.New("prefix without a valid length")
				}
				o.prefixes = append(o.prefixes, netip.PrefixFrom(v.ipv6(), v.prefix))
			}
		case "rdnss":
			for _, v := range vals {
				o.rdnss = append(o.rdnss, v.ipv6())
			}
		case "dnssl":
			o.dnssl = vals[0].text()
		case "route_info":
			o.routeInfo = vals[0].text()
		}
	}
	return o, nil
}

// routerAdvertisement encodes the ICMPv6 message of a router
// advertisement (RFC 4861 4.2) with its options.
func routerAdvertisement(o raOptions) ([]byte, error) {
	ra := make([]byte, 16)
	ra[0] = icmp6RouterAdvert
	ra[4] = 255 // current hop limit
	binary.BigEndian.PutUint16(ra[6:], raRouterLifetime)
	switch strings.ToUpper(o.preference) {
	case "HIGH":
		ra[5] |= 0x08
	case "LOW":
		ra[5] |= 0x18
	}
	switch o.mode {
	case "dhcpv6_stateful":
		ra[5] |= 0x80 // managed (ovn-controller sets no "other" flag)
	case "dhcpv6_stateless":
		ra[5] |= 0x40 // other
	case "slaac", "":
	default:
		return nil, fmt.Errorf("bad addr_mode %q", o.mode)
	}
	if o.slla != nil {
		ra = append(append(ra, ndOptSLL, 1), o.slla...)
	}
	if o.mtu != 0 {
		ra = binary.BigEndian.AppendUint32(append(ra, ndOptMTU, 1, 0, 0), o.mtu)
	}
	if len(o.rdnss) > 0 {
		ra = binary.BigEndian.AppendUint32(append(ra, ndOptRDNSS, byte(1+2*len(o.rdnss)), 0, 0), infinite)
		for _, a := range o.rdnss {
			ra = append(ra, a.AsSlice()...)
		}
	}
	if o.dnssl != "" {
		d, err := encodeDomains(o.dnssl)
		if err != nil {
			return nil, err
		}
		for len(d)%8 != 0 {
			d = append(d, 0)
		}
		ra = binary.BigEndian.AppendUint32(append(ra, ndOptDNSSL, byte(1+len(d)/8), 0, 0), infinite)
		ra = append(ra, d...)
	}
	if o.routeInfo != "" {
		ri, err := routeInfo(o.routeInfo)
		if err != nil {
			return nil, err
		}
		ra = append(ra, ri...)
	}
	for _, p := range o.prefixes {
		flags := byte(0x80) // on-link
		if o.mode != "dhcpv6_stateful" {
			flags |= 0x40 // autonomous
		}
		ra = append(ra, ndOptPrefix, 4, byte(p.Bits()), flags)
		ra = binary.BigEndian.AppendUint32(ra, infinite) // valid lifetime
		ra = binary.BigEndian.AppendUint32(ra, infinite) // preferred lifetime
		ra = append(ra, 0, 0, 0, 0)
		ra = append(ra, p.Masked().Addr().AsSlice()...)
	}
	return ra, nil
}

// routeInfo encodes route_info's "PREF-PREFIX/LEN,..." as route
// information options (RFC 4191).
func routeInfo(s string) ([]byte, error) {
	var b []byte
	for _, r := range strings.Split(s, ",") {
		pref, prefix, ok := strings.Cut(strings.TrimSpace(r), "-")
		if !ok {
			prefix, pref = pref, "MEDIUM"
		}
		addr, lenStr, ok := strings.Cut(prefix, "/")
		n, err := strconv.Atoi(lenStr)
		if !ok || err != nil || n < 0 || n > 128 {
			return nil, fmt.Errorf("bad route_info %q", r)
		}
		var a argValue
		if ip, err := parseIPv6(addr); err == nil {
			a = ip
		} else {
			return nil, fmt.Errorf("bad route_info %q", r)
		}
		fl := byte(0)
		switch pref {
		case "HIGH":
			fl = 0x08
		case "LOW":
			fl = 0x18
		}
		words := 1 + (n+63)/64
		o := []byte{ndOptRouteInfo, byte(words), byte(n), fl}
		o = binary.BigEndian.AppendUint32(o, infinite)
		o = append(o, a.ipv6().AsSlice()[:(words-1)*8]...)
		b = append(b, o...)
	}
	return b, nil
}
