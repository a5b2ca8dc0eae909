package pinctrl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/govn/govn/lflow"
)

// DHCPv4 message types (option 53, RFC 2132 9.6).
const (
	dhcpDiscover = 1
	dhcpOffer    = 2
	dhcpRequest  = 3
	dhcpDecline  = 4
	dhcpAck      = 5
	dhcpNak      = 6
	dhcpRelease  = 7
	dhcpInform   = 8
)

// DHCPv4 option codes pinctrl reads or treats specially.
const (
	optPad          = 0
	optRequestedIP  = 50
	optLeaseTime    = 51
	optMsgType      = 53
	optServerID     = 54
	optRenewalT1    = 58
	optRebindingT2  = 59
	optUserClass    = 77
	optBootfile     = 67
	optEnd          = 255
	optNextServer   = 253 // OVN's: siaddr, not an option on the wire
	optBootfileAlt  = 254 // OVN's: option 67 for iPXE clients
	dhcpFixedLen    = 236
	dhcpMinLen      = 300 // BOOTP's size, which some clients insist on
	dhcpServerPort  = 67
	dhcpClientPort  = 68
	dhcpBroadcastFl = 0x8000
)

var dhcpMagic = []byte{99, 130, 83, 99}

// dhcpRequestMsg is the part of a client's DHCPv4 message pinctrl reads.
type dhcpRequestMsg struct {
	fixed   []byte          // the first 236 bytes
	options map[byte][]byte // the first occurrence of each option
	msgType byte
}

// parseDHCPv4 decodes a DHCPv4 client message (BOOTREQUEST).
func parseDHCPv4(b []byte) (*dhcpRequestMsg, error) {
	if len(b) < dhcpFixedLen+4 {
		return nil, errors.New("DHCP message truncated")
	}
	if b[0] != 1 {
		return nil, errors.New("not a BOOTREQUEST")
	}
	if !bytes.Equal(b[dhcpFixedLen:dhcpFixedLen+4], dhcpMagic) {
		return nil, errors.New("no DHCP magic cookie")
	}
	m := &dhcpRequestMsg{fixed: b[:dhcpFixedLen], options: map[byte][]byte{}}
	for p := dhcpFixedLen + 4; p < len(b); {
		code := b[p]
		if code == optEnd {
			break
		}
		if code == optPad {
			p++
			continue
		}
		if p+2 > len(b) || p+2+int(b[p+1]) > len(b) {
			return nil, errors.New("DHCP option truncated")
		}
		data := b[p+2 : p+2+int(b[p+1])]
		if _, dup := m.options[code]; !dup {
			m.options[code] = data
		}
		p += 2 + len(data)
	}
	if t := m.options[optMsgType]; len(t) == 1 && t[0] != 0 {
		m.msgType = t[0]
	} else {
		return nil, errors.New("DHCP message without a message type")
	}
	return m, nil
}

func (m *dhcpRequestMsg) ciaddr() netip.Addr { return netip.AddrFrom4([4]byte(m.fixed[12:16])) }

// putDHCPOpts answers a DHCPDISCOVER with an offer, a DHCPREQUEST with an
// ack (or a nak if it asks for another address), a DHCPINFORM with an ack
// without lease; anything else is not for it.
func (h *handling) putDHCPOpts(a *lflow.CallAction) ([]byte, error) {
	f := h.f
	if f.etype != etherIPv4 {
		return nil, errNotApplicable
	}
	sport, dport, payload, err := f.udp()
	if err != nil || dport != dhcpServerPort {
		return nil, errNotApplicable
	}
	req, err := parseDHCPv4(payload)
	if err != nil {
		return nil, fmt.Errorf("put_dhcp_opts: %w", err)
	}
	opts, offer, err := dhcpOptions(a, req)
	if err != nil {
		return nil, fmt.Errorf("put_dhcp_opts: %w", err)
	}
	var reply byte
	switch req.msgType {
	case dhcpDiscover:
		reply = dhcpOffer
	case dhcpRequest:
		want := req.ciaddr()
		if r := req.options[optRequestedIP]; len(r) == 4 {
			want = netip.AddrFrom4([4]byte(r))
		}
		reply = dhcpAck
		if want != offer {
			reply = dhcpNak
		}
	case dhcpInform:
		reply = dhcpAck
	default:
		return nil, errNotApplicable
	}
	msg := make([]byte, dhcpFixedLen, 512)
	copy(msg, req.fixed)
	msg[0], msg[3] = 2, 0 // BOOTREPLY, hops
	clear(msg[8:10])      // secs
	yiaddr, siaddr := offer, netip.IPv4Unspecified()
	if ns, ok := opts[optNextServer]; ok && len(ns) == 4 {
		siaddr = netip.AddrFrom4([4]byte(ns))
	}
	if reply == dhcpNak || req.msgType == dhcpInform {
		yiaddr = netip.IPv4Unspecified()
	}
	copy(msg[16:20], yiaddr.AsSlice())
	copy(msg[20:24], siaddr.AsSlice())
	msg = append(msg, dhcpMagic...)
	msg = append(msg, optMsgType, 1, reply)
	if id, ok := opts[optServerID]; ok {
		msg = append(msg, optServerID, byte(len(id)))
		msg = append(msg, id...)
	}
	if reply != dhcpNak {
		for _, o := range orderedOptions(a) {
			data, ok := opts[o]
			if !ok || o == optServerID || o == optNextServer || o == optBootfileAlt {
				continue
			}
			if req.msgType == dhcpInform && (o == optLeaseTime || o == optRenewalT1 || o == optRebindingT2) {
				continue // RFC 2131 3.4: no lease for an inform
			}
			msg = appendOption(msg, o, data)
		}
	}
	msg = append(msg, optEnd)
	for len(msg) < dhcpMinLen {
		msg = append(msg, 0)
	}
	dst := yiaddr
	flags := binary.BigEndian.Uint16(req.fixed[10:])
	switch {
	case reply == dhcpNak || flags&dhcpBroadcastFl != 0:
		dst = netip.AddrFrom4([4]byte{255, 255, 255, 255})
	case req.msgType == dhcpInform:
		dst = req.ciaddr()
	}
	// The ports and source address stay the request's: the
	// dhcp_response stage matches them, then sets them.
	udp := udpDatagram(sport, dport, msg)
	return append(f.ethHeader(f.dst, f.src, etherIPv4), ipPacket(f.ipDst, dst, protoUDP, 64, udp, 6)...), nil
}

