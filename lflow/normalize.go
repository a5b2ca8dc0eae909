package lflow

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Env supplies what a match refers to by name. The caller owns it; the
// package keeps no state between calls.
type Env interface {
	// AddressSet returns the addresses of the Address_Set called name
	// (ParseAddresses turns stored strings into constants).
	AddressSet(name string) ([]Const, bool)
	// PortGroup returns the names of the logical ports in a Port_Group.
	PortGroup(name string) ([]string, bool)
	// PortKey returns the tunnel key of a logical port (or multicast
	// group) of the flow's datapath; used when compiling.
	PortKey(name string) (uint32, bool)
	// ChassisResident reports whether a logical port resides on this
	// chassis (is_chassis_resident()).
	ChassisResident(port string) bool
}

// ParseAddresses parses address strings as stored in an Address_Set
// ("10.0.0.1", "10.0.0.0/24", "fe80::1", "00:00:00:00:00:01").
func (t *Symtab) ParseAddresses(addrs []string) ([]Const, error) {
	p := &parser{symtab: t}
	out := make([]Const, 0, len(addrs))
	for _, a := range addrs {
		p.reset(a)
		c := p.constant()
		if p.err == nil && p.tok.Kind != TokEOF {
			p.errorf("unexpected %s after address", p.describe())
		}
		if p.err != nil {
			return nil, fmt.Errorf("address %q: %w", a, p.err)
		}
		if c.IsStr {
			return nil, fmt.Errorf("address %q: a string is not an address", a)
		}
		out = append(out, c)
	}
	return out, nil
}

// Masked is a value and a mask over a whole field: the field matches when
// field & Mask == Value.
type Masked struct {
	Value, Mask U128
}

// Clause is a disjunction of tests of one field: the field equals one of
// Alts (integer fields) or names one of Ports (inport, outport).
type Clause struct {
	Field *Symbol // a KindField or KindString symbol
	Alts  []Masked
	Ports []string
}

// Len returns the number of alternatives.
func (c *Clause) Len() int { return len(c.Alts) + len(c.Ports) }

// Conj is a conjunction of clauses, at most one per field, sorted by field
// name. An empty Conj is true.
type Conj []Clause

// Normal is a match in normal form: a disjunction of conjunctions. An empty
// Normal is false. A Normal may share memory with other results and with
// the Symtab: treat it as read-only.
type Normal []Conj

// maxConjs bounds normalization output: beyond it an expression is
// reported as too complex instead of eating the machine.
const maxConjs = 1 << 16

var errTooComplex = errors.New("expression too complex to normalize (more than 65536 terms)")

// UnresolvedError reports a reference (address set, port group) that the
// Env does not know.
type UnresolvedError struct {
	Kind string // "address set" or "port group"
	Name string
}

func (e *UnresolvedError) Error() string {
	sigil := "$"
	if e.Kind == "port group" {
		sigil = "@"
	}
	return fmt.Sprintf("unknown %s %s%s", e.Kind, sigil, e.Name)
}

// Normalize turns a parsed match into normal form, expanding predicates,
// adding prerequisites, pushing negations down, resolving address sets and
// port groups through env (which may be nil when the expression uses none).
func (t *Symtab) Normalize(e Expr, env Env) (Normal, error) {
	n := normalizer{env: env, cx: newComplementer()}
	return n.norm(e, false)
}

type normalizer struct {
	env Env
	// cx computes exclusions and intersections of clauses within one
	// budget of work for the whole expression.
	cx complementer
}

// normTrue and normFalse return the constant normal forms.
func normTrue() Normal  { return Normal{Conj{}} }
func normFalse() Normal { return nil }

