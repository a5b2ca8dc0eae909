package dp

import (
	"testing"
	"time"

	"github.com/govn/govn/datapath/megaflow"
	"github.com/govn/govn/datapath/port"
)

// TestFlowLimit: with a limit of N, N+K misses to distinct destinations,
// spread over two receive queues, install N megaflows between them; every
// packet is still forwarded and FlowLimitHits counts K. Lowering the limit
// evicts down to it, the least recently hit megaflows of either queue
// first.
func TestFlowLimit(t *testing.T) {
	for _, tc := range []struct{ limit, extra int }{{10, 0}, {10, 7}, {1, 30}, {64, 200}} {
		table := map[uint64]uint32{}
		for i := range tc.limit + tc.extra {
			table[0x020000001000+uint64(i)] = 3
		}
		flows := &fakeFlows{translate: macTable(table)}
		d, err := New(Config{Flows: flows, FlowLimit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		sink := &nullPort{}
		if err := d.AddPort(3, sink); err != nil {
			t.Fatal(err)
		}
		var ws []*worker
		for _, no := range []uint32{1, 2} {
			if err := d.AddPort(no, &nullPort{}); err != nil {
				t.Fatal(err)
			}
			ws = append(ws, (*d.ports.Load())[no].w)
		}
		p := port.NewPacket(port.MaxFrame)
		send := func(i int, now time.Duration) {
			w := ws[i%2]
			p.SetFrame(udpFrame(0x020000001000+uint64(i), mac1, 1, 2, 18))
			w.receive(p, now)
			w.flush()
		}
		n := tc.limit + tc.extra
		for i := range n {
			send(i, time.Duration(i)*time.Millisecond)
		}
		var st = func() (mf int, inst, hits, ev uint64) {
			for _, w := range ws {
				s := w.st.stats()
				mf += w.cache.Len()
				inst += s.Installed
				hits += s.FlowLimitHits
				ev += s.Evicted
			}
			return
		}
		mf, inst, hits, _ := st()
		if sink.sent != n {
			t.Errorf("limit %d, %d misses: %d forwarded, want all", tc.limit, n, sink.sent)
		}
		if mf != tc.limit || inst != uint64(tc.limit) || hits != uint64(tc.extra) || d.limit.Len() != tc.limit {
			t.Errorf("limit %d, %d misses: %d megaflows (limit counts %d), %d installed, %d flow-limit hits; want %d, %d, %d",
				tc.limit, n, mf, d.limit.Len(), inst, hits, tc.limit, tc.limit, tc.extra)
		}
		// Again: the cached ones hit, the rest still go to the slow path
		// and are forwarded.
		for i := range n {
			send(i, time.Duration(n+i)*time.Millisecond)
		}
		if mf, _, hits, _ = st(); sink.sent != 2*n || mf != tc.limit || hits != uint64(2*tc.extra) {
			t.Errorf("limit %d, second round: %d forwarded (want %d), %d megaflows, %d flow-limit hits (want %d)",
				tc.limit, sink.sent, 2*n, mf, hits, 2*tc.extra)
		}
		if tc.limit < 2 {
			continue
		}
		// Hit the first half once more, late: the second half is idlest.
		half := tc.limit / 2
		for i := range half {
			send(i, time.Hour)
		}
		evicted, err := d.SetFlowLimit(half)
		if err != nil {
			t.Fatal(err)
		}
		mf, _, _, ev := st()
		if evicted != tc.limit-half || ev != uint64(evicted) || mf != half || d.limit.Len() != half {
			t.Errorf("limit %d lowered to %d: evicted %d (counted %d), %d megaflows left (limit counts %d); want %d evicted",
				tc.limit, half, evicted, ev, mf, d.limit.Len(), tc.limit-half)
		}
		for _, w := range ws {
			w.cache.Flows(func(f *megaflowFlow) {
				if f.Used != time.Hour {
					t.Errorf("limit lowered to %d: kept a megaflow last hit at %v, not one of the latest", half, f.Used)
				}
			})
		}
		if d.Stats().FlowLimit != half {
			t.Errorf("Stats.FlowLimit %d, want %d", d.Stats().FlowLimit, half)
		}
	}
}

func TestSetFlowLimitNegative(t *testing.T) {
	d, err := New(Config{Flows: &fakeFlows{translate: macTable(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if d.FlowLimit() != 200000 {
		t.Errorf("default flow limit %d, want 200000", d.FlowLimit())
	}
	if _, err := d.SetFlowLimit(-1); err == nil {
		t.Error("SetFlowLimit(-1) succeeded")
	}
}

// megaflowFlow shortens the megaflow type for the test above.
type megaflowFlow = megaflow.Flow
