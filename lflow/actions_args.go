package lflow

import (
	"net/netip"
	"strconv"
	"strings"
)

// This file parses the arguments of the actions that take them, each as
// OVN 23.03's ovn-controller does: what it checks is checked, what it
// skips is skipped. The result is a CallAction whose Args hold each
// argument's tokens in a canonical layout (see CallAction), so that
// printing and parsing again gives the same action.

// isCallAction reports whether name is an action of the form name(...)
// (or name; where the parentheses are optional).
func isCallAction(name string) bool {
	switch name {
	case "push", "pop", "ct_dnat", "ct_snat", "ct_dnat_in_czone", "ct_snat_in_czone",
		"ct_lb", "ct_lb_mark", "get_arp", "put_arp", "get_nd", "put_nd", "set_queue",
		"log", "set_meter", "trigger_event", "bind_vport", "handle_svc_check",
		"fwd_group", "handle_bfd_msg", "put_fdb", "commit_ecmp_nh", "commit_lb_aff",
		"sample":
		return true
	}
	return false
}

// isResultAction reports whether name is an action of the form
// R = name(...).
func isResultAction(name string) bool {
	switch name {
	case "select", "put_dhcp_opts", "put_dhcpv6_opts", "put_nd_ra_opts", "dns_lookup",
		"check_pkt_larger", "lookup_arp", "lookup_nd", "lookup_arp_ip", "lookup_nd_ip",
		"chk_lb_hairpin", "chk_lb_hairpin_reply", "get_fdb", "lookup_fdb",
		"check_in_port_sec", "check_out_port_sec", "chk_ecmp_nh_mac", "chk_ecmp_nh",
		"chk_lb_aff":
		return true
	}
	return false
}

// span returns the tokens from source offset start up to the current
// token, as argument tokens.
func (p *parser) span(start int) []ArgToken {
	l := NewLexer(p.lex.src[start:p.tok.Pos])
	var out []ArgToken
	prevEnd := 0
	for t := l.Next(); t.Kind != TokEOF; t = l.Next() {
		out = append(out, ArgToken{Kind: t.Kind, Spaced: len(out) > 0 && t.Pos > prevEnd,
			Text: t.Text, Str: t.Str, Value: t.Value, Format: t.Format})
		prevEnd = t.Pos + len(t.Text)
	}
	return out
}

// addSpan appends an argument made of the tokens from start on.
func (p *parser) addSpan(c *CallAction, key string, sep byte, start int) {
	c.Args = append(c.Args, Arg{Key: key, Value: p.span(start), Sep: sep})
}

// addToken appends an argument made of the current token and consumes it.
func (p *parser) addToken(c *CallAction, key string, sep byte) {
	start := p.tok.Pos
	p.advance()
	p.addSpan(c, key, sep, start)
}

func intToken(v uint64) ArgToken {
	return ArgToken{Kind: TokInt, Text: strconv.FormatUint(v, 10), Value: U128{Lo: v}}
}

// fieldArg parses a field argument, which must be n bits wide (0: a
// string field) and, if rw, writable in scope.
func (p *parser) fieldArg(c *CallAction, sep byte, n int, rw bool, scope writeScope) bool {
	start := p.tok.Pos
	r, ok := p.fieldRefValue(nil)
	if !ok {
		return false
	}
	if err := checkField(r, n, rw, scope); err != nil {
		p.errorAt(start, "%v", err)
		return false
	}
	p.addSpan(c, "", sep, start)
	return true
}

