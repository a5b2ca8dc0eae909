package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/govn/govn/ovsdb/jsonrpc"
)

// wire is the session's transport. It records when anything was last
// received (for the inactivity probe) and reports the JSON-RPC id of the
// transact request being issued (for "cancel").
//
// The id is learnt from the bytes written because jsonrpc.Conn.CallRaw
// chooses it and does not say which it chose; TestTransactRequestID pins
// the encoding this relies on.
type wire struct {
	net.Conn
	s *session
}

func (w *wire) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if n > 0 {
		w.s.lastRecv.Store(time.Now().UnixNano())
	}
	return n, err
}

func (w *wire) Write(p []byte) (int, error) {
	if t := w.s.issued.Load(); t != nil {
		if id, ok := transactRequestID(p); ok && w.s.issued.CompareAndSwap(t, nil) {
			t.written(w.s.conn, id)
			<-w.s.issuing
		}
	}
	return w.Conn.Write(p)
}

// issuedTransact is a transact request being issued. Its
// "cancel" is sent by whichever of wire (on writing the request) and
// session.transact (on the context's end) comes second, and so always
// after the request and before anything issued after either.
type issuedTransact struct {
	mu        sync.Mutex
	id        json.RawMessage // once written
	cancelled bool
}

func (t *issuedTransact) written(conn *jsonrpc.Conn, id json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.id = id
	if t.cancelled {
		_ = conn.Notify("cancel", []json.RawMessage{id})
	}
}

func (t *issuedTransact) cancel(conn *jsonrpc.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cancelled = true
	if t.id != nil {
		_ = conn.Notify("cancel", []json.RawMessage{t.id})
	}
}

// transactHeader is what follows the id of a transact request as
// jsonrpc encodes it: {"id":ID,"method":"transact","params":[...]}.
const transactHeader = `,"method":"transact","params":`

// transactRequestID finds the first transact request in p, a run of
// encoded messages, and returns its id.
func transactRequestID(p []byte) (json.RawMessage, bool) {
	for {
		i := bytes.Index(p, []byte(transactHeader))
		if i < 0 {
			return nil, false
		}
		j := i
		for j > 0 && '0' <= p[j-1] && p[j-1] <= '9' {
			j--
		}
		if j < i && bytes.HasSuffix(p[:j], []byte(`{"id":`)) {
			return json.RawMessage(bytes.Clone(p[j:i])), true
		}
		p = p[i+len(transactHeader):]
	}
}

// transact sends a transact request and waits for its reply. When ctx
// ends first, it returns ctx's error and sends the RFC 7047 "cancel"
// notification for the request, so that a server holding the transaction
// (blocked in a "wait") drops it instead of committing it later. (The
// server's reply to the cancelled request then finds no caller, which
// jsonrpc logs.)
//
// To know the request's id, transact requests are issued one at a time:
// each holds s.issuing from before it is queued until wire has seen it
// written (see BenchmarkTransact).
func (s *session) transact(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	select {
	case s.issuing <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-s.conn.Done():
		return nil, fmt.Errorf("transact: %w", jsonrpc.ErrClosed)
	}
	t := &issuedTransact{}
	s.issued.Store(t)
	raw, err := s.conn.CallRaw(ctx, "transact", params)
	switch {
	case err != nil && ctx.Err() != nil:
		t.cancel(s.conn)
		return nil, context.Cause(ctx)
	case err != nil && s.issued.CompareAndSwap(t, nil):
		<-s.issuing // the connection failed before the request went out
	}
	return raw, err
}
