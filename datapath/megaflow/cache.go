package megaflow

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/xlate"
)

// Flow is one megaflow.
type Flow struct {
	Key        flow.Key // masked
	Actions    []flow.DPAction
	Reasons    []xlate.Reason
	Generation uint64        // the flow-table generation Actions were computed at
	Tables     flow.TableSet // the tables the translation looked up
	Groups     bool          // whether it used a group
	Hits       uint64
	Bytes      uint64        // bytes of the packets Hits counts; the caller adds them after Lookup
	Used       time.Duration // time of the last hit, on the caller's clock
	Created    time.Duration

	st      *subtable
	hash    uint64
	dead    bool
	recircs xlate.Recircs // held while the megaflow is installed
	learned xlate.Learned // refreshed while the megaflow is used
	// refreshed is Used when learned was last refreshed.
	refreshed time.Duration
	// counters are the rules' counters Hits and Bytes are credited to;
	// pushedHits and pushedBytes what has been credited so far.
	counters                *counterList
	pushedHits, pushedBytes uint64
}

// Mask returns the megaflow's mask.
func (f *Flow) Mask() *flow.Mask { return &f.st.mask }

// String formats f like ovs-appctl dpctl/dump-flows.
func (f *Flow) String() string {
	m := flow.Match{Key: f.Key, Mask: f.st.mask}
	return fmt.Sprintf("%s, packets:%d, actions:%s", m.String(), f.Hits, flow.DPActionsString(f.Actions))
}

// subtable holds the megaflows of one mask in an open-addressing hash
// table keyed by the hash of the masked words.
type subtable struct {
	mask  flow.Mask
	words []maskWord // the mask's nonzero words
	slots []slot     // power-of-two sized, linear probing
	n     int
	hits  uint64
}

// maskWord is one nonzero word of a mask, kept next to its index so a
// probe reads one small array instead of the whole mask.
type maskWord struct {
	i int
	m uint64
}

type slot struct {
	hash uint64
	f    *Flow
}

func newSubtable(m *flow.Mask) *subtable {
	st := &subtable{mask: *m, slots: make([]slot, 8)}
	for i, w := range m.W {
		if w != 0 {
			st.words = append(st.words, maskWord{i, w})
		}
	}
	return st
}

// hash hashes k's words under the mask.
func (st *subtable) hash(k *flow.Key) uint64 {
	h := uint64(0x9ae16a3b2f90404f)
	for _, mw := range st.words {
		h = flow.HashWord(h, k.W[mw.i]&mw.m)
	}
	// HashWord ends with a rotation that brings well-mixed high product
	// bits down, so one fold is enough for slot indexing; a full finalizer
	// would cost a third of a probe.
	h ^= h >> 32
	if h == 0 {
		h = 1 // 0 marks an empty slot
	}
	return h
}

// equal reports whether k under the mask equals the masked key mk.
func (st *subtable) equal(k, mk *flow.Key) bool {
	for _, mw := range st.words {
		if k.W[mw.i]&mw.m != mk.W[mw.i] {
			return false
		}
	}
	return true
}

func (st *subtable) find(k *flow.Key) *Flow {
	h := st.hash(k)
	m := uint64(len(st.slots) - 1)
	for i := h & m; ; i = (i + 1) & m {
		s := &st.slots[i]
		if s.hash == 0 {
			return nil
		}
		if s.hash == h && st.equal(k, &s.f.Key) {
			return s.f
		}
	}
}

func (st *subtable) insert(f *Flow) {
	if (st.n+1)*2 > len(st.slots) {
		old := st.slots
		st.slots = make([]slot, len(old)*2)
		for _, s := range old {
			if s.hash != 0 {
				st.place(s)
			}
		}
	}
	st.place(slot{f.hash, f})
	st.n++
}

func (st *subtable) place(s slot) {
	m := uint64(len(st.slots) - 1)
	i := s.hash & m
	for st.slots[i].hash != 0 {
		i = (i + 1) & m
	}
	st.slots[i] = s
}

