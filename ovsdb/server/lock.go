package server

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/govn/govn/ovsdb"
)

// lockTable implements OVSDB's advisory locks (RFC 7047 §4.1.8-4.1.11)
// as ovsdb-server does: each name has a queue of requests whose head owns
// the lock. "lock" joins at the back, "steal" at the front; the owner it
// displaces is told "stolen" and keeps its place, second, so it gets the
// lock back when the thief unlocks, unless it had stolen the lock itself,
// in which case it leaves the queue (its request still counts as made
// until it unlocks). Whenever a request leaves a queue, the head is told
// "locked", even when it owned the lock before.
type lockTable struct {
	mu     sync.Mutex
	queues map[string][]*lockRequest
}

// lockRequest is one session's lock or steal request for a lock.
type lockRequest struct {
	sess  *session
	steal bool
}

func (t *lockTable) owns(s *session, name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queues[name]
	return len(q) > 0 && q[0].sess == s
}

func (s *session) lockMethod(id json.RawMessage, method string, params []any) {
	var name string
	if len(params) == 1 {
		name, _ = params[0].(string)
	}
	if !ovsdb.IsIdentifier(name) {
		s.replyError(id, errorAtJSON(params, ovsdb.ErrSyntax, "%s request params must be <id>", method))
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
		if requested {
			s.replyError(id, errorAtJSON(params, ovsdb.ErrSyntax, "must issue \"unlock\" before new \"%s\"", method))
			return
		}
		s.mu.Lock()
		s.locks[name] = true
		s.mu.Unlock()
		if t.queues == nil {
			t.queues = map[string][]*lockRequest{}
		}
		q := t.queues[name]
		req := &lockRequest{sess: s, steal: method == "steal"}
		if !req.steal {
			t.queues[name] = append(q, req)
		} else {
			t.queues[name] = append([]*lockRequest{req}, q...)
			if len(q) > 0 {
				victim := q[0]
				if victim.steal {
					t.removeLocked(name, victim.sess)
				}
				victim.sess.conn.Notify("stolen", []string{name})
			}
		}
		s.conn.Reply(id, map[string]bool{"locked": t.queues[name][0].sess == s})
	case "unlock":
		if !requested {
			s.replyError(id, errorAtJSON(params, ovsdb.ErrSyntax, "unlock: \"unlock\" without \"lock\" or \"steal\""))
			return
		}
		t.releaseLocked(s, name)
		s.conn.Reply(id, json.RawMessage("{}"))
	}
}

// removeLocked takes s's request out of the queue of name and reports
// whether it was there. Callers hold t.mu.
func (t *lockTable) removeLocked(name string, s *session) bool {
	q := t.queues[name]
	for i, r := range q {
		if r.sess == s {
			q = append(q[:i:i], q[i+1:]...)
			if len(q) == 0 {
				delete(t.queues, name)
			} else {
				t.queues[name] = q
			}
			return true
		}
	}
	return false
}

// releaseLocked ends s's request for name; if the request was queued, the
// head of the queue, if any, is told "locked". Callers hold t.mu.
func (t *lockTable) releaseLocked(s *session, name string) {
	s.mu.Lock()
	delete(s.locks, name)
	s.mu.Unlock()
	if t.removeLocked(name, s) {
		if q := t.queues[name]; len(q) > 0 {
			q[0].sess.conn.Notify("locked", []string{name})
		}
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
	slices.Sort(names)
	for _, n := range names {
		t.releaseLocked(s, n)
	}
}
