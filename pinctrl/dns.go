package pinctrl

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
)

// DNS record types and the class pinctrl answers (RFC 1035, RFC 3596).
const (
	dnsTypeA    = 1
	dnsTypePTR  = 12
	dnsTypeAAAA = 28
	dnsTypeANY  = 255
	dnsClassIN  = 1
	dnsTTL      = 3600 // seconds an answer may be cached
	dnsHeader   = 12
	maxDNSName  = 255
)

// dnsQuery is the question of a DNS query.
type dnsQuery struct {
	id       uint16
	flags    uint16
	name     string // lower case, without the final dot
	qtype    uint16
	question []byte // the question section as received, to echo
}

// parseDNSQuery decodes a standard query with one question.
func parseDNSQuery(b []byte) (*dnsQuery, error) {
	if len(b) < dnsHeader {
		return nil, errors.New("DNS message truncated")
	}
	q := &dnsQuery{id: binary.BigEndian.Uint16(b), flags: binary.BigEndian.Uint16(b[2:])}
	if q.flags&0x8000 != 0 || q.flags&0x7800 != 0 {
		return nil, errors.New("not a standard DNS query")
	}
	if binary.BigEndian.Uint16(b[4:]) != 1 {
		return nil, errors.New("DNS query without exactly one question")
	}
	var labels []string
	p, total := dnsHeader, 0
	for {
		if p >= len(b) {
			return nil, errors.New("DNS name truncated")
		}
		n := int(b[p])
		if n == 0 {
			p++
			break
		}
		if n > 63 {
			return nil, errors.New("compressed or bad DNS name in a question")
		}
		if p+1+n > len(b) {
			return nil, errors.New("DNS name truncated")
		}
		if total += n + 1; total > maxDNSName {
			return nil, errors.New("DNS name too long")
		}
		labels = append(labels, string(b[p+1:p+1+n]))
		p += 1 + n
	}
	if p+4 > len(b) {
		return nil, errors.New("DNS question truncated")
	}
	q.qtype = binary.BigEndian.Uint16(b[p:])
	if binary.BigEndian.Uint16(b[p+2:]) != dnsClassIN {
		return nil, errors.New("DNS question not of class IN")
	}
	q.name = strings.ToLower(strings.Join(labels, "."))
	q.question = b[dnsHeader : p+4]
	return q, nil
}

// dnsAnswers returns the answers for q from a datapath's records: the
// addresses of the name's record for A and AAAA (and ANY), a host name
// for PTR, from a reverse record or from the address records.
func dnsAnswers(q *dnsQuery, records map[string]string) ([][]byte, error) {
	rec, ok := records[q.name]
	var out [][]byte
	rr := func(typ uint16, data []byte) {
		// The name as the question wrote it, uncompressed, as
		// ovn-controller answers (TestDNSDifferential).
		b := append([]byte(nil), q.question[:len(q.question)-4]...)
		b = binary.BigEndian.AppendUint16(b, typ)
		b = binary.BigEndian.AppendUint16(b, dnsClassIN)
		b = binary.BigEndian.AppendUint32(b, dnsTTL)
		b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
		out = append(out, append(b, data...))
	}
	switch q.qtype {
	case dnsTypeA, dnsTypeAAAA, dnsTypeANY:
		if !ok {
			return nil, errNotApplicable
		}
		for _, f := range strings.Fields(rec) {
			a, err := netip.ParseAddr(f)
			if err != nil {
				continue
			}
			switch {
			case a.Is4() && q.qtype != dnsTypeAAAA:
				rr(dnsTypeA, a.AsSlice())
			case a.Is6() && q.qtype != dnsTypeA:
				rr(dnsTypeAAAA, a.AsSlice())
			}
		}
	case dnsTypePTR:
		names := []string{}
		if ok {
			names = strings.Fields(rec)
		} else if a, err := reverseAddr(q.name); err == nil {
			for name, r := range records {
				for _, f := range strings.Fields(r) {
					if b, err := netip.ParseAddr(f); err == nil && b == a {
						names = append(names, name)
					}
				}
			}
		}
		for _, n := range names {
			data, err := encodeName(n)
			if err != nil {
				return nil, err
			}
			rr(dnsTypePTR, data)
		}
	}
	if len(out) == 0 {
		return nil, errNotApplicable
	}
	return out, nil
}

// reverseAddr parses a name under in-addr.arpa or ip6.arpa.
func reverseAddr(name string) (netip.Addr, error) {
	if s, ok := strings.CutSuffix(name, ".in-addr.arpa"); ok {
		p := strings.Split(s, ".")
		if len(p) != 4 {
			return netip.Addr{}, errors.New("bad reverse name")
		}
		return netip.ParseAddr(p[3] + "." + p[2] + "." + p[1] + "." + p[0])
	}
	if s, ok := strings.CutSuffix(name, ".ip6.arpa"); ok {
		p := strings.Split(s, ".")
		if len(p) != 32 {
			return netip.Addr{}, errors.New("bad reverse name")
		}
		var b strings.Builder
		for i := 31; i >= 0; i-- {
			b.WriteString(p[i])
			if i%4 == 0 && i > 0 {
				b.WriteByte(':')
			}
		}
		return netip.ParseAddr(b.String())
	}
	return netip.Addr{}, errors.New("not a reverse name")
}

// dnsLookup answers a DNS query for a name in the datapath's DNS records;
// the dns_response stage then sends it back.
func (h *handling) dnsLookup() ([]byte, error) {
	f := h.f
	sport, dport, payload, err := f.udp()
	if err != nil || dport != 53 {
		return nil, errNotApplicable
	}
	q, err := parseDNSQuery(payload)
	if err != nil {
		return nil, errNotApplicable // not ours to answer: the query goes on
	}
	ans, err := dnsAnswers(q, h.dp.DNS)
	if err != nil {
		return nil, err
	}
	msg := binary.BigEndian.AppendUint16(nil, q.id)
	msg = binary.BigEndian.AppendUint16(msg, 0x8000|q.flags&0x0100) // response, RD echoed (no AA, as ovn-controller)
	msg = binary.BigEndian.AppendUint16(msg, 1)
	msg = binary.BigEndian.AppendUint16(msg, uint16(len(ans)))
	msg = binary.BigEndian.AppendUint32(msg, 0)
	msg = append(msg, q.question...)
	for _, a := range ans {
		msg = append(msg, a...)
	}
	udp := udpDatagram(sport, dport, msg)
	et := uint16(etherIPv4)
	if f.ipSrc.Is6() {
		et = etherIPv6
	}
	return append(f.ethHeader(f.dst, f.src, et), ipPacket(f.ipSrc, f.ipDst, protoUDP, f.ttl, udp, 6)...), nil
}
