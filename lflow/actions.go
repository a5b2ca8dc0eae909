package lflow

import (
	"fmt"
	"math"
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

// NextAction is next;, next(N);, next(pipeline=P); or
// next(pipeline=P, table=N).
type NextAction struct {
	Pipeline string // "", "ingress" or "egress"
	Table    int    // -1 for the table after the current one (in Pipeline)
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
// written. Args hold the arguments in a canonical layout: positional ones
// in order; KEY=VALUE ones with Key set; a list such as ct_lb's backends
// or fwd_group's childports as one argument per element, the first
// carrying the key; arguments after a ';' with Sep ';'.
type CallAction struct {
	Result *FieldRef
	Name   string
	Parens bool
	Args   []Arg
}

// maxLogicalTable is the highest table number of a logical pipeline:
// OVN 23.03 has 29 tables in each (ovn-controller refuses next(29)).
const maxLogicalTable = 28

// maxNestedActions is how deep nested actions (clone { clone { ... } })
// may go: OVN refuses a 32nd level.
const maxNestedActions = 31

// writeScope says which fields an assignment may write: outside
// ct_commit { } the packet's fields and registers, inside it only the
// connection's ct_mark and ct_label (and their subfields), as in OVN.
type writeScope uint8

const (
	scopePacket writeScope = iota
	scopeCTCommit
)

// ParseActions parses an actions string as OVN 23.03's ovn-controller
// does: it accepts exactly what OVN accepts and refuses the rest with the
// reason. An empty string (or only comments) means drop, and yields no
// actions.
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
	acts := p.actionList(TokEOF, scopePacket)
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

// peek returns the token after the current one without consuming it.
func (p *parser) peek() Token {
	l := p.lex
	return l.Next()
}

// isIdent reports whether the current token is the identifier name.
func (p *parser) isIdent(name string) bool {
	return p.tok.Kind == TokIdent && p.tok.Text == name
}

// acceptIdent consumes the identifier name if it is the current token.
func (p *parser) acceptIdent(name string) bool {
	if p.isIdent(name) {
		p.advance()
		return true
	}
	return false
}

// actionList parses "action; action; ..." up to and including end
// (TokEOF or TokRCurly). "drop;" is an action list of its own: nothing
// may follow it, as in OVN.
func (p *parser) actionList(end TokenKind, scope writeScope) []Action {
	if p.isIdent("drop") && p.peek().Kind == TokSemicolon {
		p.advance()
		p.advance()
		if p.tok.Kind != end {
			p.errorf("drop; must be the only action, found %s after it", p.describe())
			return nil
		}
		p.advance()
		return []Action{&CallAction{Name: "drop"}}
	}
	var buf [8]Action
	acts := buf[:0]
	for !p.accept(end) && p.err == nil {
		a := p.action(scope)
		if p.err != nil {
			return nil
		}
		if a != nil {
			acts = append(acts, a)
		}
		if !p.accept(TokSemicolon) {
			p.errorf("expected ';' after action, found %s", p.describe())
			return nil
		}
	}
	if p.err != nil || len(acts) == 0 {
		return nil
	}
	return slices.Clone(acts)
}

func (p *parser) action(scope writeScope) Action {
	if p.tok.Kind != TokIdent {
		p.errorf("expected an action, found %s", p.describe())
		return nil
	}
	switch p.peek().Kind {
	case TokEquals, TokExchange, TokLSquare:
		return p.setAction(scope)
	}
	name := p.tok.Text
	switch name {
	case "next":
		return p.next()
	case "ip.ttl":
		p.advance()
		if !p.accept(TokDecrement) {
			p.errorf("expected '--' after ip.ttl, found %s", p.describe())
			return nil
		}
		return &DecTTLAction{}
	case "output", "ct_next", "ct_clear", "ct_commit_nat", "igmp",
		"handle_dhcpv6_reply", "ct_snat_to_vip":
		p.advance()
		return &CallAction{Name: name}
	case "ct_commit":
		return p.ctCommit()
	case "clone":
		p.advance()
		return p.nested(name, scopePacket)
	case "arp", "icmp4", "icmp4_error", "icmp6", "icmp6_error", "tcp_reset",
		"sctp_abort", "nd_na", "nd_na_router", "nd_ns", "reject":
		p.advance()
		return p.nested(name, scope)
	}
	if isCallAction(name) {
		p.advance()
		c := &CallAction{Name: name}
		p.callArgs(c, scope)
		return orNothing(c)
	}
	if name == "drop" {
		p.errorf("drop; must be the only action of its list")
		return nil
	}
	p.errorf("unknown action %q", name)
	return nil
}

// orNothing returns c, or nil when its parser found that OVN adds no
// action for it (set_queue(;), whose name it then cleared.
func orNothing(c *CallAction) Action {
	if c.Name == "" {
		return nil
	}
	return c
}

// nested parses the { actions } of action name, whose name has been
// read. Inside, fields are writable as in scope.
func (p *parser) nested(name string, scope writeScope) Action {
	if !p.accept(TokLCurly) {
		p.errorf("%s needs nested actions in { }, found %s", name, p.describe())
		return nil
	}
	if p.depth >= maxNestedActions {
		p.errorf("actions nested more than %d deep", maxNestedActions)
		return nil
	}
	p.depth++
	body := p.actionList(TokRCurly, scope)
	p.depth--
	if p.err != nil {
		return nil
	}
	return &NestedAction{Name: name, Body: body}
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
	if p.smallInt() {
		n.Table = int(p.tok.Value.Lo)
		p.advance()
	} else {
		for {
			switch {
			case p.acceptIdent("pipeline"):
				if !p.expect(TokEquals) {
					return nil
				}
				if !p.isIdent("ingress") && !p.isIdent("egress") {
					p.errorf("pipeline must be ingress or egress, not %s", p.describe())
					return nil
				}
				n.Pipeline = p.tok.Text
				p.advance()
			case p.acceptIdent("table"):
				if !p.expect(TokEquals) {
					return nil
				}
				if !p.smallInt() {
					p.errorf("expected a table number, found %s", p.describe())
					return nil
				}
				n.Table = int(p.tok.Value.Lo)
				p.advance()
			default:
				p.errorf("next takes a table number or pipeline=, table=; found %s", p.describe())
				return nil
			}
			if !p.accept(TokComma) {
				break
			}
		}
	}
	if !p.expect(TokRParen) {
		return nil
	}
	if n.Table > maxLogicalTable {
		p.errorf("next(%d): a logical pipeline has only tables 0 to %d", n.Table, maxLogicalTable)
		return nil
	}
	return n
}

// plainInt reports whether the current token is a number without a mask.
func (p *parser) plainInt() bool {
	return p.tok.Kind == TokInt && p.peek().Kind != TokSlash
}

// smallInt reports whether the current token is a decimal number without
// a mask that fits an int32: the only numbers OVN takes for table numbers,
// lengths, queue ids, ports and weights.
func (p *parser) smallInt() bool {
	return p.plainInt() && p.tok.Format == FmtDecimal && p.tok.Value.Hi == 0 && p.tok.Value.Lo <= math.MaxInt32
}

// uint16Int reports whether the current token is a smallInt of at most
// 65535.
func (p *parser) uint16Int() bool {
	return p.smallInt() && p.tok.Value.Lo <= 65535
}

// setAction parses an action that starts with a field: an assignment of a
// constant or a field, an exchange, or R = function(...).
func (p *parser) setAction(scope writeScope) Action {
	dstPos := p.tok.Pos
	dst, ok := p.fieldRefValue(nil)
	if !ok {
		return nil
	}
	switch p.tok.Kind {
	case TokExchange:
		p.advance()
		src, ok := p.fieldRefValue(nil)
		if !ok {
			return nil
		}
		if err := checkMove(dst, src, true, scope); err != nil {
			p.errorAt(dstPos, "%v", err)
			return nil
		}
		return &ExchangeAction{A: dst, B: src}
	case TokEquals:
		p.advance()
	default:
		p.errorf("expected '=' or '<->' after %s, found %s", dst.Sym.Name, p.describe())
		return nil
	}
	if p.tok.Kind != TokIdent {
		return p.load(dst, dstPos, scope)
	}
	if isResultAction(p.tok.Text) && p.peek().Kind == TokLParen {
		// A copy, so that dst itself does not escape on every assignment.
		result := dst
		c := &CallAction{Result: &result, Name: p.tok.Text, Parens: true}
		p.resultArgs(c, dstPos, scope)
		return orNothing(c)
	}
	src, ok := p.fieldRefValue(nil)
	if !ok {
		return nil
	}
	if err := checkMove(dst, src, false, scope); err != nil {
		p.errorAt(dstPos, "%v", err)
		return nil
	}
	var a *AssignAction
	if p.arena != nil {
		a = p.arena.assigns.new()
		a.Dst = dst
		a.Src = p.arena.refs.new()
		*a.Src = src
	} else {
		a = &AssignAction{Dst: dst, Src: &src}
	}
	return a
}

// load parses the constant of dst = constant.
func (p *parser) load(dst FieldRef, dstPos int, scope writeScope) Action {
	if err := checkField(dst, fieldWidth(dst), true, scope); err != nil {
		p.errorAt(dstPos, "%v", err)
		return nil
	}
	cpos := p.tok.Pos
	c, ok := p.actionConst()
	if !ok {
		return nil
	}
	if err := checkConstFits(dst.Sym, &c); err != nil {
		p.errorAt(cpos, "%v", err)
		return nil
	}
	var a *AssignAction
	if p.arena != nil {
		a = p.arena.assigns.new()
		a.Dst = dst
	} else {
		a = &AssignAction{Dst: dst}
	}
	a.Value = c
	return a
}

// checkConstFits checks a constant against the field it is assigned to.
// As in OVN, the width that counts is the symbol's (reg0[0] = 2 is
// accepted, its higher bits are dropped), and of a masked constant the
// mask's.
func checkConstFits(sym *Symbol, c *Const) error {
	isStr := sym.Kind == KindString
	switch {
	case isStr && !c.IsStr:
		return fmt.Errorf("%s takes a quoted port name, not a number", sym.Name)
	case !isStr && c.IsStr:
		return fmt.Errorf("%s is an integer field; cannot assign a string", sym.Name)
	case isStr:
		return nil
	}
	// An address is as wide as its kind (00:00:00:00:00:01 is 48 bits),
	// a masked number as its mask, other numbers as their highest 1-bit.
	w := constWidth(c)
	if w > sym.Width {
		return fmt.Errorf("constant %s needs %d bits, more than %d-bit %s has", constText(c), w, sym.Width, sym.Name)
	}
	return nil
}

// actionConst parses a constant of an action: a string, or a number with
// an optional /mask or /prefix-length. Unlike a match, an action accepts
// a value with 1-bits outside its mask; the mask must be written like the
// value (an IPv4 or IPv6 address also takes a prefix length), as in OVN.
func (p *parser) actionConst() (Const, bool) {
	switch p.tok.Kind {
	case TokString:
		c := Const{IsStr: true, Str: p.tok.Str}
		p.advance()
		return c, true
	case TokInt:
	default:
		p.errorf("expected a constant, found %s", p.describe())
		return Const{}, false
	}
	if !checkDecimal(p) {
		return Const{}, false
	}
	c := Const{Value: p.tok.Value, Format: p.tok.Format, Prefix: -1, Wide: p.tok.Wide}
	vtok := p.tok
	p.advance()
	if p.tok.Kind != TokSlash {
		return c, true
	}
	// As in OVN, '/' is part of the number: no space around it.
	slash := p.tok
	p.advance()
	if p.tok.Kind != TokInt {
		p.errorf("expected a mask after '/', found %s", p.describe())
		return Const{}, false
	}
	m := p.tok
	if slash.Pos != vtok.Pos+len(vtok.Text) || m.Pos != slash.Pos+1 {
		p.errorAt(slash.Pos, "'/' must join %s and its mask %s without spaces", vtok.Text, m.Text)
		return Const{}, false
	}
	if !checkDecimal(p) {
		return Const{}, false
	}
	c.Masked = true
	switch {
	case m.Format == vtok.Format:
		c.Mask, c.MaskFmt, c.MaskWide = m.Value, m.Format, m.Wide
	case m.Format == FmtDecimal && (c.Format == FmtIPv4 || c.Format == FmtIPv6):
		w := 32
		if c.Format == FmtIPv6 {
			w = 128
		}
		if m.Value.Hi != 0 || m.Value.Lo > uint64(w) {
			p.errorf("prefix length %s is longer than %d", m.Text, w)
			return Const{}, false
		}
		c.Prefix = int(m.Value.Lo)
		c.Mask = Ones(c.Prefix).Lsh(w - c.Prefix)
	default:
		p.errorf("mask %s is not written like value %s", m.Text, vtok.Text)
		return Const{}, false
	}
	p.advance()
	return c, true
}

// checkDecimal refuses a decimal number of 2**64 or more, as OVN's lexer
// does (hexadecimal numbers may be wider).
func checkDecimal(p *parser) bool {
	if p.tok.Format == FmtDecimal && p.tok.Value.Hi != 0 {
		p.errorf("decimal number %s is 2**64 or more", p.tok.Text)
		return false
	}
	return true
}

// fieldWidth is the width OVN gives a field reference: its bits, or 0 for
// a string field.
func fieldWidth(r FieldRef) int {
	if r.Sym.Kind == KindString {
		return 0
	}
	return r.Width()
}

// checkField checks that r is n bits wide (n = 0: a string field, such as
// a port) and, if rw, that it may be written in scope.
func checkField(r FieldRef, n int, rw bool, scope writeScope) error {
	if w := fieldWidth(r); w != n {
		switch {
		case w > 0 && n > 0:
			return fmt.Errorf("%s is %d bits (%s[%d..%d]) where a %d-bit field is needed", refText(r), w, r.Sym.Name, r.Lo, r.Lo+w-1, n)
		case n > 0:
			return fmt.Errorf("string field %s is used where a %d-bit field is needed", r.Sym.Name, n)
		default:
			return fmt.Errorf("%d-bit field %s is used where a string field (a port) is needed", w, refText(r))
		}
	}
	if rw {
		return checkWritable(r, scope)
	}
	return nil
}

// checkWritable checks that r may be written in scope.
func checkWritable(r FieldRef, scope writeScope) error {
	if r.Sym.ReadOnly || r.Sym.Field != nil && r.Sym.Field.ReadOnly {
		return fmt.Errorf("field %s is read-only", r.Sym.Name)
	}
	if r.Sym.OVNField {
		return nil // OVN lets them be set anywhere
	}
	ct := r.Sym.Field != nil && (r.Sym.Field.Name == "ct_mark" || r.Sym.Field.Name == "ct_label")
	switch {
	case ct && scope != scopeCTCommit:
		return fmt.Errorf("field %s can only be set inside ct_commit { }", r.Sym.Name)
	case !ct && scope == scopeCTCommit:
		return fmt.Errorf("field %s cannot be set inside ct_commit { }, which sets only ct_mark and ct_label", r.Sym.Name)
	}
	return nil
}

// checkMove checks dst = src (or dst <-> src when exchange).
func checkMove(dst, src FieldRef, exchange bool, scope writeScope) error {
	ds, ss := dst.Sym.Kind == KindString, src.Sym.Kind == KindString
	if ds != ss {
		return fmt.Errorf("cannot mix string field and integer field (%s, %s)", dst.Sym.Name, src.Sym.Name)
	}
	if dw, sw := fieldWidth(dst), fieldWidth(src); dw != sw {
		return fmt.Errorf("%s is %d bits but %s is %d bits", refText(dst), dw, refText(src), sw)
	}
	if err := checkWritable(dst, scope); err != nil {
		return err
	}
	if exchange {
		return checkWritable(src, scope)
	}
	return nil
}

func refText(r FieldRef) string {
	var sb strings.Builder
	r.write(&sb)
	return sb.String()
}

// Printing.

func (a *NextAction) write(sb *strings.Builder) {
	sb.WriteString("next")
	switch {
	case a.Pipeline != "" && a.Table < 0:
		fmt.Fprintf(sb, "(pipeline=%s)", a.Pipeline)
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
			sb.WriteString(quote(t.Str))
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