// callArgs parses what follows the name of an isCallAction action.
func (p *parser) callArgs(c *CallAction, scope writeScope) {
	switch c.Name {
	case "push", "pop":
		if !p.expect(TokLParen) {
			return
		}
		c.Parens = true
		start := p.tok.Pos
		r, ok := p.fieldRefValue(nil)
		if !ok {
			return
		}
		if err := checkField(r, fieldWidth(r), c.Name == "pop", scope); err != nil {
			p.errorAt(start, "%v", err)
			return
		}
		p.addSpan(c, "", 0, start)
		p.expect(TokRParen)
	case "ct_dnat", "ct_snat", "ct_dnat_in_czone", "ct_snat_in_czone":
		p.natArgs(c)
	case "ct_lb", "ct_lb_mark":
		p.lbArgs(c)
	case "get_arp", "get_nd", "put_arp", "put_nd":
		width := 32
		if strings.HasSuffix(c.Name, "_nd") {
			width = 128
		}
		if !p.expect(TokLParen) {
			return
		}
		c.Parens = true
		if !p.fieldArg(c, 0, 0, false, scope) || !p.expect(TokComma) || !p.fieldArg(c, ',', width, false, scope) {
			return
		}
		if strings.HasPrefix(c.Name, "put_") && (!p.expect(TokComma) || !p.fieldArg(c, ',', 48, false, scope)) {
			return
		}
		p.expect(TokRParen)
	case "put_fdb":
		if !p.expect(TokLParen) {
			return
		}
		c.Parens = true
		if p.fieldArg(c, 0, 0, false, scope) && p.expect(TokComma) && p.fieldArg(c, ',', 48, false, scope) {
			p.expect(TokRParen)
		}
	case "handle_svc_check":
		if !p.expect(TokLParen) {
			return
		}
		c.Parens = true
		if p.fieldArg(c, 0, 0, false, scope) {
			p.expect(TokRParen)
		}
	case "bind_vport":
		if !p.expect(TokLParen) {
			return
		}
		c.Parens = true
		if p.tok.Kind != TokString {
			p.errorf("bind_vport needs the virtual port's name as a quoted string, found %s", p.describe())
			return
		}
		p.addToken(c, "", 0)
		if p.expect(TokComma) && p.fieldArg(c, ',', 0, false, scope) {
			p.expect(TokRParen)
		}
	case "handle_bfd_msg":
		if p.expect(TokLParen) && p.expect(TokRParen) {
			c.Parens = true
		}
	case "set_queue":
		if !p.expect(TokLParen) {
			return
		}
		c.Parens = true
		if !p.smallInt() {
			if p.tok.Kind == TokSemicolon {
				// OVN stops at a missing number without an error and
				// adds no action: the ';' then ends set_queue(.
				c.Name = ""
				return
			}
			p.errorf("set_queue takes a queue number, found %s", p.describe())
			return
		}
		id := p.tok.Value.Lo
		p.addToken(c, "", 0)
		if p.expect(TokRParen) && id > maxQueueID {
			p.errorf("set_queue(%d): queue numbers go from 0 to %d", id, maxQueueID)
		}
	case "set_meter":
		p.meterArgs(c)
	case "log":
		p.logArgs(c)
	case "sample":
		p.sampleArgs(c)
	case "trigger_event":
		p.eventArgs(c)
	case "fwd_group":
		p.fwdGroupArgs(c)
	case "commit_ecmp_nh":
		p.commitECMPArgs(c)
	case "commit_lb_aff":
		p.commitLBAffArgs(c)
	}
}

// maxQueueID is the highest queue number set_queue takes (OVN's
// QDISC_MAX_QUEUE_ID).
const maxQueueID = 61440

// natArgs parses ct_dnat's and ct_snat's optional (IP[, PORT[-PORT]]).
// As in OVN, ports keep their low 16 bits, the lower one must not be 0
// and the upper one must be above it; the canonical form writes the
// ports as OVN uses them.
func (p *parser) natArgs(c *CallAction) {
	if !p.accept(TokLParen) {
		return
	}
	c.Parens = true
	if !p.plainInt() || p.tok.Format != FmtIPv4 && p.tok.Format != FmtIPv6 {
		p.errorf("%s takes an IPv4 or IPv6 address, found %s", c.Name, p.describe())
		return
	}
	p.addToken(c, "", 0)
	if p.accept(TokComma) {
		if !p.plainInt() || p.tok.Format != FmtDecimal {
			p.errorf("expected a decimal port number, found %s", p.describe())
			return
		}
		lo := uint16(p.tok.Value.Lo)
		if lo == 0 {
			p.errorf("port range of %s cannot start at port 0 (%s)", c.Name, p.tok.Text)
			return
		}
		p.advance()
		ports := []ArgToken{intToken(uint64(lo))}
		if p.accept(TokMinus) {
			if !p.plainInt() {
				p.errorf("expected the port range's upper end, found %s", p.describe())
				return
			}
			hi := uint16(p.tok.Value.Lo)
			if hi <= lo {
				p.errorf("port range %d-%d of %s does not go up", lo, hi, c.Name)
				return
			}
			p.advance()
			ports = append(ports, ArgToken{Kind: TokMinus, Text: "-"}, intToken(uint64(hi)))
		}
		c.Args = append(c.Args, Arg{Value: ports, Sep: ','})
	}
	p.expect(TokRParen)
}

