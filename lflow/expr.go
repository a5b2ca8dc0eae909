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
	// Wide and MaskWide are Token.Wide of the value and of the mask: a
	// hexadecimal number wider than 128 bits, of which Value (Mask)
	// holds the low 128.
	Wide, MaskWide int
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
	// neg is set inside an odd number of ! operators: OVN's equality
	// rules for nominal fields take them into account.
	neg bool
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
	p.neg = false
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

// not parses [!]primary. As in OVN, ! applies only to an atomic operand
// (a parenthesized expression, a bare field or predicate, 0 or 1, or a
// function), so "!!x" and "!tcp.src == 80" are refused.
func (p *parser) not() Expr {
	if p.tok.Kind != TokNot {
		e, _ := p.primary()
		return e
	}
	pos := p.tok.Pos
	p.advance()
	p.neg = !p.neg
	e, atomic := p.primary()
	p.neg = !p.neg
	if p.err == nil && !atomic {
		p.errorAt(pos, "missing parentheses around operand of !")
	}
	return &NotExpr{X: e}
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

// startsValues reports whether a token can begin a constant set.
func startsValues(k TokenKind) bool {
	return k == TokInt || k == TokString || k == TokLCurly || k == TokAddrSet || k == TokPortGroup
}

// primary parses an operand of ! or of && and ||. atomic says whether
// ! may be applied to it without parentheses.
func (p *parser) primary() (e Expr, atomic bool) {
	switch {
	case p.tok.Kind == TokLParen:
		if p.depth >= maxDepth {
			p.errorf("parentheses nested too deeply")
			return &BoolExpr{}, true
		}
		p.advance()
		p.depth++
		e := p.orAnd()
		p.depth--
		p.expect(TokRParen)
		return e, true
	case startsValues(p.tok.Kind):
		return p.constantFirst()
	case p.tok.Kind == TokIdent:
		if peek := p.lex; peek.Next().Kind == TokLParen {
			return p.function(), true
		}
		r, ok := p.fieldRefValue(nil)
		if !ok {
			return &BoolExpr{}, false
		}
		cmp := p.newCmp(r)
		if isRelop(p.tok.Kind) {
			cmp.Op = p.tok.Kind
			p.advance()
			p.values(cmp)
			return p.finishCmp(cmp), false
		}
		// A bare field means field != 0; OVN allows it for a one-bit
		// field, or for any field under an odd number of ! (so that
		// "!vlan.pcp" is vlan.pcp == 0).
		switch {
		case cmp.Sym.Kind == KindString || p.tok.Kind == TokEquals:
			p.errorf("expected a relational operator, found %s", p.describe())
			return &BoolExpr{}, false
		case cmp.Width() > 1 && !p.neg:
			p.errorf("explicit `!= 0' is required to test multibit field %s against 0", fieldText(cmp))
			return &BoolExpr{}, false
		}
		cmp.Op, cmp.Kind, cmp.Implicit = TokNe, RefConst, true
		e := p.finishCmp(cmp)
		if c, ok := e.(*CmpExpr); ok && c.Width() == 1 {
			// The same test, written the way one-bit tests are kept.
			c.Op, c.C = TokEq, Const{Value: U128{Lo: 1}}
		}
		return e, true
	}
	p.errorf("expected a field, predicate, constant or '(', found %s", p.describe())
	return &BoolExpr{}, false
}

// function parses is_chassis_resident("port"), the one function of the
// match language.
func (p *parser) function() Expr {
	if p.tok.Text != "is_chassis_resident" {
		p.errorf("unknown function %s", p.tok.Text)
		return &BoolExpr{}
	}
	p.advance() // name
	p.advance() // (
	arg := p.tok.Str
	if p.tok.Kind != TokString {
		p.errorf("expected a string, found %s", p.describe())
		return &BoolExpr{}
	}
	p.advance()
	p.expect(TokRParen)
	return &FuncExpr{Name: "is_chassis_resident", Arg: arg}
}

// constantFirst parses what starts with constants: the Booleans 0 and 1,
// "C relop field" and the range "C1 relop field relop C2".
func (p *parser) constantFirst() (Expr, bool) {
	var left CmpExpr
	single := p.tok.Kind == TokInt && p.tok.Format == FmtDecimal
	p.values(&left)
	if p.err != nil {
		return &BoolExpr{}, false
	}
	if !isRelop(p.tok.Kind) && single && left.Kind == RefConst && !left.C.Masked &&
		left.C.Value.Hi == 0 && left.C.Value.Lo <= 1 {
		return &BoolExpr{Value: left.C.Value.Lo == 1}, true
	}
	if !isRelop(p.tok.Kind) {
		p.errorf("expected a relational operator, found %s", p.describe())
		return &BoolExpr{}, false
	}
	op1 := p.tok.Kind
	p.advance()
	r, ok := p.fieldRefValue(nil)
	if !ok {
		return &BoolExpr{}, false
	}
	cmp := p.newCmp(r)
	cmp.Op, cmp.Kind, cmp.C, cmp.Set, cmp.Name = flipRelop(op1), left.Kind, left.C, left.Set, left.Name
	if !isRelop(p.tok.Kind) {
		return p.finishCmp(cmp), false
	}
	// A range: both operators must point the same way.
	op2 := p.tok.Kind
	less := func(k TokenKind) bool { return k == TokLt || k == TokLe }
	more := func(k TokenKind) bool { return k == TokGt || k == TokGe }
	if !(less(op1) && less(op2) || more(op1) && more(op2)) {
		p.errorf("a range must be written x < field < y or x > field > y (with <= or >= allowed)")
		return &BoolExpr{}, false
	}
	p.advance()
	cmp2 := p.newCmp(r)
	cmp2.Op = op2
	p.values(cmp2)
	e1, e2 := p.finishCmp(cmp), p.finishCmp(cmp2)
	return &AndExpr{Terms: []Expr{e1, e2}}, false
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
// nil) with optional [lo..hi] bits. In a match, predicates count as
// one-bit fields.
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
	if sym.Kind == KindPredicate && p.inActions {
		p.errorf("predicate %s used where a field is needed", sym.Name)
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
		p.errorf("cannot select bits of string field %s", sym.Name)
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
	switch {
	case lo > hi:
		p.errorf("bit range %d..%d of %s is backwards", lo, hi, sym.Name)
	case hi >= sym.Width:
		p.errorf("bit %d is outside %d-bit field %s", hi, sym.Width, sym.Name)
	case sym.Nominal && (lo != 0 || hi != sym.Width-1):
		// All of a nominal field is allowed: eth.type[0..15].
		p.errorf("cannot select some bits of nominal field %s", sym.Name)
	default:
		return lo, hi, true
	}
	return 0, 0, false
}

// values parses the constant side of a comparison: a constant, an
// address set, a port group or a braced set of these, all integers or
// all strings.
func (p *parser) values(cmp *CmpExpr) {
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
		strs := false
		for p.err == nil {
			var el SetElem
			switch p.tok.Kind {
			case TokAddrSet:
				el = SetElem{Kind: RefAddrSet, Name: p.tok.Str}
			case TokPortGroup:
				el = SetElem{Kind: RefPortGroup, Name: p.tok.Str}
			case TokInt, TokString:
			default:
				p.errorf("expected a constant, found %s", p.describe())
				return
			}
			isStr := p.tok.Kind == TokString || p.tok.Kind == TokPortGroup
			if len(cmp.Set) == 0 {
				strs = isStr
			} else if isStr != strs {
				p.errorf("expected %s in a set of %ss, found %s", kindName(strs), kindName(strs), p.describe())
				return
			}
			if el.Kind == RefConst {
				el.C = p.constant()
			} else {
				p.advance()
			}
			cmp.Set = append(cmp.Set, el)
			p.accept(TokComma)
			if p.accept(TokRCurly) {
				break
			}
		}
	default:
		cmp.Kind = RefConst
		cmp.C = p.constant()
	}
}

func kindName(str bool) string {
	if str {
		return "string"
	}
	return "integer"
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
		c := Const{Value: p.tok.Value, Format: p.tok.Format, Prefix: -1, Wide: p.tok.Wide}
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
					p.errorAt(pos, "prefix length %s is longer than %d", m.Text, w)
					return c
				}
				c.Prefix = int(m.Value.Lo)
				c.Mask = Ones(c.Prefix).Lsh(w - c.Prefix)
			} else if m.Format != c.Format {
				// As in OVN: 80/0xffff is refused, 0x50/0xffff is not.
				p.errorAt(pos, "value and mask have incompatible formats")
				return c
			} else {
				c.Mask, c.MaskFmt, c.MaskWide = m.Value, m.Format, m.Wide
			}
		}
		return c
	}
	p.errorf("expected a constant, found %s", p.describe())
	return Const{}
}

