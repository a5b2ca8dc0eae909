package flow

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultPriority is the priority of a rule that names none, as in
// ovs-ofctl (OpenFlow's OFP_DEFAULT_PRIORITY).
const DefaultPriority = 32768

// ParseRule parses a rule written as ovs-ofctl writes flows, e.g.
//
//	table=1,priority=120,tcp,nw_dst=10.0.0.100,tp_dst=80 actions=load:0x1->reg10[3],resubmit(,2)
//
// It reads what Rule.String writes, with ovs-ofctl's defaults: table 0,
// priority 32768 (DefaultPriority), cookie 0. Besides field=value[/mask]
// terms it takes table=, priority=, cookie=, idle_timeout= and
// hard_timeout= (only 0, never expiring: govn's tables do not expire rules)
// and the protocol shorthands ip, ipv6, arp, rarp, tcp, udp, sctp, icmp,
// icmp6, tcp6, udp6, sctp6. Values are decimal or 0x-hex integers, IPv4 and
// IPv6 addresses (with /prefix), Ethernet addresses, and ct_state flags
// (+trk-new).
//
// Every field matched or written must have its prerequisites in the match
// (ovs-fields(7)): "tp_dst=80" alone is refused. ovs-ofctl would drop such
// a field and install a rule that matches more than was written.
func ParseRule(s string) (Rule, error) {
	r := Rule{Priority: DefaultPriority}
	matchPart, actPart, ok := strings.Cut(s, "actions=")
	if !ok {
		return r, fmt.Errorf("%q: no actions=", s)
	}
	named, err := r.parseTerms(matchPart, true)
	if err != nil {
		return Rule{}, err
	}
	if err := finishMatch(&r.Match, named); err != nil {
		return Rule{}, err
	}
	as, err := ParseActions(actPart)
	if err != nil {
		return Rule{}, err
	}
	if err := checkActionPrerequisites(&r.Match, as); err != nil {
		return Rule{}, err
	}
	r.Actions = as
	if err := r.Validate(); err != nil {
		return Rule{}, err
	}
	return r, nil
}

// ParseMatch parses the match part of a rule ("tcp,nw_dst=10.0.0.1"),
// without table, priority or cookie.
func ParseMatch(s string) (Match, error) {
	var r Rule
	named, err := r.parseTerms(s, false)
	if err != nil {
		return Match{}, err
	}
	if err := finishMatch(&r.Match, named); err != nil {
		return Match{}, err
	}
	return r.Match, nil
}

// parseTerms parses the comma- or space-separated terms of a match into r,
// returning the fields named; rule says whether table=, priority= and the
// other rule attributes are allowed.
func (r *Rule) parseTerms(s string, rule bool) ([]Field, error) {
	var named []Field
	for _, term := range splitTop(strings.ReplaceAll(s, " ", ",")) {
		f, err := r.parseTerm(term, rule)
		if err != nil {
			return nil, err
		}
		if f != FieldInvalid {
			named = append(named, f)
		}
	}
	return named, nil
}

// finishMatch checks the prerequisites of the fields named. nw_proto in
// an ARP match is the ARP opcode, as in OVS.
func finishMatch(m *Match, named []Field) error {
	v := matchView{m}
	for i, f := range named {
		if f == NWProto && v.arp() {
			// OVS keeps the opcode in nw_proto's 8 bits.
			op := m.Key.GetU128(NWProto)
			setU128(&m.Key.W, NWProto, U128{}, fieldOnes(NWProto))
			setU128(&m.Mask.W, NWProto, U128{}, fieldOnes(NWProto))
			m.SetMaskedU128(ARPOp, op, fieldOnes(ARPOp))
			named[i] = ARPOp
		}
	}
	return checkMatchPrerequisites(named, m)
}

var shorthands = map[string][][2]uint64{
	"ip":    {{uint64(EthType), 0x0800}},
	"ipv6":  {{uint64(EthType), 0x86dd}},
	"arp":   {{uint64(EthType), 0x0806}},
	"rarp":  {{uint64(EthType), 0x8035}},
	"tcp":   {{uint64(EthType), 0x0800}, {uint64(NWProto), 6}},
	"udp":   {{uint64(EthType), 0x0800}, {uint64(NWProto), 17}},
	"sctp":  {{uint64(EthType), 0x0800}, {uint64(NWProto), 132}},
	"icmp":  {{uint64(EthType), 0x0800}, {uint64(NWProto), 1}},
	"icmp6": {{uint64(EthType), 0x86dd}, {uint64(NWProto), 58}},
	"tcp6":  {{uint64(EthType), 0x86dd}, {uint64(NWProto), 6}},
	"udp6":  {{uint64(EthType), 0x86dd}, {uint64(NWProto), 17}},
	"sctp6": {{uint64(EthType), 0x86dd}, {uint64(NWProto), 132}},
}

