package lflow

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/govn/govn/datapath/flow"
)

// matchesAny reports whether v matches one of the alternatives.
func matchesAny(alts []Masked, v U128) bool {
	for _, m := range alts {
		if v.And(m.Mask) == m.Value {
			return true
		}
	}
	return false
}

// randomCubes returns n cubes over the low w bits, biased towards points,
// prefixes and single bits (what sets, address sets and != produce).
func randomCubes(r *rand.Rand, n, w int) []Masked {
	out := make([]Masked, n)
	for i := range out {
		var mask U128
		switch r.IntN(4) {
		case 0:
			mask = Ones(w)
		case 3:
			mask = Bit1(r.IntN(w)) // as in the alternatives of a lone !=
		case 1:
			plen := r.IntN(w + 1)
			mask = Ones(plen).Lsh(w - plen)
		default:
			mask = U128{Lo: r.Uint64()}.And(Ones(w))
		}
		out[i] = Masked{U128{Lo: r.Uint64()}.And(mask), mask}
	}
	return out
}

// TestComplementExhaustive checks complement and intersectAlts on every
// value of an 8-bit field for random sets of cubes.
func TestComplementExhaustive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const w = 8
	for iter := 0; iter < 2000; iter++ {
		a := randomCubes(r, 1+r.IntN(6), w)
		b := randomCubes(r, 1+r.IntN(6), w)
		c := newComplementer()
		notA, err := c.complement(a)
		if err != nil {
			t.Fatal(err)
		}
		both, err := c.intersectAlts(a, b)
		if err != nil {
			t.Fatal(err)
		}
		aNotB, ok := c.subtract(a, b)
		if !ok {
			t.Fatalf("%v minus %v: too large", a, b)
		}
		for v := 0; v < 1<<w; v++ {
			x := U128{Lo: uint64(v)}
			inA, inB := matchesAny(a, x), matchesAny(b, x)
			if matchesAny(notA, x) == inA {
				t.Fatalf("complement of %v is %v: wrong for %#x", a, notA, v)
			}
			if matchesAny(both, x) != (inA && inB) {
				t.Fatalf("%v and %v is %v: wrong for %#x", a, b, both, v)
			}
			if matchesAny(aNotB, x) != (inA && !inB) {
				t.Fatalf("%v minus %v is %v: wrong for %#x", a, b, aNotB, v)
			}
		}
		for _, m := range notA {
			if !m.Mask.And(Ones(w).Not()).IsZero() || !m.Value.And(m.Mask.Not()).IsZero() {
				t.Fatalf("complement of %v: cube %v outside the field or not normalized", a, m)
			}
		}
	}
}

// TestExcludeSize checks the documented bound on the alternatives of
// f != {n values}: the bits all values agree on, plus about
// n * (w - log2 n) for the rest.
func TestExcludeSize(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct{ n, w int }{{2, 16}, {7, 16}, {50, 16}, {1000, 32}, {100, 128}} {
		off := make([]Masked, tc.n)
		for i := range off {
			v := U128{Lo: r.Uint64(), Hi: r.Uint64()}.And(Ones(tc.w))
			off[i] = Masked{v, Ones(tc.w)}
		}
		c := newComplementer()
		on, err := c.exclude(off)
		if err != nil {
			t.Fatalf("n=%d w=%d: %v", tc.n, tc.w, err)
		}
		bound := tc.w + tc.n*(tc.w-bits.Len(uint(tc.n))+2)
		if len(on) > bound {
			t.Errorf("n=%d w=%d: %d alternatives, more than %d", tc.n, tc.w, len(on), bound)
		}
		for _, m := range off {
			if matchesAny(on, m.Value) {
				t.Fatalf("n=%d w=%d: excluded value %v still matches", tc.n, tc.w, m.Value)
			}
		}
		for i := 0; i < 1000; i++ {
			v := U128{Lo: r.Uint64(), Hi: r.Uint64()}.And(Ones(tc.w))
			if !matchesAny(off, v) && !matchesAny(on, v) {
				t.Fatalf("n=%d w=%d: value %v lost", tc.n, tc.w, v)
			}
		}
	}
}

