package lflow

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Expr is a parsed match expression. The concrete types are *BoolExpr,
// *AndExpr, *OrExpr, *NotExpr, *CmpExpr, *PredExpr and *FuncExpr. Parsed
// expressions may share nodes (every mention of a predicate is one node):
// treat them as read-only.
type Expr interface {
	// write appends the expression's text; prec is the binding strength
	// of the context (see precedence constants).
	write(sb *strings.Builder, prec int)
}

const (
	precTop   = iota // whole expression
	precAndOr        // operand of && or ||: another && / || needs parentheses
	precNot          // operand of !: a comparison needs parentheses
)

// BoolExpr is the literal 1 (true) or 0 (false).
type BoolExpr struct{ Value bool }

// AndExpr is X1 && X2 && ...
type AndExpr struct{ Terms []Expr }

// OrExpr is X1 || X2 || ...
type OrExpr struct{ Terms []Expr }

// NotExpr is !X.
type NotExpr struct{ X Expr }

// PredExpr is a mention of a predicate such as ip4 or tcp.
type PredExpr struct{ Sym *Symbol }

// FuncExpr is a function in a match; OVN has one, is_chassis_resident("p").
type FuncExpr struct {
	Name string
	Arg  string
}

// Const is a constant: an integer with an optional mask, or a string.
type Const struct {
	Value U128
	Mask  U128 // meaningful when Masked
	// Masked says a mask was written; Prefix>=0 says it was written as a
	// CIDR prefix length.
	Masked  bool
	Prefix  int
	Format  Format
	MaskFmt Format
	IsStr   bool
	Str     string
}

// RefKind says what a CmpExpr compares against.
type RefKind uint8

// Right-hand sides of a comparison.
const (
	RefConst     RefKind = iota // one constant
	RefSet                      // { c1, c2, ... } (may contain set references)
	RefAddrSet                  // $name
	RefPortGroup                // @name
)

// SetElem is an element of a braced set: a constant or a reference.
type SetElem struct {
	Kind RefKind // RefConst, RefAddrSet or RefPortGroup
	C    Const
	Name string
}

// CmpExpr is a comparison of a field (or some of its bits) with a
// constant, a set, or a named set.
type CmpExpr struct {
	Sym *Symbol
	// Lo..Hi is the range of bits of Sym written in brackets; Bits says
	// brackets were written.
	Bits   bool
	Lo, Hi int
	Op     TokenKind // TokEq, TokNe, TokLt, TokLe, TokGt, TokGe
	// Implicit marks a bare mention of a one-bit field ("ct.new",
	// "reg0[3]"), which means == 1.
	Implicit bool
	Kind     RefKind
	C        Const     // RefConst
	Set      []SetElem // RefSet
	Name     string    // RefAddrSet / RefPortGroup
}

// Width returns the number of bits compared.
func (c *CmpExpr) Width() int {
	if c.Bits {
		return c.Hi - c.Lo + 1
	}
	return c.Sym.Width
}

// ParseExpr parses a match expression.
func (t *Symtab) ParseExpr(s string) (Expr, error) {
	p := &parser{symtab: t}
	return p.parseExpr(s)
}

// ExprString returns e's canonical text, which ParseExpr reads back to an
// equal expression.
func ExprString(e Expr) string {
	var sb strings.Builder
	e.write(&sb, precTop)
	return sb.String()
}

// parser is a recursive-descent parser over the lexer with one token of
// lookahead. It is shared by matches and actions.
type parser struct {
	symtab *Symtab
	lex    Lexer
	tok    Token
	err    error
	depth  int
	// inActions is set while parsing actions, where OVN fields may be
	// assigned.
	inActions bool
	// arena, if set, provides the nodes of the tree (see astArena).
	arena *astArena
}

func (p *parser) newCmp(r FieldRef) *CmpExpr {
	if p.arena == nil {
		return &CmpExpr{Sym: r.Sym, Bits: r.Bits, Lo: r.Lo, Hi: r.Hi}
	}
	c := p.arena.cmps.new()
	c.Sym, c.Bits, c.Lo, c.Hi = r.Sym, r.Bits, r.Lo, r.Hi
	return c
}

// junction returns the conjunction (and) or disjunction of terms, which
// may be the parser's scratch space.
func (p *parser) junction(and bool, terms []Expr) Expr {
	if p.arena == nil {
		owned := slices.Clone(terms)
		if and {
			return &AndExpr{Terms: owned}
		}
		return &OrExpr{Terms: owned}
	}
	owned := p.arena.exprs.slice(terms)
	if and {
		e := p.arena.ands.new()
		e.Terms = owned
		return e
	}
	e := p.arena.ors.new()
	e.Terms = owned
	return e
}

