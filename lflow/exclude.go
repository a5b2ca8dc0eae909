package lflow

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// Inequalities: complements and intersections of clauses.
//
// A clause's alternatives are cubes: each Masked fixes the bits under its
// mask and leaves the others free, and the clause is their union. A lone
// f != c is the union of one single-bit cube per bit of c ("this bit
// differs"), as in OVN. Several inequalities on one field, or !(f == {a,
// b, c}), are the complement of a union of cubes, which complement
// computes directly instead of crossing the single-bit cubes of every !=
// (w^n alternatives for n inequalities on a w-bit field).
//
// complement is the classic recursive method. Literals that every cube
// shares come out first as single-bit cubes, since ¬(l ∧ F) = ¬l ∨ ¬F; the
// bit the most cubes fix then splits the set into the cubes where it is 0
// and where it is 1, whose complements are computed alone and merged back,
// a cube found in both losing the split bit. On points (the usual case,
// values excluded by !=) this gives the single-bit cubes of the bits all
// excluded values agree on, then a prefix-style cover of the rest: about n
// times (w - log2 n) alternatives at worst, and far fewer when the
// excluded values are clustered (ports 80-90, addresses in one subnet).
// reduce then widens each cube as far as the excluded values allow, and
// cover keeps the smaller of the covers got by splitting from either end.
//
// Two clauses of one field intersect (intersectAlts, intersectRun) by the
// cheapest exact route that gives few alternatives: crossing them when
// one has a single alternative or the product is small; the complement of
// the union of their complements when those are small (inequalities,
// clustered sets); and a spread set (ip4.src == $allowed) less a few
// values (ip4.src != $except) by subtracting the other's complement from
// it, cube by cube.

// maxExclusion bounds the alternatives of a clause built by complement:
// beyond it a match is reported as too complex. It is the same bound as
// for conjunctions; a negated set of 1,000 IPv4 addresses spread over the
// whole address space needs 8,877, so the bound is reached at about
// 6,000 such addresses.
const maxExclusion = maxConjs

// normalizeWork bounds the work of the exclusions and intersections of
// one normalization, so that hostile input cannot make it run for long.
// It counts the cubes complement visits (a fraction of a microsecond
// each); the other steps are charged in proportion. Excluding n values
// of a w-bit field visits a few times n*w cubes: the largest exclusions
// maxExclusion allows (5,000 random IPv4 addresses) take a fifth of it.
const normalizeWork = 1 << 20

var (
	errExclusionTooLarge = fmt.Errorf("too complex: the values left need more than %d masked matches", maxExclusion)
	errTooMuchWork       = errors.New("expression too complex to normalize (its inequalities need too much work)")
	// errComplementTooLarge is internal: a complement passed maxExclusion.
	errComplementTooLarge = errors.New("complement too large")
)

// complementer computes complements and intersections of unions of
// cubes within one budget of work.
type complementer struct {
	work int // budget left, in cube visits
	// lowFirst breaks ties between split bits towards the least
	// significant one; which order gives the smaller cover depends on
	// the values.
	lowFirst bool
}

func newComplementer() complementer { return complementer{work: normalizeWork} }

var allBits = U128{Hi: ^uint64(0), Lo: ^uint64(0)}