// lbArgs parses ct_lb's and ct_lb_mark's optional
// (backends=B, B, ...[; hash_fields="..."][; skip_snat|force_snat]).
// Like OVN, it consumes one token after hash_fields' value when no ';'
// follows it, and one after the SNAT flag (normally the ')').
func (p *parser) lbArgs(c *CallAction) {
	if !p.accept(TokLParen) {
		return
	}
	c.Parens = true
	if p.accept(TokRParen) {
		return
	}
	if !p.acceptIdent("backends") || !p.accept(TokEquals) {
		p.errorf("%s takes backends=..., found %s", c.Name, p.describe())
		return
	}
	var backends []Arg
	for !p.accept(TokSemicolon) && !p.accept(TokRParen) && p.err == nil {
		start := p.tok.Pos
		if p.accept(TokLSquare) {
			if !p.plainInt() || p.tok.Format != FmtIPv6 {
				p.errorf("expected an IPv6 address in [ ], found %s", p.describe())
				return
			}
			p.advance()
			if !p.accept(TokRSquare) {
				p.errorf("expected ']' after the IPv6 address, found %s", p.describe())
				return
			}
			if p.accept(TokColon) && !p.backendPort() {
				return
			}
		} else {
			if !p.plainInt() || p.tok.Format != FmtIPv4 && p.tok.Format != FmtIPv6 {
				p.errorf("expected a backend IP address, found %s", p.describe())
				return
			}
			v6 := p.tok.Format == FmtIPv6
			p.advance()
			if p.tok.Kind == TokColon {
				if v6 {
					p.errorf("an IPv6 backend with a port is written [address]:port")
					return
				}
				p.advance()
				if !p.backendPort() {
					return
				}
			}
		}
		backends = append(backends, Arg{Value: p.span(start), Sep: ','})
		p.accept(TokComma)
	}
	if p.err != nil {
		return
	}
	var rest []Arg
	if p.acceptIdent("hash_fields") {
		if !p.accept(TokEquals) || p.tok.Kind != TokString {
			p.errorf("hash_fields takes a quoted list of fields, found %s", p.describe())
			return
		}
		start := p.tok.Pos
		p.advanceLenient()
		rest = append(rest, Arg{Key: "hash_fields", Value: p.span(start), Sep: ';'})
		if !p.accept(TokSemicolon) {
			p.advance()
		}
	}
	if p.isIdent("skip_snat") || p.isIdent("force_snat") {
		start := p.tok.Pos
		p.advanceLenient()
		rest = append(rest, Arg{Value: p.span(start), Sep: ';'})
		p.advance()
	}
	if len(backends) == 0 && len(rest) == 0 {
		return
	}
	// The canonical form always names backends (possibly none), which
	// OVN requires first.
	if len(backends) == 0 {
		backends = []Arg{{}}
	}
	backends[0].Key = "backends"
	c.Args = append(append(c.Args, backends...), rest...)
}

func (p *parser) backendPort() bool {
	if !p.uint16Int() {
		p.errorf("expected a port number, found %s", p.describe())
		return false
	}
	p.advance()
	return true
}

// meterArgs parses set_meter(RATE[, BURST]). Like OVN, it takes whatever
// token stands where a number should be, and counts a non-decimal one as
// 0: a rate of 0 is refused, a burst of 0 means none.
func (p *parser) meterArgs(c *CallAction) {
	if p.tok.Kind != TokLParen {
		p.errorf("expected '(', found %s", p.describe())
		return
	}
	p.advanceLenient()
	c.Parens = true
	num := func() uint64 {
		var v uint64
		if p.plainInt() && p.tok.Format == FmtDecimal {
			v = p.tok.Value.Lo
		}
		p.advance()
		return v
	}
	rate := num()
	var burst uint64
	if p.tok.Kind == TokComma {
		p.advanceLenient()
		burst = num()
	}
	if !p.expect(TokRParen) {
		return
	}
	if rate == 0 {
		p.errorf("set_meter needs a decimal rate above 0")
		return
	}
	c.Args = append(c.Args, Arg{Value: []ArgToken{intToken(rate)}})
	if burst != 0 {
		c.Args = append(c.Args, Arg{Value: []ArgToken{intToken(burst)}, Sep: ','})
	}
}

// isLogSeverity reports whether s is a severity log(severity=...) takes.
func isLogSeverity(s string) bool {
	switch s {
	case "alert", "warning", "notice", "info", "debug":
		return true
	}
	return false
}

// logArgs parses log(verdict=V, name="N", severity=S, meter="M"); a
// verdict is required.
func (p *parser) logArgs(c *CallAction) {
	verdict := false
	if p.accept(TokLParen) {
		c.Parens = true
		for !p.accept(TokRParen) && p.err == nil {
			key := p.tok.Text
			if p.tok.Kind != TokIdent {
				key = ""
			}
			switch key {
			case "verdict", "name", "severity", "meter":
			default:
				p.errorf("log takes verdict=, name=, severity= and meter=, found %s", p.describe())
				return
			}
			p.advance()
			if !p.expect(TokEquals) {
				return
			}
			switch {
			case key == "verdict" && p.tok.Kind == TokIdent && (p.tok.Text == "allow" || p.tok.Text == "drop" || p.tok.Text == "reject"):
				verdict = true
			case key == "verdict":
				p.errorf("log verdict must be allow, drop or reject, not %s", p.describe())
				return
			case key == "severity" && p.tok.Kind == TokIdent && isLogSeverity(p.tok.Text):
			case key == "severity":
				p.errorf("log severity must be alert, warning, notice, info or debug, not %s", p.describe())
				return
			case p.tok.Kind != TokString:
				p.errorf("log %s must be a quoted string, not %s", key, p.describe())
				return
			case key == "name" && len(p.tok.Str) >= 64:
				p.errorf("log name %q is longer than 63 bytes", p.tok.Str)
				return
			}
			p.addToken(c, key, ',')
			p.accept(TokComma)
		}
	}
	if p.err == nil && !verdict {
		p.errorf("log needs verdict=allow, drop or reject")
	}
}

