package dp

import (
	"slices"
	"time"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/xlate"
)

// megaflow is one installed datapath flow: every packet whose key agrees
// with key on mask runs actions.
type megaflow struct {
	key     flow.Key // masked
	mask    *subtable
	actions []flow.DPAction
	sample  flow.Key // the key of the packet that caused the upcall
	reasons []xlate.Reason
	gen     uint64 // flow-table generation the actions were computed at
	hits    uint64
	used    time.Duration // last hit, on the datapath's clock
	dead    bool          // removed; EMC entries pointing here are stale
}

// subtable holds the megaflows that share one mask (tuple-space search).
type subtable struct {
	mask  flow.Mask
	flows map[flow.Key]*megaflow
	hits  uint64
}

// emcSize is the number of exact-match cache slots per worker (a power of
// two). An entry is 330 bytes, so this is about 1.3 MB per receive queue.
const emcSize = 4096

type emcEntry struct {
	key flow.Key
	mf  *megaflow
}

// cache is one worker's exact-match cache in front of its megaflow cache.
// It is not safe for concurrent use: each receive goroutine owns one, so
// the fast path takes no locks.
type cache struct {
	emc       [emcSize]emcEntry
	subtables []*subtable
	n         int // megaflows
	lookups   uint64
}

// lookup finds the megaflow for k, trying the exact-match cache first.
func (c *cache) lookup(k *flow.Key, now time.Duration) (mf *megaflow, emcHit bool) {
	h := k.Hash()
	e := &c.emc[h&(emcSize-1)]
	if e.mf != nil && !e.mf.dead && e.key == *k {
		e.mf.hits++
		e.mf.used = now
		return e.mf, true
	}
	c.lookups++
	for _, st := range c.subtables {
		if mf := st.flows[k.And(&st.mask)]; mf != nil {
			st.hits++
			mf.hits++
			mf.used = now
			e.key, e.mf = *k, mf
			if c.lookups&1023 == 0 {
				c.rank()
			}
			return mf, false
		}
	}
	return nil, false
}

// rank keeps the most-hit subtables first, so the common case is found by
// the first probe.
func (c *cache) rank() {
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
		st.hits /= 2 // age, so ranking follows the current traffic
	}
}

// insert installs a megaflow for sample with mask, replacing any that
// matches the same masked key.
func (c *cache) insert(sample *flow.Key, mask *flow.Mask, actions []flow.DPAction, reasons []xlate.Reason, gen uint64, now time.Duration) *megaflow {
	var st *subtable
	for _, s := range c.subtables {
		if s.mask == *mask {
			st = s
			break
		}
	}
	if st == nil {
		st = &subtable{mask: *mask, flows: make(map[flow.Key]*megaflow)}
		c.subtables = append(c.subtables, st)
	}
	mk := sample.And(mask)
	if old := st.flows[mk]; old != nil {
		old.dead = true
		c.n--
	}
	mf := &megaflow{key: mk, mask: st, actions: actions, reasons: reasons, sample: *sample, gen: gen, used: now}
	st.flows[mk] = mf
	c.n++
	e := &c.emc[sample.Hash()&(emcSize-1)]
	e.key, e.mf = *sample, mf
	return mf
}

// remove deletes a megaflow.
func (c *cache) remove(mf *megaflow) {
	if mf.dead {
		return
	}
	mf.dead = true
	delete(mf.mask.flows, mf.key)
	c.n--
	if len(mf.mask.flows) == 0 {
		c.subtables = slices.DeleteFunc(c.subtables, func(s *subtable) bool { return s == mf.mask })
	}
}

// each calls f for every megaflow; f may remove the one it is given.
func (c *cache) each(f func(*megaflow)) {
	for _, st := range slices.Clone(c.subtables) {
		for _, mf := range st.flows {
			f(mf)
		}
	}
}