// exprEval evaluates a parsed match on a packet directly, as ovn-sb(5)
// defines it (negation does not apply to prerequisites), to check the
// normalizer and compiler against.
type exprEval struct {
	env Env
	key *flow.Key
	t   *testing.T
}

func (ev *exprEval) eval(e Expr, neg bool) bool {
	switch e := e.(type) {
	case *BoolExpr:
		return e.Value != neg
	case *NotExpr:
		return ev.eval(e.X, !neg)
	case *AndExpr:
		for _, x := range e.Terms {
			if ev.eval(x, neg) == neg { // a false term (true, negated)
				return neg
			}
		}
		return !neg
	case *OrExpr:
		for _, x := range e.Terms {
			if ev.eval(x, neg) != neg {
				return !neg
			}
		}
		return neg
	case *PredExpr:
		return ev.eval(e.Sym.expansion, neg)
	case *CmpExpr:
		if e.Sym.prereq != nil && !ev.eval(e.Sym.prereq, false) {
			return false
		}
		return ev.cmp(e) != neg
	}
	ev.t.Fatalf("cannot evaluate %T", e)
	return false
}

func (ev *exprEval) cmp(e *CmpExpr) bool {
	f := e.Sym.Field
	dp, ok := flow.FieldByName(f.DP)
	if !ok {
		ev.t.Fatalf("no datapath field %s", f.DP)
	}
	raw := ev.key.GetU128(dp)
	ofs := f.DPOfs + e.Sym.Ofs
	if e.Bits {
		ofs += e.Lo
	}
	w := e.Width()
	v := U128{Hi: raw.Hi, Lo: raw.Lo}.Rsh(ofs).And(Ones(w))
	var consts []Const
	switch e.Kind {
	case RefConst:
		consts = []Const{e.C}
	case RefAddrSet:
		consts, _ = ev.env.AddressSet(e.Name)
	case RefSet:
		for _, el := range e.Set {
			if el.Kind == RefAddrSet {
				cs, _ := ev.env.AddressSet(el.Name)
				consts = append(consts, cs...)
			} else {
				consts = append(consts, el.C)
			}
		}
	}
	in := false
	for _, k := range consts {
		m := Ones(w)
		if k.Masked {
			m = k.Mask
		}
		in = in || v.And(m) == k.Value.And(m)
	}
	c := e.C.Value
	switch e.Op {
	case TokEq:
		return in
	case TokNe:
		return !in
	case TokLt:
		return v.Less(c)
	case TokLe:
		return !c.Less(v)
	case TokGt:
		return c.Less(v)
	default:
		return !v.Less(c)
	}
}

// rulesAccept reports whether the rules of one compiled flow take the
// packet: a plain rule matches it, or every clause of one conjunction has
// a rule that matches it.
func rulesAccept(rules []flow.Rule, k *flow.Key) bool {
	type conj struct {
		n    uint8
		seen uint64
	}
	conjs := map[uint32]*conj{}
	for i := range rules {
		r := &rules[i]
		if !r.Match.Matches(k) {
			continue
		}
		if cj, ok := r.Actions[0].(flow.Conjunction); ok {
			c := conjs[cj.ID]
			if c == nil {
				c = &conj{n: cj.NClauses}
				conjs[cj.ID] = c
			}
			c.seen |= 1 << (cj.Clause - 1)
			continue
		}
		if !r.IsConjunctive() {
			return true
		}
	}
	for _, c := range conjs {
		if c.seen == 1<<c.n-1 {
			return true
		}
	}
	return false
}

// exprGen makes random matches over a few fields, from small pools of
// constants so that packets often hit them.
type exprGen struct {
	r     *rand.Rand
	ports []uint64
	ip4s  []uint64
	regs  []uint64
}