// maxDepth bounds nesting so that hostile input cannot exhaust the stack.
const maxDepth = 100

func (p *parser) reset(s string) {
	p.lex.Reset(s)
	p.err = nil
	p.depth = 0
	p.advance()
}

func (p *parser) advance() {
	p.tok = p.lex.Next()
	if p.tok.Kind == TokEOF && p.lex.err != nil && p.err == nil {
		p.err = p.lex.err
	}
}

func (p *parser) errorf(format string, args ...any) {
	p.errorAt(p.tok.Pos, format, args...)
}

func (p *parser) errorAt(pos int, format string, args ...any) {
	if p.err == nil {
		p.err = &SyntaxError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
	}
	// Stop parsing: every further token is EOF.
	p.tok = Token{Kind: TokEOF, Pos: p.tok.Pos}
	p.lex.pos = len(p.lex.src)
}

func (p *parser) describe() string {
	if p.tok.Kind == TokEOF {
		return "end of input"
	}
	return strconv.Quote(p.tok.Text)
}

func (p *parser) expect(k TokenKind) bool {
	if p.tok.Kind != k {
		p.errorf("expected %s, found %s", k, p.describe())
		return false
	}
	p.advance()
	return true
}

func (p *parser) accept(k TokenKind) bool {
	if p.tok.Kind == k {
		p.advance()
		return true
	}
	return false
}

func (p *parser) parseExpr(s string) (Expr, error) {
	p.reset(s)
	if p.err != nil {
		return nil, p.err
	}
	e := p.orAnd()
	if p.err == nil && p.tok.Kind != TokEOF {
		p.errorf("unexpected %s after expression", p.describe())
	}
	if p.err != nil {
		return nil, p.err
	}
	return e, nil
}

// orAnd parses X && Y && ... or X || Y || ...; mixing them needs
// parentheses, as in OVN.
func (p *parser) orAnd() Expr {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		p.errorf("expression nested too deeply")
		return &BoolExpr{}
	}
	first := p.not()
	op := p.tok.Kind
	if op != TokAnd && op != TokOr {
		return first
	}
	var buf [8]Expr
	terms := append(buf[:0], first)
	for p.tok.Kind == TokAnd || p.tok.Kind == TokOr {
		if p.tok.Kind != op {
			p.errorf("&& and || must be parenthesized when used together")
			return first
		}
		p.advance()
		terms = append(terms, p.not())
	}
	return p.junction(op == TokAnd, terms)
}

func (p *parser) not() Expr {
	if p.tok.Kind == TokNot {
		p.advance()
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > maxDepth {
			p.errorf("expression nested too deeply")
			return &BoolExpr{}
		}
		return &NotExpr{X: p.not()}
	}
	return p.primary()
}

func isRelop(k TokenKind) bool {
	return k >= TokEq && k <= TokGe
}

// flipRelop returns the operator for swapped operands (a < b is b > a).
func flipRelop(k TokenKind) TokenKind {
	switch k {
	case TokLt:
		return TokGt
	case TokLe:
		return TokGe
	case TokGt:
		return TokLt
	case TokGe:
		return TokLe
	}
	return k
}

