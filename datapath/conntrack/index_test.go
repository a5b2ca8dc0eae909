package conntrack

import (
	"math/rand/v2"
	"testing"
)

// find returns whether r is filed under tag, searching as lookup does.
func (ix *index) find(tag uint32, r ref) bool {
	for i, n := tag&ix.mask, 0; n < len(ix.buckets); i, n = (i+1)&ix.mask, n+1 {
		b := &ix.buckets[i]
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

// recount recomputes every bucket's overflow count from where keys live.
func (ix *index) recount() []uint32 {
	over := make([]uint32, len(ix.buckets))
	for i := range ix.buckets {
		b := &ix.buckets[i]
		for s := range bucketSlots {
			if b.refs[s] == 0 {
				continue
			}
			for j := b.tags[s] & ix.mask; j != uint32(i); j = (j + 1) & ix.mask {
				over[j]++
			}
		}
	}
	return over
}

// TestIndex files and removes refs in random order, with tags drawn from a
// small set so that buckets overflow and tags collide, and checks after
// every step that every live ref is found, removed ones are not, and the
// overflow counts match where the keys live.
func TestIndex(t *testing.T) {
	for _, tc := range []struct {
		name string
		tags uint32 // distinct tags drawn from
		ops  int
	}{
		{"spread", 1 << 30, 20000},
		{"colliding", 16, 5000},
		{"one tag", 1, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.tags)))
			var ix index
			ix.init(1)
			live := map[ref]uint32{}
			next := uint32(0)
			for op := range tc.ops {
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
					if ix.used+1 > len(ix.buckets)*maxLoad {
						ix.grow()
					}
					r := mkref(next, int(next&1))
					next++
					tag := rng.Uint32N(tc.tags) * 0x9e3779b1
					ix.insert(tag, r)
					live[r] = tag
				}
				if ix.used != len(live) {
					t.Fatalf("op %d: used %d, live %d", op, ix.used, len(live))
				}
				if op%97 != 0 && op != tc.ops-1 {
					continue
				}
				for r, tag := range live {
					if !ix.find(tag, r) {
						t.Fatalf("op %d: ref %d (tag %#x) lost", op, r, tag)
					}
				}
				for i, want := range ix.recount() {
					if got := ix.buckets[i].over; got != want {
						t.Fatalf("op %d: bucket %d overflow count %d, want %d", op, i, got, want)
					}
				}
			}
		})
	}
}