// constWidth is the width OVN gives a constant when checking it against
// a field: that of its mask, else 32, 128 or 48 for an IPv4, IPv6 or
// Ethernet address, else the number of bits its value needs.
func constWidth(c *Const) int {
	if c.Masked {
		return max(c.Mask.BitLen(), c.MaskWide)
	}
	switch c.Format {
	case FmtIPv4:
		return 32
	case FmtIPv6:
		return 128
	case FmtMAC:
		return 48
	}
	return max(c.Value.BitLen(), c.Wide)
}

// finishCmp checks a comparison as OVN does and returns it, or, for a
// predicate, the test of the predicate it means.
func (p *parser) finishCmp(cmp *CmpExpr) Expr {
	p.checkCmp(cmp)
	if p.err != nil {
		return &BoolExpr{}
	}
	if cmp.Sym.Kind == KindPredicate {
		return p.predicateCmp(cmp)
	}
	return cmp
}

// checkCmp checks a comparison against its field's type, in the order
// OVN does: the kind and width of the constants, the operator, and the
// equality rules of nominal fields and predicates (taking the enclosing
// negations, p.neg, into account).
func (p *parser) checkCmp(cmp *CmpExpr) {
	if p.err != nil {
		return
	}
	sym := cmp.Sym
	isStr := sym.Kind == KindString
	var consts []*Const // the constants written here (not of named sets)
	valStr := false
	switch cmp.Kind {
	case RefConst:
		consts = append(consts, &cmp.C)
		valStr = cmp.C.IsStr
	case RefAddrSet:
	case RefPortGroup:
		valStr = true
	case RefSet:
		for i := range cmp.Set {
			if e := &cmp.Set[i]; e.Kind == RefConst {
				consts = append(consts, &e.C)
			}
		}
		valStr = cmp.Set[0].Kind == RefPortGroup || cmp.Set[0].Kind == RefConst && cmp.Set[0].C.IsStr
	}
	if isStr != valStr {
		if isStr {
			p.errorf("string field %s is not compatible with integer constant", sym.Name)
		} else {
			p.errorf("integer field %s is not compatible with string constant", sym.Name)
		}
		return
	}
	if !isStr {
		for _, c := range consts {
			// OVN checks the width of the symbol, not of the selected
			// bits: reg0[0..7] == 0x100 is accepted (and tests 0).
			if w := constWidth(c); w > sym.Width {
				p.errorf("%d-bit constant %s is not compatible with %d-bit field %s", w, constText(c), sym.Width, sym.Name)
				return
			}
		}
	}
	if cmp.Op != TokEq && cmp.Op != TokNe {
		switch {
		case cmp.Kind == RefSet:
			p.errorf("only == and != can compare %s with a set of values", sym.Name)
		case sym.Nominal:
			p.errorf("only == and != can be used with nominal field %s", sym.Name)
		case sym.Kind == KindPredicate:
			p.errorf("only == and != can be used with Boolean field %s", sym.Name)
		case cmp.Kind == RefConst && cmp.C.Masked:
			p.errorf("only == and != can compare with a masked constant; use bits instead (eth.src[0..15] > 0x1111)")
		}
		if p.err != nil {
			return
		}
	}
	if sym.Kind == KindPredicate {
		if cmp.Kind == RefAddrSet || cmp.Kind == RefSet && len(consts) < len(cmp.Set) {
			p.errorf("predicate %s cannot be compared with an address set", sym.Name)
			return
		}
		for _, c := range consts {
			if sym.Nominal && predicatePositive(cmp.Op, c) == p.neg {
				p.errorf("nominal predicate %s may only be tested positively (%s or %s == 1, not !%s or %s == 0)", sym.Name, sym.Name, sym.Name, sym.Name, sym.Name)
				return
			}
		}
		return
	}
	want := TokEq
	if p.neg {
		want = TokNe
	}
	if sym.Nominal && cmp.Op != want {
		p.errorf("nominal field %s may only be tested for equality (taking enclosing `!' operators into account)", sym.Name)
	}
}