func (n *normalizer) norm(e Expr, neg bool) (Normal, error) {
	switch e := e.(type) {
	case *BoolExpr:
		if e.Value != neg {
			return normTrue(), nil
		}
		return normFalse(), nil
	case *NotExpr:
		return n.norm(e.X, !neg)
	case *AndExpr:
		return n.junction(e.Terms, !neg, neg)
	case *OrExpr:
		return n.junction(e.Terms, neg, neg)
	case *PredExpr:
		if e.Sym.cached {
			if neg {
				return e.Sym.negNorm, e.Sym.negErr
			}
			return e.Sym.posNorm, nil
		}
		return n.norm(e.Sym.expansion, neg)
	case *FuncExpr:
		if n.env == nil {
			return nil, fmt.Errorf("%s(%q): no environment to say where ports reside", e.Name, e.Arg)
		}
		if n.env.ChassisResident(e.Arg) != neg {
			return normTrue(), nil
		}
		return normFalse(), nil
	case *CmpExpr:
		return n.cmp(e, neg)
	}
	return nil, fmt.Errorf("unknown expression type %T", e)
}

// junction normalizes terms joined by && (and==true) or ||.
func (n *normalizer) junction(terms []Expr, and, neg bool) (Normal, error) {
	var buf [8]Normal
	norms := buf[:0]
	single := true // every term is a single conjunction
	for _, t := range terms {
		var x, pre Normal
		var err error
		if c, ok := t.(*CmpExpr); ok && and && c.Sym.cached && c.Sym.prereq != nil {
			// Keep the comparison and its prerequisites as separate
			// operands, so that they are merged once, with the rest.
			x, err = n.leaf(c, neg)
			pre = c.Sym.prereqNorm
		} else {
			x, err = n.norm(t, neg)
		}
		if err != nil {
			return nil, err
		}
		if and && len(x) == 0 {
			return normFalse(), nil
		}
		single = single && len(x) == 1
		norms = append(norms, x)
		if pre != nil {
			single = single && len(pre) == 1
			norms = append(norms, pre)
		}
	}
	if and && single {
		return n.andSingles(norms)
	}
	acc := norms[0]
	for _, x := range norms[1:] {
		var err error
		if and {
			acc, err = n.andNormal(acc, x)
		} else {
			acc, err = orNormal(acc, x)
		}
		if err != nil {
			return nil, err
		}
	}
	return acc, nil
}

// andSingles is the common case of &&: every operand is one conjunction.
// All clauses go into one slice, sorted by field, and clauses of the same
// field are intersected: two allocations instead of one per operand.
func (n *normalizer) andSingles(norms []Normal) (Normal, error) {
	total := 0
	for _, x := range norms {
		total += len(x[0])
	}
	// One allocation holds the result and its clauses.
	var clauses []Clause
	var out Normal
	switch {
	case total <= 3:
		b := &struct {
			n [1]Conj
			c [3]Clause
		}{}
		clauses, out = b.c[:0:3], b.n[:1:1]
	case total <= 6:
		b := &struct {
			n [1]Conj
			c [6]Clause
		}{}
		clauses, out = b.c[:0:6], b.n[:1:1]
	case total <= 10:
		b := &struct {
			n [1]Conj
			c [10]Clause
		}{}
		clauses, out = b.c[:0:10], b.n[:1:1]
	default:
		clauses, out = make([]Clause, 0, total), make(Normal, 1)
	}
	for _, x := range norms {
		for _, c := range x[0] {
			// Insertion sort: conjunctions are short.
			i := len(clauses)
			clauses = append(clauses, c)
			for i > 0 && clauses[i-1].Field.Name > c.Field.Name {
				clauses[i] = clauses[i-1]
				i--
			}
			clauses[i] = c
		}
	}
	// Merge runs of the same field.
	w := 0
	for r := 0; r < len(clauses); r++ {
		if end := sameFieldRun(clauses, r); end-r > 2 && clauses[r].Field.Kind != KindString {
			// Three or more clauses of one field, typically
			// inequalities: intersect them all at once.
			run := make([][]Masked, 0, end-r)
			for _, c := range clauses[r:end] {
				run = append(run, c.Alts)
			}
			alts, err := n.cx.intersectRun(run)
			if err != nil {
				return nil, err
			}
			if len(alts) == 0 {
				return normFalse(), nil
			}
			clauses[w] = Clause{Field: clauses[r].Field, Alts: alts}
			w++
			r = end - 1
			continue
		}
		if w > 0 && clauses[w-1].Field == clauses[r].Field {
			c, ok, err := n.andClause(&clauses[w-1], &clauses[r])
			if err != nil {
				return nil, err
			}
			if !ok {
				return normFalse(), nil
			}
			clauses[w-1] = c
			continue
		}
		clauses[w] = clauses[r]
		w++
	}
	out[0] = clauses[:w:w]
	return out, nil
}

