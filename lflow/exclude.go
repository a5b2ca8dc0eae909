package lflow

import (
	"errors"
	"fmt"
	"math/bits"
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

// maxExclusion bounds the alternatives of a clause built by complement:
// beyond it a match is reported as too complex. It is the same bound as
// for conjunctions; a negated set of 1,000 IPv4 addresses spread over the
// whole address space needs about 22,000.
const maxExclusion = maxConjs

// complementWork bounds the cubes complement visits, so that hostile
// input cannot make it run for long.
const complementWork = 1 << 22

var errExclusionTooLarge = fmt.Errorf("the values left need more than %d masked matches", maxExclusion)

// errComplementBudget is internal: complement gave up.
var errComplementBudget = errors.New("complement over budget")

// complementer computes complements of unions of cubes within a budget.
type complementer struct {
	work int // cube visits left
}

func newComplementer() complementer { return complementer{work: complementWork} }

var allBits = U128{Hi: ^uint64(0), Lo: ^uint64(0)}

// complement returns cubes whose union is exactly the set of values that
// match none of f. The result never shares memory with f.
func (c *complementer) complement(f []Masked) ([]Masked, error) {
	c.work -= len(f) + 1
	if c.work < 0 {
		return nil, errComplementBudget
	}
	if len(f) == 0 {
		return []Masked{{}}, nil // everything
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
			return nil, errComplementBudget
		}
		return out, nil
	}

	bit := splitBit(f)
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
		return nil, errComplementBudget
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

// splitBit returns the bit the most cubes fix, the highest on a tie (so
// that on points the split goes from the most significant bit down, as in
// a prefix trie).
func splitBit(f []Masked) int {
	var count [128]int
	for _, m := range f {
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
		if count[i] > count[best] || count[i] == count[best] && i > best {
			best = i
		}
	}
	return best
}

// exclude returns the alternatives of "the field matches none of off".
func exclude(off []Masked) ([]Masked, error) {
	c := newComplementer()
	on, err := c.complement(off)
	if errors.Is(err, errComplementBudget) {
		return nil, errExclusionTooLarge
	}
	return on, err
}

// crossLimit is the largest cross product intersectAlts computes just to
// compare it with the complement's answer.
const crossLimit = 4096

// intersectAlts returns alternatives matching exactly the values that
// match one of a and one of b (two clauses of one field). Crossing the
// alternatives is exact but multiplies their numbers; when both are
// large, as for two inequalities, the complement of the union of their
// complements is usually far smaller. The smaller answer wins.
func intersectAlts(a, b []Masked) ([]Masked, error) {
	n := len(a) * len(b)
	if len(a) == 1 || len(b) == 1 {
		return crossAlts(a, b), nil
	}
	var cross []Masked
	if n <= crossLimit {
		cross = crossAlts(a, b)
	}
	c := newComplementer()
	if offA, err := c.complement(a); err == nil {
		if offB, err := c.complement(b); err == nil {
			if on, err := c.complement(append(offA, offB...)); err == nil && (cross == nil || len(on) < len(cross)) {
				return on, nil
			}
		}
	}
	if cross != nil {
		return cross, nil
	}
	if n > maxConjs {
		return nil, errTooComplex
	}
	return crossAlts(a, b), nil
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
