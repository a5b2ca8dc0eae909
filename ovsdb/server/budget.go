package server

import (
	"context"
	"sync"
)

// byteBudget bounds the bytes of large requests that sessions decode and
// execute at once. A request's decoded form may take several times its
// size (ovsdb.DecodeJSON allows 7 bytes per byte, plus 1 MiB), so without
// a bound, many clients sending requests of tens of megabytes at
// the same time could make the server take gigabytes and be killed, losing
// every client. Requests wait their turn instead, first come first served.
type byteBudget struct {
	capacity int64
	mu       sync.Mutex
	free     int64
	waiters  []*budgetWaiter // in arrival order
}

// largeRequest is the size from which a request's params take from the
// server's byteBudget: smaller ones cost too little to matter.
const largeRequest = 1 << 20

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when the bytes are granted
}

func newByteBudget(capacity int64) *byteBudget {
	return &byteBudget{capacity: capacity, free: capacity}
}

// acquire waits until n bytes are free and takes them, or returns false
// if ctx ends first. n must not exceed the capacity.
func (b *byteBudget) acquire(ctx context.Context, n int64) bool {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.free >= n {
		b.free -= n
		b.mu.Unlock()
		return true
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready:
			// Granted meanwhile: give it back.
			b.free += n
			b.grantLocked()
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			// The head may have changed: the next one may fit.
			b.grantLocked()
		}
		return false
	}
}

// release returns n bytes taken by acquire.
func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	b.free += n
	b.grantLocked()
	b.mu.Unlock()
}

// grantLocked hands free bytes to waiters in order, stopping at the first
// that does not fit, so that a large request is not passed over forever.
func (b *byteBudget) grantLocked() {
	for len(b.waiters) > 0 && b.waiters[0].n <= b.free {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.free -= w.n
		close(w.ready)
	}
}