func (p *parser) primary() Expr {
	switch p.tok.Kind {
	case TokLParen:
		p.advance()
		e := p.orAnd()
		p.expect(TokRParen)
		return e
	case TokInt, TokString:
		// "0", "1", or a constant on the left: 80 == tcp.src,
		// 1024 <= tcp.src <= 49151.
		c := p.constant()
		if p.err != nil {
			return &BoolExpr{}
		}
		if !isRelop(p.tok.Kind) {
			if !c.IsStr && !c.Masked && c.Value.Hi == 0 && c.Value.Lo <= 1 && c.Format == FmtDecimal {
				return &BoolExpr{Value: c.Value.Lo == 1}
			}
			p.errorf("constant %s must be compared with a field", constText(&c))
			return &BoolExpr{}
		}
		op := flipRelop(p.tok.Kind)
		p.advance()
		cmp := p.fieldRef()
		if p.err != nil {
			return &BoolExpr{}
		}
		cmp.Op, cmp.Kind, cmp.C = op, RefConst, c
		p.checkCmp(cmp)
		if isRelop(p.tok.Kind) {
			// a <= x <= b
			op2 := p.tok.Kind
			p.advance()
			cmp2 := *cmp
			cmp2.Op = op2
			p.rhs(&cmp2)
			p.checkCmp(&cmp2)
			return &AndExpr{Terms: []Expr{cmp, &cmp2}}
		}
		return cmp
	case TokIdent:
		if p.tok.Text == "is_chassis_resident" {
			p.advance()
			p.expect(TokLParen)
			arg := p.tok.Str
			if !p.expect(TokString) {
				return &BoolExpr{}
			}
			p.expect(TokRParen)
			return &FuncExpr{Name: "is_chassis_resident", Arg: arg}
		}
		sym := p.symtab.Lookup(p.tok.Text)
		if sym != nil && sym.Kind == KindPredicate {
			p.advance()
			if isRelop(p.tok.Kind) {
				p.errorf("predicate %s cannot be compared; use it alone or negate it with !", sym.Name)
			}
			// Every mention of a predicate shares one node: parsed
			// expressions are read-only.
			return sym.mention
		}
		r, ok := p.fieldRefValue(sym)
		if !ok {
			return &BoolExpr{}
		}
		cmp := p.newCmp(r)
		if !isRelop(p.tok.Kind) {
			if cmp.Width() != 1 {
				p.errorf("explicit comparison required for %d-bit field %s (only one-bit fields may be used alone)", cmp.Width(), fieldText(cmp))
				return &BoolExpr{}
			}
			cmp.Op, cmp.Implicit, cmp.Kind = TokEq, true, RefConst
			cmp.C = Const{Value: U128{Lo: 1}}
			return cmp
		}
		cmp.Op = p.tok.Kind
		p.advance()
		p.rhs(cmp)
		p.checkCmp(cmp)
		return cmp
	}
	p.errorf("expected a field, predicate, constant or '(', found %s", p.describe())
	return &BoolExpr{}
}

// fieldRef parses a field name with optional [lo..hi] bits into a new
// comparison node.
func (p *parser) fieldRef() *CmpExpr {
	r, ok := p.fieldRefValue(nil)
	if !ok {
		return nil
	}
	return &CmpExpr{Sym: r.Sym, Bits: r.Bits, Lo: r.Lo, Hi: r.Hi}
}

// fieldRefValue parses a field name (already looked up as sym, if not
// nil) with optional [lo..hi] bits.
func (p *parser) fieldRefValue(sym *Symbol) (FieldRef, bool) {
	if p.tok.Kind != TokIdent {
		p.errorf("expected a field name, found %s", p.describe())
		return FieldRef{}, false
	}
	if sym == nil {
		sym = p.symtab.Lookup(p.tok.Text)
	}
	if sym == nil {
		p.errorf("unknown field %s", p.tok.Text)
		return FieldRef{}, false
	}
	if sym.Kind == KindPredicate {
		p.errorf("predicate %s used where a field is needed", sym.Name)
		return FieldRef{}, false
	}
	if sym.OVNField && !p.inActions {
		p.errorf("%s can only be assigned, not matched", sym.Name)
		return FieldRef{}, false
	}
	p.advance()
	r := FieldRef{Sym: sym}
	if p.tok.Kind == TokLSquare {
		lo, hi, ok := p.bitRange(sym)
		if !ok {
			return FieldRef{}, false
		}
		r.Bits, r.Lo, r.Hi = true, lo, hi
	}
	return r, true
}

// bitRange parses [n] or [lo..hi] after a field.
func (p *parser) bitRange(sym *Symbol) (lo, hi int, ok bool) {
	p.advance() // [
	if sym.Kind == KindString {
		p.errorf("string field %s has no bits to select", sym.Name)
		return 0, 0, false
	}
	if sym.Nominal {
		p.errorf("cannot select bits of nominal field %s", sym.Name)
		return 0, 0, false
	}
	readInt := func() int {
		if p.tok.Kind != TokInt || p.tok.Format != FmtDecimal || p.tok.Value.Hi != 0 || p.tok.Value.Lo > 1000 {
			p.errorf("expected a bit number, found %s", p.describe())
			return -1
		}
		v := int(p.tok.Value.Lo)
		p.advance()
		return v
	}
	lo = readInt()
	hi = lo
	if p.err == nil && p.accept(TokEllipsis) {
		hi = readInt()
	}
	if p.err != nil || !p.expect(TokRSquare) {
		return 0, 0, false
	}
	if lo > hi {
		p.errorf("bit range %d..%d of %s is backwards", lo, hi, sym.Name)
		return 0, 0, false
	}
	if hi >= sym.Width {
		p.errorf("bit %d is outside %d-bit field %s", hi, sym.Width, sym.Name)
		return 0, 0, false
	}
	return lo, hi, true
}

