package conntrack

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
