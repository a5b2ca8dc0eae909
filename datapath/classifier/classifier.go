package classifier

import (
	"math/bits"
	"slices"

	"github.com/govn/govn/datapath/flow"
)

// Classifier is a set of rules searchable by tuple-space search with staged
// lookup and prefix tracking. It is not safe for concurrent use; Tables adds
// the locking.
type Classifier struct {
	subtables []*subtable // by maxPriority, highest first
	byMask    map[flow.Mask]*subtable
	tries     [numTries]trie
	n         int
}

// subtable holds the rules that share one mask.
type subtable struct {
	mask flow.Mask
	// stageWords lists, per stage, the indexes of the mask's nonzero words.
	stageWords [flow.NumStages][]uint8
	// lastStage is the last stage with nonzero words (-1 if the mask is
	// empty); stages before it are checked against stageHashes.
	lastStage int
	// stageHashes[s] counts the rules whose key hashes to h through stage s.
	stageHashes [flow.NumStages]map[uint64]int
	buckets     map[uint64][]*bucket
	// plen is the prefix length of the mask on each trie field: 0 if the
	// field is not matched, -1 if the mask is not a prefix.
	plen        [numTries]int
	maxPriority int
	top         *flow.Rule // a rule of priority maxPriority
	n           int
	// ports tracks the rules' masked L4 ports (tp_src<<16 | tp_dst) when
	// the last stage matches nothing but ports: a miss then un-wildcards
	// only the port bits that tell the packet apart from every rule.
	ports     *trie
	portsMask uint64 // the ports' mask, as a 32-bit value
	portsLen  uint   // 32 minus its trailing zero bits
	// partitioned says the mask matches all of metadata, as OVN's flows
	// do (it is the logical datapath): then tags has bit metaTag(v) set
	// for every metadata value v of its rules (tagRules counts them by
	// bit), and a lookup whose metadata's bit is clear skips the subtable
	// without hashing it, as Open vSwitch's partitions do.
	partitioned bool
	tags        uint64
	tagRules    *[64]int32
	// words are the indexes of the mask's nonzero words: the only words
	// a probe can un-wildcard.
	words []uint8
}

// The metadata word of the key layout.
var metaWord = flow.Metadata.Info().Word

// metaTag is the bit of a metadata value in a subtable's tags.
func metaTag(v uint64) uint64 { return 1 << (flow.HashFinish(flow.HashWord(0, v)) & 63) }

// The ports word of the key layout: tp_src and tp_dst in its high 32 bits.
var portsWord = flow.TPSrc.Info().Word

func portsOf(w uint64) uint64 { return w >> 32 }

// bucket holds the rules with one masked key, by priority, highest first.
type bucket struct {
	key   flow.Key
	rules []entry
}

// entry is a rule with what a lookup tests of it kept beside the pointer,
// so that a probe reads no rule but the one it picks: a rule is big (its
// match alone is 640 bytes), and in a cache-cold upcall every rule read
// is a miss or two.
type entry struct {
	rule *flow.Rule
	prio uint16
	conj bool // rule.IsConjunctive()
}

// New returns an empty classifier.
func New() *Classifier {
	c := &Classifier{byMask: map[flow.Mask]*subtable{}}
	for i, f := range trieFields {
		c.tries[i].width = f.Bits()
	}
	return c
}

// Len returns the number of rules.
func (c *Classifier) Len() int { return c.n }