// sampleArgs parses sample(probability=P, collector_set=C, obs_domain=D,
// obs_point=O|$cookie). As in OVN, a non-decimal collector_set or
// obs_domain counts as 0, a non-decimal probability is no value, and the
// probability must end up above 0. The canonical form lists the values
// that are set.
func (p *parser) sampleArgs(c *CallAction) {
	var probability, collectorSet, obsDomain, obsPoint uint64
	cookie := false
	decimal := func() bool { return p.plainInt() && p.tok.Format == FmtDecimal }
	if p.accept(TokLParen) {
		c.Parens = true
		for !p.accept(TokRParen) && p.err == nil {
			switch {
			case p.acceptIdent("probability"):
				if !p.expect(TokEquals) {
					return
				}
				if decimal() {
					if !p.uint16Int() {
						p.errorf("sample probability must be 1 to 65535, not %s", p.tok.Text)
						return
					}
					probability = p.tok.Value.Lo
					p.advance()
				}
			case p.acceptIdent("obs_point"):
				if !p.expect(TokEquals) {
					return
				}
				switch {
				case p.tok.Kind == TokAddrSet && p.tok.Str == "cookie":
					cookie = true
				case decimal():
					obsPoint, cookie = uint64(uint32(p.tok.Value.Lo)), false
				default:
					p.errorf("sample obs_point must be a decimal number or $cookie, not %s", p.describe())
					return
				}
				p.advance()
			case p.acceptIdent("obs_domain"):
				if !p.expectLenient(TokEquals) {
					return
				}
				if decimal() {
					if d := uint32(p.tok.Value.Lo); d > 255 {
						p.errorf("sample obs_domain must be 0 to 255, not %s", p.tok.Text)
						return
					} else {
						obsDomain = uint64(d)
					}
				}
				p.advance()
			case p.acceptIdent("collector_set"):
				if !p.expectLenient(TokEquals) {
					return
				}
				if decimal() {
					collectorSet = uint64(uint32(p.tok.Value.Lo))
				}
				p.advance()
			default:
				p.errorf("sample takes probability=, collector_set=, obs_domain= and obs_point=, found %s", p.describe())
				return
			}
			p.accept(TokComma)
		}
	}
	if p.err != nil {
		return
	}
	if probability == 0 {
		p.errorf("sample needs a probability above 0")
		return
	}
	c.Parens = true
	c.Args = append(c.Args, Arg{Key: "probability", Value: []ArgToken{intToken(probability)}})
	for _, kv := range []struct {
		key string
		v   uint64
	}{{"collector_set", collectorSet}, {"obs_domain", obsDomain}, {"obs_point", obsPoint}} {
		if kv.v != 0 {
			c.Args = append(c.Args, Arg{Key: kv.key, Value: []ArgToken{intToken(kv.v)}, Sep: ','})
		}
	}
	if cookie {
		c.Args = append(c.Args, Arg{Key: "obs_point", Value: []ArgToken{{Kind: TokAddrSet, Text: "$cookie", Str: "cookie"}}, Sep: ','})
	}
}

// boolToken reports whether the current token is true or false, bare or
// quoted, as fwd_group and commit_ecmp_nh take them.
func (p *parser) boolToken() bool {
	switch {
	case p.tok.Kind == TokIdent:
		return p.tok.Text == "true" || p.tok.Text == "false"
	case p.tok.Kind == TokString:
		return p.tok.Str == "true" || p.tok.Str == "false"
	}
	return false
}

// fwdGroupArgs parses fwd_group's optional
// (liveness=true|false, childports="p1", "p2", ...).
func (p *parser) fwdGroupArgs(c *CallAction) {
	if !p.accept(TokLParen) {
		return
	}
	c.Parens = true
	if p.acceptIdent("liveness") {
		if !p.expect(TokEquals) {
			return
		}
		if !p.boolToken() {
			p.errorf("fwd_group liveness must be true or false, not %s", p.describe())
			return
		}
		p.addToken(c, "liveness", 0)
		if !p.expect(TokComma) {
			return
		}
	}
	if !p.acceptIdent("childports") {
		// OVN then expects the ';' that ends the action: the ')' is
		// refused there. The action has no child ports, which is what an
		// empty childports= says too, and that form prints as one that
		// parses again ("fwd_group(;" would print as "fwd_group();").
		c.Args = append(c.Args, Arg{Key: "childports", Sep: ','})
		return
	}
	if !p.expect(TokEquals) {
		return
	}
	ports := 0
	for !p.accept(TokRParen) && p.err == nil {
		if p.tok.Kind != TokString {
			p.errorf("fwd_group childports are quoted port names, found %s", p.describe())
			return
		}
		key := ""
		if ports == 0 {
			key = "childports"
		}
		p.addToken(c, key, ',')
		ports++
		p.accept(TokComma)
	}
	if ports == 0 {
		c.Args = append(c.Args, Arg{Key: "childports", Sep: ','})
	}
}

