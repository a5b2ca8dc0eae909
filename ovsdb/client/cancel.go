package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"time"
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
	if ch := w.s.sentTransact.Load(); ch != nil {
		if id, ok := transactRequestID(p); ok && w.s.sentTransact.CompareAndSwap(ch, nil) {
			*ch <- id // buffered
		}
	}
	return w.Conn.Write(p)
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
// ends first, it sends the RFC 7047 "cancel" notification for the request
// (so that a server holding the transaction, blocked in a "wait", drops it
// instead of committing it later) and returns ctx's error.
func (s *session) transact(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	if ctx.Done() == nil {
		return s.conn.CallRaw(ctx, "transact", params)
	}
	type reply struct {
		raw json.RawMessage
		err error
	}
	replied := make(chan reply, 1)
	sent := make(chan json.RawMessage, 1)
	s.issueMu.Lock()
	s.sentTransact.Store(&sent)
	go func() {
		// The call lasts as long as the connection, not ctx, so that the
		// server's reply to a cancelled request still has a taker.
		raw, err := s.conn.CallRaw(s.conn.Context(), "transact", params)
		replied <- reply{raw, err}
	}()
	// issued releases the next request once this one's id is known (or
	// it never went out), then cancels it if asked to.
	issued := func(id json.RawMessage, cancel bool) {
		s.sentTransact.CompareAndSwap(&sent, nil)
		s.issueMu.Unlock()
		if cancel && id != nil {
			_ = s.conn.Notify("cancel", []json.RawMessage{id})
		}
	}
	var id json.RawMessage
	select {
	case id = <-sent:
		issued(id, false)
	case r := <-replied: // failed before it was written
		issued(nil, false)
		return r.raw, r.err
	case <-ctx.Done():
		go func() {
			select {
			case id := <-sent:
				issued(id, true)
			case <-replied:
				issued(nil, false)
			}
		}()
		return nil, context.Cause(ctx)
	}
	select {
	case r := <-replied:
		return r.raw, r.err
	case <-ctx.Done():
		_ = s.conn.Notify("cancel", []json.RawMessage{id})
		return nil, context.Cause(ctx)
	}
}
