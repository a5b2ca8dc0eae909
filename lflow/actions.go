package lflow

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Action is one parsed action. The concrete types are *NextAction,
// *AssignAction, *ExchangeAction, *DecTTLAction, *NestedAction and
// *CallAction (which also covers keyword actions such as output; and
// drop;).
type Action interface {
	write(sb *strings.Builder)
}

// FieldRef names a field or some of its bits, as the target or source of
// an action.
type FieldRef struct {
	Sym    *Symbol
	Bits   bool
	Lo, Hi int
}

// Width returns the number of bits referenced.
func (r FieldRef) Width() int {
	if r.Bits {
		return r.Hi - r.Lo + 1
	}
	return r.Sym.Width
}

// BaseOfs returns the offset of the referenced bits inside the
// underlying field (r.Sym.Field).
func (r FieldRef) BaseOfs() int {
	o := r.Sym.Ofs
	if r.Bits {
		o += r.Lo
	}
	return o
}

func (r FieldRef) write(sb *strings.Builder) {
	sb.WriteString(r.Sym.Name)
	if r.Bits {
		sb.WriteByte('[')
		sb.WriteString(strconv.Itoa(r.Lo))
		if r.Hi != r.Lo {
			sb.WriteString("..")
			sb.WriteString(strconv.Itoa(r.Hi))
		}
		sb.WriteByte(']')
	}
}

// NextAction is next; next(N); or next(pipeline=P, table=N).
type NextAction struct {
	Pipeline string // "", "ingress" or "egress"
	Table    int    // -1 for the table after the current one
}

// AssignAction is dst = constant; or dst = src;.
type AssignAction struct {
	Dst   FieldRef
	Src   *FieldRef // nil when the source is a constant
	Value Const
}

// ExchangeAction is a <-> b;.
type ExchangeAction struct{ A, B FieldRef }

// DecTTLAction is ip.ttl--;.
type DecTTLAction struct{}

// NestedAction is name { actions };, e.g. ct_commit { ... }, arp { ... }.
type NestedAction struct {
	Name string
	Body []Action
}

// Arg is one argument of a CallAction: an optional "key =" and a value
// made of tokens (an address, "10.0.0.1:80", a field, a string ...). Sep
// is the separator written before it: ',' or ';' (zero for the first).
type Arg struct {
	Key   string
	Value []ArgToken
	Sep   byte
}

// ArgToken is one token of an argument's value.
type ArgToken struct {
	Kind TokenKind
	// Spaced says white space separated the token from the one before:
	// printing keeps it, because "1 :0" and "1:0" lex differently.
	Spaced bool
	Text   string // identifiers and punctuation
	Str    string // strings
	Value  U128   // numbers
	Format Format
}

// CallAction is any other action: a keyword (output; ct_next;), a call
// (put_arp(inport, arp.spa, arp.sha);), possibly with a result
// (reg0[3] = put_dhcp_opts(...);) — Parens says the parentheses were
// written.
type CallAction struct {
	Result *FieldRef
	Name   string
	Parens bool
	Args   []Arg
}

// actionShape lists the forms an action name accepts.
type actionShape uint8

const (
	shapeBare   actionShape = 1 << iota // name;
	shapeParens                         // name(...);
	shapeBody                           // name { ... };
	shapeResult                         // R = name...;
)

