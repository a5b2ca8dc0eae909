package megaflow

import (
	"math/rand/v2"
	"testing"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/xlate"
)

// TestCheckPktLargerFromFrames sends frames of random lengths, parsed by
// packet.Extract as the datapath does, through a pipeline that sends
// frames longer than 1514 bytes one way and the rest another: every frame
// goes the right way, from cached megaflows, and the megaflows number
// about one per deciding bit of the length, not one per length.
func TestCheckPktLargerFromFrames(t *testing.T) {
	var b flow.Bundle
	for _, s := range []string{
		"table=0,priority=1 actions=check_pkt_larger(1514)->reg9[1],resubmit(,1)",
		"table=1,priority=10,reg9=0x2/0x2 actions=output:7",
		"table=1,priority=1 actions=output:3",
	} {
		r, err := flow.ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		b.Add(r)
	}
	ts := classifier.NewTables()
	if _, err := ts.Apply(b); err != nil {
		t.Fatal(err)
	}
	d := &datapath{cache: New(true), tr: xlate.New(ts), tables: ts}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		n := 54 + rng.IntN(9000-54)
		if i%10 == 0 {
			n = 1514 + rng.IntN(3) - 1 // around the threshold
		}
		f := append(tcpFrame(true, 1000, 0), make([]byte, n-54)...)
		var k flow.Key
		k.Set(flow.InPort, clientPort)
		packet.Extract(f, &k)
		want := "3"
		if n > 1514 {
			want = "7"
		}
		if got := flow.DPActionsString(d.process(t, &k)); got != want {
			t.Fatalf("frame of %d bytes: %s, want %s", n, got, want)
		}
	}
	if d.cache.Len() > 16 {
		t.Errorf("%d megaflows:\n%s", d.cache.Len(), d.cache.Dump(false))
	}
	t.Logf("%d megaflows, %d upcalls for 5000 frames", d.cache.Len(), d.upcalls)
}
