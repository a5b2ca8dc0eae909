package xlate

import (
	"testing"

	"github.com/govn/govn/datapath/flow"
)

// TestCheckPktLarger translates packets of every length from 0 to 3000
// against a threshold, with and without a VLAN header pushed first: the
// result bit is right, every length the megaflow covers compares the same
// way, and the number of distinct megaflows stays logarithmic.
func TestCheckPktLarger(t *testing.T) {
	for _, tt := range []struct {
		name    string
		actions string
		limit   int64 // the length the packet as extracted must exceed
	}{
		{"plain", "check_pkt_larger(1500)->reg0[3],resubmit(,1)", 1500},
		{"after push_vlan", "push_vlan:0x8100,check_pkt_larger(1500)->reg0[3],resubmit(,1)", 1496},
		{"zero", "check_pkt_larger(0)->reg0[3],resubmit(,1)", 0},
		{"pushed past zero", "push_vlan:0x8100,check_pkt_larger(2)->reg0[3],resubmit(,1)", -2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := program(t,
				ruleSpec{0, 1, matchAll, mustActions(t, tt.actions)},
				ruleSpec{1, 10, func(m *flow.Match) { m.SetMasked(flow.Reg0, 8, 8) }, mustActions(t, "output:2")},
				ruleSpec{1, 1, matchAll, mustActions(t, "output:3")},
			)
			tr := New(ts)
			megaflows := map[flow.Match]string{}
			for n := int64(0); n <= 3000; n++ {
				k := tcpKey(1, 2)
				k.Set(flow.PktLen, uint64(n))
				res := tr.Translate(&k, Options{})
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				acts := flow.DPActionsString(res.Actions)
				want := "3"
				if n > tt.limit {
					want = "2"
				}
				if acts[len(acts)-1:] != want {
					t.Fatalf("length %d: %s, want output %s", n, acts, want)
				}
				m := flow.Match{Key: res.Key, Mask: res.Mask}
				if prev, ok := megaflows[m]; ok && prev != acts {
					t.Fatalf("length %d: megaflow %s gives %s and %s", n, m.String(), prev, acts)
				}
				megaflows[m] = acts
			}
			// Soundness over every length: a megaflow covering n gives n's
			// result.
			for m, acts := range megaflows {
				for n := int64(0); n <= 3000; n++ {
					k := tcpKey(1, 2)
					k.Set(flow.PktLen, uint64(n))
					if m.Matches(&k) && (n > tt.limit) != (acts[len(acts)-1:] == "2") {
						t.Fatalf("megaflow %s covers length %d but answers %s", m.String(), n, acts)
					}
				}
			}
			if len(megaflows) > 33 {
				t.Errorf("%d megaflows for one threshold", len(megaflows))
			}
			t.Logf("%d megaflows", len(megaflows))
		})
	}
}
