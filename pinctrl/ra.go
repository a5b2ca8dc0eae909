package pinctrl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/govn/govn/lflow"
)

// Router advertisement constants (RFC 4861 4.2, 4.6).
const (
	icmp6RouterSolicit = 133
	icmp6RouterAdvert  = 134
	raRouterLifetime   = 1800 // seconds, OVN's default
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
	ra, err := routerAdvertisement(a)
	if err != nil {
		return nil, fmt.Errorf("put_nd_ra_opts: %w", err)
	}
	return append(f.ethHeader(f.dst, f.src, etherIPv6), ipPacket(f.ipSrc, f.ipDst, protoICMPv6, 255, ra, 2)...), nil
}

// routerAdvertisement encodes the ICMPv6 message of a router
// advertisement with put_nd_ra_opts' options.
func routerAdvertisement(a *lflow.CallAction) ([]byte, error) {
	ra := make([]byte, 16)
	ra[0] = icmp6RouterAdvert
	ra[4] = 255 // current hop limit
	binary.BigEndian.PutUint16(ra[6:], raRouterLifetime)
	mode := ""
	var opts, prefixes []byte
	var prefixVals []argValue
	for _, arg := range a.Args {
		_, ok := lflow.RAOption(arg.Key)
		if !ok {
			return nil, fmt.Errorf("unknown option %q", arg.Key)
		}
		vals, err := argValues(arg.Value)
		if err != nil || len(vals) == 0 {
			return nil, fmt.Errorf("option %s: bad value", arg.Key)
		}
		switch arg.Key {
		case "addr_mode":
			mode = vals[0].text()
		case "router_preference":
			switch vals[0].text() {
			case "HIGH":
				ra[5] |= 0x08
			case "LOW":
				ra[5] |= 0x18
			}
		case "slla":
			opts = append(opts, ndOptSLL, 1)
			opts = append(opts, vals[0].mac()...)
		case "mtu":
			o := []byte{ndOptMTU, 1, 0, 0}
			opts = binary.BigEndian.AppendUint32(append(opts, o...), uint32(vals[0].num.Lo))
		case "prefix":
			prefixVals = append(prefixVals, vals...)
		case "rdnss":
			o := []byte{ndOptRDNSS, byte(1 + 2*len(vals)), 0, 0}
			o = binary.BigEndian.AppendUint32(o, infinite)
			for _, v := range vals {
				o = append(o, v.ipv6().AsSlice()...)
			}
			opts = append(opts, o...)
		case "dnssl":
			d, err := encodeDomains(vals[0].text())
			if err != nil {
				return nil, err
			}
			for len(d)%8 != 0 {
				d = append(d, 0)
			}
			o := []byte{ndOptDNSSL, byte(1 + len(d)/8), 0, 0}
			o = binary.BigEndian.AppendUint32(o, infinite)
			opts = append(opts, append(o, d...)...)
		case "route_info":
			ri, err := routeInfo(vals[0].text())
			if err != nil {
				return nil, err
			}
			opts = append(opts, ri...)
		}

	}
	switch mode {
	case "dhcpv6_stateful":
		ra[5] |= 0xc0 // managed, other
	case "dhcpv6_stateless":
		ra[5] |= 0x40 // other
	case "slaac", "":
	default:
		return nil, fmt.Errorf("bad addr_mode %q", mode)
	}
	for _, p := range prefixVals {
		if p.prefix < 0 || p.prefix > 128 {
			return nil, errors.New("prefix without a valid length")
		}
		flags := byte(0x80) // on-link
		if mode != "dhcpv6_stateful" {
			flags |= 0x40 // autonomous
		}
		o := []byte{ndOptPrefix, 4, byte(p.prefix), flags}
		o = binary.BigEndian.AppendUint32(o, infinite) // valid lifetime
		o = binary.BigEndian.AppendUint32(o, infinite) // preferred lifetime
		o = append(o, 0, 0, 0, 0)
		o = append(o, p.ipv6().AsSlice()...)
		prefixes = append(prefixes, o...)
	}
	return append(append(ra, opts...), prefixes...), nil
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
