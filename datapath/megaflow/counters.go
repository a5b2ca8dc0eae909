package megaflow

import (
	"slices"

	"github.com/govn/govn/datapath/xlate"
)

// counterList is a megaflow's "xlate cache": the packet counters of the
// rules (and table misses) its translation went through. Megaflows with
// the same list share one: the megaflows of a pipeline usually differ in
// bits that chose no different rule (one per TCP port, say), so most cost
// one pointer here.
type counterList struct {
	counters xlate.Counters
	hash     uint64
	refs     int
	next     *counterList // another list with the same hash
}

// counterLists interns a cache's counter lists by hash.
type counterLists map[uint64]*counterList

// hold returns the shared list equal to cs, made if there is none, with
// one more reference; nil for an empty cs.
func (ls counterLists) hold(cs xlate.Counters) *counterList {
	if len(cs) == 0 {
		return nil
	}
	h := cs.Hash()
	for l := ls[h]; l != nil; l = l.next {
		if l.counters.Equal(cs) {
			l.refs++
			return l
		}
	}
	l := &counterList{counters: slices.Clone(cs), hash: h, refs: 1, next: ls[h]}
	ls[h] = l
	return l
}

// release drops a reference to l, forgetting l with the last one.
func (ls counterLists) release(l *counterList) {
	if l == nil {
		return
	}
	if l.refs--; l.refs > 0 {
		return
	}
	if ls[l.hash] == l {
		if l.next == nil {
			delete(ls, l.hash)
		} else {
			ls[l.hash] = l.next
		}
		return
	}
	for p := ls[l.hash]; p != nil; p = p.next {
		if p.next == l {
			p.next = l.next
			return
		}
	}
}

// push credits f's rules with the packets and bytes f counted since the
// last push.
func push(f *Flow) {
	dp, db := f.Hits-f.pushedHits, f.Bytes-f.pushedBytes
	if dp == 0 && db == 0 {
		return
	}
	f.pushedHits, f.pushedBytes = f.Hits, f.Bytes
	if f.counters != nil {
		f.counters.counters.Credit(dp, db)
	}
}

// Counters returns the counters f credits: the rules (and table misses)
// of its translation.
func (f *Flow) Counters() xlate.Counters {
	if f.counters == nil {
		return nil
	}
	return f.counters.counters
}

// PushStats credits every megaflow's packets and bytes since the last push
// to the rules its translation ran. Expire, Revalidate and every removal
// push too; a dump calls PushStats for counts that are up to date.
func (c *Cache) PushStats() {
	for _, st := range c.subtables {
		for _, s := range st.slots {
			if s.f != nil {
				push(s.f)
			}
		}
	}
}