// commitECMPArgs parses commit_ecmp_nh(ipv6=true|false, proto=P).
func (p *parser) commitECMPArgs(c *CallAction) {
	if !p.expect(TokLParen) {
		return
	}
	c.Parens = true
	if !p.acceptIdent("ipv6") || !p.expect(TokEquals) {
		p.errorf("commit_ecmp_nh takes (ipv6=true|false, proto=tcp|udp|sctp), found %s", p.describe())
		return
	}
	if !p.boolToken() {
		p.errorf("commit_ecmp_nh ipv6 must be true or false, not %s", p.describe())
		return
	}
	p.addToken(c, "ipv6", 0)
	if !p.expect(TokComma) {
		return
	}
	if !p.acceptIdent("proto") || !p.expect(TokEquals) {
		p.errorf("commit_ecmp_nh takes (ipv6=true|false, proto=tcp|udp|sctp), found %s", p.describe())
		return
	}
	if !p.protoToken() {
		return
	}
	p.addToken(c, "proto", ',')
	p.expect(TokRParen)
}

func (p *parser) protoToken() bool {
	if !p.isIdent("tcp") && !p.isIdent("udp") && !p.isIdent("sctp") {
		p.errorf("protocol must be tcp, udp or sctp, not %s", p.describe())
		return false
	}
	return true
}

// commitLBAffArgs parses commit_lb_aff(vip="IP[:PORT]",
// backend="IP[:PORT]"[, proto=P], timeout=T): proto is required when, and
// only when, the VIP has a port.
func (p *parser) commitLBAffArgs(c *CallAction) {
	if !p.expect(TokLParen) {
		return
	}
	c.Parens = true
	addr := func(key string, sep byte) (v6 bool, port int, ok bool) {
		if !p.acceptIdent(key) || !p.expect(TokEquals) {
			p.errorf("commit_lb_aff expects %s=\"IP[:PORT]\", found %s", key, p.describe())
			return false, 0, false
		}
		if p.tok.Kind != TokString {
			p.errorf("commit_lb_aff %s must be a quoted \"IP[:PORT]\", not %s", key, p.describe())
			return false, 0, false
		}
		v6, port, ok = parseHostPort(p.tok.Str)
		if !ok {
			p.errorf("commit_lb_aff %s %q is not IP[:PORT]", key, p.tok.Str)
			return false, 0, false
		}
		p.addToken(c, key, sep)
		return v6, port, p.expect(TokComma)
	}
	vip6, vipPort, ok := addr("vip", 0)
	if !ok {
		return
	}
	backend6, _, ok := addr("backend", ',')
	if !ok {
		return
	}
	if vip6 != backend6 {
		p.errorf("commit_lb_aff vip and backend are not of the same IP version")
		return
	}
	if vipPort != 0 {
		if !p.acceptIdent("proto") || !p.expect(TokEquals) {
			p.errorf("commit_lb_aff with a VIP port needs proto=tcp|udp|sctp, found %s", p.describe())
			return
		}
		if !p.protoToken() {
			return
		}
		p.addToken(c, "proto", ',')
		if !p.expect(TokComma) {
			return
		}
	}
	if !p.acceptIdent("timeout") || !p.expect(TokEquals) {
		p.errorf("commit_lb_aff expects timeout=SECONDS, found %s", p.describe())
		return
	}
	if !p.uint16Int() {
		p.errorf("commit_lb_aff timeout must be 0 to 65535 seconds, not %s", p.describe())
		return
	}
	p.addToken(c, "timeout", ',')
	p.expect(TokRParen)
}

// parseHostPort parses "IPv4[:PORT]", "IPv6" or "[IP][:PORT]" as OVN
// reads load balancer VIPs and backends (ovs's inet_parse_active, without
// name resolution): it returns whether the address is IPv6 and the port
// (0 when absent).
func parseHostPort(s string) (v6 bool, port int, ok bool) {
	host, portText := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return false, 0, false
		}
		host = s[1:end]
		switch rest := s[end+1:]; {
		case rest == "":
		case rest[0] == ':':
			portText = rest[1:]
		default:
			return false, 0, false
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		host, portText = s[:i], s[i+1:]
	}
	if portText != "" {
		n, err := strconv.ParseInt(portText, 10, 64)
		if err != nil || n < 0 || n > 65535 {
			return false, 0, false
		}
		port = int(n)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false, 0, false
	}
	if strings.Contains(host, ":") {
		return true, port, a.Is6()
	}
	return false, port, a.Is4() && a.Zone() == ""
}

// isUUID reports whether s is a UUID written as 8-4-4-4-12 hex digits.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