// sameFieldRun returns the end of the run of clauses of the same field
// as clauses[r].
func sameFieldRun(clauses []Clause, r int) int {
	end := r + 1
	for end < len(clauses) && clauses[end].Field == clauses[r].Field {
		end++
	}
	return end
}

// singleNormal returns the normal form "field & mask == value" in one
// allocation.
func singleNormal(field *Symbol, m Masked) Normal {
	b := &struct {
		n [1]Conj
		c [1]Clause
		a [1]Masked
	}{}
	b.a[0] = m
	b.c[0] = Clause{Field: field, Alts: b.a[:1:1]}
	b.n[0] = b.c[:1:1]
	return b.n[:1:1]
}

func orNormal(a, b Normal) (Normal, error) {
	if len(a) == 0 {
		return b, nil
	}
	if len(b) == 0 {
		return a, nil
	}
	// A true term makes the whole disjunction true.
	if len(a) == 1 && len(a[0]) == 0 || len(b) == 1 && len(b[0]) == 0 {
		return normTrue(), nil
	}
	// ip4.dst == 1.1.1.1 || ip4.dst == 2.2.2.2 becomes one conjunction
	// with a two-way clause: conjunctions that differ in one clause only
	// merge, which keeps sets written as || (and "ip") compact.
	if len(b) == 1 {
		for i := len(a) - 1; i >= 0 && i >= len(a)-8; i-- {
			if m, ok := mergeConj(a[i], b[0]); ok {
				out := slices.Clone(a)
				out[i] = m
				return out, nil
			}
		}
	}
	if len(a)+len(b) > maxConjs {
		return nil, errTooComplex
	}
	out := make(Normal, 0, len(a)+len(b))
	return append(append(out, a...), b...), nil
}

// mergeConj returns the disjunction of two conjunctions as one
// conjunction, when they test the same fields and differ in one clause.
func mergeConj(a, b Conj) (Conj, bool) {
	if len(a) != len(b) {
		return nil, false
	}
	diff := -1
	for i := range a {
		if a[i].Field != b[i].Field {
			return nil, false
		}
		if !slices.Equal(a[i].Alts, b[i].Alts) || !slices.Equal(a[i].Ports, b[i].Ports) {
			if diff >= 0 {
				return nil, false
			}
			diff = i
		}
	}
	if diff < 0 {
		return a, true
	}
	out := slices.Clone(a)
	c := &out[diff]
	c.Alts = appendAlts(slices.Clip(c.Alts), b[diff].Alts)
	c.Ports = appendPorts(slices.Clip(c.Ports), b[diff].Ports)
	return out, true
}

func (n *normalizer) andNormal(a, b Normal) (Normal, error) {
	if len(a) == 0 || len(b) == 0 {
		return normFalse(), nil
	}
	if len(a)*len(b) > maxConjs {
		return nil, errTooComplex
	}
	out := make(Normal, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			c, ok, err := n.andConj(x, y)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// andConj merges two conjunctions; ok is false when they contradict.
// Neither input is modified.
func (n *normalizer) andConj(a, b Conj) (Conj, bool, error) {
	if len(b) == 0 {
		return a, true, nil
	}
	if len(a) == 0 {
		return b, true, nil
	}
	out := make(Conj, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].Field.Name < b[j].Field.Name:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].Field.Name < a[i].Field.Name:
			out = append(out, b[j])
			j++
		default:
			c, ok, err := n.andClause(&a[i], &b[j])
			if !ok || err != nil {
				return nil, false, err
			}
			out = append(out, c)
			i++
			j++
		}
	}
	return out, true, nil
}