// actionShapes is the catalogue of OVN 23.03 actions (ovn-sb(5)).
func actionShapeOf(name string) (actionShape, bool) {
	switch name {
	case "output", "drop", "ct_clear", "ct_commit_nat", "handle_dhcpv6_reply",
		"igmp", "mld", "handle_bfd_msg", "mac_cache_use", "ct_next", "next":
		return shapeBare, true
	case "ct_dnat", "ct_snat", "ct_dnat_in_czone", "ct_snat_in_czone", "ct_lb", "ct_lb_mark":
		return shapeBare | shapeParens, true
	case "ct_commit":
		return shapeBare | shapeParens | shapeBody, true
	case "clone", "arp", "nd_ns", "nd_na", "nd_na_router", "icmp4", "icmp4_error",
		"icmp6", "icmp6_error", "tcp_reset", "sctp_abort", "reject":
		return shapeBody, true
	case "get_arp", "put_arp", "get_nd", "put_nd", "put_fdb", "bind_vport",
		"handle_svc_check", "log", "set_meter", "set_queue", "trigger_event",
		"fwd_group", "sample", "commit_lb_aff", "commit_ecmp_nh", "push", "pop",
		"ovn_field":
		return shapeParens, true
	case "lookup_arp", "lookup_arp_ip", "lookup_nd", "lookup_nd_ip", "get_fdb",
		"lookup_fdb", "put_dhcp_opts", "put_dhcpv6_opts", "dns_lookup",
		"put_nd_ra_opts", "check_pkt_larger", "chk_lb_hairpin",
		"chk_lb_hairpin_reply", "check_in_port_sec", "check_out_port_sec",
		"chk_ecmp_nh_mac", "chk_ecmp_nh", "chk_lb_aff", "select":
		return shapeResult | shapeParens, true
	case "ct_snat_to_vip":
		return shapeResult | shapeBare, true
	}
	return 0, false
}

// ParseActions parses an actions string. An empty string (or only
// comments) means drop, and yields no actions.
func (t *Symtab) ParseActions(s string) ([]Action, error) {
	p := &parser{symtab: t}
	return p.parseActions(s)
}

func (p *parser) parseActions(s string) ([]Action, error) {
	p.inActions = true
	p.reset(s)
	if p.err != nil {
		return nil, p.err
	}
	acts := p.actionList(TokEOF)
	if p.err != nil {
		return nil, p.err
	}
	return acts, nil
}

// ActionsString prints actions in canonical form; ParseActions reads it
// back to the same actions.
func ActionsString(acts []Action) string {
	var sb strings.Builder
	writeActions(&sb, acts)
	return sb.String()
}

func writeActions(sb *strings.Builder, acts []Action) {
	for i, a := range acts {
		if i > 0 {
			sb.WriteByte(' ')
		}
		a.write(sb)
		sb.WriteByte(';')
	}
}

// actionList parses "action; action; ..." up to end (TokEOF or TokRCurly).
func (p *parser) actionList(end TokenKind) []Action {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		p.errorf("actions nested too deeply")
		return nil
	}
	var buf [8]Action
	acts := buf[:0]
	for p.tok.Kind != end && p.err == nil {
		if p.tok.Kind == TokEOF {
			p.errorf("expected '}' to close nested actions, found end of input")
			return nil
		}
		a := p.action()
		if p.err != nil {
			return nil
		}
		acts = append(acts, a)
		if !p.accept(TokSemicolon) {
			p.errorf("expected ';' after action, found %s", p.describe())
			return nil
		}
	}
	if len(acts) == 0 {
		return nil
	}
	return slices.Clone(acts)
}

func (p *parser) action() Action {
	if p.tok.Kind != TokIdent {
		p.errorf("expected an action, found %s", p.describe())
		return nil
	}
	name := p.tok.Text
	if sym := p.symtab.Lookup(name); sym != nil && sym.Kind != KindPredicate {
		return p.assignment(sym)
	}
	shape, ok := actionShapeOf(name)
	if !ok {
		if p.symtab.Lookup(name) != nil {
			p.errorf("predicate %s cannot be assigned", name)
		} else {
			p.errorf("unknown action or field %q", name)
		}
		return nil
	}
	if name == "next" {
		return p.next()
	}
	p.advance()
	switch {
	case p.tok.Kind == TokLCurly:
		if shape&shapeBody == 0 {
			p.errorf("%s does not take nested actions", name)
			return nil
		}
		p.advance()
		body := p.actionList(TokRCurly)
		if !p.expect(TokRCurly) {
			return nil
		}
		return &NestedAction{Name: name, Body: body}
	case p.tok.Kind == TokLParen:
		if shape&shapeParens == 0 {
			p.errorf("%s does not take arguments", name)
			return nil
		}
		if shape&shapeResult != 0 {
			p.errorf("%s must be used as R = %s(...)", name, name)
			return nil
		}
		c := &CallAction{Name: name, Parens: true}
		c.Args = p.args()
		return c
	default:
		if shape&shapeBare == 0 {
			switch {
			case shape&shapeBody != 0:
				p.errorf("%s needs nested actions in { }", name)
			case shape&shapeResult != 0 && shape&shapeParens != 0:
				p.errorf("%s must be used as R = %s(...)", name, name)
			default:
				p.errorf("%s needs arguments in ( )", name)
			}
			return nil
		}
		return &CallAction{Name: name}
	}
}

