package northd

import (
	"slices"
	"unsafe"
)

// dpID is a logical datapath's number inside northd: small, dense and
// stable while the datapath exists, so that sets of datapaths are short
// sorted slices of integers rather than sets of UUIDs.
type dpID uint32

// flowKey is a logical flow's identity: its content. Two owners that make
// the same flow for the same datapath make one row; the same flow for
// several datapaths is one row with a Logical_DP_Group. The stage hint (the
// NB object behind the flow) is part of the identity, so that a row's
// external_ids never depend on which of its owners happened to come first.
type flowKey struct {
	stage    Stage
	priority uint16
	match    string
	actions  string
	meter    string // controller_meter, "" for none
	hint     string // external_ids:stage-hint, "" for none
}

// dpRef is one datapath of a flow and how many owners put the flow there.
type dpRef struct {
	dp dpID
	n  uint32
}

// flowEntry is one logical flow and the datapaths it applies to.
type flowEntry struct {
	key flowKey
	dps []dpRef // sorted by dp
	// sets are the sets of datapaths the flow is on as a whole (see
	// dpSet), each once; the flow is on the union of dps and sets.
	sets []*dpSet
	// dirty says the entry's datapaths changed since the Southbound last
	// saw it (or it is new, or gone: no dps).
	dirty bool
}

// flowTable holds every logical flow that some owner contributes. It keeps
// no per-owner state: owners remember their own contributions (see owner),
// and a (flow, datapath) pair carries a count only so that two owners of the
// same flow on the same datapath can leave in any order.
type flowTable struct {
	entries map[flowKey]*flowEntry
	dirty   []*flowEntry
}

func newFlowTable() *flowTable {
	return &flowTable{entries: make(map[flowKey]*flowEntry)}
}

// add puts the flow k on datapath dp once more and returns its entry.
func (t *flowTable) add(k flowKey, dp dpID) *flowEntry {
	e := t.entry(k)
	i, found := slices.BinarySearchFunc(e.dps, dp, func(r dpRef, d dpID) int { return int(r.dp) - int(d) })
	if found {
		e.dps[i].n++
		return e
	}
	e.dps = slices.Insert(e.dps, i, dpRef{dp, 1})
	t.markDirty(e)
	return e
}

// entry returns the entry of k, a new one if there is none.
func (t *flowTable) entry(k flowKey) *flowEntry {
	e := t.entries[k]
	if e == nil {
		e = &flowEntry{key: k}
		t.entries[k] = e
	}
	return e
}

// shareKey makes the entry of k, if there is one, hold k itself: the
// strings of a Southbound row that has that content. Its generator's
// copy of the match and actions is then garbage, and the flow's text is
// in memory once, in the row the client's cache holds anyway.
func (t *flowTable) shareKey(k flowKey) {
	e := t.entries[k]
	if e == nil || sameStrings(e.key, k) {
		return
	}
	delete(t.entries, k)
	e.key = k
	t.entries[k] = e
}

// sameStrings says whether a and b, equal, hold the very same strings.
func sameStrings(a, b flowKey) bool {
	same := func(x, y string) bool { return len(x) == 0 || unsafe.StringData(x) == unsafe.StringData(y) }
	return same(a.match, b.match) && same(a.actions, b.actions) && same(a.meter, b.meter) && same(a.hint, b.hint)
}

// remove takes back one add of e on dp.
func (t *flowTable) remove(e *flowEntry, dp dpID) {
	i, found := slices.BinarySearchFunc(e.dps, dp, func(r dpRef, d dpID) int { return int(r.dp) - int(d) })
	if !found {
		return
	}
	if e.dps[i].n > 1 {
		e.dps[i].n--
		return
	}
	e.dps = slices.Delete(e.dps, i, i+1)
	t.markDirty(e)
}

func (t *flowTable) markDirty(e *flowEntry) {
	if !e.dirty {
		e.dirty = true
		t.dirty = append(t.dirty, e)
	}
}

// takeDirty returns the entries changed since the last call and forgets
// entries that no owner contributes any more. The caller writes them to the
// Southbound.
func (t *flowTable) takeDirty() []*flowEntry {
	d := t.dirty
	t.dirty = nil
	for _, e := range d {
		e.dirty = false
		if len(e.dps) == 0 && len(e.sets) == 0 {
			delete(t.entries, e.key)
		}
	}
	return d
}

// datapaths returns e's datapaths, sorted, each once.
func (e *flowEntry) datapaths() []dpID {
	out := make([]dpID, len(e.dps))
	for i, r := range e.dps {
		out[i] = r.dp
	}
	if len(e.sets) == 0 {
		return out
	}
	for _, set := range e.sets {
		out = append(out, set.dps...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