// eventArgs parses trigger_event(event="NAME", OPTION=VALUE, ...) and
// checks the options of the event (only empty_lb_backends exists).
func (p *parser) eventArgs(c *CallAction) {
	if !p.expect(TokLParen) {
		return
	}
	c.Parens = true
	if !p.acceptIdent("event") {
		p.errorf("trigger_event must start with event=\"...\", found %s", p.describe())
		return
	}
	if !p.expect(TokEquals) {
		return
	}
	if p.tok.Kind != TokString || len(p.tok.Str) >= 64 {
		p.errorf("trigger_event event must be a quoted event name, not %s", p.describe())
		return
	}
	if p.tok.Str != "empty_lb_backends" {
		p.errorf("unknown trigger_event event %q (the only one is \"empty_lb_backends\")", p.tok.Str)
		return
	}
	p.addToken(c, "event", 0)
	p.accept(TokComma)
	var opts []parsedOption
	for !p.accept(TokRParen) && p.err == nil {
		o, ok := p.option(c, lbEventOption, "empty_lb_backends")
		if !ok {
			return
		}
		opts = append(opts, o)
		p.accept(TokComma)
	}
	if p.err != nil {
		return
	}
	for _, o := range opts {
		if len(o.values) != 1 || !o.values[0].IsStr {
			p.errorf("trigger_event option %s takes one quoted value", o.name)
			return
		}
		v := o.values[0].Str
		switch o.name {
		case "vip":
			if _, _, ok := parseHostPort(v); !ok {
				p.errorf("trigger_event vip %q is not a load balancer VIP (IP[:PORT])", v)
				return
			}
		case "protocol":
			if v != "tcp" && v != "udp" && v != "sctp" {
				p.errorf("trigger_event protocol %q is not tcp, udp or sctp", v)
				return
			}
		case "load_balancer":
			if !isUUID(v) {
				p.errorf("trigger_event load_balancer %q is not a UUID", v)
				return
			}
		}
	}
}

// parsedOption is one NAME=VALUE of put_dhcp_opts, put_dhcpv6_opts,
// put_nd_ra_opts or trigger_event: the value is a constant or a set of
// them.
type parsedOption struct {
	name   string
	values []Const
}

// option parses one NAME=VALUE whose NAME lookup knows, checks that its
// value has the option's type (string or number) and appends it to c.
func (p *parser) option(c *CallAction, lookup func(string) (Option, bool), what string) (parsedOption, bool) {
	if p.tok.Kind != TokIdent {
		p.errorf("expected a %s option name, found %s", what, p.describe())
		return parsedOption{}, false
	}
	opt, ok := lookup(p.tok.Text)
	if !ok {
		p.errorf("unknown %s option %q", what, p.tok.Text)
		return parsedOption{}, false
	}
	p.advance()
	if !p.expect(TokEquals) {
		return parsedOption{}, false
	}
	start := p.tok.Pos
	values, ok := p.constSet()
	if !ok {
		return parsedOption{}, false
	}
	if opt.Type != OptHostID && values[0].IsStr != opt.Type.takesString() {
		kind := "a number"
		if opt.Type.takesString() {
			kind = "a quoted string"
		}
		p.errorAt(start, "%s option %s takes %s", what, opt.Name, kind)
		return parsedOption{}, false
	}
	p.addSpan(c, opt.Name, ',', start)
	return parsedOption{name: opt.Name, values: values}, true
}

// constSet parses a constant or a set of constants { c1, c2, ... } (commas
// optional), all strings or all numbers.
func (p *parser) constSet() ([]Const, bool) {
	one := func() (Const, bool) {
		switch p.tok.Kind {
		case TokAddrSet, TokPortGroup:
			p.errorf("%s cannot be used in an action", p.describe())
			return Const{}, false
		}
		return p.actionConst()
	}
	if !p.accept(TokLCurly) {
		c, ok := one()
		return []Const{c}, ok
	}
	var set []Const
	for {
		c, ok := one()
		if !ok {
			return nil, false
		}
		if len(set) > 0 && c.IsStr != set[0].IsStr {
			p.errorf("a set cannot mix strings and numbers")
			return nil, false
		}
		set = append(set, c)
		p.accept(TokComma)
		if p.accept(TokRCurly) {
			return set, true
		}
	}
}

// putOpts parses R = put_dhcp_opts(...), put_dhcpv6_opts(...) or
// put_nd_ra_opts(...): R is one writable bit; the options are those of
// the action's table, each with a value of its type.
func (p *parser) putOpts(c *CallAction, dstPos int, scope writeScope) []parsedOption {
	p.advance()
	p.advance()
	if err := checkField(*c.Result, 1, true, scope); err != nil {
		p.errorAt(dstPos, "%v", err)
		return nil
	}
	lookup, what := DHCPv4Option, "DHCPv4"
	switch c.Name {
	case "put_dhcpv6_opts":
		lookup, what = DHCPv6Option, "DHCPv6"
	case "put_nd_ra_opts":
		lookup, what = RAOption, "router advertisement"
	}
	var opts []parsedOption
	for !p.accept(TokRParen) && p.err == nil {
		o, ok := p.option(c, lookup, what)
		if !ok {
			return nil
		}
		opts = append(opts, o)
		p.accept(TokComma)
	}
	return opts
}