func (p *parser) next() Action {
	p.advance()
	var n *NextAction
	if p.arena != nil {
		n = p.arena.nexts.new()
		n.Table = -1
	} else {
		n = &NextAction{Table: -1}
	}
	if !p.accept(TokLParen) {
		return n
	}
	for p.tok.Kind != TokRParen && p.err == nil {
		if p.tok.Kind == TokInt {
			n.Table = p.tableNumber()
		} else if p.tok.Kind == TokIdent && (p.tok.Text == "pipeline" || p.tok.Text == "table") {
			key := p.tok.Text
			p.advance()
			p.expect(TokEquals)
			if key == "table" {
				n.Table = p.tableNumber()
			} else {
				if p.tok.Kind != TokIdent || p.tok.Text != "ingress" && p.tok.Text != "egress" {
					p.errorf("pipeline must be ingress or egress, not %s", p.describe())
					return nil
				}
				n.Pipeline = p.tok.Text
				p.advance()
			}
		} else {
			p.errorf("next takes a table number or pipeline=, table=; found %s", p.describe())
			return nil
		}
		if !p.accept(TokComma) {
			break
		}
	}
	p.expect(TokRParen)
	if p.err == nil && n.Pipeline != "" && n.Table < 0 {
		p.errorf("next(pipeline=%s) needs a table", n.Pipeline)
	}
	return n
}

func (p *parser) tableNumber() int {
	if p.tok.Kind != TokInt || p.tok.Format != FmtDecimal || p.tok.Value.Hi != 0 || p.tok.Value.Lo > 254 {
		p.errorf("expected a table number 0..254, found %s", p.describe())
		return -1
	}
	v := int(p.tok.Value.Lo)
	p.advance()
	return v
}

func (p *parser) assignment(dstSym *Symbol) Action {
	dstPos := p.tok.Pos
	dst, ok := p.fieldRefValue(dstSym)
	if !ok {
		return nil
	}
	switch p.tok.Kind {
	case TokDecrement:
		if dst.Sym.Name != "ip.ttl" || dst.Bits {
			p.errorAt(dstPos, "only ip.ttl can be decremented")
			return nil
		}
		p.advance()
		return &DecTTLAction{}
	case TokExchange:
		p.advance()
		src, ok := p.fieldRefValue(nil)
		if !ok {
			return nil
		}
		if err := checkWritable(dst); err != nil {
			p.errorAt(dstPos, "%v", err)
		} else if err := checkWritable(src); err != nil {
			p.errorAt(dstPos, "%v", err)
		} else if err := checkSameType(dst, src); err != nil {
			p.errorAt(dstPos, "%v", err)
		}
		return &ExchangeAction{A: dst, B: src}
	case TokEquals:
		p.advance()
	default:
		p.errorf("expected '=', '<->' or '--' after %s, found %s", dst.Sym.Name, p.describe())
		return nil
	}
	// R = function(...) or R = keyword.
	var srcSym *Symbol
	if p.tok.Kind == TokIdent {
		srcSym = p.symtab.Lookup(p.tok.Text)
	}
	if p.tok.Kind == TokIdent && srcSym == nil {
		name := p.tok.Text
		shape, ok := actionShapeOf(name)
		if !ok || shape&shapeResult == 0 {
			if ok {
				p.errorf("%s does not return a value", name)
			} else {
				p.errorf("unknown field or function %q", name)
			}
			return nil
		}
		p.advance()
		// A copy, so that dst itself does not escape on every assignment.
		result := dst
		c := &CallAction{Result: &result, Name: name}
		if p.tok.Kind == TokLParen {
			if shape&shapeParens == 0 {
				p.errorf("%s does not take arguments", name)
				return nil
			}
			c.Parens = true
			c.Args = p.args()
		} else if shape&shapeBare == 0 {
			p.errorf("%s needs arguments in ( )", name)
			return nil
		}
		if err := checkResult(dst, name); err != nil {
			p.errorAt(dstPos, "%v", err)
		}
		return c
	}
	if err := checkWritable(dst); err != nil {
		p.errorAt(dstPos, "%v", err)
		return nil
	}
	var a *AssignAction
	if p.arena != nil {
		a = p.arena.assigns.new()
		a.Dst = dst
	} else {
		a = &AssignAction{Dst: dst}
	}
	if p.tok.Kind == TokIdent {
		src, ok := p.fieldRefValue(srcSym)
		if !ok {
			return nil
		}
		if err := checkSameType(dst, src); err != nil {
			p.errorAt(dstPos, "%v", err)
			return nil
		}
		if p.arena != nil {
			a.Src = p.arena.refs.new()
			*a.Src = src
		} else {
			a.Src = &src
		}
		return a
	}
	cpos := p.tok.Pos
	a.Value = p.constant()
	if p.err != nil {
		return nil
	}
	isStr := dst.Sym.Kind == KindString
	switch {
	case isStr != a.Value.IsStr:
		if isStr {
			p.errorAt(cpos, "%s takes a quoted port name", dst.Sym.Name)
		} else {
			p.errorAt(cpos, "%s is an integer field; cannot assign a string", dst.Sym.Name)
		}
	case !isStr && (a.Value.Value.BitLen() > dst.Width() || a.Value.Masked && a.Value.Mask.BitLen() > dst.Width()):
		p.errorAt(cpos, "constant %s does not fit %d-bit %s", constText(&a.Value), dst.Width(), dst.Sym.Name)
	}
	return a
}