// rhs parses the right side of a comparison.
func (p *parser) rhs(cmp *CmpExpr) {
	switch p.tok.Kind {
	case TokAddrSet:
		cmp.Kind, cmp.Name = RefAddrSet, p.tok.Str
		p.advance()
	case TokPortGroup:
		cmp.Kind, cmp.Name = RefPortGroup, p.tok.Str
		p.advance()
	case TokLCurly:
		p.advance()
		cmp.Kind = RefSet
		for p.tok.Kind != TokRCurly && p.err == nil {
			switch p.tok.Kind {
			case TokAddrSet:
				cmp.Set = append(cmp.Set, SetElem{Kind: RefAddrSet, Name: p.tok.Str})
				p.advance()
			case TokPortGroup:
				cmp.Set = append(cmp.Set, SetElem{Kind: RefPortGroup, Name: p.tok.Str})
				p.advance()
			default:
				cmp.Set = append(cmp.Set, SetElem{Kind: RefConst, C: p.constant()})
			}
			p.accept(TokComma)
		}
		p.expect(TokRCurly)
		if p.err == nil && len(cmp.Set) == 0 {
			p.errorf("empty set")
		}
	default:
		cmp.Kind = RefConst
		cmp.C = p.constant()
	}
}

// constant parses INT[/INT] or STRING.
func (p *parser) constant() Const {
	switch p.tok.Kind {
	case TokString:
		c := Const{IsStr: true, Str: p.tok.Str}
		p.advance()
		return c
	case TokInt:
		pos := p.tok.Pos
		c := Const{Value: p.tok.Value, Format: p.tok.Format, Prefix: -1}
		p.advance()
		if p.tok.Kind == TokSlash {
			p.advance()
			if p.tok.Kind != TokInt {
				p.errorf("expected a mask after '/', found %s", p.describe())
				return c
			}
			c.Masked = true
			m := p.tok
			p.advance()
			if m.Format == FmtDecimal && (c.Format == FmtIPv4 || c.Format == FmtIPv6) {
				w := 32
				if c.Format == FmtIPv6 {
					w = 128
				}
				if m.Value.Hi != 0 || m.Value.Lo > uint64(w) {
					p.errorf("prefix length %s is longer than %d", m.Text, w)
					return c
				}
				c.Prefix = int(m.Value.Lo)
				c.Mask = Ones(c.Prefix).Lsh(w - c.Prefix)
			} else {
				c.Mask, c.MaskFmt = m.Value, m.Format
			}
			if !c.Value.And(c.Mask.Not()).IsZero() {
				p.errorAt(pos, "value %s has 1-bits outside its mask", constText(&c))
			}
		}
		return c
	}
	p.errorf("expected a constant, found %s", p.describe())
	return Const{}
}

// checkCmp checks a comparison against its field's type.
func (p *parser) checkCmp(cmp *CmpExpr) {
	if p.err != nil {
		return
	}
	sym := cmp.Sym
	isStr := sym.Kind == KindString
	if (cmp.Op != TokEq && cmp.Op != TokNe) && (sym.Nominal || isStr) {
		p.errorf("only == and != can compare nominal field %s", sym.Name)
		return
	}
	if cmp.Op != TokEq && cmp.Op != TokNe && cmp.Kind != RefConst {
		p.errorf("%s cannot compare %s with a set", cmp.Op, sym.Name)
		return
	}
	check := func(c *Const) {
		if isStr != c.IsStr {
			if isStr {
				p.errorf("%s is a string field; compare it with a quoted port name", sym.Name)
			} else {
				p.errorf("%s is an integer field; cannot compare it with string %q", fieldText(cmp), c.Str)
			}
			return
		}
		if isStr {
			return
		}
		if cmp.Op != TokEq && cmp.Op != TokNe && c.Masked {
			p.errorf("%s cannot take a masked constant", cmp.Op)
			return
		}
		w := cmp.Width()
		if c.Value.BitLen() > w || c.Masked && c.Mask.BitLen() > w {
			p.errorf("constant %s is wider than the %d-bit field %s", constText(c), w, fieldText(cmp))
		}
	}
	switch cmp.Kind {
	case RefConst:
		check(&cmp.C)
	case RefSet:
		for i := range cmp.Set {
			e := &cmp.Set[i]
			switch e.Kind {
			case RefConst:
				check(&e.C)
			case RefPortGroup:
				if !isStr {
					p.errorf("port group @%s can only be compared with inport or outport", e.Name)
				}
			case RefAddrSet:
				if isStr {
					p.errorf("address set $%s cannot be compared with string field %s", e.Name, sym.Name)
				}
			}
		}
	case RefPortGroup:
		if !isStr {
			p.errorf("port group @%s can only be compared with inport or outport", cmp.Name)
		}
	case RefAddrSet:
		if isStr {
			p.errorf("address set $%s cannot be compared with string field %s", cmp.Name, sym.Name)
		}
	}
}

