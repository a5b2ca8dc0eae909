package jsonrpc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestInlineWritesKeepOrder sends from many goroutines through a Conn with
// inline writes to a peer that reads only after a pause, so that the
// socket fills and writes are cut short: every message must arrive whole,
// and each goroutine's in the order it sent them.
func TestInlineWritesKeepOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inline bool
		queued bool // QueueNotification + Flush instead of Notify
	}{
		{"writer goroutine", false, false},
		{"inline", true, false},
		{"inline, queued then flushed", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := socketPair(t)
			c := NewConn(t.Context(), a, Options{InlineWrites: tc.inline})
			defer c.Close()
			const senders, each = 4, 300
			pad := strings.Repeat("x", 2000) // fills the socket buffer soon
			var wg sync.WaitGroup
			for g := range senders {
				wg.Go(func() {
					for i := range each {
						params := fmt.Sprintf(`[%d,%d,"%s"]`, g, i, pad)
						var err error
						if tc.queued {
							err = c.QueueNotification("n", []byte(params[:1]), []byte(params[1:]))
							c.Flush()
						} else {
							err = c.Notify("n", json.RawMessage(params))
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			time.Sleep(50 * time.Millisecond) // let the socket fill up
			r := NewReader(b, 0)
			next := make([]int, senders)
			for range senders * each {
				m, err := r.ReadMessage()
				if err != nil {
					t.Fatal(err)
				}
				var p []any
				if err := json.Unmarshal(m.Params, &p); err != nil || len(p) != 3 || m.Method != "n" {
					t.Fatalf("bad message %.100s: %v", m.Params, err)
				}
				g, i := int(p[0].(float64)), int(p[1].(float64))
				if i != next[g] {
					t.Fatalf("sender %d: got message %d, want %d", g, i, next[g])
				}
				next[g]++
			}
			wg.Wait()
		})
	}
}

// TestInlineCloseFlushes checks that Close still sends what inline writes
// left queued.
func TestInlineCloseFlushes(t *testing.T) {
	a, b := socketPair(t)
	c := NewConn(t.Context(), a, Options{InlineWrites: true})
	pad := strings.Repeat("y", 4000)
	const n = 200
	for i := range n {
		if err := c.Notify("n", json.RawMessage(fmt.Sprintf(`[%d,"%s"]`, i, pad))); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		r := NewReader(b, 0)
		for i := range n {
			m, err := r.ReadMessage()
			if err != nil {
				done <- fmt.Errorf("message %d: %w", i, err)
				return
			}
			if !strings.HasPrefix(string(m.Params), fmt.Sprintf("[%d,", i)) {
				done <- fmt.Errorf("message %d: %.20s", i, m.Params)
				return
			}
		}
		_, err := r.Next()
		if err != io.EOF {
			done <- fmt.Errorf("after the messages: %v, want EOF", err)
			return
		}
		done <- nil
	}()
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestQueueNotificationWaitsForFlush checks that a queued notification is
// sent by Flush and not before.
func TestQueueNotificationWaitsForFlush(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprint("inline=", inline), func(t *testing.T) {
			got := make(chan *Message, 2)
			a, b := socketPair(t)
			server := NewConn(t.Context(), a, Options{InlineWrites: inline})
			client := NewConn(t.Context(), b, Options{Handler: func(_ context.Context, _ *Conn, m *Message) { got <- m }})
			defer client.Close()
			defer server.Close()
			if err := server.QueueNotification("update2", []byte(`["mon",`), []byte(`{}]`)); err != nil {
				t.Fatal(err)
			}
			select {
			case m := <-got:
				t.Fatalf("%s arrived before Flush", m.Method)
			case <-time.After(50 * time.Millisecond):
			}
			server.Flush()
			select {
			case m := <-got:
				if m.Method != "update2" || string(m.Params) != `["mon",{}]` || m.Kind() != KindNotification {
					t.Fatalf("got %s %s", m.Method, m.Params)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("nothing arrived after Flush")
			}
		})
	}
}