func newSubtable(m flow.Mask) *subtable {
	st := &subtable{mask: m, buckets: map[uint64][]*bucket{}, lastStage: -1}
	for s := 0; s < flow.NumStages; s++ {
		for w := flow.StageStart(s); w < flow.StageEnd(s); w++ {
			if m.W[w] != 0 {
				st.stageWords[s] = append(st.stageWords[s], uint8(w))
				st.lastStage = s
			}
		}
		st.stageHashes[s] = map[uint64]int{}
	}
	for i, f := range trieFields {
		st.plen[i] = prefixLen(m.Get(f), f.Bits())
	}
	if pm := portsOf(m.W[portsWord]); pm != 0 && st.lastStage == flow.StageL4 && onlyPorts(&m) {
		st.ports = &trie{width: 32}
		st.portsMask = pm
		st.portsLen = uint(32 - bits.TrailingZeros32(uint32(pm)))
	}
	if m.W[metaWord] == ^uint64(0) {
		st.partitioned, st.tagRules = true, new([64]int32)
	}
	for s := range st.stageWords {
		st.words = append(st.words, st.stageWords[s]...)
	}
	// Prefix tracking may un-wildcard the whole of a trie field, beyond
	// the mask's own words (the low word of an IPv6 address).
	for i, f := range trieFields {
		if st.plen[i] == 0 {
			continue
		}
		in := f.Info()
		for w := in.Word; w < in.Word+int(f.Bits()+63)/64; w++ {
			if !slices.Contains(st.words, uint8(w)) {
				st.words = append(st.words, uint8(w))
			}
		}
	}
	return st
}

// tag counts a rule with metadata v in (d 1) or out of (d -1) the
// subtable's tags.
func (st *subtable) tag(v uint64, d int32) {
	if !st.partitioned {
		return
	}
	t := metaTag(v)
	i := bits.TrailingZeros64(t)
	st.tagRules[i] += d
	if st.tagRules[i] > 0 {
		st.tags |= t
	} else {
		st.tags &^= t
	}
}

// onlyPorts reports whether m's L4 stage has no bits but tp_src and tp_dst.
func onlyPorts(m *flow.Mask) bool {
	for w := flow.StageStart(flow.StageL4); w < flow.StageEnd(flow.StageL4); w++ {
		x := m.W[w]
		if w == portsWord {
			x &= 1<<32 - 1
		}
		if x != 0 {
			return false
		}
	}
	return true
}

// hashes computes the hash of k under st's mask through each stage.
func (st *subtable) hashes(k *flow.Key) (hs [flow.NumStages]uint64) {
	h := uint64(0x2545f4914f6cdd1d)
	for s := 0; s < flow.NumStages; s++ {
		for _, w := range st.stageWords[s] {
			h = flow.HashWord(h, k.W[w]&st.mask.W[w])
		}
		hs[s] = flow.HashFinish(h)
	}
	return hs
}

// Insert adds r. A rule with the same priority and match is replaced and
// returned.
func (c *Classifier) Insert(r *flow.Rule) (replaced *flow.Rule) {
	m := r.Match
	m.Normalize()
	st := c.byMask[m.Mask]
	if st == nil {
		st = newSubtable(m.Mask)
		c.byMask[m.Mask] = st
		c.subtables = append(c.subtables, st)
	}
	hs := st.hashes(&m.Key)
	h := hs[flow.NumStages-1]
	var b *bucket
	for _, x := range st.buckets[h] {
		if x.key == m.Key {
			b = x
			break
		}
	}
	if b == nil {
		b = &bucket{key: m.Key}
		st.buckets[h] = append(st.buckets[h], b)
	}
	e := entry{rule: r, prio: r.Priority, conj: r.IsConjunctive()}
	for i, x := range b.rules {
		if x.prio == r.Priority {
			b.rules[i] = e
			if st.top == x.rule {
				st.top = r
			}
			return x.rule
		}
	}
	i, _ := slices.BinarySearchFunc(b.rules, r.Priority, func(x entry, p uint16) int { return int(p) - int(x.prio) })
	b.rules = slices.Insert(b.rules, i, e)
	for s := 0; s < flow.NumStages; s++ {
		st.stageHashes[s][hs[s]]++
	}
	st.tag(m.Key.W[metaWord], 1)
	if st.ports != nil {
		st.ports.insert(flow.U128{Lo: portsOf(m.Key.W[portsWord])}, st.portsLen)
	}
	for i, f := range trieFields {
		if st.plen[i] > 0 {
			c.tries[i].insert(m.Key.GetU128(f), uint(st.plen[i]))
		}
	}
	st.n++
	c.n++
	if int(r.Priority) > st.maxPriority || st.n == 1 {
		st.maxPriority = int(r.Priority)
		st.top = r
		c.sortSubtables()
	}
	return nil
}

