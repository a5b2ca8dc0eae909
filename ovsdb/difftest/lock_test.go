package difftest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// lockSteps is a session of three clients, a, b and c, around lock "L":
// a owns it, c queues for it, b steals it, and then the lock goes back,
// as ovsdb-server(7) says, to the former owner, which stays queued
// (ovn-northd's active/standby relies on it), and only then to c; then
// the finer points of ovsdb-server's queue, with lock "M".
var lockSteps = []struct{ client, request string }{
	{"a", `{"id":1,"method":"lock","params":["L"]}`},
	{"c", `{"id":2,"method":"lock","params":["L"]}`},
	{"b", `{"id":3,"method":"steal","params":["L"]}`},
	{"a", `{"id":4,"method":"transact","params":["t",{"op":"assert","lock":"L"}]}`},
	{"b", `{"id":5,"method":"transact","params":["t",{"op":"assert","lock":"L"}]}`},
	{"a", `{"id":6,"method":"lock","params":["L"]}`},
	{"b", `{"id":7,"method":"unlock","params":["L"]}`},
	{"a", `{"id":8,"method":"transact","params":["t",{"op":"assert","lock":"L"}]}`},
	{"b", `{"id":9,"method":"steal","params":["L"]}`},
	{"a", `{"id":10,"method":"unlock","params":["L"]}`},
	{"b", `{"id":11,"method":"unlock","params":["L"]}`},
	{"c", `{"id":12,"method":"transact","params":["t",{"op":"assert","lock":"L"}]}`},
	{"c", `{"id":13,"method":"unlock","params":["L"]}`},
	{"b", `{"id":14,"method":"unlock","params":["L"]}`},
	// Any request that leaves the queue makes ovsdb-server tell the
	// owner "locked" again; an owner that had stolen the lock leaves the
	// queue when it is stolen from in turn.
	{"a", `{"id":15,"method":"lock","params":["M"]}`},
	{"c", `{"id":16,"method":"lock","params":["M"]}`},
	{"c", `{"id":17,"method":"unlock","params":["M"]}`},
	{"c", `{"id":18,"method":"lock","params":["M"]}`},
	{"b", `{"id":19,"method":"steal","params":["M"]}`},
	{"c", `{"id":20,"method":"unlock","params":["M"]}`},
	{"c", `{"id":21,"method":"lock","params":["M"]}`},
	{"a", `{"id":22,"method":"unlock","params":["M"]}`},
	{"a", `{"id":23,"method":"lock","params":["M"]}`},
	{"a", `{"id":24,"method":"steal","params":["M"]}`},
	{"a", `{"id":25,"method":"unlock","params":["M"]}`},
	{"a", `{"id":26,"method":"steal","params":["M"]}`},
	{"b", `{"id":27,"method":"steal","params":["M"]}`},
	{"a", `{"id":28,"method":"unlock","params":["M"]}`},
	{"b", `{"id":29,"method":"unlock","params":["M"]}`},
	{"c", `{"id":30,"method":"transact","params":["t",{"op":"assert","lock":"M"}]}`},
	// Bad requests.
	{"a", `{"id":31,"method":"lock","params":["a-b"]}`},
	{"a", `{"id":32,"method":"steal","params":[]}`},
	{"a", `{"id":33,"method":"unlock","params":[1]}`},
	{"a", `{"id":34,"method":"lock","params":["x","y"]}`},
}

// TestLockSteal runs lockSteps against the real ovsdb-server and the
// target and compares what each client received: replies and "locked" and
// "stolen" notifications.
func TestLockSteal(t *testing.T) {
	need(t, "ovsdb-server", "ovsdb-tool")
	schema := []byte(`{"name":"t","version":"1.0.0","tables":{"x":{"columns":{"n":{"type":"integer"}}}}}`)
	ref := runLockSteps(t, startServerSchema(t, kindReal, "lock", schema))
	got := runLockSteps(t, startServerSchema(t, target(), "lock", schema))
	diffTranscripts(t, "lock-steal", ref, got)
}

type lockClient struct {
	name string
	c    net.Conn
	dec  *json.Decoder
}

// next returns the client's next message.
func (l *lockClient) next(t *testing.T) map[string]any {
	t.Helper()
	l.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var m map[string]any
	if err := l.dec.Decode(&m); err != nil {
		t.Fatalf("client %s: %v", l.name, err)
	}
	return m
}

// runLockSteps returns the transcript of lockSteps against s. After each
// step, every other client sends an echo and records what came before its
// reply: a server sends the notifications a step causes before it
// replies to the step, so the echo reply comes after them.
func runLockSteps(t *testing.T, s *dbServer) string {
	clients := map[string]*lockClient{}
	for _, n := range []string{"a", "b", "c"} {
		c, err := net.Dial("unix", s.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		dec := json.NewDecoder(bufio.NewReader(c))
		dec.UseNumber()
		clients[n] = &lockClient{name: n, c: c, dec: dec}
	}
	var b strings.Builder
	record := func(l *lockClient, untilID string) {
		for {
			m := l.next(t)
			if id, _ := json.Marshal(m["id"]); m["method"] == nil && string(id) == untilID {
				if untilID != `"barrier"` {
					fmt.Fprintf(&b, "  %s got %s\n", l.name, mustJSON(m))
				}
				return
			}
			fmt.Fprintf(&b, "  %s got %s\n", l.name, mustJSON(m))
		}
	}
	for _, st := range lockSteps {
		fmt.Fprintf(&b, "$ %s: %s\n", st.client, st.request)
		l := clients[st.client]
		if _, err := l.c.Write([]byte(st.request)); err != nil {
			t.Fatal(err)
		}
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal([]byte(st.request), &req)
		record(l, string(req.ID))
		for _, n := range []string{"a", "b", "c"} {
			if n == st.client {
				continue
			}
			o := clients[n]
			if _, err := o.c.Write([]byte(`{"id":"barrier","method":"echo","params":[]}`)); err != nil {
				t.Fatal(err)
			}
			record(o, `"barrier"`)
		}
	}
	return b.String()
}
