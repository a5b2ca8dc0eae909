package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
)

// encoded is the wire form of m as jsonrpc writes it.
func encoded(t testing.TB, m *jsonrpc.Message) []byte {
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTransactRequestID pins how the client learns a transact request's
// id from jsonrpc's encoding of it.
func TestTransactRequestID(t *testing.T) {
	request := func(id, method, params string) []byte {
		return encoded(t, &jsonrpc.Message{ID: json.RawMessage(id), Method: method, Params: json.RawMessage(params)})
	}
	transact := request("17", "transact", `["Test",{"op":"comment","comment":"x"}]`)
	for _, tt := range []struct {
		name   string
		stream [][]byte
		want   string // "" for none
	}{
		{"alone", [][]byte{transact}, "17"},
		{"after other messages", [][]byte{request("3", "echo", `[]`), request("4", "monitor_cond_change", `["m","m",{}]`), transact}, "17"},
		{"the first of two", [][]byte{transact, request("18", "transact", `["Test"]`)}, "17"},
		{"other methods only", [][]byte{request("5", "get_schema", `["Test"]`), request("6", "transactions", `[]`)}, ""},
		{"method name inside params", [][]byte{request("7", "echo", `[",\"method\":\"transact\",\"params\":"]`)}, ""},
		{"notification", [][]byte{encoded(t, &jsonrpc.Message{Method: "transact", Params: json.RawMessage(`[]`)})}, ""},
		{"nothing", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id, ok := transactRequestID(bytes.Join(tt.stream, nil))
			if string(id) != tt.want || ok != (tt.want != "") {
				t.Errorf("got %q, %v; want %q", id, ok, tt.want)
			}
		})
	}
}

func FuzzTransactRequestID(f *testing.F) {
	f.Add([]byte(`{"id":17,"method":"transact","params":["Test"]}`))
	f.Add([]byte(`{"id":,"method":"transact","params":`))
	f.Fuzz(func(t *testing.T, p []byte) {
		id, ok := transactRequestID(p)
		if !ok {
			return
		}
		digits := len(id) > 0 && strings.Trim(string(id), "0123456789") == ""
		if !digits || !bytes.Contains(p, append(append([]byte(`{"id":`), id...), transactHeader...)) {
			t.Errorf("id %q from %q", id, p)
		}
	})
}

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
