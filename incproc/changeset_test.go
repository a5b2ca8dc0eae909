package incproc_test

import (
	"math/rand/v2"
	"testing"

	"github.com/govn/govn/incproc"
)

func TestChangeSetMerge(t *testing.T) {
	const none incproc.Change = 0
	for _, tc := range []struct{ first, then, want incproc.Change }{
		{incproc.Inserted, incproc.Updated, incproc.Inserted},
		{incproc.Inserted, incproc.Deleted, none},
		{incproc.Updated, incproc.Updated, incproc.Updated},
		{incproc.Updated, incproc.Deleted, incproc.Deleted},
		{incproc.Deleted, incproc.Inserted, incproc.Updated},
	} {
		var s incproc.ChangeSet[string]
		s.Add("k", tc.first)
		s.Add("k", tc.then)
		got, _ := s.Get("k")
		if got != tc.want || (tc.want == none) != (s.Len() == 0) {
			t.Errorf("%v then %v: %v (len %d), want %v", tc.first, tc.then, got, s.Len(), tc.want)
		}
	}
}

// A ChangeSet fed a random sequence of valid changes says what the
// difference between the states before and after says.
func TestChangeSetNetEffect(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 200 {
		before := map[int]bool{}
		for k := range 8 {
			before[k] = rng.IntN(2) == 0
		}
		now := map[int]bool{}
		for k, v := range before {
			now[k] = v
		}
		var s incproc.ChangeSet[int]
		for range rng.IntN(30) {
			k := rng.IntN(8)
			switch {
			case !now[k]:
				s.Add(k, incproc.Inserted)
				now[k] = true
			case rng.IntN(2) == 0:
				s.Add(k, incproc.Updated)
			default:
				s.Add(k, incproc.Deleted)
				now[k] = false
			}
		}
		for k := range 8 {
			got, ok := s.Get(k)
			switch {
			case !before[k] && now[k]:
				if got != incproc.Inserted {
					t.Fatalf("key %d absent, then present: %v", k, got)
				}
			case before[k] && !now[k]:
				if got != incproc.Deleted {
					t.Fatalf("key %d present, then absent: %v", k, got)
				}
			case !before[k] && !now[k]:
				if ok {
					t.Fatalf("key %d absent before and after: %v", k, got)
				}
			default:
				if ok && got != incproc.Updated {
					t.Fatalf("key %d present before and after: %v", k, got)
				}
			}
		}
		n := 0
		for range s.All() {
			n++
		}
		if n != s.Len() {
			t.Fatalf("All gave %d keys, Len says %d", n, s.Len())
		}
		s.Clear()
		if s.Len() != 0 {
			t.Fatal("Clear left keys")
		}
	}
}