// Find returns the rule with exactly this priority and match, or nil.
func (c *Classifier) Find(priority uint16, match flow.Match) *flow.Rule {
	match.Normalize()
	st := c.byMask[match.Mask]
	if st == nil {
		return nil
	}
	b := st.find(&match.Key)
	if b == nil {
		return nil
	}
	for _, e := range b.rules {
		if e.prio == priority {
			return e.rule
		}
	}
	return nil
}

func (st *subtable) find(masked *flow.Key) *bucket {
	h := st.hashes(masked)[flow.NumStages-1]
	for _, b := range st.buckets[h] {
		if b.key == *masked {
			return b
		}
	}
	return nil
}

// Remove deletes the rule with r's priority and match and returns it (nil if
// there was none).
func (c *Classifier) Remove(priority uint16, match flow.Match) *flow.Rule {
	match.Normalize()
	st := c.byMask[match.Mask]
	if st == nil {
		return nil
	}
	hs := st.hashes(&match.Key)
	h := hs[flow.NumStages-1]
	list := st.buckets[h]
	bi := slices.IndexFunc(list, func(b *bucket) bool { return b.key == match.Key })
	if bi < 0 {
		return nil
	}
	b := list[bi]
	ri := slices.IndexFunc(b.rules, func(e entry) bool { return e.prio == priority })
	if ri < 0 {
		return nil
	}
	old := b.rules[ri].rule
	b.rules = slices.Delete(b.rules, ri, ri+1)
	if len(b.rules) == 0 {
		list = slices.Delete(list, bi, bi+1)
		if len(list) == 0 {
			delete(st.buckets, h)
		} else {
			st.buckets[h] = list
		}
	}
	for s := 0; s < flow.NumStages; s++ {
		if st.stageHashes[s][hs[s]]--; st.stageHashes[s][hs[s]] == 0 {
			delete(st.stageHashes[s], hs[s])
		}
	}
	st.tag(match.Key.W[metaWord], -1)
	if st.ports != nil {
		st.ports.remove(flow.U128{Lo: portsOf(match.Key.W[portsWord])}, st.portsLen)
	}
	for i, f := range trieFields {
		if st.plen[i] > 0 {
			c.tries[i].remove(match.Key.GetU128(f), uint(st.plen[i]))
		}
	}
	st.n--
	c.n--
	if st.n == 0 {
		delete(c.byMask, st.mask)
		c.subtables = slices.DeleteFunc(c.subtables, func(x *subtable) bool { return x == st })
	} else if old == st.top {
		st.maxPriority, st.top = -1, nil
		for _, l := range st.buckets {
			for _, b := range l {
				if e := b.rules[0]; int(e.prio) > st.maxPriority {
					st.maxPriority, st.top = int(e.prio), e.rule
				}
			}
		}
		c.sortSubtables()
	}
	return old
}

func (c *Classifier) sortSubtables() {
	slices.SortStableFunc(c.subtables, func(a, b *subtable) int { return b.maxPriority - a.maxPriority })
}

// Rules calls fn for every rule (in no particular order) until fn returns
// false.
func (c *Classifier) Rules(fn func(*flow.Rule) bool) {
	for _, st := range c.subtables {
		for _, l := range st.buckets {
			for _, b := range l {
				for _, e := range b.rules {
					if !fn(e.rule) {
						return
					}
				}
			}
		}
	}
}

// Explain is told, for each subtable a lookup probed that examined bits
// not yet in the wildcards, the bits the probe examined (before they are
// added to the wildcards) and the subtable's rule
// the probe was about: the rule it matched, or else the subtable's
// highest-priority rule, which the probe ruled out. It answers "which rule
// made this megaflow match that field?".
type Explain func(examined *flow.Mask, rule *flow.Rule)