// andClause intersects two clauses on the same field.
func (n *normalizer) andClause(a, b *Clause) (Clause, bool, error) {
	c := Clause{Field: a.Field}
	if a.Field.Kind == KindString {
		if a.Len()*b.Len() > maxConjs {
			return c, false, errTooComplex
		}
		for _, p := range a.Ports {
			if slices.Contains(b.Ports, p) {
				c.Ports = append(c.Ports, p)
			}
		}
		return c, len(c.Ports) > 0, nil
	}
	if len(a.Alts) == 1 && len(b.Alts) == 1 {
		x, y := a.Alts[0], b.Alts[0]
		if !x.Value.Xor(y.Value).And(x.Mask.And(y.Mask)).IsZero() {
			return c, false, nil
		}
		c.Alts = []Masked{{x.Value.Or(y.Value), x.Mask.Or(y.Mask)}}
		return c, true, nil
	}
	alts, err := n.cx.intersectAlts(a.Alts, b.Alts)
	if err != nil {
		return c, false, err
	}
	c.Alts = alts
	return c, len(c.Alts) > 0, nil
}

// appendAlts appends the alternatives of add that dst does not have yet.
func appendAlts(dst, add []Masked) []Masked {
	for _, m := range add {
		if len(dst) < 64 && slices.Contains(dst, m) {
			continue
		}
		dst = append(dst, m)
	}
	return dst
}

func appendPorts(dst, add []string) []string {
	for _, p := range add {
		if !slices.Contains(dst, p) {
			dst = append(dst, p)
		}
	}
	return dst
}

// cmp normalizes one comparison, with its symbol's prerequisites.
func (n *normalizer) cmp(e *CmpExpr, neg bool) (Normal, error) {
	leaf, err := n.leaf(e, neg)
	if err != nil {
		return nil, err
	}
	if e.Sym.prereq == nil || len(leaf) == 0 {
		return leaf, nil
	}
	// Prerequisites are never negated: !(tcp.src == 80) is
	// tcp.src != 80 && tcp.
	pre := e.Sym.prereqNorm
	if !e.Sym.cached {
		var err error
		if pre, err = n.norm(e.Sym.prereq, false); err != nil {
			return nil, err
		}
	}
	if len(leaf) == 1 && len(pre) == 1 {
		both := [2]Normal{leaf, pre}
		return n.andSingles(both[:])
	}
	return n.andNormal(leaf, pre)
}

