package pinctrl

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/govn/govn/lflow"
)

// DHCPv6 message types and options (RFC 8415).
const (
	dhcp6Solicit     = 1
	dhcp6Advertise   = 2
	dhcp6Request     = 3
	dhcp6Confirm     = 4
	dhcp6Renew       = 5
	dhcp6Rebind      = 6
	dhcp6Reply       = 7
	dhcp6Release     = 8
	dhcp6InfoRequest = 11

	opt6ClientID    = 1
	opt6ServerID    = 2
	opt6IANA        = 3
	opt6IAAddr      = 5
	opt6RapidCommit = 14
	opt6DNSServers  = 23
	opt6DomainList  = 24

	dhcp6ServerPort = 547
	dhcp6ClientPort = 546
	infinite        = 0xffffffff
)

// dhcp6Msg is a client's DHCPv6 message: type, transaction and options.
type dhcp6Msg struct {
	typ     byte
	xid     []byte
	options map[uint16][]byte // first occurrence of each
}

// parseDHCPv6 decodes a client message (not a relay message).
func parseDHCPv6(b []byte) (*dhcp6Msg, error) {
	if len(b) < 4 {
		return nil, errors.New("DHCPv6 message truncated")
	}
	m := &dhcp6Msg{typ: b[0], xid: b[1:4], options: map[uint16][]byte{}}
	for p := 4; p < len(b); {
		if p+4 > len(b) {
			return nil, errors.New("DHCPv6 option truncated")
		}
		code, n := binary.BigEndian.Uint16(b[p:]), int(binary.BigEndian.Uint16(b[p+2:]))
		if p+4+n > len(b) {
			return nil, errors.New("DHCPv6 option truncated")
		}
		if _, dup := m.options[code]; !dup {
			m.options[code] = b[p+4 : p+4+n]
		}
		p += 4 + n
	}
	return m, nil
}

func appendOpt6(b []byte, code uint16, data []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, code)
	b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
	return append(b, data...)
}

// putDHCPv6Opts answers a Solicit with an Advertise (a Reply if it asks
// for rapid commit) and a Request, Confirm, Renew, Rebind or
// Information-request with a Reply, with the action's server id, address
// (in an IA_NA with the client's IAID, unless stateless) and DNS options.
func (h *handling) putDHCPv6Opts(a *lflow.CallAction) ([]byte, error) {
	f := h.f
	if f.etype != etherIPv6 {
		return nil, errNotApplicable
	}
	sport, dport, payload, err := f.udp()
	if err != nil || dport != dhcp6ServerPort {
		return nil, errNotApplicable
	}
	req, err := parseDHCPv6(payload)
	if err != nil {
		return nil, fmt.Errorf("put_dhcpv6_opts: %w", err)
	}
	var reply byte
	switch req.typ {
	case dhcp6Solicit:
		reply = dhcp6Advertise
		if _, ok := req.options[opt6RapidCommit]; ok {
			reply = dhcp6Reply
		}
	case dhcp6Request, dhcp6Confirm, dhcp6Renew, dhcp6Rebind, dhcp6InfoRequest:
		reply = dhcp6Reply
	default:
		return nil, errNotApplicable
	}
	msg := append([]byte{reply}, req.xid...)
	if cid, ok := req.options[opt6ClientID]; ok {
		msg = appendOpt6(msg, opt6ClientID, cid)
	}
	if reply == dhcp6Reply && req.typ == dhcp6Solicit {
		msg = appendOpt6(msg, opt6RapidCommit, nil)
	}
	var iaAddr []byte
	for _, arg := range a.Args {
		o, ok := lflow.DHCPv6Option(arg.Key)
		if !ok {
			return nil, fmt.Errorf("put_dhcpv6_opts: unknown option %q", arg.Key)
		}
		vals, err := argValues(arg.Value)
		if err != nil || len(vals) == 0 {
			return nil, fmt.Errorf("put_dhcpv6_opts: option %s: bad value", arg.Key)
		}
		switch o.Code {
		case opt6ServerID: // DUID-LL (RFC 8415 11.4), Ethernet
			msg = appendOpt6(msg, opt6ServerID, append([]byte{0, 3, 0, 1}, vals[0].mac()...))
		case opt6IAAddr:
			iaAddr = vals[0].ipv6().AsSlice()
		case opt6DNSServers:
			var d []byte
			for _, v := range vals {
				d = append(d, v.ipv6().AsSlice()...)
			}
			msg = appendOpt6(msg, opt6DNSServers, d)
		case opt6DomainList:
			d, err := encodeDomains(vals[0].text())
			if err != nil {
				return nil, fmt.Errorf("put_dhcpv6_opts: %w", err)
			}
			msg = appendOpt6(msg, opt6DomainList, d)
		}
	}
	if iana, ok := req.options[opt6IANA]; ok && len(iana) >= 12 && iaAddr != nil && req.typ != dhcp6InfoRequest {
		addr := append(iaAddr, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff) // preferred, valid: infinite
		// IAID; T1 and T2 infinite, as ovn-controller sends them
		// (TestIPv6Differential).
		ia := append(append([]byte(nil), iana[:4]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
		ia = appendOpt6(ia, opt6IAAddr, addr)
		msg = appendOpt6(msg, opt6IANA, ia)
	}
	udp := udpDatagram(sport, dport, msg)
	return append(f.ethHeader(f.dst, f.src, etherIPv6), ipPacket(f.ipSrc, f.ipDst, protoUDP, 255, udp, 6)...), nil
}
