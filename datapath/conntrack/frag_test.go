package conntrack

import (
	"testing"
	"time"

	"github.com/govn/govn/datapath/conntrack/ipfrag"
)

// TestFragments: fragments are invalid to the tracker itself; reassembled
// by ipfrag first (as OVS does before ct), the datagram is tracked.
func TestFragments(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tr := newTracker(t, Config{})
			ra := ipfrag.New(ipfrag.Config{})
			out := build(spec{src: f.client, dst: f.server, proto: protoUDP, sport: 4000, dport: 4001, payload: 3000})
			frags, err := ipfrag.Fragment(out, 0, 1280, 7)
			if err != nil || len(frags) < 3 {
				t.Fatalf("fragment: %d, %v", len(frags), err)
			}
			if r := tr.Process(frags[1], 0, Params{Zone: 1, Commit: true}, 1); r.State != trkInv || r.Reason != ReasonFragment {
				t.Errorf("raw fragment: %v %q", r.State, r.Reason)
			}
			var whole []byte
			for _, fr := range frags {
				if res := ra.Add(fr, 0, 1, 1); res.Status == ipfrag.Complete {
					whole = res.Packet
				}
			}
			if r := tr.Process(whole, 0, Params{Zone: 1, Commit: true}, time.Second); r.State != trkNew {
				t.Fatalf("reassembled: %v %q", r.State, r.Reason)
			}
			back := build(spec{src: f.server, dst: f.client, proto: protoUDP, sport: 4001, dport: 4000, payload: 10})
			if r := tr.Process(back, 0, Params{Zone: 1}, time.Second); r.State != trkRpl {
				t.Errorf("reply: %v", r.State)
			}
		})
	}
}
