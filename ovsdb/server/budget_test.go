package server

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
)

func TestByteBudget(t *testing.T) {
	b := newByteBudget(10)
	ctx := context.Background()
	if !b.acquire(ctx, 6) {
		t.Fatal("first acquire failed")
	}
	got := make(chan int, 3)
	go func() { b.acquire(ctx, 5); got <- 5 }()
	time.Sleep(20 * time.Millisecond)
	go func() { b.acquire(ctx, 1); got <- 1 }() // fits, but waits behind the 5
	select {
	case n := <-got:
		t.Fatalf("acquire of %d granted while 6 of 10 bytes were taken and a 5 waited first", n)
	case <-time.After(50 * time.Millisecond):
	}
	b.release(6)
	for range 2 {
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("release did not grant both waiters")
		}
	}
	// A waiter whose context ends leaves; the bytes stay with the others.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan bool)
	go func() { done <- b.acquire(cctx, 10) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if <-done {
		t.Fatal("acquire succeeded after its context ended")
	}
	b.release(5)
	b.release(1)
	if !b.acquire(ctx, 10) {
		t.Fatal("the whole budget is not free after every release")
	}
}

// TestLargeRequestsTakeTurns sends large requests from several clients at
// once to a server whose budget holds one at a time: each is answered.
func TestLargeRequestsTakeTurns(t *testing.T) {
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1, LargeRequestBudget: 3 << 20})
	if err := srv.AddDatabase(ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(testSchema))), nil); err != nil {
		t.Fatal(err)
	}
	sock := serve(t, srv, nil)
	ctx := t.Context()
	params := []byte(`["`)
	params = append(params, bytes.Repeat([]byte("x"), 2<<20)...)
	params = append(params, `"]`...)
	var wg sync.WaitGroup
	for range 4 {
		c := dial(t, sock)
		defer c.conn.Close()
		wg.Go(func() {
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
			defer ccancel()
			raw, err := c.conn.CallRaw(cctx, "echo", json.RawMessage(params))
			if err != nil || len(raw) != len(params) {
				t.Errorf("echo of 2 MiB: %d bytes back, %v", len(raw), err)
			}
		})
	}
	wg.Wait()
}