// remove deletes f with backward-shift deletion, which keeps linear probing
// free of tombstones.
func (st *subtable) remove(f *Flow) {
	m := uint64(len(st.slots) - 1)
	i := f.hash & m
	for st.slots[i].f != f {
		if st.slots[i].hash == 0 {
			return
		}
		i = (i + 1) & m
	}
	for {
		st.slots[i] = slot{}
		j := i
		for {
			j = (j + 1) & m
			if st.slots[j].hash == 0 {
				st.n--
				return
			}
			home := st.slots[j].hash & m
			// Move slot j back to i unless its home lies cyclically in (i, j].
			if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				st.slots[i] = st.slots[j]
				i = j
				break
			}
		}
	}
}

// EMCSize is the number of exact-match cache entries (a power of two).
const EMCSize = 1 << 12

// emcMinSubtables is the number of subtables above which the exact-match
// cache is consulted. Hashing and comparing a whole key costs about as much
// as probing four subtables, so with fewer the EMC would only slow hits.
const emcMinSubtables = 4

// emcEntry remembers which megaflow the key with this hash last hit. It
// does not keep the key: a hit is confirmed by checking the key against the
// megaflow itself (its few mask words), which is both exact and cheaper than
// comparing whole keys, and keeps the EMC small enough for the L2 cache.
type emcEntry struct {
	hash uint64
	f    *Flow
}

// Cache is a megaflow cache with an exact-match cache in front. The zero
// value is not usable; call New.
type Cache struct {
	// union is the OR of every subtable's mask: the EMC hashes a key only
	// on these words, because keys that differ elsewhere hit the same
	// megaflow anyway.
	union *subtable

	emc       []emcEntry // nil when disabled
	subtables []*subtable
	byMask    map[flow.Mask]*subtable
	n         int
	gen       uint64 // lookups treat older megaflows as misses
	revalGen  uint64 // every megaflow has been revalidated to this
	lookups   uint64
	stats     Stats
	lists     counterLists // the megaflows' counter lists, shared
	limit     *Limit       // the cap shared with other caches; nil for none
}

// Stats counts cache activity.
type Stats struct {
	EMCHits, MegaflowHits, Misses           uint64
	Inserted, Revalidated, Deleted, Expired uint64
	// LimitHits counts Inserts refused at the Limit; Evicted the
	// megaflows Evict removed.
	LimitHits, Evicted uint64
}

// New returns an empty cache; emc enables the exact-match cache.
func New(emc bool) *Cache {
	c := &Cache{byMask: map[flow.Mask]*subtable{}, union: newSubtable(&flow.Mask{}), lists: counterLists{}}
	if emc {
		c.emc = make([]emcEntry, EMCSize)
	}
	return c
}

// updateUnion recomputes the union of the subtables' masks.
func (c *Cache) updateUnion() {
	var u flow.Mask
	for _, st := range c.subtables {
		u.Or(&st.mask)
	}
	c.union = newSubtable(&u)
}

// Len returns the number of megaflows.
func (c *Cache) Len() int { return c.n }

// Subtables returns the number of distinct masks.
func (c *Cache) Subtables() int { return len(c.subtables) }

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats { return c.stats }

// Generation returns the flow-table generation the cache is valid for.
func (c *Cache) Generation() uint64 { return c.gen }

// SetGeneration tells the cache the tables reached gen: megaflows of older
// generations become misses at once, before Revalidate gets to them.
func (c *Cache) SetGeneration(gen uint64) { c.gen = gen }