func newExprGen(seed uint64) *exprGen {
	g := &exprGen{r: rand.New(rand.NewPCG(seed, 99))}
	g.ports = []uint64{0, 1, 22, 53, 80, 81, 443, 8080, 65535}
	for i := 0; i < 6; i++ {
		g.ports = append(g.ports, g.r.Uint64N(65536))
	}
	for i := 0; i < 12; i++ {
		g.ip4s = append(g.ip4s, 0x0a000000|g.r.Uint64N(64))
	}
	g.ip4s = append(g.ip4s, 0xc0a80101, 0xffffffff)
	g.regs = []uint64{0, 1, 2, 3, 0x10, 0xff, 0x1234, 0xffffffff}
	return g
}

func ip4Text(v uint64) string {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}

func (g *exprGen) pick(pool []uint64) uint64 { return pool[g.r.IntN(len(pool))] }

// term returns one comparison (or a negated set).
func (g *exprGen) term() string {
	var field string
	var val func() string
	switch g.r.IntN(4) {
	case 0:
		field = "tcp.dst"
		val = func() string { return fmt.Sprint(g.pick(g.ports)) }
	case 1:
		field = "ip4.dst"
		val = func() string {
			if g.r.IntN(5) == 0 {
				return fmt.Sprintf("%s/%d", ip4Text(g.pick(g.ip4s)&^0xf), 28)
			}
			return ip4Text(g.pick(g.ip4s))
		}
	case 2:
		field = "reg0"
		val = func() string {
			if g.r.IntN(4) == 0 {
				return fmt.Sprintf("%#x/%#x", g.pick(g.regs)&0xf0, 0xf0)
			}
			return fmt.Sprintf("%#x", g.pick(g.regs))
		}
	default:
		field = "reg0[0..7]"
		val = func() string { return fmt.Sprintf("%d", g.pick(g.regs)&0xff) }
	}
	set := func() string {
		n := 1 + g.r.IntN(5)
		vals := make([]string, n)
		for i := range vals {
			vals[i] = val()
		}
		return "{" + strings.Join(vals, ", ") + "}"
	}
	switch g.r.IntN(8) {
	case 0, 1, 2:
		return field + " != " + val()
	case 3:
		return field + " != " + set()
	case 4:
		return "!(" + field + " == " + set() + ")"
	case 5:
		return field + " == " + set()
	case 6:
		v := val()
		if !strings.Contains(v, "/") {
			return field + []string{" < ", " >= "}[g.r.IntN(2)] + v
		}
		return field + " == " + v
	default:
		return "!(" + field + " != " + val() + ")"
	}
}

// match joins terms, mostly with &&, the shape of ACLs.
func (g *exprGen) match() string {
	n := 1 + g.r.IntN(8)
	terms := make([]string, n)
	for i := range terms {
		terms[i] = g.term()
		switch g.r.IntN(8) {
		case 0:
			terms[i] = "(" + terms[i] + " || " + g.term() + ")"
		case 1:
			terms[i] = "!(" + terms[i] + " && " + g.term() + ")"
		}
	}
	return strings.Join(terms, " && ")
}

// packet returns a packet whose fields mostly take values from the pools,
// or next to them.
func (g *exprGen) packet(datapath uint32) flow.Key {
	var k flow.Key
	set := func(name string, v uint64) {
		f, ok := flow.FieldByName(name)
		if !ok {
			panic("no field " + name)
		}
		k.Set(f, v)
	}
	near := func(pool []uint64, mask uint64) uint64 {
		switch g.r.IntN(4) {
		case 0:
			return g.r.Uint64() & mask
		case 1:
			return (g.pick(pool) + uint64(g.r.IntN(3)) - 1) & mask
		default:
			return g.pick(pool) & mask
		}
	}
	set("metadata", uint64(datapath))
	set("eth_type", []uint64{0x800, 0x800, 0x800, 0x86dd, 0x806}[g.r.IntN(5)])
	set("nw_proto", []uint64{6, 6, 6, 17}[g.r.IntN(4)])
	set("tcp_dst", near(g.ports, 0xffff))
	set("nw_dst", near(g.ip4s, 0xffffffff))
	reg := near(g.regs, 0xffffffff)
	if g.r.IntN(2) == 0 {
		reg = reg&^0xff | near(g.regs, 0xff)
	}
	set("reg0", reg)
	return k
}