// unsupportedFlowMod are the flow options of ovs-ofctl(8) other than
// table, priority, cookie and the timeouts, which ParseRule refuses by name.
var unsupportedFlowMod = map[string]bool{
	"importance": true, "out_port": true, "out_group": true, "send_flow_rem": true,
	"check_overlap": true, "reset_counts": true, "no_packet_counts": true, "no_byte_counts": true,
}

// parseTerm parses one term into r and returns the field it matches
// (FieldInvalid for a rule attribute).
func (r *Rule) parseTerm(term string, rule bool) (Field, error) {
	name, val, hasVal := strings.Cut(term, "=")
	if unsupportedFlowMod[name] {
		return FieldInvalid, fmt.Errorf("%s: an ovs-ofctl flow option that govn's tables do not support", name)
	}
	if !hasVal {
		sh, ok := shorthands[name]
		if !ok {
			return FieldInvalid, fmt.Errorf("unknown match keyword %q", name)
		}
		for _, fv := range sh {
			r.Match.Set(Field(fv[0]), fv[1])
		}
		return FieldInvalid, nil
	}
	switch name {
	case "table", "priority", "cookie", "idle_timeout", "hard_timeout":
		if !rule {
			return FieldInvalid, fmt.Errorf("%s: not a match field", name)
		}
		return FieldInvalid, r.parseAttribute(name, val)
	}
	f, ok := FieldByName(name)
	if !ok {
		return FieldInvalid, fmt.Errorf("unknown field %q", name)
	}
	v, m, err := ParseValue(f, val)
	if err != nil {
		return FieldInvalid, err
	}
	r.Match.SetMaskedU128(f, v, m)
	return f, nil
}

// parseAttribute parses a rule attribute other than a match field.
func (r *Rule) parseAttribute(name, val string) error {
	switch name {
	case "table":
		n, err := strconv.ParseUint(val, 0, 8)
		if err != nil || n >= NumTables {
			return fmt.Errorf("bad table %q", val)
		}
		r.Table = uint8(n)
	case "priority":
		n, err := strconv.ParseUint(val, 0, 16)
		if err != nil {
			return fmt.Errorf("bad priority %q", val)
		}
		r.Priority = uint16(n)
	case "cookie":
		n, err := strconv.ParseUint(val, 0, 64)
		if err != nil {
			return fmt.Errorf("bad cookie %q", val)
		}
		r.Cookie = n
	case "idle_timeout", "hard_timeout":
		n, err := strconv.ParseUint(val, 0, 16)
		if err != nil {
			return fmt.Errorf("bad %s %q", name, val)
		}
		if n != 0 {
			return fmt.Errorf("%s=%d: govn's flow tables do not expire rules (only %s=0 is accepted)", name, n, name)
		}
	}
	return nil
}

// ParseValue parses a value of f with an optional mask ("10.0.0.0/8",
// "0x10/0xf0", "+trk-new"); without a mask, the mask is the whole field.
func ParseValue(f Field, s string) (v, mask U128, err error) {
	if !f.Valid() {
		return v, mask, fmt.Errorf("invalid field")
	}
	full := fieldOnes(f)
	if f == CTState && (strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-")) {
		return parseFlags(f, s, ctStateNames[:])
	}
	if f == TCPFlags && (strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-")) {
		return parseFlags(f, s, tcpFlagNames[:])
	}
	vs, ms, hasMask := strings.Cut(s, "/")
	if v, err = parseScalar(f, vs); err != nil {
		return v, mask, err
	}
	mask = full
	if hasMask {
		if n, err := strconv.ParseUint(ms, 10, 8); err == nil && isAddress(f) && !strings.HasPrefix(ms, "0") {
			if uint(n) > f.Bits() {
				return v, mask, fmt.Errorf("%s: prefix /%d too long", f, n)
			}
			mask = OnesU128(uint(n)).Shl(f.Bits() - uint(n))
		} else if mask, err = parseScalar(f, ms); err != nil {
			return v, mask, err
		}
	}
	if !v.AndNot(full).IsZero() {
		return v, mask, fmt.Errorf("%s: value %s does not fit %d bits", f, vs, f.Bits())
	}
	return v.And(mask), mask, nil
}

