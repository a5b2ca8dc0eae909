package conntrack

import (
	"math/rand/v2"
	"testing"
)

// find returns whether r is filed under tag, searching as lookup does.
func (ix *index) find(tag uint32, r ref) bool {
	sg := ix.segment(tag)
	for i, n := tag&sg.mask, 0; n < len(sg.buckets); i, n = (i+1)&sg.mask, n+1 {
		b := &sg.buckets[i]
		for s := range bucketSlots {
			if b.tags[s] == tag && b.refs[s] == uint32(r) {
				return true
			}
		}
		if b.over == 0 {
			return false
		}
	}
	return false
}

// check verifies the directory and every segment: each segment covers the
// aligned run of directory entries of one prefix and holds only tags with
// that prefix, its used count and overflow counts match where its keys
// live. It returns the number of keys.
func (ix *index) check(t *testing.T) int {
	t.Helper()
	if len(ix.dir) != 1<<ix.depth {
		t.Fatalf("directory of %d entries at depth %d", len(ix.dir), ix.depth)
	}
	total := 0
	for j := 0; j < len(ix.dir); {
		sg := ix.dir[j]
		span := 1 << (ix.depth - sg.depth)
		if j%span != 0 {
			t.Fatalf("segment at directory %d of depth %d is not aligned", j, sg.depth)
		}
		for k := j; k < j+span; k++ {
			if ix.dir[k] != sg {
				t.Fatalf("directory %d: segment of depth %d covers %d..%d but not %d", j, sg.depth, j, j+span, k)
			}
		}
		over := make([]uint32, len(sg.buckets))
		used := 0
		for i := range sg.buckets {
			b := &sg.buckets[i]
			for s := range bucketSlots {
				if b.refs[s] == 0 {
					continue
				}
				used++
				if int(uint64(b.tags[s])>>(32-ix.depth)) < j || int(uint64(b.tags[s])>>(32-ix.depth)) >= j+span {
					t.Fatalf("tag %#x in the segment of directory %d..%d", b.tags[s], j, j+span)
				}
				for h := b.tags[s] & sg.mask; h != uint32(i); h = (h + 1) & sg.mask {
					over[h]++
				}
			}
		}
		if used != sg.used {
			t.Fatalf("segment at %d: used %d, holds %d", j, sg.used, used)
		}
		for i, want := range over {
			if got := sg.buckets[i].over; got != want {
				t.Fatalf("segment at %d, bucket %d: overflow count %d, want %d", j, i, got, want)
			}
		}
		total += used
		j += span
	}
	return total
}

// TestIndex files and removes refs in random order, with tags spread or
// drawn from a small set (so that buckets overflow, tags collide and
// segments cannot always split), and checks every few steps that every
// live ref is found, removed ones are not, and the structure is sound.
func TestIndex(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tags  uint32 // distinct tags drawn from
		ops   int
		split bool // whether segments must have split
	}{
		{"spread", 1 << 30, 40000, true},
		{"colliding", 16, 12000, true},
		{"one tag", 1, 3000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.tags)))
			var ix index
			ix.init()
			live := map[ref]uint32{}
			next := uint32(0)
			for op := range tc.ops {
				// Insert twice as often as remove: the index grows.
				if len(live) > 0 && rng.IntN(3) == 0 {
					for r, tag := range live {
						ix.remove(tag, r)
						delete(live, r)
						if ix.find(tag, r) {
							t.Fatalf("op %d: removed ref %d still found", op, r)
						}
						break
					}
				} else {
					r := mkref(next, int(next&1))
					next++
					tag := rng.Uint32N(tc.tags) * 0x9e3779b1
					ix.insert(tag, r)
					live[r] = tag
				}
				if op%211 != 0 && op != tc.ops-1 {
					continue
				}
				if n := ix.check(t); n != len(live) {
					t.Fatalf("op %d: index holds %d, want %d", op, n, len(live))
				}
				for r, tag := range live {
					if !ix.find(tag, r) {
						t.Fatalf("op %d: ref %d (tag %#x) lost", op, r, tag)
					}
				}
			}
			if split := ix.depth > 0; split != tc.split {
				t.Errorf("directory depth %d after %d keys", ix.depth, len(live))
			}
		})
	}
}
