package megaflow

import (
	"testing"
	"time"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/xlate"
)

// exactDst is the translation of a packet to nw_dst dst: a megaflow
// matching nw_dst exactly, as a router's ARP resolution makes one per
// address.
func exactDst(dst uint64) xlate.Result {
	var m flow.Mask
	m.SetField(flow.EthType)
	m.SetField(flow.NWDst)
	var k flow.Key
	k.Set(flow.EthType, 0x0800)
	k.Set(flow.NWDst, dst)
	return xlate.Result{Key: k.And(&m), Mask: m, Actions: []flow.DPAction{flow.DPOutput{Port: 2}}}
}

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		name          string
		caches, limit int
		misses        int // distinct, spread over the caches in turn
	}{
		{"one cache under", 1, 10, 5},
		{"one cache at", 1, 10, 10},
		{"one cache over", 1, 10, 25},
		{"three caches over", 3, 10, 25},
		{"zero", 2, 0, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLimit(tc.limit)
			cs := make([]*Cache, tc.caches)
			for i := range cs {
				cs[i] = New(true)
				cs[i].SetLimit(l)
			}
			installed := 0
			for i := range tc.misses {
				r := exactDst(uint64(i + 1))
				if cs[i%len(cs)].Insert(&r, 0) != nil {
					installed++
				}
			}
			want := min(tc.limit, tc.misses)
			var n, hits int
			for _, c := range cs {
				n += c.Len()
				hits += int(c.Stats().LimitHits)
			}
			if installed != want || n != want || l.Len() != want {
				t.Errorf("installed %d, caches hold %d, limit counts %d; want %d", installed, n, l.Len(), want)
			}
			if k := tc.misses - want; hits != k {
				t.Errorf("LimitHits %d, want %d", hits, k)
			}
			// At the cap, replacing a megaflow is still allowed.
			if want > 0 {
				r := exactDst(1)
				r.Actions = []flow.DPAction{flow.DPOutput{Port: 3}}
				if f := cs[0].Insert(&r, 0); f == nil {
					t.Error("replacing a megaflow at the cap failed")
				}
				if l.Len() != want {
					t.Errorf("after a replace the limit counts %d, want %d", l.Len(), want)
				}
			}
			for _, c := range cs {
				c.Flush()
			}
			if l.Len() != 0 {
				t.Errorf("after flushing, the limit counts %d", l.Len())
			}
		})
	}
}

// TestEvictIdleFirst lowers the limit and evicts the excess, least
// recently hit first.
func TestEvictIdleFirst(t *testing.T) {
	l := NewLimit(100)
	c := New(false)
	c.SetLimit(l)
	for i := range 20 {
		r := exactDst(uint64(i + 1))
		c.Insert(&r, time.Duration(i)*time.Second) // megaflow i last hit at i s
	}
	// Hitting the oldest five makes them the most recent.
	for i := range 5 {
		k := exactDst(uint64(i + 1)).Key
		if c.Lookup(&k, time.Minute) == nil {
			t.Fatalf("megaflow %d missing", i)
		}
	}
	l.Set(12)
	if got := l.Over(); got != 8 {
		t.Fatalf("Over %d, want 8", got)
	}
	used := c.AppendUsed(nil)
	if len(used) != 20 {
		t.Fatalf("AppendUsed gave %d times, want 20", len(used))
	}
	if n := c.Evict(time.Hour, l.Over()); n != 8 {
		t.Fatalf("Evict removed %d, want 8", n)
	}
	if c.Len() != 12 || l.Len() != 12 || l.Over() != 0 || c.Stats().Evicted != 8 {
		t.Errorf("after evicting: %d megaflows, limit counts %d, over %d, Evicted %d", c.Len(), l.Len(), l.Over(), c.Stats().Evicted)
	}
	// Megaflows 5..12 (last hit at 5..12 s) were the idlest.
	for i := range 20 {
		k := exactDst(uint64(i + 1)).Key
		gone := c.Lookup(&k, time.Minute) == nil
		if want := i >= 5 && i < 13; gone != want {
			t.Errorf("megaflow %d (last hit %v): evicted %v, want %v", i, time.Duration(i)*time.Second, gone, want)
		}
	}
	// usedBy spares megaflows hit after it.
	if n := c.Evict(4*time.Second, 100); n != 0 {
		t.Errorf("Evict(4s) removed %d, want 0 (none idle since then)", n)
	}
}

// BenchmarkInsert installs megaflows to distinct destinations (flushing
// every 4,096) with and without a Limit: the limit costs one atomic add on
// each install and removal.
func BenchmarkInsert(b *testing.B) {
	rs := make([]xlate.Result, 4096)
	for i := range rs {
		rs[i] = exactDst(uint64(i + 1))
	}
	for _, limited := range []bool{false, true} {
		b.Run(map[bool]string{false: "nolimit", true: "limit"}[limited], func(b *testing.B) {
			c := New(true)
			if limited {
				c.SetLimit(NewLimit(DefaultFlowLimit))
			}
			i := 0
			for b.Loop() {
				c.Insert(&rs[i], 0)
				if i++; i == len(rs) {
					c.Flush()
					i = 0
				}
			}
		})
	}
}