// leaf turns a comparison into a one-field normal form.
func (n *normalizer) leaf(e *CmpExpr, neg bool) (Normal, error) {
	sym := e.Sym
	field := sym.Field
	if sym.Kind == KindString {
		positive := (e.Op == TokEq) != neg
		if !positive {
			return nil, fmt.Errorf("%s can only be tested for equality in a positive sense", sym.Name)
		}
		ports, err := n.ports(e)
		if err != nil {
			return nil, err
		}
		if len(ports) == 0 {
			return normFalse(), nil
		}
		return Normal{Conj{{Field: field, Ports: ports}}}, nil
	}

	ofs := sym.Ofs
	if e.Bits {
		ofs += e.Lo
	}
	w := e.Width()
	full := Ones(w)

	op := e.Op
	if neg {
		op = negateRelop(op)
	}
	switch op {
	case TokEq, TokNe:
		if op == TokEq && e.Kind == RefConst {
			m := full
			if e.C.Masked {
				m = e.C.Mask.And(full)
			}
			return singleNormal(field, Masked{e.C.Value.And(m).Lsh(ofs), m.Lsh(ofs)}), nil
		}
		consts, err := n.consts(e)
		if err != nil {
			return nil, err
		}
		if op == TokEq {
			c := Clause{Field: field}
			for _, k := range consts {
				m := full
				if k.Masked {
					m = k.Mask.And(full)
				}
				c.Alts = appendAlts(c.Alts, []Masked{{k.Value.And(m).Lsh(ofs), m.Lsh(ofs)}})
			}
			if len(c.Alts) == 0 {
				return normFalse(), nil
			}
			return Normal{Conj{c}}, nil
		}
		// x != c is "some bit of x under the mask differs from c", one
		// single-bit alternative per bit; x != {a, b} is x != a && x != b,
		// which exclude computes as a whole (see exclude.go).
		off := make([]Masked, 0, len(consts))
		for _, k := range consts {
			m := full
			if k.Masked {
				m = k.Mask.And(full)
			}
			off = append(off, Masked{k.Value.And(m).Lsh(ofs), m.Lsh(ofs)})
		}
		on, err := n.cx.exclude(off)
		if err != nil {
			return nil, fmt.Errorf("%s != %d values: %w", sym.Name, len(consts), err)
		}
		if len(on) == 0 {
			return normFalse(), nil // x != c/0 never holds
		}
		return Normal{Conj{{Field: field, Alts: on}}}, nil
	default:
		if e.Kind == RefAddrSet {
			// As in OVN, f < $set holds when f < each address (so its
			// negation when f >= some address).
			consts, err := n.consts(e)
			if err != nil {
				return nil, err
			}
			out := normTrue()
			if neg {
				out = normFalse()
			}
			for _, k := range consts {
				one := *e
				one.Kind, one.C = RefConst, k
				r, err := n.leaf(&one, neg)
				if err == nil && neg {
					out, err = orNormal(out, r)
				} else if err == nil {
					out, err = n.andNormal(out, r)
				}
				if err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		if e.Kind != RefConst {
			return nil, fmt.Errorf("%s cannot compare with a set", relopText(e.Op))
		}
		lo, hi := U128{}, full
		// Constants are cut to the bits compared, as OVN cuts them.
		v := e.C.Value.And(full)
		switch op {
		case TokLt:
			if v.IsZero() {
				return normFalse(), nil
			}
			hi = v.Sub(U128{Lo: 1})
		case TokLe:
			hi = v
		case TokGt:
			if v == full {
				return normFalse(), nil
			}
			lo = v.Add(U128{Lo: 1})
		case TokGe:
			lo = v
		}
		c := Clause{Field: field}
		for _, m := range rangeToMasks(lo, hi, w) {
			c.Alts = append(c.Alts, Masked{m.Value.Lsh(ofs), m.Mask.Lsh(ofs)})
		}
		return Normal{Conj{c}}, nil
	}
}

func negateRelop(k TokenKind) TokenKind {
	switch k {
	case TokEq:
		return TokNe
	case TokNe:
		return TokEq
	case TokLt:
		return TokGe
	case TokLe:
		return TokGt
	case TokGt:
		return TokLe
	case TokGe:
		return TokLt
	}
	return k
}

// rangeToMasks covers lo..hi (inclusive, w-bit values) with the fewest
// aligned power-of-two blocks, each a masked value.
func rangeToMasks(lo, hi U128, w int) []Masked {
	var out []Masked
	full := Ones(w)
	for !hi.Less(lo) {
		// Largest k such that lo is aligned to 2^k and lo+2^k-1 <= hi.
		k := lo.TrailingZeros()
		if k > w {
			k = w
		}
		for k > 0 {
			end := lo.Or(Ones(k))
			if !hi.Less(end) {
				break
			}
			k--
		}
		out = append(out, Masked{lo, full.And(Ones(k).Not())})
		end := lo.Or(Ones(k))
		if end == full {
			break
		}
		lo = end.Add(U128{Lo: 1})
	}
	return out
}

// consts returns the constants a comparison tests, resolving address sets.
func (n *normalizer) consts(e *CmpExpr) ([]Const, error) {
	switch e.Kind {
	case RefConst:
		return []Const{e.C}, nil
	case RefAddrSet:
		return n.addrSet(e.Name, e.Sym.Width)
	case RefSet:
		out := make([]Const, 0, len(e.Set))
		for _, el := range e.Set {
			switch el.Kind {
			case RefConst:
				out = append(out, el.C)
			case RefAddrSet:
				cs, err := n.addrSet(el.Name, e.Sym.Width)
				if err != nil {
					return nil, err
				}
				out = append(out, cs...)
			default:
				return nil, fmt.Errorf("port group @%s in an integer set", el.Name)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("port group @%s compared with integer field %s", e.Name, e.Sym.Name)
}

func (n *normalizer) addrSet(name string, w int) ([]Const, error) {
	if n.env == nil {
		return nil, &UnresolvedError{"address set", name}
	}
	cs, ok := n.env.AddressSet(name)
	if !ok {
		return nil, &UnresolvedError{"address set", name}
	}
	for i := range cs {
		if cs[i].IsStr || constWidth(&cs[i]) > w {
			return nil, fmt.Errorf("address set $%s: %s does not fit a %d-bit field", name, constText(&cs[i]), w)
		}
	}
	return cs, nil
}

// ports returns the port names a string comparison tests.
func (n *normalizer) ports(e *CmpExpr) ([]string, error) {
	var out []string
	add := func(kind RefKind, c *Const, name string) error {
		switch kind {
		case RefConst:
			out = appendPorts(out, []string{c.Str})
		case RefPortGroup:
			if n.env == nil {
				return &UnresolvedError{"port group", name}
			}
			ps, ok := n.env.PortGroup(name)
			if !ok {
				return &UnresolvedError{"port group", name}
			}
			out = appendPorts(out, ps)
		default:
			return fmt.Errorf("address set $%s compared with string field %s", name, e.Sym.Name)
		}
		return nil
	}
	if e.Kind == RefSet {
		for i := range e.Set {
			if err := add(e.Set[i].Kind, &e.Set[i].C, e.Set[i].Name); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if err := add(e.Kind, &e.C, e.Name); err != nil {
		return nil, err
	}
	return out, nil
}

// Printing the normal form.

// String prints the normal form, one conjunction per line; "0" when false
// and "1" for an always-true conjunction.
func (nf Normal) String() string {
	if len(nf) == 0 {
		return "0"
	}
	var sb strings.Builder
	for i, c := range nf {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(c.String())
	}
	return sb.String()
}

func (c Conj) String() string {
	if len(c) == 0 {
		return "1"
	}
	var sb strings.Builder
	for i := range c {
		if i > 0 {
			sb.WriteString(" && ")
		}
		c[i].write(&sb)
	}
	return sb.String()
}

func (c *Clause) write(sb *strings.Builder) {
	sb.WriteString(c.Field.Name)
	sb.WriteString(" == ")
	n := c.Len()
	if n > 1 {
		sb.WriteByte('{')
	}
	for i, p := range c.Ports {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Quote(p))
	}
	for i, m := range c.Alts {
		if i > 0 {
			sb.WriteString(", ")
		}
		writeMasked(sb, c.Field, m)
	}
	if n > 1 {
		sb.WriteByte('}')
	}
}

func writeMasked(sb *strings.Builder, f *Symbol, m Masked) {
	full := Ones(f.Width)
	format := f.Format
	if m.Mask == full {
		formatValue(sb, m.Value, format)
		return
	}
	// A prefix mask on an address prints as CIDR.
	if format == FmtIPv4 || format == FmtIPv6 {
		plen := f.Width - m.Mask.TrailingZeros()
		if m.Mask.IsZero() {
			plen = 0
		}
		if Ones(plen).Lsh(f.Width-plen) == m.Mask {
			formatValue(sb, m.Value, format)
			sb.WriteByte('/')
			sb.WriteString(strconv.Itoa(plen))
			return
		}
	}
	if format == FmtDecimal {
		format = FmtHex
	}
	formatValue(sb, m.Value, format)
	sb.WriteByte('/')
	formatValue(sb, m.Mask, format)
}