// complement returns cubes whose union is exactly the set of values that
// match none of f. The result never shares memory with f.
func (c *complementer) complement(f []Masked) ([]Masked, error) {
	c.work -= len(f) + 1
	if c.work < 0 {
		return nil, errTooMuchWork
	}
	if len(f) == 0 {
		return []Masked{{}}, nil // everything
	}
	if cube, ok, all := complementLiterals(f); all {
		// ¬(l1 ∨ l2 ∨ ...) = ¬l1 ∧ ¬l2 ∧ ...: the complement of a lone
		// != is one cube.
		if !ok {
			return nil, nil
		}
		return []Masked{cube}, nil
	}
	common, vAnd, vOr := allBits, allBits, U128{}
	for _, m := range f {
		if m.Mask.IsZero() {
			return nil, nil // f matches everything
		}
		common = common.And(m.Mask)
		vAnd = vAnd.And(m.Value)
		vOr = vOr.Or(m.Value)
	}
	// Bits every cube fixes to the same value.
	common = common.And(vAnd.Xor(vOr).Not())
	if !common.IsZero() {
		var out []Masked
		for bit := 0; bit < 128; bit++ {
			if !common.Bit(bit) {
				continue
			}
			v := U128{}
			if !vAnd.Bit(bit) {
				v = Bit1(bit)
			}
			out = append(out, Masked{v, Bit1(bit)})
		}
		keep := common.Not()
		rest := make([]Masked, len(f))
		for i, m := range f {
			rest[i] = Masked{m.Value.And(keep), m.Mask.And(keep)}
		}
		sub, err := c.complement(rest)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
		if len(out) > maxExclusion {
			return nil, errComplementTooLarge
		}
		return out, nil
	}

	bit := splitBit(f, c.lowFirst)
	b := Bit1(bit)
	clear := b.Not()
	var f0, f1 []Masked
	for _, m := range f {
		switch {
		case m.Mask.And(b).IsZero():
			f0 = append(f0, m)
			f1 = append(f1, m)
		case m.Value.Bit(bit):
			f1 = append(f1, Masked{m.Value.And(clear), m.Mask.And(clear)})
		default:
			f0 = append(f0, Masked{m.Value, m.Mask.And(clear)})
		}
	}
	c0, err := c.complement(f0)
	if err != nil {
		return nil, err
	}
	c1, err := c.complement(f1)
	if err != nil {
		return nil, err
	}
	if len(c0)+len(c1) > maxExclusion {
		return nil, errComplementTooLarge
	}
	// A cube in both halves holds whatever the split bit is.
	in1 := make(map[Masked]bool, len(c1))
	for _, m := range c1 {
		in1[m] = true
	}
	both := map[Masked]bool{}
	out := make([]Masked, 0, len(c0)+len(c1))
	for _, m := range c0 {
		if in1[m] {
			both[m] = true
			out = append(out, m)
			continue
		}
		out = append(out, Masked{m.Value, m.Mask.Or(b)})
	}
	for _, m := range c1 {
		if !both[m] {
			out = append(out, Masked{m.Value.Or(b), m.Mask.Or(b)})
		}
	}
	return out, nil
}

// complementLiterals returns the complement of f when all its cubes fix
// one bit each (all is false otherwise): one cube, or none (ok false)
// when f has both values of a bit and so matches everything.
func complementLiterals(f []Masked) (cube Masked, ok, all bool) {
	for _, m := range f {
		if m.Mask.OnesCount() != 1 {
			return Masked{}, false, false
		}
		if !cube.Mask.And(m.Mask).IsZero() {
			if cube.Value.And(m.Mask) != m.Value {
				continue // the same literal again
			}
			return Masked{}, false, true // x = 0 or x = 1: everything
		}
		cube.Mask = cube.Mask.Or(m.Mask)
		cube.Value = cube.Value.Or(m.Value.Xor(m.Mask))
	}
	return cube, true, true
}

// splitBit returns the bit the most of the smallest cubes (those fixing
// the fewest bits) fix, the highest (or with lowFirst the lowest) on a
// tie. Splitting where the smallest cubes are soon leaves halves that one
// cube covers whole, which end the recursion; on points the split goes
// from the most significant bit down, as in a prefix trie.
func splitBit(f []Masked, lowFirst bool) int {
	least := 129
	for _, m := range f {
		least = min(least, m.Mask.OnesCount())
	}
	var count [128]int
	for _, m := range f {
		if m.Mask.OnesCount() != least {
			continue
		}
		for w, word := range [2]uint64{m.Mask.Lo, m.Mask.Hi} {
			for word != 0 {
				i := bits.TrailingZeros64(word)
				count[w*64+i]++
				word &= word - 1
			}
		}
	}
	best := 0
	for i := 127; i >= 0; i-- {
		if count[i] > count[best] || count[i] == count[best] && i > best != lowFirst {
			best = i
		}
	}
	return best
}

// exclude returns the alternatives of "the field matches none of off".
func (c *complementer) exclude(off []Masked) ([]Masked, error) {
	if len(off) == 1 {
		// A lone !=: one alternative per bit, that bit differing.
		var on []Masked
		m := off[0]
		for bit := 0; bit < 128; bit++ {
			if b := Bit1(bit); m.Mask.Bit(bit) {
				on = append(on, Masked{m.Value.And(b).Xor(b), b})
			}
		}
		return on, nil
	}
	on, err := c.cover(off)
	if errors.Is(err, errComplementTooLarge) {
		return nil, errExclusionTooLarge
	}
	return on, err
}

// cover returns a small cover of the complement of off: complement's,
// reduced, and when that is not tiny, the smaller of the covers got by
// splitting from the most and from the least significant bit.
func (c *complementer) cover(off []Masked) ([]Masked, error) {
	on, err := c.complement(off)
	if err != nil {
		return nil, err
	}
	on = c.reduce(on, off)
	if len(on) > 16 {
		c.lowFirst = true
		other, err := c.complement(off)
		c.lowFirst = false
		if err == nil && len(other) < len(on) {
			if other = c.reduce(other, off); len(other) < len(on) {
				on = other
			}
		}
	}
	return on, nil
}