// TestCompileExact compiles random matches full of inequalities and
// checks, on random packets, that the rules accept exactly the packets
// the match accepts.
func TestCompileExact(t *testing.T) {
	st, c := testCompiler(t)
	env := newTestEnv(t, st)
	g := newExprGen(7)
	packets := 300
	matches := 400
	if testing.Short() {
		matches = 100
	}
	total, accepted := 0, 0
	for i := 0; i < matches; i++ {
		text := g.match()
		e, err := st.ParseExpr(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		lf := Lflow{Pipeline: "ingress", Table: 3, Priority: 100, Match: text, Actions: "next;"}
		ctx := &Context{Env: env, Datapath: 5, NextConjID: 1}
		var res Result
		if err := c.Compile(&lf, ctx, &res); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		total += len(res.Rules)
		ev := exprEval{env: env, t: t}
		for p := 0; p < packets; p++ {
			k := g.packet(5)
			ev.key = &k
			want := ev.eval(e, false)
			if want {
				accepted++
			}
			if got := rulesAccept(res.Rules, &k); got != want {
				t.Fatalf("%s\n%d rules accept=%v, match says %v for %v", text, len(res.Rules), got, want, &k)
			}
		}
	}
	t.Logf("%d matches, %d rules, %d of %d packets accepted", matches, total, accepted, matches*packets)
	// Packets on both sides of the matches, or the test proves nothing.
	if accepted < matches*packets/20 || accepted > matches*packets*19/20 {
		t.Errorf("%d of %d packets accepted: the generators are off", accepted, matches*packets)
	}
}

// TestExcludeTooLarge checks that a negated set beyond the documented
// bound gets a clear error, and one just within it does not.
func TestExcludeTooLarge(t *testing.T) {
	st := testSymtab(t)
	env := &mapEnv{sets: map[string][]Const{}}
	spread := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			a := uint32(i+1) * 2654435761
			out[i] = ip4Text(uint64(a))
		}
		return out
	}
	for _, tc := range []struct {
		n    int
		fits bool
	}{{5000, true}, {20000, false}} {
		cs, err := st.ParseAddresses(spread(tc.n))
		if err != nil {
			t.Fatal(err)
		}
		env.sets["big"] = cs
		e, err := st.ParseExpr("ip4.src != $big")
		if err != nil {
			t.Fatal(err)
		}
		nf, err := st.Normalize(e, env)
		switch {
		case tc.fits && err != nil:
			t.Errorf("%d addresses: %v", tc.n, err)
		case tc.fits && len(nf) == 1:
			t.Logf("%d addresses: %d alternatives", tc.n, len(nf[0][1].Alts))
		case !tc.fits && (err == nil || !strings.Contains(err.Error(), "ip4.src != 20000 values: too complex")):
			t.Errorf("%d addresses: got error %v", tc.n, err)
		}
	}
}

