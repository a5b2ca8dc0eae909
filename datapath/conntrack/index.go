package conntrack

// A zone's index maps tuple hashes to entries: extendible hashing over
// segments, each an open-addressing table of one-cache-line buckets.
//
// A bucket holds seven (tag, ref) slots and an overflow count. A key lives
// in its home bucket (tag & mask) or, when that is full, in one of the
// buckets after it; each bucket counts the keys that passed it for lack of
// room, so a search stops at the first bucket whose count is zero. A hit
// thus reads one bucket line and one entry, a miss usually one line and no
// entry (the 32-bit tags filter out other keys); the buckets hold no
// pointers.
//
// The directory picks a segment by the tag's top bits. A segment grows by
// doubling up to segBuckets buckets; past that it splits in two by one more
// tag bit (doubling the directory, an array of pointers, when needed). So
// adding a key costs at most the rehash of one segment, never of the
// zone's whole index: a zone of millions of connections never stalls its
// lookups for the tens of milliseconds a full rehash would take.
const (
	bucketSlots = 7
	maxLoad     = 4   // average used slots per bucket before growing (57%)
	segBuckets  = 512 // buckets (32 KiB) a segment grows to before it splits
)

type bucket struct {
	tags [bucketSlots]uint32
	over uint32 // keys homed at or before this bucket that live after it
	refs [bucketSlots]uint32
	_    uint32
}

type index struct {
	dir   []*segment // 1<<depth of them, by the tag's top depth bits
	depth uint8
}

type segment struct {
	buckets []bucket // a power of two of them
	mask    uint32
	used    int
	depth   uint8 // the segment holds the tags of one prefix of this many bits
}

func newSegment(n int, depth uint8) *segment {
	return &segment{buckets: make([]bucket, n), mask: uint32(n - 1), depth: depth}
}

func (ix *index) init() {
	ix.dir, ix.depth = []*segment{newSegment(1, 0)}, 0
}

// segment returns the segment for tag. (A shift by 32 gives 0.)
func (ix *index) segment(tag uint32) *segment { return ix.dir[tag>>(32-ix.depth)] }

// insert files r under tag, growing or splitting its segment first if it
// is full.
func (ix *index) insert(tag uint32, r ref) {
	sg := ix.segment(tag)
	if sg.used+1 > len(sg.buckets)*maxLoad {
		if len(sg.buckets) < segBuckets || !ix.split(sg, tag) {
			sg.grow()
		}
		sg = ix.segment(tag)
	}
	sg.insert(tag, r)
}

func (ix *index) remove(tag uint32, r ref) { ix.segment(tag).remove(tag, r) }

// split divides sg, which holds tag, into two segments by the next tag bit.
// It reports false, changing nothing, if that bit would not divide the
// keys (then only growing helps).
func (ix *index) split(sg *segment, tag uint32) bool {
	if sg.depth >= 24 {
		return false
	}
	bit := uint32(1) << (31 - sg.depth)
	ones := 0
	for i := range sg.buckets {
		b := &sg.buckets[i]
		for s := range bucketSlots {
			if b.refs[s] != 0 && b.tags[s]&bit != 0 {
				ones++
			}
		}
	}
	if ones == 0 || ones == sg.used {
		return false
	}
	if sg.depth == ix.depth {
		dir := make([]*segment, 2*len(ix.dir))
		for i, s := range ix.dir {
			dir[2*i], dir[2*i+1] = s, s
		}
		ix.dir, ix.depth = dir, ix.depth+1
	}
	halves := [2]*segment{newSegment(len(sg.buckets), sg.depth+1), newSegment(len(sg.buckets), sg.depth+1)}
	for i := range sg.buckets {
		b := &sg.buckets[i]
		for s := range bucketSlots {
			if b.refs[s] != 0 {
				h := halves[0]
				if b.tags[s]&bit != 0 {
					h = halves[1]
				}
				h.insert(b.tags[s], ref(b.refs[s]))
			}
		}
	}
	// sg covers the directory entries of tag's prefix of sg.depth bits: a
	// run of 1<<(ix.depth-sg.depth), whose halves go to the two segments.
	span := 1 << (ix.depth - sg.depth)
	first := int(tag>>(32-sg.depth)) * span
	for i := range span {
		ix.dir[first+i] = halves[i/(span/2)]
	}
	return true
}

// insert files r under tag; the segment must have a free slot.
func (sg *segment) insert(tag uint32, r ref) {
	for i := tag & sg.mask; ; i = (i + 1) & sg.mask {
		b := &sg.buckets[i]
		for s := range bucketSlots {
			if b.refs[s] == 0 {
				b.tags[s], b.refs[s] = tag, uint32(r)
				sg.used++
				return
			}
		}
		b.over++
	}
}

// remove deletes r, filed under tag, and takes it off the overflow counts
// of the buckets it passed.
func (sg *segment) remove(tag uint32, r ref) {
	home := tag & sg.mask
	for i, n := home, 0; n < len(sg.buckets); i, n = (i+1)&sg.mask, n+1 {
		b := &sg.buckets[i]
		for s := range bucketSlots {
			if b.refs[s] == uint32(r) {
				b.tags[s], b.refs[s] = 0, 0
				sg.used--
				for j := home; j != i; j = (j + 1) & sg.mask {
					sg.buckets[j].over--
				}
				return
			}
		}
	}
}

// grow doubles the segment's buckets.
func (sg *segment) grow() {
	old := sg.buckets
	sg.buckets, sg.mask, sg.used = make([]bucket, 2*len(old)), uint32(2*len(old)-1), 0
	for i := range old {
		b := &old[i]
		for s := range bucketSlots {
			if b.refs[s] != 0 {
				sg.insert(b.tags[s], ref(b.refs[s]))
			}
		}
	}
}