func checkWritable(r FieldRef) error {
	if r.Sym.ReadOnly || r.Sym.Field != nil && r.Sym.Field.ReadOnly {
		return fmt.Errorf("field %s is read-only", r.Sym.Name)
	}
	return nil
}

func checkSameType(dst, src FieldRef) error {
	ds, ss := dst.Sym.Kind == KindString, src.Sym.Kind == KindString
	if ds != ss {
		return fmt.Errorf("cannot mix string field and integer field (%s, %s)", dst.Sym.Name, src.Sym.Name)
	}
	if !ds && dst.Width() != src.Width() {
		return fmt.Errorf("%s is %d bits but %s is %d bits", dst.Sym.Name, dst.Width(), src.Sym.Name, src.Width())
	}
	return nil
}

// checkResult checks the destination of R = function(...).
func checkResult(r FieldRef, name string) error {
	if r.Sym.Kind == KindString && name != "get_fdb" {
		return fmt.Errorf("%s cannot store its result in string field %s", name, r.Sym.Name)
	}
	if name == "get_fdb" && r.Sym.Kind != KindString {
		return fmt.Errorf("get_fdb stores a port: its result must be outport or inport")
	}
	return checkWritable(r)
}

// args parses (arg, arg; key=value ...).
func (p *parser) args() []Arg {
	p.advance() // (
	var args []Arg
	var sep byte
	for p.tok.Kind != TokRParen && p.err == nil {
		a := Arg{Sep: sep}
		// key = value, where the key is a name or a number (select(1=50)).
		if p.tok.Kind == TokIdent || p.tok.Kind == TokInt {
			save := p.tok
			saveLex := p.lex
			p.advance()
			if p.tok.Kind == TokEquals {
				a.Key = argTokenText(save)
				p.advance()
			} else {
				p.tok, p.lex = save, saveLex
			}
		}
		prevEnd := p.tok.Pos
		for p.err == nil {
			switch p.tok.Kind {
			case TokComma, TokSemicolon, TokRParen:
			case TokEOF:
				p.errorf("expected ')' to close arguments, found end of input")
			case TokIdent, TokInt, TokString, TokColon, TokMinus, TokSlash,
				TokLSquare, TokRSquare, TokEllipsis, TokAddrSet, TokPortGroup:
				a.Value = append(a.Value, ArgToken{Kind: p.tok.Kind, Spaced: p.tok.Pos > prevEnd, Text: p.tok.Text, Str: p.tok.Str, Value: p.tok.Value, Format: p.tok.Format})
				prevEnd = p.tok.Pos + len(p.tok.Text)
				p.advance()
				continue
			default:
				p.errorf("unexpected %s in arguments", p.describe())
			}
			break
		}
		if p.err != nil {
			return nil
		}
		if len(a.Value) == 0 {
			p.errorf("empty argument")
			return nil
		}
		args = append(args, a)
		switch p.tok.Kind {
		case TokComma:
			sep = ','
			p.advance()
		case TokSemicolon:
			sep = ';'
			p.advance()
		}
	}
	p.expect(TokRParen)
	return args
}

