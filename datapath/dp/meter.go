package dp

import (
	"math/bits"
	"sync"
	"time"

	"github.com/govn/govn/datapath/flow"
)

// A meter action (flow.DPMeter) names its meter by its rate and burst:
// every flow with the same pair shares one token bucket, over all ports,
// as OVN shares the meter of set_meter actions with the same arguments.
// Packets that find too few tokens are dropped (the only band OVN uses).

// tokenBucket is one meter: a bucket of bits, refilled at the rate up to
// its size. It takes the time from the caller.
type tokenBucket struct {
	mu     sync.Mutex
	rate   uint64 // bits per second
	size   uint64 // bits
	tokens uint64 // bits, at most size
	last   time.Duration
}

// newTokenBucket returns a full bucket for rate kbps and burst kilobits
// (0: one second's worth of the rate, as OVS takes a missing burst).
func newTokenBucket(rateKbps, burstKbits uint32, now time.Duration) *tokenBucket {
	if burstKbits == 0 {
		burstKbits = rateKbps
	}
	size := uint64(burstKbits) * 1000
	return &tokenBucket{rate: uint64(rateKbps) * 1000, size: size, tokens: size, last: now}
}

// admit takes a packet of n bytes at now: true if the bucket had the
// tokens for it (they are spent), false if the packet is over the rate.
func (b *tokenBucket) admit(n int, now time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if elapsed := now - b.last; elapsed > 0 {
		b.last = now
		if elapsed >= time.Hour { // refills any bucket; keeps the product in range
			b.tokens = b.size
		} else {
			hi, lo := bits.Mul64(uint64(elapsed), b.rate) // < 2^42 * 2^42
			add, _ := bits.Div64(hi, lo, uint64(time.Second))
			b.tokens = min(b.size, b.tokens+add)
		}
	}
	need := uint64(n) * 8
	if b.tokens < need {
		return false
	}
	b.tokens -= need
	return true
}

// meters is the datapath's meter table.
type meters struct {
	mu sync.Mutex
	m  map[flow.DPMeter]*tokenBucket
}

// get returns the meter for a, creating it full at now.
func (t *meters) get(a flow.DPMeter, now time.Duration) *tokenBucket {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.m[a]
	if b == nil {
		if t.m == nil {
			t.m = make(map[flow.DPMeter]*tokenBucket)
		}
		b = newTokenBucket(a.RateKbps, a.BurstKbits, now)
		t.m[a] = b
	}
	return b
}

// meter runs packet p of n bytes through meter a; false means drop it.
// The worker remembers the meters it has used, so the shared table's lock
// is taken only on a worker's first use of a meter.
func (w *worker) meter(a flow.DPMeter, n int, now time.Duration) bool {
	b := w.meters[a]
	if b == nil {
		b = w.d.meters.get(a, now)
		if w.meters == nil {
			w.meters = make(map[flow.DPMeter]*tokenBucket)
		}
		w.meters[a] = b
	}
	if !b.admit(n, now) {
		w.st.meterDrops.Add(1)
		return false
	}
	return true
}
