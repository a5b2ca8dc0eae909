package client

import (
	"context"
	"encoding/json"
	"net"
	"time"
)

// wire is the session's transport. It records when anything was last
// received, for the inactivity probe.
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

// transact sends a transact request and waits for its reply. When ctx
// ends first, it returns ctx's error, and the session's connection sends
// the RFC 7047 "cancel" notification for the request (jsonrpc's
// CancelAbandoned), so that a server holding the transaction (blocked in a
// "wait") drops it instead of committing it later.
func (s *session) transact(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	raw, err := s.conn.CallRaw(ctx, "transact", params)
	if err != nil && ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return raw, err
}