// Lookup returns the megaflow matching k, or nil, and counts the hit at
// time now. A megaflow translated at an older generation than the cache's
// is a miss.
func (c *Cache) Lookup(k *flow.Key, now time.Duration) *Flow {
	var e *emcEntry
	var h uint64
	if c.emc != nil && len(c.subtables) > emcMinSubtables {
		h = c.union.hash(k)
		e = &c.emc[h&(EMCSize-1)]
		if f := e.f; f != nil && e.hash == h && !f.dead && f.Generation == c.gen && f.st.equal(k, &f.Key) {
			f.Hits++
			f.Used = now
			c.stats.EMCHits++
			return f
		}
	}
	for _, st := range c.subtables {
		if f := st.find(k); f != nil {
			if f.Generation != c.gen {
				continue // stale: awaiting revalidation
			}
			f.Hits++
			f.Used = now
			st.hits++
			c.stats.MegaflowHits++
			if c.lookups++; c.lookups&1023 == 0 {
				c.rank()
			}
			if e != nil {
				e.hash, e.f = h, f
			}
			return f
		}
	}
	c.stats.Misses++
	return nil
}

// rank sorts subtables by hits, busiest first, and decays the counts so
// the order follows recent traffic.
func (c *Cache) rank() {
	slices.SortStableFunc(c.subtables, func(a, b *subtable) int {
		switch {
		case a.hits > b.hits:
			return -1
		case a.hits < b.hits:
			return 1
		}
		return 0
	})
	for _, st := range c.subtables {
		st.hits /= 2
	}
}

// Insert installs the translation of key k, replacing a megaflow with the
// same mask and masked key. It returns the megaflow, or nil if the cache's
// Limit is reached (then nothing changed: the caller uses the actions for
// its packet only).
func (c *Cache) Insert(res *xlate.Result, now time.Duration) *Flow {
	st := c.byMask[res.Mask]
	if c.limit != nil {
		replaces := false
		if st != nil {
			mk := res.Key.And(&st.mask)
			replaces = st.find(&mk) != nil
		}
		if !replaces && !c.limit.reserve() {
			c.stats.LimitHits++
			return nil
		}
		if replaces {
			c.limit.n.Add(1) // remove gives it back
		}
	}
	if st == nil {
		st = newSubtable(&res.Mask)
		c.byMask[res.Mask] = st
		c.subtables = append(c.subtables, st)
		c.updateUnion()
	}
	mk := res.Key.And(&st.mask)
	if old := st.find(&mk); old != nil {
		c.remove(old)
		st = c.byMask[res.Mask]
		if st == nil {
			st = newSubtable(&res.Mask)
			c.byMask[res.Mask] = st
			c.subtables = append(c.subtables, st)
			c.updateUnion()
		}
	}
	f := &Flow{Key: mk, Actions: res.Actions, Reasons: res.Reasons, Generation: res.Generation,
		Tables: res.Tables, Groups: res.Groups,
		Used: now, Created: now, st: st, hash: st.hash(&mk), recircs: res.Recircs, learned: res.Learned,
		refreshed: now, counters: c.lists.hold(res.Counters)}
	f.recircs.Hold()
	// Learned rules were validated with their learn action; a failure
	// would leave the affinity (or whatever) unlearned, not the megaflow
	// wrong.
	_ = f.learned.Install()
	st.insert(f)
	c.n++
	c.stats.Inserted++
	return f
}

// Remove deletes f from the cache.
func (c *Cache) Remove(f *Flow) {
	if !f.dead {
		c.remove(f)
		c.stats.Deleted++
	}
}

func (c *Cache) remove(f *Flow) {
	f.dead = true
	push(f) // the final count
	c.lists.release(f.counters)
	f.counters = nil
	f.recircs.Release()
	st := f.st
	st.remove(f)
	c.n--
	if c.limit != nil {
		c.limit.n.Add(-1)
	}
	if st.n == 0 {
		delete(c.byMask, st.mask)
		c.subtables = slices.DeleteFunc(c.subtables, func(x *subtable) bool { return x == st })
		c.updateUnion()
	}
}