func argTokenText(t Token) string {
	if t.Kind == TokInt {
		var sb strings.Builder
		formatValue(&sb, t.Value, t.Format)
		return sb.String()
	}
	return t.Text
}

// Printing.

func (a *NextAction) write(sb *strings.Builder) {
	sb.WriteString("next")
	switch {
	case a.Pipeline != "":
		fmt.Fprintf(sb, "(pipeline=%s, table=%d)", a.Pipeline, a.Table)
	case a.Table >= 0:
		fmt.Fprintf(sb, "(%d)", a.Table)
	}
}

func (a *AssignAction) write(sb *strings.Builder) {
	a.Dst.write(sb)
	sb.WriteString(" = ")
	if a.Src != nil {
		a.Src.write(sb)
		return
	}
	writeConst(sb, &a.Value)
}

func (a *ExchangeAction) write(sb *strings.Builder) {
	a.A.write(sb)
	sb.WriteString(" <-> ")
	a.B.write(sb)
}

func (*DecTTLAction) write(sb *strings.Builder) { sb.WriteString("ip.ttl--") }

func (a *NestedAction) write(sb *strings.Builder) {
	sb.WriteString(a.Name)
	sb.WriteString(" {")
	if len(a.Body) > 0 {
		sb.WriteByte(' ')
		writeActions(sb, a.Body)
	}
	sb.WriteString(" }")
}

func (a *CallAction) write(sb *strings.Builder) {
	if a.Result != nil {
		a.Result.write(sb)
		sb.WriteString(" = ")
	}
	sb.WriteString(a.Name)
	if !a.Parens {
		return
	}
	sb.WriteByte('(')
	for i, arg := range a.Args {
		if i > 0 {
			sb.WriteByte(arg.Sep)
			sb.WriteByte(' ')
		}
		if arg.Key != "" {
			sb.WriteString(arg.Key)
			sb.WriteString(" = ")
		}
		writeArgValue(sb, arg.Value)
	}
	sb.WriteByte(')')
}

// writeArgValue prints an argument's tokens without spaces, except
// between two words (which the lexer would otherwise glue together).
func writeArgValue(sb *strings.Builder, toks []ArgToken) {
	for i, t := range toks {
		if i > 0 && (t.Spaced || isWordish(toks[i-1].Kind) && isWordish(t.Kind) || colonish(toks[i-1]) && colonish(t)) {
			sb.WriteByte(' ')
		}
		switch t.Kind {
		case TokInt:
			formatValue(sb, t.Value, t.Format)
		case TokString:
			sb.WriteString(strconv.Quote(t.Str))
		default:
			sb.WriteString(t.Text)
		}
	}
}

// colonish reports whether a token can print with a colon at either end
// (":" or an IPv6 address such as "::"), so that two of them in a row
// need a space.
func colonish(t ArgToken) bool {
	return t.Kind == TokColon || t.Kind == TokInt && t.Format == FmtIPv6
}

func isWordish(k TokenKind) bool {
	return k == TokIdent || k == TokInt || k == TokString || k == TokAddrSet || k == TokPortGroup
}

// Arg returns the value of the argument called key and whether it exists.
func (a *CallAction) Arg(key string) ([]ArgToken, bool) {
	for _, arg := range a.Args {
		if arg.Key == key {
			return arg.Value, true
		}
	}
	return nil, false
}