// reduceWork bounds the cube comparisons one reduce makes; they are
// charged to the budget at 256 a cube visit.
const reduceWork = 1 << 22

// reduce shrinks a cover of the complement of off: each cube loses the
// bits it can lose without touching off (the complement's cubes keep the
// bits of every split above them, which the values below often do not
// need), then cubes inside another one go. It gives up, returning on as
// it is, when that would take long.
func (c *complementer) reduce(on, off []Masked) []Masked {
	lits := 0
	for _, m := range on {
		lits += m.Mask.OnesCount()
	}
	cost := lits*len(off) + len(on)*len(on)
	if len(on) < 2 || lits*len(off) > reduceWork || len(on)*len(on) > reduceWork || cost>>8 > c.work {
		return on
	}
	c.work -= cost >> 8
	out := make([]Masked, len(on))
	for i, m := range on {
		for bit := 127; bit >= 0; bit-- {
			if !m.Mask.Bit(bit) {
				continue
			}
			clear := Bit1(bit).Not()
			wider := Masked{m.Value.And(clear), m.Mask.And(clear)}
			if !touchesAny(wider, off) {
				m = wider
			}
		}
		out[i] = m
	}
	// Drop duplicates and cubes another one contains, keeping the order.
	keep := make([]Masked, 0, len(out))
	for i, m := range out {
		inside := false
		for j, o := range out {
			if i != j && contains(o, m) && (o != m || j < i) {
				inside = true
				break
			}
		}
		if !inside {
			keep = append(keep, m)
		}
	}
	return keep
}

// touchesAny reports whether some value matches m and one of off.
func touchesAny(m Masked, off []Masked) bool {
	for _, o := range off {
		if m.Value.Xor(o.Value).And(m.Mask.And(o.Mask)).IsZero() {
			return true
		}
	}
	return false
}

// contains reports whether every value that matches m also matches o.
func contains(o, m Masked) bool {
	return o.Mask.And(m.Mask) == o.Mask && m.Value.And(o.Mask) == o.Value
}

// crossLimit is the largest cross product intersectAlts computes just to
// compare it with the complement's answer.
const crossLimit = 1 << 14

// intersectAlts returns alternatives matching exactly the values that
// match one of a and one of b (two clauses of one field). Crossing the
// alternatives is exact but multiplies their numbers; when both are
// large, as for two inequalities, the complement of the union of their
// complements is usually far smaller. The smaller answer wins.
func (c *complementer) intersectAlts(a, b []Masked) ([]Masked, error) {
	n := len(a) * len(b)
	if len(a) == 1 || len(b) == 1 {
		return crossAlts(a, b), nil
	}
	if c.work -= 1 + n>>8; c.work < 0 {
		return nil, errTooMuchWork
	}
	var best []Masked
	found := false
	consider := func(alts []Masked) {
		if !found || len(alts) < len(best) {
			best, found = alts, true
		}
	}
	if n <= crossLimit {
		consider(crossAlts(a, b))
		if len(best) <= max(len(a), len(b)) {
			// As small as either side alone: the common case of two
			// sets, and not worth more work.
			return best, nil
		}
	}
	offA, errA := c.complement(a)
	offB, errB := c.complement(b)
	if c.work < 0 {
		return nil, errTooMuchWork
	}
	switch {
	case errA == nil && errB == nil && len(offA)+len(offB) <= max(len(a)+len(b), 1024):
		// The complement of the union of complements is the best
		// answer when they are small (inequalities, clustered sets).
		off := append(c.reduce(offA, a), c.reduce(offB, b)...)
		if on, err := c.cover(off); err == nil {
			consider(on)
		}
	case errB == nil && len(offB) <= subtractLimit:
		// One side is a set spread over the field (ip4.src ==
		// $allowed), whose complement is large, and the other a few
		// inequalities (ip4.src != $except): the set minus those.
		if alts, ok := c.subtract(a, offB); ok {
			consider(alts)
		}
	case errA == nil && len(offA) <= subtractLimit:
		if alts, ok := c.subtract(b, offA); ok {
			consider(alts)
		}
	}
	if c.work < 0 {
		return nil, errTooMuchWork
	}
	if found {
		return best, nil
	}
	if n > maxConjs {
		return nil, errTooComplex
	}
	c.work -= n >> 8
	return crossAlts(a, b), nil
}

// subtractLimit is the largest set of cubes subtract takes away.
const subtractLimit = 256

