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
type conn struct {
	// Fields a lookup touches come first so that a hit costs two adjacent
	// cache lines.
	mu      sync.Mutex // guards the fields below except expires and the index/wheel links
	flags   uint16
	backend int16
	class   uint8 // timeout class
	expires atomic.Int64
	mark    uint32
	keys    [2]key    // original and reply tuples
	chain   [2]uint32 // next ref with the same hash, per direction (guarded by zone.mu)
	label   Label
	peer    [2]peer
	lastAck uint32
	wnext   uint32 // timer wheel list, index+1 (guarded by zone.wheelMu); free list when unused
	wprev   uint32
	wslot   uint16
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
	index  map[uint64]ref

	wheelMu sync.Mutex
	wheel   wheel
}

func newZone(id uint16, now int64) *zone {
	z := &zone{id: id, index: make(map[uint64]ref)}
	z.wheel.init(now)
	return z
}

func (z *zone) at(idx uint32) *conn { return &z.chunks[idx>>chunkBits][idx&(chunkSize-1)] }

// lookup finds k; the caller holds z.mu.
func (z *zone) lookup(k *key, h uint64) (uint32, int, bool) {
	for r := z.index[h]; r != 0; {
		c := z.at(r.idx())
		if c.keys[r.dir()] == *k {
			return r.idx(), r.dir(), true
		}
		r = ref(c.chain[r.dir()])
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

// link adds both directions of entry idx to the index.
func (z *zone) link(idx uint32, hashes [2]uint64) {
	c := z.at(idx)
	for d := range 2 {
		c.chain[d] = uint32(z.index[hashes[d]])
		z.index[hashes[d]] = mkref(idx, d)
	}
}

// unlink removes both directions of entry idx from the index.
func (z *zone) unlink(idx uint32, hashes [2]uint64) {
	c := z.at(idx)
	for d := range 2 {
		me := mkref(idx, d)
		h := hashes[d]
		r := z.index[h]
		if r == me {
			if c.chain[d] == 0 {
				delete(z.index, h)
			} else {
				z.index[h] = ref(c.chain[d])
			}
			continue
		}
		for r != 0 {
			p := z.at(r.idx())
			if ref(p.chain[r.dir()]) == me {
				p.chain[r.dir()] = c.chain[d]
				break
			}
			r = ref(p.chain[r.dir()])
		}
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
