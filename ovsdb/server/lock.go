package server

import (
	"encoding/json"
	"sync"

	"github.com/govn/govn/ovsdb"
)

// lockTable implements OVSDB's advisory locks (RFC 7047 §4.1.8-4.1.11):
// each name has at most one owner and a queue of sessions waiting for it.
type lockTable struct {
	mu      sync.Mutex
	owner   map[string]*session
	waiters map[string][]*session
}

func (t *lockTable) owns(s *session, name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.owner[name] == s
}

func (s *session) lockMethod(id json.RawMessage, method string, params []any) {
	if len(params) != 1 {
		s.replyError(id, errorJSON(ovsdb.ErrSyntax, "%s takes one lock name", method))
		return
	}
	name, ok := params[0].(string)
	if !ok || name == "" {
		s.replyError(id, errorJSON(ovsdb.ErrSyntax, "lock name must be a non-empty string"))
		return
	}
	t := &s.srv.locks
	t.mu.Lock()
	defer t.mu.Unlock()
	s.mu.Lock()
	requested := s.locks[name]
	s.mu.Unlock()
	switch method {
	case "lock", "steal":
		if requested && method == "lock" {
			s.replyError(id, errorJSON(ovsdb.ErrSyntax, "lock %q is already requested by this session", name))
			return
		}
		s.mu.Lock()
		s.locks[name] = true
		s.mu.Unlock()
		owner := t.owner[name]
		switch {
		case owner == s:
		case owner == nil:
			t.owner[name] = s
		case method == "steal":
			t.owner[name] = s
			t.removeWaiter(name, s)
			// The loser keeps no claim: it must ask again.
			owner.mu.Lock()
			delete(owner.locks, name)
			owner.mu.Unlock()
			owner.conn.Notify("stolen", []string{name})
		default:
			t.waiters[name] = append(t.waiters[name], s)
		}
		s.conn.Reply(id, map[string]bool{"locked": t.owner[name] == s})
	case "unlock":
		if !requested {
			s.replyError(id, errorJSON(ovsdb.ErrSyntax, "unlock of lock %q that this session did not request", name))
			return
		}
		t.releaseLocked(s, name)
		s.conn.Reply(id, json.RawMessage("{}"))
	}
}

func (t *lockTable) removeWaiter(name string, s *session) {
	w := t.waiters[name]
	for i, x := range w {
		if x == s {
			w = append(w[:i], w[i+1:]...)
			break
		}
	}
	if len(w) == 0 {
		delete(t.waiters, name)
	} else {
		t.waiters[name] = w
	}
}

// releaseLocked gives up s's claim on name and hands the lock to the next
// waiter. Callers hold t.mu.
func (t *lockTable) releaseLocked(s *session, name string) {
	s.mu.Lock()
	delete(s.locks, name)
	s.mu.Unlock()
	t.removeWaiter(name, s)
	if t.owner[name] != s {
		return
	}
	delete(t.owner, name)
	if w := t.waiters[name]; len(w) > 0 {
		next := w[0]
		t.removeWaiter(name, next)
		t.owner[name] = next
		next.conn.Notify("locked", []string{name})
	}
}

func (t *lockTable) releaseAll(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.mu.Lock()
	var names []string
	for n := range s.locks {
		names = append(names, n)
	}
	s.mu.Unlock()
	for _, n := range names {
		t.releaseLocked(s, n)
	}
}