// Printing.

func (e *BoolExpr) write(sb *strings.Builder, _ int) {
	if e.Value {
		sb.WriteByte('1')
	} else {
		sb.WriteByte('0')
	}
}

func writeTerms(sb *strings.Builder, prec int, terms []Expr, op string) {
	if prec > precTop {
		sb.WriteByte('(')
	}
	for i, t := range terms {
		if i > 0 {
			sb.WriteString(op)
		}
		t.write(sb, precAndOr)
	}
	if prec > precTop {
		sb.WriteByte(')')
	}
}

func (e *AndExpr) write(sb *strings.Builder, prec int) { writeTerms(sb, prec, e.Terms, " && ") }
func (e *OrExpr) write(sb *strings.Builder, prec int)  { writeTerms(sb, prec, e.Terms, " || ") }

func (e *NotExpr) write(sb *strings.Builder, _ int) {
	sb.WriteByte('!')
	e.X.write(sb, precNot)
}

func (e *PredExpr) write(sb *strings.Builder, _ int) { sb.WriteString(e.Sym.Name) }

func (e *FuncExpr) write(sb *strings.Builder, _ int) {
	sb.WriteString(e.Name)
	sb.WriteByte('(')
	sb.WriteString(strconv.Quote(e.Arg))
	sb.WriteByte(')')
}

func fieldText(c *CmpExpr) string {
	var sb strings.Builder
	writeField(&sb, c)
	return sb.String()
}

func writeField(sb *strings.Builder, c *CmpExpr) {
	sb.WriteString(c.Sym.Name)
	if c.Bits {
		sb.WriteByte('[')
		sb.WriteString(strconv.Itoa(c.Lo))
		if c.Hi != c.Lo {
			sb.WriteString("..")
			sb.WriteString(strconv.Itoa(c.Hi))
		}
		sb.WriteByte(']')
	}
}

func constText(c *Const) string {
	var sb strings.Builder
	writeConst(&sb, c)
	return sb.String()
}

func writeConst(sb *strings.Builder, c *Const) {
	if c.IsStr {
		sb.WriteString(strconv.Quote(c.Str))
		return
	}
	formatValue(sb, c.Value, c.Format)
	if c.Masked {
		sb.WriteByte('/')
		if c.Prefix >= 0 && (c.Format == FmtIPv4 || c.Format == FmtIPv6) {
			sb.WriteString(strconv.Itoa(c.Prefix))
		} else {
			formatValue(sb, c.Mask, c.MaskFmt)
		}
	}
}

func relopText(k TokenKind) string {
	switch k {
	case TokEq:
		return "=="
	case TokNe:
		return "!="
	case TokLt:
		return "<"
	case TokLe:
		return "<="
	case TokGt:
		return ">"
	case TokGe:
		return ">="
	}
	return k.String()
}

func (e *CmpExpr) write(sb *strings.Builder, prec int) {
	if e.Implicit {
		writeField(sb, e)
		return
	}
	if prec == precNot {
		sb.WriteByte('(')
	}
	writeField(sb, e)
	sb.WriteByte(' ')
	sb.WriteString(relopText(e.Op))
	sb.WriteByte(' ')
	switch e.Kind {
	case RefConst:
		writeConst(sb, &e.C)
	case RefAddrSet:
		sb.WriteByte('$')
		sb.WriteString(e.Name)
	case RefPortGroup:
		sb.WriteByte('@')
		sb.WriteString(e.Name)
	case RefSet:
		sb.WriteByte('{')
		for i := range e.Set {
			if i > 0 {
				sb.WriteString(", ")
			}
			switch el := &e.Set[i]; el.Kind {
			case RefConst:
				writeConst(sb, &el.C)
			case RefAddrSet:
				sb.WriteByte('$')
				sb.WriteString(el.Name)
			case RefPortGroup:
				sb.WriteByte('@')
				sb.WriteString(el.Name)
			}
		}
		sb.WriteByte('}')
	}
	if prec == precNot {
		sb.WriteByte(')')
	}
}
