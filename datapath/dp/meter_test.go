package dp

import (
	"testing"
	"time"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
)

func TestTokenBucket(t *testing.T) {
	const frame = 1000 // bytes: 8 kilobits
	tests := []struct {
		name         string
		rate, burst  uint32
		at           []time.Duration // a burst of packets at each time
		perBurst     int             // packets sent at each time
		wantAdmitted []int
	}{
		// 100 kbit bucket: 12 packets of 8 kbit, then nothing until
		// tokens come back: 8 ms at 1 Mbit/s is one packet, a second
		// refills the bucket but no further than its size.
		{"burst then refill", 1000, 100, []time.Duration{0, 0, 8 * time.Millisecond, time.Second + 8*time.Millisecond}, 20, []int{12, 0, 1, 12}},
		// No burst: one second of the rate (64 kbit: 8 packets).
		{"default burst", 64, 0, []time.Duration{0, 500 * time.Millisecond, 2 * time.Hour}, 20, []int{8, 4, 8}},
		// Time going backwards adds nothing.
		{"clock backwards", 1000, 16, []time.Duration{time.Second, 0}, 5, []int{2, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTokenBucket(tt.rate, tt.burst, 0)
			for i, now := range tt.at {
				n := 0
				for range tt.perBurst {
					if b.admit(frame, now) {
						n++
					}
				}
				if n != tt.wantAdmitted[i] {
					t.Errorf("at %v admitted %d of %d, want %d", now, n, tt.perBurst, tt.wantAdmitted[i])
				}
			}
		})
	}
}

// TestMeterAction runs a meter(rate=800,burst=80) flow with an injected
// clock: at 100-byte frames (0.8 kbit), 100 pass at once, and 1000 a second
// afterwards (the rate), the rest are dropped; a flow with another meter
// is not limited by the first one's.
func TestMeterAction(t *testing.T) {
	d, err := New(Config{Flows: &fakeFlows{translate: func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		m.SetField(flow.TPSrc)
		rate := uint32(800)
		if k.Get(flow.TPSrc) == 2 {
			rate = 8000
		}
		return m, []flow.DPAction{flow.DPMeter{RateKbps: rate, BurstKbits: rate / 10}, flow.DPOutput{Port: 2}}
	}}})
	if err != nil {
		t.Fatal(err)
	}
	out := &recordPort{}
	if err := d.AddPort(2, out); err != nil {
		t.Fatal(err)
	}
	w := newWorker(d, &portEntry{no: 1, port: &nullPort{}})
	p := port.NewPacket(port.MaxFrame)
	send := func(sport uint16, n int, now time.Duration) int {
		before := len(out.frames)
		for range n {
			p.SetFrame(udpFrame(mac2, mac1, sport, 9, 58)) // 100 bytes
			w.receive(p, now)
			w.flush()
		}
		return len(out.frames) - before
	}
	if got := send(1, 150, 0); got != 100 {
		t.Errorf("burst: %d of 150 passed, want 100", got)
	}
	if got := send(2, 150, 0); got != 150 {
		t.Errorf("other meter: %d of 150 passed, want 150", got)
	}
	// Over the next second, 2000 packets (1.6 Mbit/s offered at 0.8).
	passed := 0
	for i := 1; i <= 100; i++ {
		passed += send(1, 20, time.Duration(i)*10*time.Millisecond)
	}
	if passed != 1000 {
		t.Errorf("a second at twice the rate: %d of 2000 passed, want 1000", passed)
	}
	if s := w.st.stats(); s.MeterDrops != 50+1000 {
		t.Errorf("MeterDrops %d, want %d", s.MeterDrops, 50+1000)
	}
}
