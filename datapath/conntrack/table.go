package conntrack

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// Entries live in chunks of chunkSize so a zone grows without copying and a
// flushed zone's memory can be recycled chunk by chunk.
const (
	chunkBits = 8
	chunkSize = 1 << chunkBits
)

// Flags of an entry.
const (
	flagUsed      = 1 << iota // slot holds a connection
	flagSeenReply             // a valid packet went in the reply direction
	flagSNAT                  // reply tuple differs in destination (source translation)
	flagDNAT                  // reply tuple differs in source (destination translation)
	flagChallenge             // TCP: a challenge ACK passed in SYN_SENT; lastAck holds its ack
	flagPickup                // TCP: picked up mid-stream; windows learned from traffic
)

// peer is one direction's TCP window state (see tcp.go).
type peer struct {
	end    uint32 // highest sequence sent + 1
	maxEnd uint32 // highest sequence the other side allows (its ack + window)
	maxWin uint32 // largest window advertised, scaled
	scale  int8   // window scale; -1 until negotiated
	state  uint8
	inited bool
}

// conn is one connection. It holds no pointers, so a zone's slab is never
// scanned by the garbage collector.
//
// It is exactly three cache lines (chunks are page-aligned large objects,
// so every entry starts on a line boundary). Line 0 holds what every hit
// reads (lock, expiry, mark, flags, class) and the original tuple; line 1
// the reply tuple and the label; line 2 the TCP windows and the links of the
// index and the wheel. A UDP hit thus costs two adjacent lines, and
// ProcessBatch knows which lines to touch ahead of the update.
type conn struct {
	mu      sync.Mutex // guards the fields below except expires, keys, tags and the wheel links
	expires atomic.Int64
	mark    uint32
	flags   uint16
	backend int16
	class   uint8     // timeout class
	keys    [2]key    // original and reply tuples (written under zone.mu held for writing)
	label   Label     // line 1 from here
	lastAck uint32    //
	wslot   uint16    // timer wheel slot+1 (guarded by zone.wheelMu)
	peer    [2]peer   // line 2 from here
	tags    [2]uint32 // index tag of each direction (written under zone.mu held for writing)
	wnext   uint32    // timer wheel list, index+1 (guarded by zone.wheelMu); free list when unused
	wprev   uint32
	_       [16]byte
}

// ref names one direction of one entry in a zone's index: (index+1)<<1|dir.
type ref uint32

func mkref(idx uint32, dir int) ref { return ref((idx+1)<<1 | uint32(dir)) }
func (r ref) idx() uint32           { return uint32(r>>1) - 1 }
func (r ref) dir() int              { return int(r & 1) }

// zone is one zone's connection table.
type zone struct {
	mu     sync.RWMutex
	id     uint16
	dead   bool // set by the reclaimer after a flush; lookups then retry
	count  int
	chunks [][]conn
	free   uint32 // free list head, index+1
	next   uint32 // first never-used index
	index  index

	wheelMu sync.Mutex
	wheel   wheel
	dues    *dueIndex // the Tracker's
}

func newZone(id uint16, now int64, dues *dueIndex) *zone {
	z := &zone{id: id, dues: dues}
	z.index.init()
	z.wheel.init(now)
	return z
}

func (z *zone) at(idx uint32) *conn { return &z.chunks[idx>>chunkBits][idx&(chunkSize-1)] }

// tagOf is the part of a tuple hash the index keeps: its high bits choose
// the segment, its low bits the home bucket, and all 32 bits filter
// candidates before an entry is read.
func tagOf(h uint64) uint32 { return uint32(h) ^ uint32(h>>32) }

// lookup finds k; the caller holds z.mu.
func (z *zone) lookup(k *key, h uint64) (uint32, int, bool) {
	tag := tagOf(h)
	if len(z.index.dir) == 0 {
		return 0, 0, false
	}
	sg := z.index.segment(tag)
	for i, n := tag&sg.mask, 0; n < len(sg.buckets); i, n = (i+1)&sg.mask, n+1 {
		b := &sg.buckets[i]
		for s := range bucketSlots {
			if b.tags[s] == tag && b.refs[s] != 0 {
				r := ref(b.refs[s])
				if z.at(r.idx()).keys[r.dir()] == *k {
					return r.idx(), r.dir(), true
				}
			}
		}
		if b.over == 0 {
			break
		}
	}
	return 0, 0, false
}

func (z *zone) contains(k *key, h uint64) bool {
	_, _, ok := z.lookup(k, h)
	return ok
}

// alloc returns a free slot; the caller holds z.mu for writing.
func (z *zone) alloc(pool *chunkPool) uint32 {
	if z.free != 0 {
		idx := z.free - 1
		z.free = z.at(idx).wnext
		z.at(idx).wnext = 0
		return idx
	}
	idx := z.next
	if int(idx>>chunkBits) == len(z.chunks) {
		z.chunks = append(z.chunks, pool.get())
	}
	z.next++
	*z.at(idx) = conn{} // pooled chunks come back dirty
	return idx
}

// link adds both directions of entry idx to the index; the caller holds
// z.mu for writing.
func (z *zone) link(idx uint32, hashes [2]uint64) {
	c := z.at(idx)
	for d := range 2 {
		c.tags[d] = tagOf(hashes[d])
		z.index.insert(c.tags[d], mkref(idx, d))
	}
}

// unlink removes both directions of entry idx from the index; the caller
// holds z.mu for writing.
func (z *zone) unlink(idx uint32) {
	c := z.at(idx)
	for d := range 2 {
		z.index.remove(c.tags[d], mkref(idx, d))
	}
}

// release puts entry idx on the free list; the caller holds z.mu for
// writing and has unlinked it from the index and the wheel.
func (z *zone) release(idx uint32) {
	c := z.at(idx)
	*c = conn{}
	c.wnext = z.free
	z.free = idx + 1
	z.count--
}

// chunkPool recycles the chunks of flushed zones.
type chunkPool struct {
	mu     sync.Mutex
	chunks [][]conn
	max    int
}

func (p *chunkPool) get() []conn {
	p.mu.Lock()
	if n := len(p.chunks); n > 0 {
		c := p.chunks[n-1]
		p.chunks = p.chunks[:n-1]
		p.mu.Unlock()
		return c
	}
	p.mu.Unlock()
	return make([]conn, chunkSize)
}

// put takes a chunk of a dead zone (not cleared: alloc zeroes each slot
// it hands out); it reports false if the pool is full.
func (p *chunkPool) put(c []conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.chunks) >= p.max {
		return false
	}
	p.chunks = append(p.chunks, c)
	return true
}

func hashKey(seed maphash.Seed, k *key) uint64 { return maphash.Comparable(seed, *k) }
