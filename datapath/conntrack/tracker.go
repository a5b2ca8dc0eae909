package conntrack

import (
	"hash/maphash"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Timeout classes: which Timeouts field an entry's idle timeout comes from.
const (
	classTCPSynSent = iota
	classTCPSynRecv
	classTCPEstablished
	classTCPFinWait
	classTCPTimeWait
	classTCPClose
	classUDPFirst
	classUDPSingle
	classUDPMultiple
	classICMPFirst
	classICMPReply
	classOtherFirst
	classOtherSingle
	classOtherMultiple
	numClasses
)

// expireSlice bounds the entries one Expire visits under one zone lock.
const expireSlice = 512

// reclaimPoll is how often the reclaimer looks for flushed zones.
const reclaimPoll = 2 * time.Millisecond

// reclaimSlice is how many chunks the reclaimer clears between yields.
const reclaimSlice = 8

// Tracker is a connection tracker for all 65,536 zones.
type Tracker struct {
	seed     maphash.Seed
	timeouts [numClasses]int64
	cfg      Config
	zones    [1 << 16]atomic.Pointer[zone]
	limits   [1 << 16]atomic.Uint32
	dues     dueIndex
	entries  atomic.Int64
	nzones   atomic.Int64
	pool     chunkPool

	pendMu  sync.Mutex
	pending []*zone
	stop    chan struct{}
	done    chan struct{}

	reclaimed     atomic.Int64
	reclaimNanos  atomic.Int64
	reclaimSlices atomic.Int64
	expired       atomic.Int64
}

// New returns a Tracker and starts its reclaimer goroutine; Close stops it.
func New(cfg Config) *Tracker {
	t := &Tracker{
		seed: maphash.MakeSeed(),
		cfg:  cfg,
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	to := DefaultTimeouts()
	if cfg.Timeouts != nil {
		to = *cfg.Timeouts
	}
	for i, d := range [numClasses]time.Duration{
		to.TCPSynSent, to.TCPSynRecv, to.TCPEstablished, to.TCPFinWait, to.TCPTimeWait, to.TCPClose,
		to.UDPFirst, to.UDPSingle, to.UDPMultiple, to.ICMPFirst, to.ICMPReply,
		to.OtherFirst, to.OtherSingle, to.OtherMultiple,
	} {
		t.timeouts[i] = int64(max(d, time.Millisecond))
	}
	t.pool.max = 1 << 14 // up to 4M pooled entries
	t.dues.init()
	go t.reclaimer()
	return t
}

// Close stops the reclaimer. The Tracker must not be used afterwards.
func (t *Tracker) Close() {
	close(t.stop)
	<-t.done
}

// SetZoneLimit bounds the connections of one zone; 0 restores the default.
func (t *Tracker) SetZoneLimit(zone uint16, limit uint32) { t.limits[zone].Store(limit) }

// ZoneLimit returns a zone's limit (0: none) and its current count.
func (t *Tracker) ZoneLimit(zone uint16) (limit uint32, count int) {
	limit = t.zoneLimit(zone)
	if z := t.zones[zone].Load(); z != nil {
		z.mu.RLock()
		count = z.count
		z.mu.RUnlock()
	}
	return limit, count
}

func (t *Tracker) zoneLimit(zone uint16) uint32 {
	if l := t.limits[zone].Load(); l != 0 {
		return l
	}
	return t.cfg.DefaultZoneLimit
}

func (t *Tracker) hash(k *key) uint64 { return hashKey(t.seed, k) }

func invalid(res Result, r Reason) Result {
	res.State = StateTracked | StateInvalid
	res.Reason = r
	res.Orig = Tuple{}
	return res
}

// Process runs one packet through the tracker; see the package comment for
// the contract.
func (t *Tracker) Process(pkt []byte, l3off int, p Params, now time.Duration) Result {
	var pk packet
	r := parse(pkt, l3off, false, &pk)
	var h uint64
	if r == ReasonNone && !pk.icmpErr {
		h = t.hash(&pk.k)
	}
	return t.process(pkt, &pk, r, h, &p, now)
}

// process tracks a packet that parse read (with result r); h is the hash of
// pk.k unless the packet is invalid or an ICMP error.
func (t *Tracker) process(pkt []byte, pk *packet, r Reason, h uint64, p *Params, now time.Duration) Result {
	res := Result{Zone: p.Zone, Backend: -1}
	if r != ReasonNone {
		return invalid(res, r)
	}
	if pk.icmpErr {
		return t.related(pkt, pk, p, res)
	}
	for {
		replace := false
		if z := t.zones[p.Zone].Load(); z != nil {
			z.mu.RLock()
			if z.dead {
				z.mu.RUnlock()
				continue
			}
			if idx, dir, ok := z.lookup(&pk.k, h); ok {
				c := z.at(idx)
				c.mu.Lock()
				if t.mustReplace(c, dir, pk, p) {
					replace = true
				} else {
					res = t.update(z, idx, dir, pkt, pk, p, int64(now), res)
				}
				c.mu.Unlock()
				z.mu.RUnlock()
				if !replace {
					return res
				}
			} else {
				z.mu.RUnlock()
			}
		}
		if !p.Commit {
			return t.uncommitted(pk, res)
		}
		if r, retry := t.create(pkt, pk, h, p, int64(now), res); !retry {
			return r
		}
	}
}

// mustReplace reports whether the packet ends the connection it matched and
// (when committed) starts a new one in its own direction.
func (t *Tracker) mustReplace(c *conn, dir int, pk *packet, p *Params) bool {
	if p.Commit && p.Force && dir == 1 {
		return true
	}
	return pk.k.proto == protoTCP && tcpWouldReopen(c, dir, pk)
}

// validNew checks that a packet may start a connection.
func validNew(pk *packet) Reason {
	switch pk.k.proto {
	case protoTCP:
		if !tcpValidNew(pk.flags) {
			if tcpBadFlags(pk.flags) {
				return ReasonTCPFlags
			}
			return ReasonTCPState
		}
	case protoICMP, protoICMPv6:
		if !icmpQuery(pk.k.proto, uint8(pk.k.dport>>8)) {
			return ReasonUnsupported
		}
	}
	return ReasonNone
}

func (t *Tracker) uncommitted(pk *packet, res Result) Result {
	if r := validNew(pk); r != ReasonNone {
		return invalid(res, r)
	}
	res.State = StateTracked | StateNew
	res.Orig = pk.k.tuple()
	return res
}

func dataLen(pk *packet, pkt []byte) uint32 {
	doff := int(pkt[pk.l4off+12]>>4) * 4
	return uint32(pk.l4end - pk.l4off - doff)
}

// update handles a packet of an existing connection; the caller holds z.mu
// (read) and c.mu.
func (t *Tracker) update(z *zone, idx uint32, dir int, pkt []byte, pk *packet, p *Params, now int64, res Result) Result {
	c := z.at(idx)
	oldExpires := c.expires.Load()
	class := c.class
	switch pk.k.proto {
	case protoTCP:
		v, reason := tcpUpdate(c, dir, pk, dataLen(pk, pkt), t.cfg.Liberal)
		switch v {
		case tcpInvalid:
			return invalid(res, reason)
		case tcpIgnored:
			// Leaves state and timers alone.
			if dir == 1 {
				res.State = StateTracked | StateEstablished | StateReply
			} else {
				res.State = StateTracked | StateNew
			}
			t.finish(c, dir, pkt, pk, p, &res)
			return res
		}
		if dir == 1 {
			c.flags |= flagSeenReply
		}
		class = classTCPSynSent + tcpConnState(c)
	case protoICMP, protoICMPv6:
		if dir == 1 {
			c.flags |= flagSeenReply
			class = classICMPReply
		}
	default:
		base := uint8(classOtherFirst)
		if pk.k.proto == protoUDP {
			base = classUDPFirst
		}
		switch {
		case dir == 1 || c.flags&flagSeenReply != 0:
			c.flags |= flagSeenReply
			class = base + 2
		default:
			class = base + 1
		}
	}
	c.class = class
	exp := now + t.timeouts[class]
	c.expires.Store(exp)
	if exp < oldExpires {
		z.reschedule(idx)
	}
	switch {
	case dir == 1:
		res.State = StateTracked | StateEstablished | StateReply
	case c.flags&flagSeenReply != 0:
		res.State = StateTracked | StateEstablished
	default:
		res.State = StateTracked | StateNew
	}
	t.finish(c, dir, pkt, pk, p, &res)
	return res
}

// applyMetadata sets a committing packet's mark and label on c, then
// reports c's metadata in res; the caller holds c.mu.
func (c *conn) applyMetadata(p *Params, res *Result) {
	if p.Commit {
		c.mark = c.mark&^p.MarkMask | p.Mark&p.MarkMask
		c.label.Hi = c.label.Hi&^p.LabelMask.Hi | p.Label.Hi&p.LabelMask.Hi
		c.label.Lo = c.label.Lo&^p.LabelMask.Lo | p.Label.Lo&p.LabelMask.Lo
	}
	res.Mark, res.Label = c.mark, c.label
	res.Orig = c.keys[0].tuple()
	res.Backend = int(c.backend) - 1
}

// finish applies commit metadata and NAT to a packet of an existing
// connection and fills the result; the caller holds c.mu.
func (t *Tracker) finish(c *conn, dir int, pkt []byte, pk *packet, p *Params, res *Result) {
	c.applyMetadata(p, res)
	if (p.NAT != nil || p.LB != nil) && c.flags&(flagSNAT|flagDNAT) != 0 {
		res.State |= natPacket(pkt, pk, c, dir, p.PartialChecksum)
	}
}

// create commits a new connection. It reports retry when the zone changed
// under it or another goroutine created the connection first.
func (t *Tracker) create(pkt []byte, pk *packet, h uint64, p *Params, now int64, res Result) (Result, bool) {
	if r := validNew(pk); r != ReasonNone {
		return invalid(res, r), false
	}
	z := t.zones[p.Zone].Load()
	if z == nil {
		nz := newZone(p.Zone, now, &t.dues)
		if !t.zones[p.Zone].CompareAndSwap(nil, nz) {
			return res, true
		}
		t.nzones.Add(1)
		z = nz
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.dead {
		return res, true
	}
	if idx, dir, ok := z.lookup(&pk.k, h); ok {
		c := z.at(idx)
		if !t.mustReplace(c, dir, pk, p) {
			return res, true
		}
		t.remove(z, idx)
	}
	if lim := t.zoneLimit(p.Zone); lim != 0 && z.count >= int(lim) {
		return invalid(res, ReasonZoneLimit), false
	}
	if t.cfg.MaxEntries > 0 && t.entries.Load() >= int64(t.cfg.MaxEntries) {
		return invalid(res, ReasonTableFull), false
	}

	reply := pk.k.reverse()
	var flags uint16
	backend := -1
	if p.NAT != nil || p.LB != nil {
		var r Reason
		reply, flags, backend, r = t.natSetup(z, pk, p, reply)
		if r != ReasonNone {
			return invalid(res, r), false
		}
	} else if z.contains(&reply, t.hash(&reply)) {
		// The reverse tuple already belongs to another connection (it
		// was translated onto these addresses and ports).
		return invalid(res, ReasonCollision), false
	}

	idx := z.alloc(&t.pool)
	c := z.at(idx)
	c.keys = [2]key{pk.k, reply}
	c.flags = flagUsed | flags
	c.backend = int16(backend + 1)
	c.mark = p.Mark & p.MarkMask
	c.label = Label{p.Label.Hi & p.LabelMask.Hi, p.Label.Lo & p.LabelMask.Lo}
	switch pk.k.proto {
	case protoTCP:
		tcpInit(c, pk, dataLen(pk, pkt))
		c.class = classTCPSynSent + tcpConnState(c)
	case protoUDP:
		c.class = classUDPFirst
	case protoICMP, protoICMPv6:
		c.class = classICMPFirst
	default:
		c.class = classOtherFirst
	}
	c.expires.Store(now + t.timeouts[c.class])
	z.link(idx, [2]uint64{h, t.hash(&reply)})
	z.wheelMu.Lock()
	z.schedule(idx)
	z.wheelMu.Unlock()
	z.count++
	t.entries.Add(1)

	res.State = StateTracked | StateNew
	res.Mark, res.Label = c.mark, c.label
	res.Orig = pk.k.tuple()
	res.Backend = backend
	if flags != 0 {
		res.State |= natPacket(pkt, pk, c, 0, p.PartialChecksum)
	}
	return res, false
}

// remove deletes entry idx; the caller holds z.mu for writing.
func (t *Tracker) remove(z *zone, idx uint32) {
	z.wheelMu.Lock()
	z.unschedule(idx)
	z.wheelMu.Unlock()
	z.unlink(idx)
	z.release(idx)
	t.entries.Add(-1)
}

// related handles an ICMP error: it belongs to the connection of the packet
// it quotes.
func (t *Tracker) related(pkt []byte, pk *packet, p *Params, res Result) Result {
	in := pk.inner
	k := in.k.reverse()
	h := t.hash(&k)
	for {
		z := t.zones[p.Zone].Load()
		if z == nil {
			return invalid(res, ReasonICMPNoConnection)
		}
		z.mu.RLock()
		if z.dead {
			z.mu.RUnlock()
			continue
		}
		idx, dir, ok := z.lookup(&k, h)
		if !ok {
			z.mu.RUnlock()
			return invalid(res, ReasonICMPNoConnection)
		}
		c := z.at(idx)
		c.mu.Lock()
		res.State = StateTracked | StateRelated
		if dir == 1 {
			res.State |= StateReply
		}
		c.applyMetadata(p, &res)
		if (p.NAT != nil || p.LB != nil) && c.flags&(flagSNAT|flagDNAT) != 0 {
			res.State |= natICMPError(pkt, pk, c, dir)
		}
		c.mu.Unlock()
		z.mu.RUnlock()
		return res
	}
}

// Expire removes the entries whose timeout passed by now. It visits only
// the zones whose timer wheels have a due slot (see dueIndex), and there
// only entries filed in due slots, holding each zone's lock for at most
// expireSlice entries at a time. It returns how many entries expired.
func (t *Tracker) Expire(now time.Duration) int {
	nowTick := int64(now) >> wheelShift
	n := 0
	for g := range t.dues.group {
		if t.dues.group[g].Load() >= nowTick {
			continue
		}
		t.dues.group[g].Store(math.MaxInt64)
		next := int64(math.MaxInt64)
		for i := g * dueGroup; i < (g+1)*dueGroup; i++ {
			if t.dues.zone[i].Load() < nowTick {
				t.dues.zone[i].Store(math.MaxInt64)
				if z := t.zones[i].Load(); z != nil {
					n += t.expireZone(z, now)
				}
			}
			next = min(next, t.dues.zone[i].Load())
		}
		casMin(&t.dues.group[g], next)
	}
	t.expired.Add(int64(n))
	return n
}

// expireZone advances one zone's wheel to now and files the zone's next due
// tick in the due index.
func (t *Tracker) expireZone(z *zone, now time.Duration) int {
	n := 0
	for {
		z.mu.Lock()
		if z.dead {
			z.mu.Unlock()
			return n
		}
		_, caughtUp := z.advance(int64(now), expireSlice, func(idx uint32) {
			z.unlink(idx)
			z.release(idx)
			t.entries.Add(-1)
			n++
		})
		if caughtUp {
			z.wheelMu.Lock()
			t.dues.lower(z.id, z.nextDue())
			z.wheelMu.Unlock()
			z.mu.Unlock()
			return n
		}
		z.mu.Unlock()
	}
}

// Flush empties one zone. It detaches the zone's table at once, so every
// lookup after Flush returns sees an empty zone, and leaves freeing the old
// entries to the reclaimer goroutine. Its cost does not depend on the size
// of the zone or of the others.
func (t *Tracker) Flush(zone uint16) {
	if z := t.zones[zone].Swap(nil); z != nil {
		t.nzones.Add(-1)
		t.retire(z)
	}
}

// FlushAll empties every zone.
func (t *Tracker) FlushAll() {
	for i := range t.zones {
		t.Flush(uint16(i))
	}
}

// FlushTuple removes the connection of zone whose original or reply tuple
// is tup; it reports whether there was one.
func (t *Tracker) FlushTuple(zone uint16, tup Tuple) bool {
	k, ok := tupleKey(tup)
	if !ok {
		return false
	}
	h := t.hash(&k)
	for {
		z := t.zones[zone].Load()
		if z == nil {
			return false
		}
		z.mu.Lock()
		if z.dead {
			z.mu.Unlock()
			continue
		}
		idx, _, found := z.lookup(&k, h)
		if found {
			t.remove(z, idx)
		}
		z.mu.Unlock()
		return found
	}
}

func (t *Tracker) retire(z *zone) {
	t.pendMu.Lock()
	t.pending = append(t.pending, z)
	t.pendMu.Unlock()
}

func (t *Tracker) reclaimer() {
	defer close(t.done)
	// The reclaimer polls for retired zones rather than being woken by
	// Flush: waking a parked goroutine costs the flushing caller a futex
	// system call, several microseconds, which is most of Flush's budget.
	tick := time.NewTicker(reclaimPoll)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		for {
			t.pendMu.Lock()
			if len(t.pending) == 0 {
				t.pendMu.Unlock()
				break
			}
			z := t.pending[0]
			t.pendMu.Unlock()
			t.reclaim(z)
			// The zone leaves pending only now, so that Stats never
			// shows it neither pending nor reclaimed.
			t.pendMu.Lock()
			t.pending[0] = nil
			t.pending = t.pending[1:]
			t.pendMu.Unlock()
			select {
			case <-t.stop:
				return
			default:
			}
		}
	}
}

// reclaim frees a detached zone. Marking it dead under its lock waits out
// the lookups that loaded it before the swap; later ones see dead and retry
// on the new table. After that nothing else touches it: its chunks go back
// to the pool a slice at a time (alloc zeroes a slot when it reuses one) and
// the garbage collector takes its index.
func (t *Tracker) reclaim(z *zone) {
	start := time.Now()
	z.mu.Lock()
	z.dead = true
	chunks, n := z.chunks, z.count
	z.chunks, z.index = nil, index{}
	z.mu.Unlock()
	t.entries.Add(-int64(n))
	for i := 0; i < len(chunks); i += reclaimSlice {
		for _, ch := range chunks[i:min(i+reclaimSlice, len(chunks))] {
			t.pool.put(ch)
		}
		t.reclaimSlices.Add(1)
		runtime.Gosched()
	}
	t.reclaimed.Add(int64(n))
	t.reclaimNanos.Add(int64(time.Since(start)))
}

// Stats returns the tracker's counters. Entries counts a flushed zone's
// entries until the reclaimer has taken the zone.
func (t *Tracker) Stats() Stats {
	s := Stats{
		Entries:       t.entries.Load(),
		Reclaimed:     t.reclaimed.Load(),
		ReclaimTime:   time.Duration(t.reclaimNanos.Load()),
		ReclaimSlices: t.reclaimSlices.Load(),
		Expired:       t.expired.Load(),
	}
	s.Zones = int(t.nzones.Load())
	t.pendMu.Lock()
	s.PendingZones = len(t.pending)
	t.pendMu.Unlock()
	return s
}

// ZoneCounts calls fn with the number of connections of every live zone
// that has a table (flushed zones are left out), in zone order. It takes each zone's read lock in turn, never all at once.
func (t *Tracker) ZoneCounts(fn func(zone uint16, count int)) {
	for i := range t.zones {
		if z := t.zones[i].Load(); z != nil {
			z.mu.RLock()
			n, dead := z.count, z.dead
			z.mu.RUnlock()
			if !dead {
				fn(uint16(i), n)
			}
		}
	}
}

// Dump calls fn for every connection of zone, until fn returns false. It
// holds the zone's read lock for one chunk of entries at a time.
func (t *Tracker) Dump(zone uint16, fn func(Entry) bool) {
	z := t.zones[zone].Load()
	if z == nil {
		return
	}
	var batch []Entry
	for ci := 0; ; ci++ {
		batch = batch[:0]
		z.mu.RLock()
		if z.dead || ci >= len(z.chunks) {
			z.mu.RUnlock()
			return
		}
		for i := range min(chunkSize, int(z.next)-ci*chunkSize) {
			// Slots past z.next may hold a dead zone's data (pooled chunks).
			c := &z.chunks[ci][i]
			c.mu.Lock()
			if c.flags&flagUsed != 0 {
				batch = append(batch, entryOf(zone, c))
			}
			c.mu.Unlock()
		}
		z.mu.RUnlock()
		for _, e := range batch {
			if !fn(e) {
				return
			}
		}
	}
}

// DumpAll calls fn for every connection of every zone, in zone order, until
// fn returns false.
func (t *Tracker) DumpAll(fn func(Entry) bool) {
	stop := false
	for i := range t.zones {
		t.Dump(uint16(i), func(e Entry) bool {
			stop = !fn(e)
			return !stop
		})
		if stop {
			return
		}
	}
}

func entryOf(zone uint16, c *conn) Entry {
	e := Entry{
		Zone: zone, Orig: c.keys[0].tuple(), Reply: c.keys[1].tuple(),
		Mark: c.mark, Label: c.label,
		Expires: time.Duration(c.expires.Load()),
		SNAT:    c.flags&flagSNAT != 0, DNAT: c.flags&flagDNAT != 0,
	}
	switch {
	case c.keys[0].proto == protoTCP:
		e.ProtoState = tcpStateNames[tcpConnState(c)]
	default:
		e.ProtoState = [...]string{"FIRST", "SINGLE", "MULTIPLE"}[classPhase(c.class)]
	}
	return e
}

func classPhase(class uint8) int {
	switch class {
	case classUDPFirst, classICMPFirst, classOtherFirst:
		return 0
	case classUDPSingle, classOtherSingle:
		return 1
	}
	return 2
}