// predicatePositive reports whether "pred OP c" tests the predicate
// itself rather than its negation.
func predicatePositive(op TokenKind, c *Const) bool {
	return (c.Value.Lo&1 == 1) != (op == TokNe)
}

// predicateCmp turns a comparison of a predicate with 0 or 1 (or a set
// of them) into the predicate or its negation.
func (p *parser) predicateCmp(cmp *CmpExpr) Expr {
	one := func(c *Const) Expr {
		if c.Masked && c.Mask.Lo&1 == 0 {
			return &BoolExpr{Value: cmp.Op == TokEq} // pred == x/0 always holds
		}
		if predicatePositive(cmp.Op, c) {
			return cmp.Sym.mention
		}
		return &NotExpr{X: cmp.Sym.mention}
	}
	if cmp.Kind == RefConst {
		return one(&cmp.C)
	}
	terms := make([]Expr, 0, len(cmp.Set))
	for i := range cmp.Set {
		terms = append(terms, one(&cmp.Set[i].C))
	}
	if len(terms) == 1 {
		return terms[0]
	}
	// pred == {a, b} is either; pred != {a, b} is neither.
	if cmp.Op == TokEq {
		return &OrExpr{Terms: terms}
	}
	return &AndExpr{Terms: terms}
}

// CheckRefs checks, as OVN's parser does, the address sets and port
// groups that e names: each must be in env, and each address must fit
// the field it is compared with. A relation (<, >=, ...) with an address
// set needs a non-empty set whose first address is not masked.
func (t *Symtab) CheckRefs(e Expr, env Env) error {
	switch e := e.(type) {
	case *AndExpr:
		return t.checkRefsAll(e.Terms, env)
	case *OrExpr:
		return t.checkRefsAll(e.Terms, env)
	case *NotExpr:
		return t.CheckRefs(e.X, env)
	case *CmpExpr:
		check := func(kind RefKind, name string) error {
			switch kind {
			case RefPortGroup:
				if _, ok := env.PortGroup(name); !ok {
					return fmt.Errorf("unknown port group @%s", name)
				}
			case RefAddrSet:
				cs, ok := env.AddressSet(name)
				if !ok {
					return fmt.Errorf("unknown address set $%s", name)
				}
				for i := range cs {
					if w := constWidth(&cs[i]); w > e.Sym.Width {
						return fmt.Errorf("address set $%s: %d-bit constant %s is not compatible with %d-bit field %s", name, w, constText(&cs[i]), e.Sym.Width, e.Sym.Name)
					}
				}
				if e.Op != TokEq && e.Op != TokNe {
					switch {
					case len(cs) == 0:
						return fmt.Errorf("only == and != can compare %s with an empty address set $%s", e.Sym.Name, name)
					case cs[0].Masked:
						return fmt.Errorf("only == and != can compare with a masked constant (the first of address set $%s)", name)
					}
				}
			}
			return nil
		}
		if e.Kind == RefSet {
			for i := range e.Set {
				if err := check(e.Set[i].Kind, e.Set[i].Name); err != nil {
					return err
				}
			}
			return nil
		}
		return check(e.Kind, e.Name)
	}
	return nil
}

func (t *Symtab) checkRefsAll(terms []Expr, env Env) error {
	for _, x := range terms {
		if err := t.CheckRefs(x, env); err != nil {
			return err
		}
	}
	return nil
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
	if _, double := e.X.(*NotExpr); double {
		// "!!x" does not parse: ! takes an atomic operand.
		sb.WriteByte('(')
		e.X.write(sb, precTop)
		sb.WriteByte(')')
		return
	}
	e.X.write(sb, precNot)
}

func (e *PredExpr) write(sb *strings.Builder, _ int) { sb.WriteString(e.Sym.Name) }

func (e *FuncExpr) write(sb *strings.Builder, _ int) {
	sb.WriteString(e.Name)
	sb.WriteByte('(')
	sb.WriteString(quote(e.Arg))
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
		sb.WriteString(quote(c.Str))
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