// Flows calls fn for every megaflow; fn may Remove the flow it is given.
func (c *Cache) Flows(fn func(*Flow)) {
	var all []*Flow
	for _, st := range c.subtables {
		for _, s := range st.slots {
			if s.f != nil {
				all = append(all, s.f)
			}
		}
	}
	for _, f := range all {
		if !f.dead {
			fn(f)
		}
	}
}

// Translate is the slow path Revalidate uses.
type Translate func(k *flow.Key) xlate.Result

// ChangedSince reports whether any of tables, or any group if groups, changed
// after generation since (classifier.Tables.ChangedSince).
type ChangedSince func(since uint64, tables *flow.TableSet, groups bool) bool

// NeedsRevalidation reports whether megaflows may be older than gen.
func (c *Cache) NeedsRevalidation(gen uint64) bool { return c.revalGen != gen }

// Revalidate brings every megaflow to generation gen. If changed is given
// (Tables.ChangedSince), a megaflow whose tables and groups did not change
// since its generation is kept as it is. Any other is re-translated from
// its masked key and kept (updated to gen) only if the translation has the
// same actions and its mask lies within the megaflow's; otherwise it is
// deleted. It returns how many were kept and deleted.
func (c *Cache) Revalidate(gen uint64, translate Translate, changed ...ChangedSince) (kept, deleted int) {
	var cs ChangedSince
	if len(changed) > 0 {
		cs = changed[0]
	}
	c.gen, c.revalGen = gen, gen
	c.Flows(func(f *Flow) {
		if f.Generation == gen {
			return
		}
		if cs != nil && !cs(f.Generation, &f.Tables, f.Groups) {
			f.Generation = gen
			kept++
			return
		}
		res := translate(&f.Key)
		if res.Err == nil && res.Generation == gen && f.st.mask.Covers(&res.Mask) && sameActions(res.Actions, f.Actions) {
			f.Generation = gen
			f.Reasons = res.Reasons
			f.Tables, f.Groups = res.Tables, res.Groups
			// The packets so far ran the old rules; later ones run the
			// new translation's (the same actions, maybe other rules).
			push(f)
			old := f.counters
			f.counters = c.lists.hold(res.Counters)
			c.lists.release(old)
			kept++
			return
		}
		c.remove(f)
		deleted++
	})
	c.stats.Revalidated += uint64(kept)
	c.stats.Deleted += uint64(deleted)
	return kept, deleted
}

func sameActions(a, b []flow.DPAction) bool {
	if len(a) != len(b) {
		return false
	}
	return flow.DPActionsString(a) == flow.DPActionsString(b)
}

// Flush deletes every megaflow.
func (c *Cache) Flush() {
	c.Flows(c.Remove)
}

// Expire deletes megaflows not hit since now-idle and returns how many.
// It also keeps the rules that megaflows' learn actions installed from
// idling out while the megaflows are hit, and has the translators expire
// learned rules that did idle out.
func (c *Cache) Expire(now, idle time.Duration) int {
	n := 0
	var learners []*xlate.Translator
	c.Flows(func(f *Flow) {
		if t := f.learned.Translator(); t != nil && !slices.Contains(learners, t) {
			learners = append(learners, t)
		}
		push(f)
		if now-f.Used > idle {
			c.remove(f)
			n++
			return
		}
		if f.learned.Len() > 0 && f.Used > f.refreshed {
			f.learned.Refresh()
			f.refreshed = f.Used
		}
	})
	for _, t := range learners {
		t.ExpireLearned()
	}
	c.stats.Expired += uint64(n)
	return n
}

// Dump formats every megaflow with its hit count, busiest first, and with
// reasons the rules that made each field be matched.
func (c *Cache) Dump(reasons bool) string {
	var fs []*Flow
	c.Flows(func(f *Flow) { fs = append(fs, f) })
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Hits > fs[j].Hits })
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.String())
		b.WriteByte('\n')
		if reasons {
			for _, r := range f.Reasons {
				fmt.Fprintf(&b, "    %s\n", r)
			}
		}
	}
	return b.String()
}