// lookupState caches per-lookup trie results.
type lookupState struct {
	k       *flow.Key
	metaTag uint64     // metaTag of k's metadata
	wc      *flow.Mask // the caller's wildcards
	done    [numTries]bool
	plens   [numTries]plenSet
	checked [numTries]uint
}

// skipByTrie reports whether prefix tracking proves that no rule of st can
// match, un-wildcarding the address bits that proof read.
func (c *Classifier) skipByTrie(st *subtable, ls *lookupState, dst *flow.Mask) bool {
	for i, f := range trieFields {
		p := st.plen[i]
		if p <= 0 {
			continue
		}
		if !ls.done[i] {
			ls.plens[i], ls.checked[i] = c.tries[i].lookup(ls.k.GetU128(f))
			ls.done[i] = true
		}
		if ls.plens[i].has(uint(p)) {
			continue
		}
		// Skip the subtable, but never by un-wildcarding more address bits
		// than probing it would (its own prefix), unless they already are.
		w, n := f.Bits(), ls.checked[i]
		need := flow.OnesU128(n).Shl(w - n)
		if n <= uint(p) || ls.wc.Get(f).And(need) == need {
			dst.SetBits(f, need)
			return true
		}
	}
	return false
}

// probe looks ls.k up in st with staged lookup and prefix tracking, adding
// the examined bits to ls.wc (and telling ls.explain about them).
// With explain, the bits are first gathered in scratch (kept apart from ls
// so that handing them to explain lets nothing else escape).
func (c *Classifier) probe(st *subtable, ls *lookupState, scratch *flow.Mask, explain Explain) *bucket {
	if explain == nil {
		return c.probeInto(st, ls, ls.wc)
	}
	if st.partitioned && st.tags&ls.metaTag == 0 && covered(ls.wc, &st.mask, st.stageWords[flow.StageMeta]) {
		// Skipped by its tags at the cost of bits already examined:
		// nothing new to explain.
		return nil
	}
	// scratch is zero on entry and left zero: only the mask's words can
	// have been set.
	b := c.probeInto(st, ls, scratch)
	rule := st.top
	if b != nil {
		rule = b.rules[0].rule
	}
	for _, w := range st.words {
		if scratch.W[w]&^ls.wc.W[w] != 0 {
			explain(scratch, rule)
			break
		}
	}
	for _, w := range st.words {
		ls.wc.W[w] |= scratch.W[w]
		scratch.W[w] = 0
	}
	return b
}

// equal reports whether k and o agree under st's mask, comparing only the
// mask's words (EqualMasked would go through the whole key).
func (st *subtable) equal(k, o *flow.Key) bool {
	for _, w := range st.words {
		if (k.W[w]^o.W[w])&st.mask.W[w] != 0 {
			return false
		}
	}
	return true
}

// covered reports whether wc has every bit of m in the words ws.
func covered(wc, m *flow.Mask, ws []uint8) bool {
	for _, w := range ws {
		if m.W[w]&^wc.W[w] != 0 {
			return false
		}
	}
	return true
}

