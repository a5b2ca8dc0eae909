package storage

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestFlushNow checks that a record submitted with SubmitDeferred is
// durable once FlushNow returns when nothing else writes, and that
// deferred and ordinary submissions from many goroutines at once all
// become durable, in submission order, with none left behind.
func TestFlushNow(t *testing.T) {
	path := create(t)
	l, _ := openFast(t, path)
	recs := testRecords(400)

	c, err := l.SubmitDeferred(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	l.FlushNow()
	select {
	case <-c.Done():
	default:
		t.Fatal("FlushNow on an idle log returned before the record was written")
	}

	// Submissions are serialized, as a server's commit lock does, and
	// waited for outside it.
	var order sync.Mutex
	var wg sync.WaitGroup
	next := 1
	for g := range 8 {
		wg.Go(func() {
			for {
				order.Lock()
				if next >= len(recs) {
					order.Unlock()
					return
				}
				rec := recs[next]
				next++
				deferred := g%2 == 0
				var c *Commit
				var err error
				if deferred {
					c, err = l.SubmitDeferred(rec)
				} else {
					c, err = l.Submit(rec)
				}
				order.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				if deferred {
					l.FlushNow()
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err = c.Wait(ctx)
				cancel()
				if err != nil {
					t.Errorf("a record never became durable: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, got := openFast(t, path)
	defer l2.Close()
	if len(got) != len(recs) {
		t.Fatalf("file holds %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if got[i].Comment != recs[i].Comment || len(got[i].Tables["T"]) != len(recs[i].Tables["T"]) {
			t.Fatalf("record %d differs: %+v vs %+v", i, got[i], recs[i])
		}
		for u := range recs[i].Tables["T"] {
			if _, ok := got[i].Tables["T"][u]; !ok {
				t.Fatalf("record %d lacks row %s: out of order", i, u)
			}
		}
	}
}