// checkRAOptions checks put_nd_ra_opts' options as OVN does: one value
// each, of the right form; slla always; prefix unless addr_mode is
// dhcpv6_stateful.
func (p *parser) checkRAOptions(opts []parsedOption) {
	stateful, prefix, slla := false, false, false
	for _, o := range opts {
		c := o.values[0]
		ok := len(o.values) == 1
		switch o.name {
		case "addr_mode":
			ok = ok && (c.Str == "slaac" || c.Str == "dhcpv6_stateful" || c.Str == "dhcpv6_stateless")
			stateful = stateful || ok && c.Str == "dhcpv6_stateful"
		case "router_preference":
			ok = ok && (c.Str == "HIGH" || c.Str == "MEDIUM" || c.Str == "LOW")
		case "slla":
			ok = ok && c.Format == FmtMAC
			slla = true
		case "prefix":
			ok = ok && c.Format == FmtIPv6 && c.Masked
			prefix = true
		case "mtu":
			ok = ok && c.Format == FmtDecimal
		case "rdnss":
			ok = ok && c.Format == FmtIPv6
		}
		if !ok {
			p.errorf("put_nd_ra_opts: invalid value for option %s", o.name)
			return
		}
	}
	switch {
	case !slla:
		p.errorf("put_nd_ra_opts needs the slla option")
	case !stateful && !prefix:
		p.errorf("put_nd_ra_opts needs the prefix option unless addr_mode is \"dhcpv6_stateful\"")
	}
}

// resultArgs parses what follows R = in an isResultAction action, whose
// name is the current token (and '(' the next).
func (p *parser) resultArgs(c *CallAction, dstPos int, scope writeScope) {
	dst := *c.Result
	oneBit := func() bool {
		if err := checkField(dst, 1, true, scope); err != nil {
			p.errorAt(dstPos, "%v", err)
			return false
		}
		return true
	}
	switch c.Name {
	case "put_dhcp_opts":
		opts := p.putOpts(c, dstPos, scope)
		if p.err != nil {
			return
		}
		for _, o := range opts {
			if o.name == "offerip" {
				return
			}
		}
		p.errorf("put_dhcp_opts needs the offerip option")
	case "put_dhcpv6_opts":
		p.putOpts(c, dstPos, scope)
	case "put_nd_ra_opts":
		if opts := p.putOpts(c, dstPos, scope); p.err == nil {
			p.checkRAOptions(opts)
		}
	case "dns_lookup", "chk_lb_hairpin", "chk_lb_hairpin_reply", "check_in_port_sec",
		"check_out_port_sec", "chk_ecmp_nh_mac", "chk_ecmp_nh", "chk_lb_aff":
		p.advance()
		p.advance()
		if !p.accept(TokRParen) {
			p.errorf("%s takes no arguments, found %s", c.Name, p.describe())
			return
		}
		oneBit()
	case "check_pkt_larger":
		if !oneBit() {
			return
		}
		p.advance()
		p.advance()
		if !p.smallInt() {
			if p.tok.Kind == TokSemicolon {
				// As for set_queue(: no error, and no action.
				c.Name = ""
				return
			}
			p.errorf("check_pkt_larger takes a decimal packet length, found %s", p.describe())
			return
		}
		p.addToken(c, "", 0)
		p.expect(TokRParen)
	case "lookup_arp", "lookup_nd", "lookup_arp_ip", "lookup_nd_ip":
		if !oneBit() {
			return
		}
		p.advance()
		p.advance()
		width := 32
		if strings.HasPrefix(c.Name, "lookup_nd") {
			width = 128
		}
		if !p.fieldArg(c, 0, 0, false, scope) || !p.expect(TokComma) || !p.fieldArg(c, ',', width, false, scope) {
			return
		}
		if !strings.HasSuffix(c.Name, "_ip") && (!p.expect(TokComma) || !p.fieldArg(c, ',', 48, false, scope)) {
			return
		}
		p.expect(TokRParen)
	case "get_fdb":
		p.advance()
		p.advance()
		// A port (outport, inport) or a 32-bit register.
		if dst.Sym.Kind != KindString {
			if err := checkField(dst, 32, true, scope); err != nil {
				p.errorAt(dstPos, "%v", err)
				return
			}
		}
		if p.fieldArg(c, 0, 48, false, scope) {
			p.expect(TokRParen)
		}
	case "lookup_fdb":
		if !oneBit() {
			return
		}
		p.advance()
		p.advance()
		if p.fieldArg(c, 0, 0, false, scope) && p.expect(TokComma) && p.fieldArg(c, ',', 48, false, scope) {
			p.expect(TokRParen)
		}
	case "select":
		p.selectArgs(c, dstPos, scope)
	}
}

// selectArgs parses R = select(ID[=WEIGHT], ...): R writable and of 16
// bits or more, at least two members, weights 1 to 65535.
func (p *parser) selectArgs(c *CallAction, dstPos int, scope writeScope) {
	dst := *c.Result
	if err := checkWritable(dst, scope); err != nil {
		p.errorAt(dstPos, "%v", err)
		return
	}
	if w := fieldWidth(dst); w < 16 {
		p.errorAt(dstPos, "select needs a result of 16 bits or more, not %d-bit %s", w, refText(dst))
		return
	}
	p.advance()
	p.advance()
	n := 0
	for !p.accept(TokRParen) && p.err == nil {
		if !p.uint16Int() {
			p.errorf("select members are numbers 0 to 65535, found %s", p.describe())
			return
		}
		id := p.tok.Value.Lo
		p.advance()
		arg := Arg{Value: []ArgToken{intToken(id)}, Sep: ','}
		if p.accept(TokEquals) {
			if !p.uint16Int() {
				p.errorf("select weights are numbers 1 to 65535, found %s", p.describe())
				return
			}
			if p.tok.Value.Lo == 0 {
				p.errorf("select weight cannot be 0")
				return
			}
			arg = Arg{Key: strconv.FormatUint(id, 10), Value: []ArgToken{intToken(p.tok.Value.Lo)}, Sep: ','}
			p.advance()
		}
		c.Args = append(c.Args, arg)
		n++
		p.accept(TokComma)
	}
	if p.err == nil && n < 2 {
		p.errorf("select needs at least 2 members, found %d", n)
	}
}