// probeInto is probe adding the examined bits to wc.
func (c *Classifier) probeInto(st *subtable, ls *lookupState, wc *flow.Mask) *bucket {
	k := ls.k
	if st.partitioned && st.tags&ls.metaTag == 0 {
		// No rule here has the key's metadata: the first stage would miss
		// (or a rare hash collision pass it, to miss later), and costs
		// the same bits.
		for _, w := range st.stageWords[flow.StageMeta] {
			wc.W[w] |= st.mask.W[w]
		}
		return nil
	}
	h := uint64(0x2545f4914f6cdd1d)
	for s := 0; s <= st.lastStage; s++ {
		// Prefix tracking runs where the addresses' stage begins, as OVS
		// does: a subtable already ruled out by in_port or L2 costs no
		// address bits.
		if s == flow.StageL3 && c.skipByTrie(st, ls, wc) {
			return nil
		}
		last := s == st.lastStage
		for _, w := range st.stageWords[s] {
			h = flow.HashWord(h, k.W[w]&st.mask.W[w])
			if !last || st.ports == nil {
				wc.W[w] |= st.mask.W[w]
			}
		}
		if !last && len(st.stageWords[s]) > 0 {
			if st.stageHashes[s][flow.HashFinish(h)] == 0 {
				return nil
			}
		}
	}
	for _, b := range st.buckets[flow.HashFinish(h)] {
		if st.equal(k, &b.key) {
			if st.ports != nil {
				wc.W[portsWord] |= st.mask.W[portsWord]
			}
			return b
		}
	}
	if st.ports != nil {
		// No rule matches. The ports trie says how many leading port bits
		// prove it; with only ports in the last stage, those suffice.
		_, n := st.ports.lookup(flow.U128{Lo: portsOf(k.W[portsWord]) & st.portsMask})
		prefix := uint64(0xffffffff) &^ (uint64(0xffffffff) >> n)
		wc.W[portsWord] |= (st.portsMask & prefix) << 32
	}
	return nil
}

// Lookup returns the highest-priority rule matching k, or nil, and ORs into
// wc every bit of k the decision depended on.
func (c *Classifier) Lookup(k *flow.Key, wc *flow.Mask) *flow.Rule {
	return c.LookupExplain(k, wc, nil)
}

// LookupExplain is Lookup that also reports, through explain (if not nil),
// which subtable's rule each examined bit was examined for.
func (c *Classifier) LookupExplain(k *flow.Key, wc *flow.Mask, explain Explain) *flow.Rule {
	best, _ := c.lookup(k, wc, explain, nil, false)
	return best
}

// lookup finds the best rule for k. With collectSoft, conjunction clauses
// are "soft" matches: they do not end the search but are returned in soft
// (those above the best hard match; the caller drops any below it). One
// priority-ordered pass over all subtables, clauses and ordinary rules
// alike, keeps the examined bits as few as OVS's. With explain, scratch
// (zero, and left zero) gathers each probe's bits; nil allocates one.
func (c *Classifier) lookup(k *flow.Key, wc *flow.Mask, explain Explain, scratch *flow.Mask, collectSoft bool) (best *flow.Rule, soft []*flow.Rule) {
	ls := lookupState{k: k, wc: wc, metaTag: metaTag(k.W[metaWord])}
	if explain != nil && scratch == nil {
		scratch = new(flow.Mask)
	}
	bestPrio := -1 // best's priority
	for _, st := range c.subtables {
		if bestPrio >= st.maxPriority {
			break
		}
		b := c.probe(st, &ls, scratch, explain)
		if b == nil {
			continue
		}
		for _, e := range b.rules {
			if int(e.prio) <= bestPrio {
				break
			}
			if collectSoft && e.conj {
				soft = append(soft, e.rule)
				continue
			}
			best, bestPrio = e.rule, int(e.prio)
			break
		}
	}
	return best, soft
}

// LookupAll calls fn for every rule matching k with priority above
// minPriority (-1 for all), adding the examined bits to wc and reporting
// them to explain (if not nil).
func (c *Classifier) LookupAll(k *flow.Key, wc *flow.Mask, explain Explain, minPriority int, fn func(*flow.Rule)) {
	ls := lookupState{k: k, wc: wc, metaTag: metaTag(k.W[metaWord])}
	var scratch *flow.Mask
	if explain != nil {
		scratch = new(flow.Mask)
	}
	for _, st := range c.subtables {
		if st.maxPriority <= minPriority {
			break
		}
		b := c.probe(st, &ls, scratch, explain)
		if b == nil {
			continue
		}
		for _, e := range b.rules {
			if int(e.prio) <= minPriority {
				break
			}
			fn(e.rule)
		}
	}
}