// appendOption appends option code with data, split into pieces of 255
// bytes as RFC 3396 allows for long options.
func appendOption(b []byte, code byte, data []byte) []byte {
	for {
		n := min(len(data), 255)
		b = append(b, code, byte(n))
		b = append(b, data[:n]...)
		data = data[n:]
		if len(data) == 0 {
			return b
		}
	}
}

// orderedOptions lists the codes of the action's options in the order
// they were given.
func orderedOptions(a *lflow.CallAction) []byte {
	var codes []byte
	for _, arg := range a.Args {
		if o, ok := lflow.DHCPv4Option(arg.Key); ok && o.Code > 0 && o.Code < 256 {
			codes = append(codes, byte(o.Code))
		}
	}
	return codes
}

// dhcpOptions encodes the action's options by code (offerip aside), with
// bootfile_name_alt in place of bootfile_name for an iPXE client.
func dhcpOptions(a *lflow.CallAction, req *dhcpRequestMsg) (map[byte][]byte, netip.Addr, error) {
	opts := map[byte][]byte{}
	var offer netip.Addr
	for _, arg := range a.Args {
		o, ok := lflow.DHCPv4Option(arg.Key)
		if !ok {
			return nil, offer, fmt.Errorf("unknown DHCP option %q", arg.Key)
		}
		vals, err := argValues(arg.Value)
		if err != nil || len(vals) == 0 {
			return nil, offer, fmt.Errorf("option %s: bad value", arg.Key)
		}
		if o.Code == 0 {
			offer = vals[0].ipv4()
			continue
		}
		data, err := encodeDHCPv4Option(o, vals)
		if err != nil {
			return nil, offer, fmt.Errorf("option %s: %w", arg.Key, err)
		}
		opts[byte(o.Code)] = data
	}
	if !offer.IsValid() {
		return nil, offer, errors.New("no offerip")
	}
	if alt, ok := opts[optBootfileAlt]; ok && bytes.Equal(req.options[optUserClass], []byte("iPXE")) {
		opts[optBootfile] = alt
	}
	return opts, offer, nil
}

// encodeDHCPv4Option encodes an option's values by its type.
func encodeDHCPv4Option(o lflow.Option, vals []argValue) ([]byte, error) {
	var b []byte
	switch o.Type {
	case lflow.OptIPv4:
		for _, v := range vals {
			b = append(b, v.ipv4().AsSlice()...)
		}
	case lflow.OptUint8, lflow.OptBool:
		b = []byte{byte(vals[0].num.Lo)}
	case lflow.OptUint16:
		b = binary.BigEndian.AppendUint16(nil, uint16(vals[0].num.Lo))
	case lflow.OptUint32:
		b = binary.BigEndian.AppendUint32(nil, uint32(vals[0].num.Lo))
	case lflow.OptStr, lflow.OptHostID:
		b = []byte(vals[0].text())
	case lflow.OptDomains:
		return encodeDomains(vals[0].text())
	case lflow.OptStaticRoutes:
		// RFC 3442: prefix length, the prefix's significant octets,
		// the router.
		if len(vals)%2 != 0 {
			return nil, errors.New("static routes need a router for each prefix")
		}
		for i := 0; i < len(vals); i += 2 {
			p := vals[i].prefix
			if p < 0 {
				p = 32
			}
			if p > 32 {
				return nil, fmt.Errorf("bad prefix length %d", p)
			}
			b = append(b, byte(p))
			b = append(b, vals[i].ipv4().AsSlice()[:(p+7)/8]...)
			b = append(b, vals[i+1].ipv4().AsSlice()...)
		}
	default:
		return nil, fmt.Errorf("option type %s is not DHCPv4's", o.Type)
	}
	if len(b) == 0 {
		return nil, errors.New("empty value")
	}
	return b, nil
}
