package megaflow

import (
	"testing"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/xlate"
)

// TestCounterListsShared checks that megaflows with the same rules share
// one counter list, that removing the last megaflow forgets it, and that
// counts reach the rules once, on push, expiry or removal.
func TestCounterListsShared(t *testing.T) {
	ts := lbPipeline(t, true)
	tr := xlate.New(ts)
	c := New(false)
	c.SetGeneration(ts.Generation())
	var flows []*Flow
	for i := range 10 {
		k := tcpKey(false, uint16(1000+i), packet.TCPAck) // exact on tcp_dst: one megaflow each
		res := tr.Translate(&k, xlate.Options{})
		if len(res.Counters) != 3 {
			t.Fatalf("translation ran %d counters, want 3 (tables 0, 1, 2)", len(res.Counters))
		}
		flows = append(flows, c.Insert(&res, 0))
	}
	if c.Len() != 10 || len(c.lists) != 1 || flows[0].counters != flows[9].counters || flows[0].counters.refs != 10 {
		t.Fatalf("%d megaflows with %d counter lists; want 10 sharing one", c.Len(), len(c.lists))
	}
	rules := flows[0].Counters()
	k := tcpKey(false, 1000, packet.TCPAck)
	for range 4 {
		c.Lookup(&k, 1).Bytes += 100
	}
	c.PushStats()
	c.PushStats() // nothing new
	for _, rc := range rules {
		if rc.Packets() != 4 || rc.Bytes() != 400 {
			t.Errorf("counter %d: %d packets %d bytes, want 4, 400", rc.ID(), rc.Packets(), rc.Bytes())
		}
	}
	// Unpushed hits are credited when their megaflow goes.
	c.Lookup(&k, 2).Bytes += 100
	if n := c.Expire(6, 5); n != 9 {
		t.Fatalf("expired %d, want 9", n)
	}
	if rules[0].Packets() != 5 || flows[0].counters.refs != 1 {
		t.Errorf("after expiry: %d packets, list held %d times; want 5, 1", rules[0].Packets(), flows[0].counters.refs)
	}
	c.Lookup(&k, 10)
	c.Flush()
	if rules[0].Packets() != 6 || len(c.lists) != 0 {
		t.Errorf("after flush: %d packets, %d lists kept; want 6, 0", rules[0].Packets(), len(c.lists))
	}
	if st := ts.TableStats(2); st.MatchedPackets != 6 {
		t.Errorf("table 2 matched %d packets, want 6", st.MatchedPackets)
	}
}

// TestCounterListsCollide interns lists whose hashes collide.
func TestCounterListsCollide(t *testing.T) {
	a, b := flow.NewPacketCounter(1, nil), flow.NewPacketCounter(2, nil)
	ls := counterLists{}
	la := ls.hold(xlate.Counters{a})
	lb := ls.hold(xlate.Counters{b})
	// Force both into one chain, as a collision would.
	delete(ls, lb.hash)
	lb.hash, lb.next = la.hash, la
	ls[la.hash] = lb
	if got := ls.hold(xlate.Counters{a}); got != la || la.refs != 2 {
		t.Fatalf("hold found %p (refs %d), want the list of a", got, la.refs)
	}
	ls.release(la)
	ls.release(la) // a's list goes from the middle of the chain
	if ls[lb.hash] != lb || lb.next != nil {
		t.Fatalf("chain after releasing a: head %p next %p", ls[lb.hash], lb.next)
	}
	ls.release(lb)
	if len(ls) != 0 {
		t.Errorf("%d lists left", len(ls))
	}
	if ls.hold(nil) != nil {
		t.Error("an empty list was interned")
	}
}
