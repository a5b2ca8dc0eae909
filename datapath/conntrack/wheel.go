package conntrack

import (
	"math"
	"sync/atomic"
)

// A zone's timer wheel: four levels of 64 slots; a level-0 slot spans
// 2^28 ns (about a quarter second), a level-3 slot about 19 hours, so the
// wheel covers 51 days. Each entry sits in exactly one slot, chosen from its
// expiry when it was filed. Packets only move an entry's expiry forward
// (atomically, without touching the wheel); when the wheel reaches the
// entry's slot it checks the current expiry and files the entry again if it
// moved. An expiry that moves earlier (a TCP connection closing) is re-filed
// at once by the packet path under wheelMu. So the wheel never sweeps a
// table: each expiry visits only the entries filed in due slots.
const (
	wheelShift  = 28
	wheelBits   = 6
	wheelSlots  = 1 << wheelBits
	wheelLevels = 4
)

type wheel struct {
	tick     int64 // the next level-0 tick to process
	cascaded bool  // the cascades of tick are done
	heads    [wheelLevels * wheelSlots]uint32
}

func (w *wheel) init(now int64) { w.tick = now >> wheelShift }

// schedule files entry idx by its expiry; the caller holds wheelMu.
func (z *zone) schedule(idx uint32) {
	c := z.at(idx)
	w := &z.wheel
	t := c.expires.Load() >> wheelShift
	if t < w.tick {
		t = w.tick
	}
	delta := t - w.tick
	level := 0
	for level < wheelLevels-1 && delta >= int64(1)<<(wheelBits*(level+1)) {
		level++
	}
	if max := int64(1)<<(wheelBits*wheelLevels) - 1; delta > max {
		t = w.tick + max // filed early; re-filed when reached
	}
	slot := level*wheelSlots + int(t>>(wheelBits*level))&(wheelSlots-1)
	// The wheel reaches the slot at the start of the span of level-0
	// ticks it covers (for level 0, at t itself).
	z.dues.lower(z.id, t&^(int64(1)<<(wheelBits*level)-1))
	c.wslot = uint16(slot + 1)
	c.wprev = 0
	c.wnext = w.heads[slot]
	if c.wnext != 0 {
		z.at(c.wnext - 1).wprev = idx + 1
	}
	w.heads[slot] = idx + 1
}

// unschedule takes entry idx out of the wheel; the caller holds wheelMu.
func (z *zone) unschedule(idx uint32) {
	c := z.at(idx)
	if c.wslot == 0 {
		return
	}
	if c.wprev != 0 {
		z.at(c.wprev - 1).wnext = c.wnext
	} else {
		z.wheel.heads[c.wslot-1] = c.wnext
	}
	if c.wnext != 0 {
		z.at(c.wnext - 1).wprev = c.wprev
	}
	c.wslot, c.wnext, c.wprev = 0, 0, 0
}

// reschedule re-files entry idx after its expiry moved earlier.
func (z *zone) reschedule(idx uint32) {
	z.wheelMu.Lock()
	z.unschedule(idx)
	z.schedule(idx)
	z.wheelMu.Unlock()
}

// advance processes the wheel up to now, visiting at most budget entries;
// expired entries are passed to drop (with wheelMu held, after they left
// the wheel). The caller holds z.mu for writing. It returns the number of
// visits and whether the wheel caught up with now.
func (z *zone) advance(now int64, budget int, drop func(idx uint32)) (int, bool) {
	z.wheelMu.Lock()
	defer z.wheelMu.Unlock()
	w := &z.wheel
	nowTick := now >> wheelShift
	visits := 0
	// Skip the ticks where only empty slots would be visited: a zone
	// Expire passed over for a day would otherwise step through 300,000
	// of them.
	if next := z.nextDue(); next > w.tick {
		w.tick, w.cascaded = min(next, nowTick), false
	}
	for w.tick < nowTick {
		if !w.cascaded {
			for level := 1; level < wheelLevels; level++ {
				if w.tick&(int64(1)<<(wheelBits*level)-1) != 0 {
					break
				}
				slot := level*wheelSlots + int(w.tick>>(wheelBits*level))&(wheelSlots-1)
				// Cascading moves entries without freeing them; it is
				// bounded by the zone's size and not budgeted, so a
				// cascade is never half done.
				for head := w.heads[slot]; head != 0; head = w.heads[slot] {
					z.unschedule(head - 1)
					z.schedule(head - 1)
					visits++
				}
			}
			w.cascaded = true
		}
		slot := int(w.tick) & (wheelSlots - 1)
		for head := w.heads[slot]; head != 0; head = w.heads[slot] {
			if visits >= budget {
				return visits, false
			}
			visits++
			idx := head - 1
			z.unschedule(idx)
			if z.at(idx).expires.Load() <= now {
				drop(idx)
			} else {
				z.schedule(idx)
			}
		}
		w.tick++
		w.cascaded = false
	}
	return visits, true
}

// nextDue returns the first tick, from the wheel's current one on, at which
// advance would visit a non-empty slot (processing it at level 0 or
// cascading it from a higher level), or math.MaxInt64 if the wheel is
// empty. The caller holds wheelMu.
func (z *zone) nextDue() int64 {
	w := &z.wheel
	next := int64(math.MaxInt64)
	for k := range int64(wheelSlots) {
		if w.heads[int(w.tick+k)&(wheelSlots-1)] != 0 {
			next = w.tick + k
			break
		}
	}
	for level := 1; level < wheelLevels; level++ {
		span := int64(1) << (wheelBits * level)
		first := (w.tick + span - 1) &^ (span - 1) // first cascade of this level from w.tick on
		for j := range int64(wheelSlots) {
			c := first + j*span
			if c >= next {
				break
			}
			if w.heads[level*wheelSlots+int(c>>(wheelBits*level))&(wheelSlots-1)] != 0 {
				next = c
				break
			}
		}
	}
	return next
}

// dueIndex tells Expire which zones' wheels have work due, so that a pass
// costs in proportion to the zones with something due rather than to all
// of them. Each zone has a lower bound of the next tick its wheel has work
// at (lowered by schedule, recomputed by Expire); each group of 64 zones
// the minimum of theirs. Both only ever move down outside Expire, which
// resets a group before recomputing it, so a concurrent lowering is never
// lost.
type dueIndex struct {
	zone  [1 << 16]atomic.Int64
	group [1 << 16 / dueGroup]atomic.Int64
}

const dueGroup = 64

func (d *dueIndex) init() {
	for i := range d.zone {
		d.zone[i].Store(math.MaxInt64)
	}
	for i := range d.group {
		d.group[i].Store(math.MaxInt64)
	}
}

// lower records that zone has work at tick.
func (d *dueIndex) lower(zone uint16, tick int64) {
	casMin(&d.zone[zone], tick)
	casMin(&d.group[zone/dueGroup], tick)
}

func casMin(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v >= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}
