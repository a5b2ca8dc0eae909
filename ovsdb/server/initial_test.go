package server

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/govn/govn/ovsdb/jsonrpc"
)

// TestInitialReplyPrecedesUpdates starts monitors while another client
// commits without pause: the initial reply is encoded outside the
// database's lock, and commits made meanwhile must still reach the
// monitor after its reply, each exactly once, so that initial contents
// plus updates end at the row's final value.
func TestInitialReplyPrecedesUpdates(t *testing.T) {
	_, sock := startServer(t, nil)
	w := dial(t, sock)
	// Enough rows that encoding the initial reply takes a while.
	var ops []string
	for i := range 3000 {
		ops = append(ops, fmt.Sprintf(`{"op":"insert","table":"Box","row":{"name":"b%d","tags":["set",["x","y"]]}}`, i))
	}
	if r := w.call("transact", `["Test",`+strings.Join(ops, ",")+`]`); strings.Contains(r, "error") {
		t.Fatalf("%.300s", r)
	}
	if r := w.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"hot","n":0}}]`); strings.Contains(r, "error") {
		t.Fatalf("%.300s", r)
	}

	const monitors, commits = 5, 200
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; i <= commits; i++ {
			r := w.call("transact", fmt.Sprintf(`["Test",{"op":"update","table":"Box","where":[["name","==","hot"]],"row":{"n":%d}}]`, i))
			if strings.Contains(r, "error") {
				t.Errorf("%.300s", r)
				return
			}
		}
		close(stop)
	})
	for m := range monitors {
		nc, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := fmt.Fprintf(nc, `{"id":1,"method":"monitor_cond","params":["Test",%d,{"Box":{"columns":["name","n"]}}]}`, m); err != nil {
			t.Fatal(err)
		}
		r := jsonrpc.NewReader(nc, 0)
		first, err := r.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if first.Kind() != jsonrpc.KindResponse {
			t.Fatalf("monitor %d: first message is %s %s, not the reply", m, first.Method, first.Params)
		}
		var initial map[string]map[string]struct {
			Initial struct {
				Name string `json:"name"`
				N    int    `json:"n"`
			} `json:"initial"`
		}
		if err := json.Unmarshal(first.Result, &initial); err != nil {
			t.Fatal(err)
		}
		n, hotUUID := -1, ""
		for u, row := range initial["Box"] {
			if row.Initial.Name == "hot" {
				n, hotUUID = row.Initial.N, u
			}
		}
		if n < 0 || len(initial["Box"]) != 3001 {
			t.Fatalf("monitor %d: initial reply has %d rows, hot=%d", m, len(initial["Box"]), n)
		}
		// Every later update of "hot" must be the next value.
		for n < commits {
			msg, err := r.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			var params []json.RawMessage
			if err := json.Unmarshal(msg.Params, &params); err != nil || msg.Method != "update2" || len(params) != 2 {
				t.Fatalf("monitor %d: unexpected %s %s", m, msg.Method, msg.Params)
			}
			var upd map[string]map[string]struct {
				Modify struct {
					N int `json:"n"`
				} `json:"modify"`
			}
			if err := json.Unmarshal(params[1], &upd); err != nil {
				t.Fatal(err)
			}
			got := upd["Box"][hotUUID].Modify.N
			if got != n+1 {
				t.Fatalf("monitor %d: after n=%d got update n=%d", m, n, got)
			}
			n = got
		}
	}
	wg.Wait()
}

// TestConditionalMonitorsShareEncodings checks that monitors with equal
// conditions, which share one encoding of each update, and monitors with
// other conditions each get exactly their rows.
func TestConditionalMonitorsShareEncodings(t *testing.T) {
	_, sock := startServer(t, nil)
	w := dial(t, sock)
	type mon struct {
		c    *client
		want string // the only name it may see
	}
	var mons []mon
	for i, name := range []string{"a", "a", "b", "a", "b"} {
		c := dial(t, sock)
		r := c.call("monitor_cond", fmt.Sprintf(`["Test",%d,{"Box":[{"columns":["name"],"where":[["name","==",%q]]}]}]`, i, name))
		if r != "{}" {
			t.Fatalf("monitor_cond: %s", r)
		}
		mons = append(mons, mon{c, name})
	}
	// One commit touching rows of both conditions.
	if r := w.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"a"}},{"op":"insert","table":"Box","row":{"name":"b"}},{"op":"insert","table":"Box","row":{"name":"c"}}]`); strings.Contains(r, "error") {
		t.Fatal(r)
	}
	for i, m := range mons {
		n := m.c.note()
		if !strings.Contains(string(n.Params), fmt.Sprintf(`{"name":%q}`, m.want)) || strings.Count(string(n.Params), `"insert"`) != 1 {
			t.Errorf("monitor %d (name == %q) got %s", i, m.want, n.Params)
		}
		m.c.noNote()
	}
}
