package flow

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"net/netip"
	"strconv"
	"strings"
)

// ParseRule parses a rule written as ovs-ofctl writes flows, e.g.
//
//	table=1,priority=120,tcp,nw_dst=10.0.0.100,tp_dst=80 actions=load:0x1->reg10[3],resubmit(,2)
//
// It reads what Rule.String writes. Besides field=value[/mask] terms it
// takes table=, priority=, cookie= and the protocol shorthands ip, ipv6,
// arp, rarp, tcp, udp, sctp, icmp, icmp6, tcp6, udp6, sctp6. Values are
// decimal or 0x-hex integers, IPv4 and IPv6 addresses (with /prefix),
// Ethernet addresses, and ct_state flags (+trk-new).
func ParseRule(s string) (Rule, error) {
	var r Rule
	matchPart, actPart, ok := strings.Cut(s, "actions=")
	if !ok {
		return r, fmt.Errorf("%q: no actions=", s)
	}
	for _, term := range splitTop(strings.ReplaceAll(matchPart, " ", ",")) {
		if err := r.parseTerm(term); err != nil {
			return Rule{}, err
		}
	}
	as, err := ParseActions(actPart)
	if err != nil {
		return Rule{}, err
	}
	r.Actions = as
	if err := r.Validate(); err != nil {
		return Rule{}, err
	}
	return r, nil
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

func (r *Rule) parseTerm(term string) error {
	name, val, hasVal := strings.Cut(term, "=")
	if !hasVal {
		sh, ok := shorthands[name]
		if !ok {
			return fmt.Errorf("unknown match keyword %q", name)
		}
		for _, fv := range sh {
			r.Match.Set(Field(fv[0]), fv[1])
		}
		return nil
	}
	switch name {
	case "table":
		n, err := strconv.ParseUint(val, 0, 8)
		if err != nil || n >= NumTables {
			return fmt.Errorf("bad table %q", val)
		}
		r.Table = uint8(n)
		return nil
	case "priority":
		n, err := strconv.ParseUint(val, 0, 16)
		if err != nil {
			return fmt.Errorf("bad priority %q", val)
		}
		r.Priority = uint16(n)
		return nil
	case "cookie":
		n, err := strconv.ParseUint(val, 0, 64)
		if err != nil {
			return fmt.Errorf("bad cookie %q", val)
		}
		r.Cookie = n
		return nil
	}
	f, ok := FieldByName(name)
	if !ok {
		return fmt.Errorf("unknown field %q", name)
	}
	v, m, err := ParseValue(f, val)
	if err != nil {
		return err
	}
	r.Match.SetMaskedU128(f, v, m)
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
		return parseCTState(s)
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

func parseCTState(s string) (v, m U128, err error) {
	for s != "" {
		sign := s[0]
		if sign != '+' && sign != '-' {
			return v, m, fmt.Errorf("ct_state: expected + or - in %q", s)
		}
		s = s[1:]
		i := strings.IndexAny(s, "+-")
		if i < 0 {
			i = len(s)
		}
		bit := uint64(0)
		for j, name := range ctStateNames {
			if name == s[:i] {
				bit = 1 << j
			}
		}
		if bit == 0 {
			return v, m, fmt.Errorf("ct_state: unknown flag %q", s[:i])
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
	case "pop_vlan":
		return PopVLAN{}, nil
	case "dec_ttl":
		return DecTTL{}, nil
	case "exit":
		return Exit{}, nil
	case "controller":
		return Controller{}, nil
	case "in_port":
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
				return nil, fmt.Errorf("masked set_field is written as a subfield load")
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
