package dp

import (
	"bytes"
	"testing"

	"github.com/govn/govn/datapath/conntrack"
	"github.com/govn/govn/datapath/conntrack/ipfrag"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
)

// TestFragmentsThroughConntrack sends UDP datagrams of 3000 bytes, split
// into fragments of at most 1000 bytes, through ct(zone=3) and
// ct(commit,zone=3): they are reassembled before the tracker (so they are
// tracked, not invalid), and leave as fragments no larger than those
// received, which reassemble into the datagram sent.
func TestFragmentsThroughConntrack(t *testing.T) {
	tr := conntrack.New(conntrack.Config{})
	t.Cleanup(tr.Close)
	r := newRig(t, Config{Conntrack: tr}, 2)
	r.flows.set(func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		if k.Get(flow.RecircID) == 0 {
			return m, []flow.DPAction{flow.DPCT{Zone: 3}, flow.DPRecirc{ID: 1}}
		}
		m.SetField(flow.CTState)
		st := conntrack.State(k.Get(flow.CTState))
		switch {
		case st&conntrack.StateInvalid != 0:
			return m, nil
		case st&conntrack.StateNew != 0:
			return m, []flow.DPAction{flow.DPCT{Zone: 3, Commit: true}, flow.DPOutput{Port: 2}}
		}
		return m, []flow.DPAction{flow.DPOutput{Port: 2}}
	})
	orig := udpFrame(mac2, mac1, 4000, 5000, 3000)
	frags, err := ipfrag.Fragment(orig, 14, 1000, 1)
	if err != nil || len(frags) != 4 {
		t.Fatalf("Fragment: %d fragments, %v", len(frags), err)
	}
	for round := range 2 { // new, then the committed connection again
		for _, f := range frags {
			r.inject(t, 1, f, port.Offload{})
		}
		re := ipfrag.New(ipfrag.Config{})
		var got []byte
		for i := 0; got == nil; i++ {
			p := r.expect(t, 2)
			if len(p.Data)-14 > 1000 {
				t.Fatalf("round %d: fragment %d has %d IP bytes, more than the 1000 received", round, i, len(p.Data)-14)
			}
			res := re.Add(p.Data, 14, 0, 0)
			switch res.Status {
			case ipfrag.Complete:
				got = res.Packet
			case ipfrag.Held:
			default:
				t.Fatalf("round %d: output fragment %d: status %v, %v", round, i, res.Status, res.Err)
			}
		}
		if !bytes.Equal(got, orig) {
			t.Errorf("round %d: reassembled output differs from the datagram sent", round)
		}
		r.expectNone(t, 2)
	}
	s := r.d.Stats()
	if s.FragsHeld != 6 || s.Reassembled != 2 || s.FragDrops != 0 {
		t.Errorf("held %d, reassembled %d, dropped %d; want 6, 2, 0", s.FragsHeld, s.Reassembled, s.FragDrops)
	}
}