// subtract returns cubes matching exactly the values that match one of
// on and none of off. ok is false when the answer would pass
// maxExclusion or the budget.
func (c *complementer) subtract(on, off []Masked) ([]Masked, bool) {
	out := slices.Clone(on)
	for _, d := range off {
		if c.work -= 1 + len(out)>>8; c.work < 0 {
			return nil, false
		}
		next := out[:0:0]
		for _, m := range out {
			if !touchesAny(m, []Masked{d}) {
				next = append(next, m)
				continue
			}
			// m minus d: for each bit d fixes and m leaves free, the
			// part of m where that bit differs from d (and the bits
			// before it agree with d, so that the parts are disjoint).
			free := d.Mask.And(m.Mask.Not())
			for bit := 0; bit < 128 && !free.IsZero(); bit++ {
				if !free.Bit(bit) {
					continue
				}
				b := Bit1(bit)
				next = append(next, Masked{m.Value.Or(d.Value.And(b).Xor(b)), m.Mask.Or(b)})
				m = Masked{m.Value.Or(d.Value.And(b)), m.Mask.Or(b)}
				free = free.And(b.Not())
			}
			if len(next) > maxExclusion {
				return nil, false
			}
		}
		out = next
	}
	return out, true
}

// intersectRun intersects the alternatives of several clauses of one
// field (an ACL's tcp.dst != 22 && tcp.dst != 80 && ...) at once: the
// clauses with one alternative fold into one cube, and the others, when
// there are several, are intersected as the complement of the union of
// their complements, computed once rather than once per clause. A nil
// result means the clauses contradict.
func (c *complementer) intersectRun(run [][]Masked) ([]Masked, error) {
	var single []Masked // at most one cube
	var multi [][]Masked
	for _, alts := range run {
		if len(alts) != 1 {
			// Prerequisites repeat (eth.type == {0x800, 0x86dd} for each
			// tcp.dst != ...): once is enough.
			if slices.ContainsFunc(multi, func(m []Masked) bool { return slices.Equal(m, alts) }) {
				continue
			}
			multi = append(multi, alts)
			continue
		}
		if single == nil {
			single = alts
		} else if single = crossAlts(single, alts); len(single) == 0 {
			return nil, nil
		}
	}
	if len(multi) == 0 {
		return single, nil
	}
	on, err := c.intersectMulti(multi)
	if err != nil || single == nil || len(on) == 0 {
		return on, err
	}
	return crossAlts(single, on), nil
}

// intersectMulti is intersectRun for one or more clauses of several
// alternatives. Like intersectAlts, it takes the complement of
// the union of complements when they are small, or else, when the
// clauses but the largest have small complements, the largest minus
// those.
func (c *complementer) intersectMulti(multi [][]Masked) ([]Masked, error) {
	if len(multi) > 2 {
		big := 0
		for i, m := range multi {
			if len(m) > len(multi[big]) {
				big = i
			}
		}
		var off, others []Masked
		ok := true
		for i, m := range multi {
			cm, err := c.complement(m)
			if err != nil {
				ok = false
				break
			}
			cm = c.reduce(cm, m)
			off = append(off, cm...)
			if i != big {
				others = append(others, cm...)
			}
		}
		if ok {
			total := 0
			for _, m := range multi {
				total += len(m)
			}
			if len(off) <= max(total, 1024) {
				if on, err := c.cover(off); err == nil {
					return on, nil
				}
			} else if len(others) <= subtractLimit {
				if on, ok := c.subtract(multi[big], others); ok {
					return on, nil
				}
			}
		}
	}
	on := multi[0]
	for _, m := range multi[1:] {
		var err error
		if on, err = c.intersectAlts(on, m); err != nil || len(on) == 0 {
			return on, err
		}
	}
	return on, nil
}

// crossAlts intersects every alternative of a with every one of b,
// dropping contradictions and duplicates.
func crossAlts(a, b []Masked) []Masked {
	var out []Masked
	var seen map[Masked]bool
	for _, x := range a {
		for _, y := range b {
			common := x.Mask.And(y.Mask)
			if !x.Value.Xor(y.Value).And(common).IsZero() {
				continue
			}
			m := Masked{x.Value.Or(y.Value), x.Mask.Or(y.Mask)}
			if seen == nil && len(out) >= 16 {
				seen = make(map[Masked]bool, 2*len(out))
				for _, o := range out {
					seen[o] = true
				}
			}
			if seen != nil {
				if seen[m] {
					continue
				}
				seen[m] = true
			} else if containsAlt(out, m) {
				continue
			}
			out = append(out, m)
		}
	}
	return out
}

func containsAlt(alts []Masked, m Masked) bool {
	for _, a := range alts {
		if a == m {
			return true
		}
	}
	return false
}