func isAddress(f Field) bool {
	switch f {
	case NWSrc, NWDst, ARPSPA, ARPTPA, TunSrc, TunDst, CTNWSrc, CTNWDst, IGMPGroup,
		IPv6Src, IPv6Dst, CTIPv6Src, CTIPv6Dst, NDTarget:
		return true
	}
	return false
}

func parseScalar(f Field, s string) (U128, error) {
	if s == "" {
		return U128{}, fmt.Errorf("%s: empty value", f)
	}
	if strings.Count(s, ":") == 5 && len(s) == 17 {
		if b, err := hex.DecodeString(strings.ReplaceAll(s, ":", "")); err == nil {
			return U128{Lo: MAC([6]byte(b))}, nil
		}
	}
	if strings.ContainsAny(s, ".:") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return U128{}, fmt.Errorf("%s: bad address %q", f, s)
		}
		if a.Is4() && f.Bits() != 128 {
			return U128{Lo: IPv4(a)}, nil
		}
		return IPv6(a), nil
	}
	n, ok := new(big.Int).SetString(s, 0)
	if !ok || n.Sign() < 0 || n.BitLen() > 128 {
		return U128{}, fmt.Errorf("%s: bad value %q", f, s)
	}
	lo := new(big.Int).And(n, new(big.Int).SetUint64(^uint64(0)))
	return U128{Hi: new(big.Int).Rsh(n, 64).Uint64(), Lo: lo.Uint64()}, nil
}

// tcpFlagNames are the TCP flags in bit order, as ovs-fields(7) names them.
var tcpFlagNames = [9]string{"fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns"}

// parseFlags parses flags written as "+trk-new": names, in bit order, are
// the flags of f; a flag with + must be set, one with - clear.
func parseFlags(f Field, s string, names []string) (v, m U128, err error) {
	for s != "" {
		sign := s[0]
		if sign != '+' && sign != '-' {
			return v, m, fmt.Errorf("%s: expected + or - in %q", f, s)
		}
		s = s[1:]
		i := strings.IndexAny(s, "+-")
		if i < 0 {
			i = len(s)
		}
		bit := uint64(0)
		for j, name := range names {
			if name == s[:i] {
				bit = 1 << j
			}
		}
		if bit == 0 {
			return v, m, fmt.Errorf("%s: unknown flag %q", f, s[:i])
		}
		m.Lo |= bit
		if sign == '+' {
			v.Lo |= bit
		} else {
			v.Lo &^= bit
		}
		s = s[i:]
	}
	return v, m, nil
}

// splitTop splits s at commas outside parentheses, dropping empty parts.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '(':
				depth++
				continue
			case ')':
				depth--
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if p := strings.TrimSpace(s[start:i]); p != "" {
			out = append(out, p)
		}
		start = i + 1
	}
	return out
}

