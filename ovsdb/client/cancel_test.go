package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
)

// insertGate inserts the Switch row "gate", whose counter blockedTxn
// waits for, and returns its UUID.
func insertGate(t *testing.T, c *Client) ovsdb.UUID {
	t.Helper()
	txn := c.Txn()
	gate := txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("gate")})
	res, err := txn.Commit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res.UUID(gate)
}

// blockedTxn returns a transaction that waits (for a minute) until the
// gate's counter is 1, then inserts the Switch "too late".
func blockedTxn(c *Client, gateID ovsdb.UUID) *Txn {
	txn := c.Txn()
	timeout := 60000
	txn.Add(Operation{Op: "wait", Table: "Switch", Where: byUUID(gateID), Columns: []string{"counter"},
		Until: "==", Rows: []map[string]ovsdb.Datum{{"counter": integer(1)}}, Timeout: &timeout})
	txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("too late")})
	return txn
}

// openGate sets the gate's counter to 1, which would let any transaction
// still blocked in blockedTxn commit, and then inserts the Switch "marker":
// once that is committed, so is anything the gate let through.
func openGate(t *testing.T, c *Client, gateID ovsdb.UUID) {
	t.Helper()
	txn := c.Txn()
	txn.Update("Switch", gateID, map[string]ovsdb.Datum{"counter": integer(1)})
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	txn = c.Txn()
	txn.Insert("Switch", map[string]ovsdb.Datum{"name": str("marker")})
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestCancelBlockedTransaction: a transaction blocked in a "wait" whose
// context ends returns the context's error, and the server, told by a
// "cancel", drops it instead of committing it when the wait is satisfied.
// The context ends at once (usually before the request is written: the
// client sends the cancel once it is) or after a while (when the server
// most likely holds the transaction already); the outcome must not differ.
func TestCancelBlockedTransaction(t *testing.T) {
	for _, delay := range []time.Duration{0, 50 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			eachServer(t, testSchema, func(t *testing.T, srv testServer) { testCancelBlockedTransaction(t, srv, delay) })
		})
	}
}

func testCancelBlockedTransaction(t *testing.T, srv testServer, delay time.Duration) {
	c := connect(t, srv.Socket(), Options{})
	gateID := insertGate(t, c)
	blocked := blockedTxn(c, gateID)
	ctx, cancel := context.WithCancel(t.Context())
	result := make(chan error, 1)
	go func() {
		_, err := blocked.Commit(ctx)
		result <- err
	}()
	time.Sleep(delay)
	cancel()
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled commit returned %v, want context.Canceled", err)
	}

	openGate(t, c, gateID)
	for _, r := range c.Cache().Rows("Switch") {
		if name, _ := c.Cache().Get("Switch", r.UUID, "name"); name.Equal(str("too late")) {
			t.Fatal("the cancelled transaction was committed")
		}
	}
}

// TestCancelAmongConcurrentTransactions cancels blocked transactions while
// other goroutines of the same client commit: every cancel must reach the
// blocked transaction it was meant for, never a neighbour.
func TestCancelAmongConcurrentTransactions(t *testing.T) {
	eachServer(t, testSchema, func(t *testing.T, srv testServer) {
		c := connect(t, srv.Socket(), Options{})
		gateID := insertGate(t, c)
		const writers, each, blocked = 4, 25, 10
		errs := make(chan error, writers*each+blocked)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					txn := c.Txn()
					txn.Insert("Switch", map[string]ovsdb.Datum{"name": str(fmt.Sprintf("w%d-%d", w, i))})
					// A context that never ends: no cancel of its own.
					if _, err := txn.Commit(context.Background()); err != nil {
						errs <- fmt.Errorf("writer %d, insert %d: %w", w, i, err)
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range blocked {
				txn := blockedTxn(c, gateID)
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
				if _, err := txn.Commit(ctx); !errors.Is(err, context.DeadlineExceeded) {
					errs <- fmt.Errorf("blocked transaction returned %v, want the deadline", err)
				}
				cancel()
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		openGate(t, c, gateID)
		if n := c.Cache().Len("Switch"); n != writers*each+2 {
			t.Errorf("%d switches, want %d: the writers', the gate and the marker", n, writers*each+2)
		}
	})
}