// ctCommit parses ct_commit;, ct_commit { ... }; and the older
// ct_commit(ct_mark=M, ct_label=L); which becomes the ct_commit { }
// that means the same: as in OVN, the last value of each field counts,
// ct_mark keeps its low 32 bits, and a mask of 0 sets nothing.
func (p *parser) ctCommit() Action {
	p.advance()
	switch p.tok.Kind {
	case TokLCurly:
		return p.nested("ct_commit", scopeCTCommit)
	case TokLParen:
	default:
		return &CallAction{Name: "ct_commit"}
	}
	p.advance()
	var mark, label *Const
	for !p.accept(TokRParen) && p.err == nil {
		key := p.tok.Text
		if p.tok.Kind != TokIdent || key != "ct_mark" && key != "ct_label" {
			p.errorf("ct_commit(...) takes ct_mark= and ct_label=, found %s", p.describe())
			return nil
		}
		p.advance()
		if !p.expect(TokEquals) {
			return nil
		}
		if p.tok.Kind != TokInt {
			p.errorf("ct_commit %s takes a number, not %s", key, p.describe())
			return nil
		}
		c, ok := p.actionConst()
		if !ok {
			return nil
		}
		if key == "ct_mark" {
			c = truncateConst(c, 32)
			mark = &c
		} else {
			c = truncateConst(c, 128) // OVN reads up to 1024 bits and keeps 128
			label = &c
		}
		p.accept(TokComma)
	}
	if p.err != nil {
		return nil
	}
	if mark == nil && label == nil {
		return &CallAction{Name: "ct_commit"}
	}
	n := &NestedAction{Name: "ct_commit"}
	for _, f := range []struct {
		name string
		c    *Const
	}{{"ct_mark", mark}, {"ct_label", label}} {
		if f.c == nil {
			continue
		}
		sym := p.symtab.Lookup(f.name)
		if sym == nil {
			p.errorf("ct_commit: no field %s", f.name)
			return nil
		}
		n.Body = append(n.Body, &AssignAction{Dst: FieldRef{Sym: sym}, Value: *f.c})
	}
	return n
}

// truncateConst keeps the low w bits of a constant and its mask, written
// in hexadecimal when that changes them or when its form is wider than w
// bits (an IPv6 "::" for the 32-bit ct_mark), so that it prints as a
// constant the field takes.
func truncateConst(c Const, w int) Const {
	if constWidth(&c) <= w && c.Value.BitLen() <= w && c.Wide == 0 && (!c.Masked || c.Mask.BitLen() <= w && c.MaskWide == 0) {
		return c
	}
	c.Wide, c.MaskWide = 0, 0
	c.Value = c.Value.And(Ones(w))
	c.Format = FmtHex
	if c.Masked {
		c.Mask, c.MaskFmt, c.Prefix = c.Mask.And(Ones(w)), FmtHex, -1
	}
	return c
}

// tokSkipped is a token the lexer refused where OVN's parser skips a token
// without looking at it (set_meter's arguments, the token after ct_lb's
// hash_fields value, ...): there OVN never sees the lexical error. Any
// other use of it is a syntax error.
const tokSkipped TokenKind = 255

// advanceLenient is advance for a token OVN skips unseen: a token the
// lexer refuses becomes a tokSkipped that spans it, as far as OVN's lexer
// would have read it, and lexing goes on after it.
func (p *parser) advanceLenient() {
	save := p.lex
	p.tok = p.lex.Next()
	if p.tok.Kind != TokEOF || p.lex.err == nil {
		return
	}
	src := save.src
	start := save.pos
	for start < len(src) && (src[start] == ' ' || src[start] == '\t' || src[start] == '\n' || src[start] == '\r') {
		start++
	}
	end := start + 1
	switch {
	case start >= len(src):
		return
	case src[start] == '"':
		for end < len(src) && src[end] != '"' {
			if src[end] == '\\' {
				end++
			}
			end++
		}
		end = min(end+1, len(src))
	case src[start] >= '0' && src[start] <= '9':
		for end < len(src) && (isIdentChar(src[end]) || src[end] == ':') {
			end++
		}
	}
	p.lex = save
	p.lex.err = nil
	p.lex.pos = end
	p.tok = Token{Kind: tokSkipped, Pos: start, Text: src[start:end]}
}

// expectLenient is expect where OVN skips the token after k unseen.
func (p *parser) expectLenient(k TokenKind) bool {
	if p.tok.Kind != k {
		p.errorf("expected %s, found %s", k, p.describe())
		return false
	}
	p.advanceLenient()
	return true
}