// ParseActions parses an action list as ActionsString writes it.
func ParseActions(s string) ([]Action, error) {
	s = strings.TrimSpace(s)
	if s == "drop" {
		return []Action{Drop{}}, nil
	}
	var out []Action
	for _, p := range splitTop(s) {
		a, err := parseAction(p)
		if err != nil {
			return nil, fmt.Errorf("action %q: %w", p, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// call splits "name(args)" into name and args.
func call(s string) (name, args string, ok bool) {
	i := strings.IndexByte(s, '(')
	if i < 0 || !strings.HasSuffix(s, ")") {
		return s, "", false
	}
	return s[:i], s[i+1 : len(s)-1], true
}

func parseUint(s string, bits int) (uint64, error) {
	return strconv.ParseUint(strings.TrimSpace(s), 0, bits)
}

func parseAction(s string) (Action, error) {
	if rest, ok := strings.CutPrefix(s, "check_pkt_larger("); ok {
		ls, ds, ok := strings.Cut(rest, ")->")
		if !ok {
			return nil, fmt.Errorf("check_pkt_larger: expected check_pkt_larger(LEN)->DST")
		}
		n, err := parseUint(ls, 16)
		if err != nil {
			return nil, fmt.Errorf("check_pkt_larger: bad length: %w", err)
		}
		dst, err := ParseFieldRange(ds)
		return CheckPktLarger{Len: uint16(n), Dst: dst}, err
	}
	if name, args, ok := call(s); ok {
		switch name {
		case "resubmit":
			_, t, _ := strings.Cut(args, ",")
			n, err := parseUint(t, 8)
			return Resubmit{Table: uint8(n)}, err
		case "ct":
			return parseCT(args)
		case "meter":
			return parseMeter(args)
		case "learn":
			return parseLearn(args)
		case "clone":
			as, err := ParseActions(args)
			return Clone{Actions: as}, err
		case "conjunction":
			id, kn, _ := strings.Cut(args, ",")
			k, n, _ := strings.Cut(kn, "/")
			a, err1 := parseUint(id, 32)
			b, err2 := parseUint(k, 8)
			c, err3 := parseUint(n, 8)
			if err1 != nil || err2 != nil || err3 != nil {
				return nil, fmt.Errorf("bad conjunction")
			}
			if c < 2 || c > 64 || b < 1 || b > c {
				return nil, fmt.Errorf("conjunction(%d,%d/%d): the clause count must be 2 to 64 and the clause 1 to it", a, b, c)
			}
			return Conjunction{ID: uint32(a), Clause: uint8(b), NClauses: uint8(c)}, nil
		case "controller":
			var c Controller
			for _, p := range splitTop(args) {
				switch {
				case p == "pause":
					c.Pause = true
				case strings.HasPrefix(p, "userdata="):
					b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimPrefix(p, "userdata="), ".", ""))
					if err != nil {
						return nil, fmt.Errorf("bad userdata: %w", err)
					}
					c.UserData = b
				default:
					return nil, fmt.Errorf("unknown controller argument %q", p)
				}
			}
			return c, nil
		}
		return nil, fmt.Errorf("unknown action")
	}
	name, arg, _ := strings.Cut(s, ":")
	switch name {
	case "drop":
		return Drop{}, nil
	case "ct_clear":
		return CTClear{}, nil
	case "pop_vlan", "strip_vlan":
		return PopVLAN{}, nil
	case "dec_ttl":
		return DecTTL{}, nil
	case "exit":
		return Exit{}, nil
	case "controller":
		return Controller{}, nil
	case "in_port", "IN_PORT":
		return Output{Port: PortInPort}, nil
	case "output":
		if n, err := parseUint(arg, 32); err == nil {
			return Output{Port: uint32(n)}, nil
		}
		r, err := ParseFieldRange(arg)
		return Output{PortField: r}, err
	case "goto_table":
		n, err := parseUint(arg, 8)
		return GotoTable{Table: uint8(n)}, err
	case "group":
		n, err := parseUint(arg, 32)
		return Group{ID: uint32(n)}, err
	case "push_vlan":
		n, err := parseUint(arg, 16)
		return PushVLAN{TPID: uint16(n)}, err
	case "load", "set_field":
		vs, ds, ok := strings.Cut(arg, "->")
		if !ok {
			return nil, fmt.Errorf("missing ->")
		}
		if name == "load" && strings.ContainsAny(vs, ".:") {
			// ovs-ofctl would read "10.0.0.1" as 10.
			return nil, fmt.Errorf("load takes an integer; write set_field:%s->%s for an address", vs, ds)
		}
		dst, err := ParseFieldRange(ds)
		if err != nil {
			return nil, err
		}
		if dst.Ofs == 0 && dst.Width() == dst.Field.Bits() {
			v, m, err := ParseValue(dst.Field, vs)
			if err != nil {
				return nil, err
			}
			if m != fieldOnes(dst.Field) {
				// set_field:V/M->F, as ovs-ofctl prints a
				// subfield load: M must be one run of ones.
				return maskedLoad(dst.Field, v, m)
			}
			return Load{Dst: dst, Value: v}, nil
		}
		v, err := parseScalar(dst.Field, vs)
		if err != nil {
			return nil, err
		}
		return Load{Dst: dst, Value: v}, nil
	case "push":
		r, err := ParseFieldRange(arg)
		return Push{Src: r}, err
	case "pop":
		r, err := ParseFieldRange(arg)
		return Pop{Dst: r}, err
	case "move":
		ss, ds, ok := strings.Cut(arg, "->")
		if !ok {
			return nil, fmt.Errorf("missing ->")
		}
		src, err := ParseFieldRange(ss)
		if err != nil {
			return nil, err
		}
		dst, err := ParseFieldRange(ds)
		return Move{Src: src, Dst: dst}, err
	}
	return nil, fmt.Errorf("unknown action")
}

// maskedLoad returns the load of v into the bits of f that m selects,
// which must be contiguous.
func maskedLoad(f Field, v, m U128) (Action, error) {
	if m.IsZero() {
		return nil, fmt.Errorf("set_field to %s with an empty mask", f)
	}
	ofs := uint(0)
	for m.Shr(ofs).And(OnesU128(1)).IsZero() {
		ofs++
	}
	width := uint(0)
	for ofs+width < f.Bits() && !m.Shr(ofs+width).And(OnesU128(1)).IsZero() {
		width++
	}
	if m != OnesU128(width).Shl(ofs) {
		return nil, fmt.Errorf("set_field to %s: mask is not one run of bits", f)
	}
	return Load{Dst: FieldRange{Field: f, Ofs: ofs, Bits: width}, Value: v.Shr(ofs)}, nil
}

func parseCT(args string) (Action, error) {
	c := CT{Table: CTNoTable}
	for _, p := range splitTop(args) {
		name, val, _ := strings.Cut(p, "=")
		switch {
		case p == "commit":
			c.Commit = true
		case p == "force":
			c.Force = true
		case name == "zone":
			if n, err := parseUint(val, 16); err == nil {
				c.Zone = uint16(n)
				continue
			}
			r, err := ParseFieldRange(val)
			if err != nil {
				return nil, err
			}
			c.ZoneField = r
		case name == "table":
			n, err := parseUint(val, 8)
			if err != nil {
				return nil, err
			}
			c.Table = uint8(n)
		case p == "nat":
			c.NAT = &NAT{}
		case strings.HasPrefix(p, "nat("):
			_, inner, _ := call(p)
			n, err := parseNAT(inner)
			if err != nil {
				return nil, err
			}
			c.NAT = n
		case strings.HasPrefix(p, "exec("):
			_, inner, _ := call(p)
			as, err := ParseActions(inner)
			if err != nil {
				return nil, err
			}
			c.Exec = as
		default:
			return nil, fmt.Errorf("unknown ct argument %q", p)
		}
	}
	return c, nil
}

// parseNAT parses "src=A[-B][:P[-Q]]", "dst=[v6]:P", with ",random" or
// ",persistent".
func parseNAT(s string) (*NAT, error) {
	n := &NAT{}
	for _, p := range splitTop(s) {
		switch p {
		case "random":
			n.Random = true
			continue
		case "persistent":
			n.Persistent = true
			continue
		case "src":
			n.Src = true
			continue
		case "dst":
			n.Dst = true
			continue
		}
		kind, r, ok := strings.Cut(p, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("unknown nat argument %q", p)
		case kind == "src":
			n.Src = true
		case kind == "dst":
			n.Dst = true
		default:
			return nil, fmt.Errorf("unknown nat kind %q", kind)
		}
		var addrs, ports string
		if strings.HasPrefix(r, "[") {
			end := strings.IndexByte(r, ']')
			if end < 0 {
				return nil, fmt.Errorf("missing ] in %q", r)
			}
			addrs, ports = r[1:end], strings.TrimPrefix(r[end+1:], ":")
		} else if strings.Count(r, ":") == 1 || !strings.Contains(r, ":") {
			addrs, ports, _ = strings.Cut(r, ":")
		} else {
			addrs = r // a bare IPv6 range without ports
		}
		lo, hi, isRange := strings.Cut(addrs, "-")
		var err error
		if n.AddrMin, err = netip.ParseAddr(lo); err != nil {
			return nil, err
		}
		n.AddrMax = n.AddrMin
		if isRange {
			if n.AddrMax, err = netip.ParseAddr(hi); err != nil {
				return nil, err
			}
		}
		if ports != "" {
			plo, phi, isRange := strings.Cut(ports, "-")
			a, err := parseUint(plo, 16)
			if err != nil {
				return nil, err
			}
			n.PortMin, n.PortMax = uint16(a), uint16(a)
			if isRange {
				b, err := parseUint(phi, 16)
				if err != nil {
					return nil, err
				}
				n.PortMax = uint16(b)
			}
		}
	}
	return n, nil
}

// parseMeter parses meter's "rate=KBPS,burst=KBITS" (burst optional).
func parseMeter(args string) (Action, error) {
	var m Meter
	for _, p := range splitTop(args) {
		k, v, _ := strings.Cut(p, "=")
		n, err := parseUint(v, 32)
		if err != nil {
			return nil, fmt.Errorf("meter: bad %s: %w", k, err)
		}
		switch k {
		case "rate":
			m.RateKbps = uint32(n)
		case "burst":
			m.BurstKbits = uint32(n)
		default:
			return nil, fmt.Errorf("meter: unknown argument %q", p)
		}
	}
	if m.RateKbps == 0 {
		return nil, fmt.Errorf("meter: needs a nonzero rate")
	}
	return m, nil
}
