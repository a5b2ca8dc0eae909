package megaflow

import (
	"cmp"
	"slices"
	"sync/atomic"
	"time"
)

// DefaultFlowLimit is the default cap on the megaflows of a datapath, as
// Open vSwitch's other_config:flow-limit.
const DefaultFlowLimit = 200000

// Limit caps the megaflows of a set of caches together (a datapath's
// receive queues): a Cache given a Limit (SetLimit) counts its megaflows
// in it, and Insert installs nothing while the count is at the cap. The
// count is exact: an Insert reserves its place with one atomic add, so
// caches on different goroutines never pass the cap together. Lowering
// the cap (Set) removes nothing; the owner evicts the excess (Evict).
// Methods are safe for concurrent use.
type Limit struct {
	max atomic.Int64
	n   atomic.Int64
}

// NewLimit returns a limit of max megaflows.
func NewLimit(max int) *Limit {
	l := &Limit{}
	l.Set(max)
	return l
}

// Set changes the cap to max (negative counts as 0).
func (l *Limit) Set(max int) { l.max.Store(int64(atLeast0(max))) }

// Max returns the cap.
func (l *Limit) Max() int { return int(l.max.Load()) }

// Len returns the number of megaflows the caches hold together.
func (l *Limit) Len() int { return int(l.n.Load()) }

// Over returns by how many megaflows the caches exceed the cap (after it
// was lowered), or 0.
func (l *Limit) Over() int { return atLeast0(int(l.n.Load() - l.max.Load())) }

// reserve takes a place for one more megaflow, or reports false at the cap.
func (l *Limit) reserve() bool {
	if l.n.Add(1) > l.max.Load() {
		l.n.Add(-1)
		return false
	}
	return true
}

func atLeast0(n int) int { return max(n, 0) }

// SetLimit makes c count its megaflows in l (shared with other caches);
// call it on an empty cache. A nil l removes the cap.
func (c *Cache) SetLimit(l *Limit) {
	if c.limit != nil {
		c.limit.n.Add(-int64(c.n))
	}
	c.limit = l
	if l != nil {
		l.n.Add(int64(c.n))
	}
}

// AppendUsed appends the last-hit time (Flow.Used) of every megaflow to
// dst: an owner of several caches picks an eviction threshold from them.
func (c *Cache) AppendUsed(dst []time.Duration) []time.Duration {
	for _, st := range c.subtables {
		for _, s := range st.slots {
			if s.f != nil {
				dst = append(dst, s.f.Used)
			}
		}
	}
	return dst
}

// Evict removes up to n megaflows last hit at or before usedBy, least
// recently hit first, and returns how many; they count as Evicted.
func (c *Cache) Evict(usedBy time.Duration, n int) int {
	if n <= 0 {
		return 0
	}
	var fs []*Flow
	c.Flows(func(f *Flow) {
		if f.Used <= usedBy {
			fs = append(fs, f)
		}
	})
	slices.SortFunc(fs, func(a, b *Flow) int { return cmp.Compare(a.Used, b.Used) })
	fs = fs[:min(n, len(fs))]
	for _, f := range fs {
		c.remove(f)
	}
	c.stats.Evicted += uint64(len(fs))
	return len(fs)
}