// BenchmarkNormalizeExclusion normalizes the largest realistic
// inequalities: 50 ports written as one set and as 50 separate !=, and a
// negated set of 1,000 addresses spread over the IPv4 space.
func BenchmarkNormalizeExclusion(b *testing.B) {
	st := testSymtab(b)
	env := newTestEnv(b, st)
	ports := make([]string, 50)
	for i := range ports {
		ports[i] = fmt.Sprint(1000 + 37*i)
	}
	for _, bc := range []struct{ name, match string }{
		{"50-ports-set", "ip4 && tcp.dst != {" + strings.Join(ports, ", ") + "}"},
		{"50-ports-chain", "ip4 && tcp.dst != " + strings.Join(ports, " && tcp.dst != ")},
		{"1000-addresses-spread", "ip4 && ip4.src != $as1000spread"},
	} {
		e, err := st.ParseExpr(bc.match)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := st.Normalize(e, env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzExclude checks complement, intersectAlts, intersectRun and
// subtract exhaustively on a 10-bit field for cube sets read from the
// fuzzer's bytes (two bytes of value and mask per cube; a zero byte
// separates the three sets).
func FuzzExclude(f *testing.F) {
	f.Add([]byte{0x50, 0xff, 0xbb, 0xff, 0, 0x03, 0x03, 0x10, 0x30})
	f.Add([]byte{1, 1, 2, 2, 4, 4, 0, 8, 8})
	// Two disjoint sets and a single value: the run contradicts.
	f.Add([]byte{0x41, 0xff, 0x42, 0xff, 0, 0x81, 0xff, 0x82, 0xff, 0, 0x41, 0xff})
	const w = 10
	f.Fuzz(func(t *testing.T, data []byte) {
		var sets [3][]Masked
		k := 0
		for i := 0; i+1 < len(data) && k < 3; i += 2 {
			if data[i] == 0 {
				k++
				i--
				continue
			}
			// Spread the two bytes over 10 bits.
			mask := U128{Lo: uint64(data[i+1])<<2 | uint64(data[i]>>6)}.And(Ones(w))
			value := U128{Lo: uint64(data[i]) * 0x9}.And(mask)
			sets[k] = append(sets[k], Masked{value, mask})
		}
		a, b, third := sets[0], sets[1], sets[2]
		c := newComplementer()
		notA, err := c.complement(a)
		if err != nil {
			t.Fatal(err)
		}
		both, err := c.intersectAlts(a, b)
		if err != nil {
			t.Fatal(err)
		}
		run, err := c.intersectRun([][]Masked{a, b, third})
		if err != nil {
			t.Fatal(err)
		}
		aNotB, ok := c.subtract(a, b)
		if !ok {
			t.Fatalf("%v minus %v: too large", a, b)
		}
		for v := 0; v < 1<<w; v++ {
			x := U128{Lo: uint64(v)}
			inA, inB := matchesAny(a, x), matchesAny(b, x)
			if matchesAny(notA, x) == inA {
				t.Fatalf("complement of %v is %v: wrong for %#x", a, notA, v)
			}
			if len(a) > 0 && len(b) > 0 && matchesAny(both, x) != (inA && inB) {
				t.Fatalf("%v and %v is %v: wrong for %#x", a, b, both, v)
			}
			if len(a) > 0 && len(b) > 0 && len(third) > 0 && matchesAny(run, x) != (inA && inB && matchesAny(third, x)) {
				t.Fatalf("run of %v, %v and %v is %v: wrong for %#x", a, b, third, run, v)
			}
			if matchesAny(aNotB, x) != (inA && !inB) {
				t.Fatalf("%v minus %v is %v: wrong for %#x", a, b, aNotB, v)
			}
		}
	})
}

// FuzzCompileExact is TestCompileExact with the generator's seed chosen
// by the fuzzer.
func FuzzCompileExact(f *testing.F) {
	f.Add(uint64(1))
	f.Add(uint64(12345))
	st, c := testCompiler(f)
	env := newTestEnv(f, st)
	f.Fuzz(func(t *testing.T, seed uint64) {
		g := newExprGen(seed)
		text := g.match()
		e, err := st.ParseExpr(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		lf := Lflow{Pipeline: "ingress", Table: 3, Priority: 100, Match: text, Actions: "next;"}
		var res Result
		if err := c.Compile(&lf, &Context{Env: env, Datapath: 5, NextConjID: 1}, &res); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		ev := exprEval{env: env, t: t}
		for p := 0; p < 100; p++ {
			k := g.packet(5)
			ev.key = &k
			if got, want := rulesAccept(res.Rules, &k), ev.eval(e, false); got != want {
				t.Fatalf("%s\n%d rules accept=%v, match says %v for %v", text, len(res.Rules), got, want, &k)
			}
		}
	})
}

// TestCompileExactSets is TestCompileExact for large address sets less a
// few addresses, and negated sets: the packets' addresses come from the
// sets, so that they hit the excluded values and their neighbours.
func TestCompileExactSets(t *testing.T) {
	st, c := testCompiler(t)
	env := newTestEnv(t, st)
	var pool []uint64
	for _, name := range []string{"as1000", "as1000spread"} {
		for _, k := range env.sets[name] {
			pool = append(pool, k.Value.Lo)
		}
	}
	pick := func(i int) string { return ip4Text(pool[i]) }
	for _, match := range []string{
		"ip4.src == $as1000spread && ip4.src != {" + pick(1500) + ", " + pick(1501) + ", 10.0.0.1}",
		"ip4.src == $as1000spread && ip4.src != " + pick(1700) + " && ip4.src != " + pick(1900) + " && ip4.src != $as_clients",
		"ip4.src == $as1000 && ip4.src != {" + pick(5) + ", " + pick(263) + "}",
		"ip4.src == 10.0.0.0/16 && ip4.src != 10.0.1.0/24 && ip4.src != 10.0.3.128/25",
		"ip4 && ip4.src != $as1000spread && ip4.src != $as1000",
		"ip4.src != $as1000spread && tcp.dst != {80, 443}",
	} {
		e, err := st.ParseExpr(match)
		if err != nil {
			t.Fatalf("%s: %v", match, err)
		}
		lf := Lflow{Pipeline: "ingress", Table: 3, Priority: 100, Match: match, Actions: "next;"}
		var res Result
		if err := c.Compile(&lf, &Context{Env: env, Datapath: 5, NextConjID: 1}, &res); err != nil {
			t.Fatalf("%s: %v", match, err)
		}
		g := newExprGen(3)
		ev := exprEval{env: env, t: t}
		src, _ := flow.FieldByName("nw_src")
		accepted := 0
		for p := 0; p < 2000; p++ {
			k := g.packet(5)
			k.Set(src, pool[g.r.IntN(len(pool))]+uint64(g.r.IntN(3))-1)
			ev.key = &k
			want := ev.eval(e, false)
			if want {
				accepted++
			}
			if got := rulesAccept(res.Rules, &k); got != want {
				t.Fatalf("%s\n%d rules accept=%v, match says %v for %v", match, len(res.Rules), got, want, &k)
			}
		}
		t.Logf("%.60s: %d rules, %d of 2000 packets accepted", match, len(res.Rules), accepted)
	}
}

// TestNormalizeWorkBound checks that a match whose inequalities would
// take long to normalize (a conjunction of disjunctions of exclusions:
// 2^14 conjunctions, each intersecting up to 14 exclusions of one field)
// is refused with a clear error, while a smaller one of the same shape
// is normalized.
func TestNormalizeWorkBound(t *testing.T) {
	st := testSymtab(t)
	match := func(k int) Expr {
		var terms []string
		for i := 0; i < k; i++ {
			terms = append(terms, fmt.Sprintf("(tcp.dst != {%d, %d, %d} || reg1[%d] == 1)", 100+i*7, 2000+i*13, 30000+i*101, i))
		}
		e, err := st.ParseExpr(strings.Join(terms, " && "))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if nf, err := st.Normalize(match(4), nil); err != nil || len(nf) != 16 {
		t.Errorf("4 terms: %d conjunctions, %v", len(nf), err)
	}
	if _, err := st.Normalize(match(14), nil); err == nil || !strings.Contains(err.Error(), "too much work") {
		t.Errorf("14 terms: got %v, want the work bound's error", err)
	}
}
