package server

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// view replays update2/update3 notifications into a map of row -> name.
type view struct {
	rows map[string]string
}

func (v *view) apply(t *testing.T, updates map[string]map[string]map[string]json.RawMessage) {
	for _, rows := range updates {
		for uuid, ru := range rows {
			for kind, body := range ru {
				switch kind {
				case "initial", "insert", "modify":
					var r map[string]any
					json.Unmarshal(body, &r)
					if name, ok := r["name"].(string); ok {
						v.rows[uuid] = name
					} else if kind != "modify" {
						v.rows[uuid] = ""
					}
				case "delete":
					delete(v.rows, uuid)
				default:
					t.Fatalf("unexpected row update %q", kind)
				}
			}
		}
	}
}

func (v *view) String() string {
	var s []string
	for u, n := range v.rows {
		s = append(s, u+"="+n)
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// TestConcurrentClients runs writers and monitors at once and checks that
// every monitor's replayed view ends equal to the database. With 40
// monitors (at least shareFrom) a write helper shares the writes.
func TestConcurrentClients(t *testing.T) {
	for _, monitors := range []int{4, 40} {
		t.Run(fmt.Sprint(monitors, " monitors"), func(t *testing.T) { testConcurrentClients(t, monitors) })
	}
}

func testConcurrentClients(t *testing.T, monitors int) {
	_, sock := startServer(t, nil)
	const writers, perWriter = 4, 25
	views := make([]*view, monitors)
	clients := make([]*client, monitors)
	for i := range clients {
		c := dial(t, sock)
		clients[i] = c
		views[i] = &view{rows: map[string]string{}}
		method, params := "monitor_cond", `["Test","m",{"Box":[{"columns":["name"]}]}]`
		if i%2 == 1 {
			method, params = "monitor_cond_since", `["Test","m",{"Box":[{"columns":["name"]}]},"00000000-0000-0000-0000-000000000000"]`
		}
		reply := c.call(method, params)
		var init map[string]map[string]map[string]json.RawMessage
		if method == "monitor_cond" {
			json.Unmarshal([]byte(reply), &init)
		} else {
			var r []json.RawMessage
			json.Unmarshal([]byte(reply), &r)
			json.Unmarshal(r[2], &init)
		}
		views[i].apply(t, init)
	}
	// Drain each monitor's notifications as they come, so that its
	// connection never stalls.
	var mu sync.Mutex
	stop := make(chan struct{})
	var drainers sync.WaitGroup
	for i, c := range clients {
		drainers.Add(1)
		go func() {
			defer drainers.Done()
			for {
				select {
				case m := <-c.notes:
					var params []json.RawMessage
					json.Unmarshal(m.Params, &params)
					var u map[string]map[string]map[string]json.RawMessage
					json.Unmarshal(params[len(params)-1], &u)
					mu.Lock()
					views[i].apply(t, u)
					mu.Unlock()
				case <-stop:
					return
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := dial(t, sock)
			for i := 0; i < perWriter; i++ {
				name := fmt.Sprintf("w%d-%d", w, i)
				r := c.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"`+name+`"}}]`)
				if !strings.Contains(r, "uuid") {
					t.Errorf("insert: %s", r)
					return
				}
				if i%3 == 0 {
					c.call("transact", `["Test",{"op":"update","table":"Box","where":[["name","==","`+name+`"]],"row":{"name":"`+name+`-x"}}]`)
				}
				if i%4 == 1 {
					c.call("transact", `["Test",{"op":"delete","table":"Box","where":[["name","==","`+name+`"]]}]`)
				}
			}
		}(w)
	}
	wg.Wait()
	// A final commit from each monitor's own session: its update arrives
	// before the reply, after every earlier commit's.
	for i, c := range clients {
		c.call("transact", fmt.Sprintf(`["Test",{"op":"insert","table":"Box","row":{"name":"fence%d"}}]`, i))
	}
	dump := dial(t, sock).call("transact", `["Test",{"op":"select","table":"Box","where":[],"columns":["_uuid","name"]}]`)
	var res []struct {
		Rows []struct {
			UUID []string `json:"_uuid"`
			Name string   `json:"name"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(dump), &res); err != nil {
		t.Fatal(err)
	}
	want := &view{rows: map[string]string{}}
	for _, r := range res[0].Rows {
		want.rows[r.UUID[1]] = r.Name
	}
	// Each monitor's own fence reply came after its update; give the
	// drainers a moment to apply what is queued, then stop them.
	for _, c := range clients {
		for len(c.notes) > 0 {
			time.Sleep(time.Millisecond)
		}
	}
	close(stop)
	drainers.Wait()
	for i := range clients {
		// The fences of later monitors may not have arrived yet: compare
		// after the last fence, which every monitor must have by now.
		got := views[i]
		for j := i + 1; j < monitors; j++ {
			for u, n := range want.rows {
				if n == fmt.Sprintf("fence%d", j) {
					if _, ok := got.rows[u]; !ok {
						got.rows[u] = n
					}
				}
			}
		}
		if got.String() != want.String() {
			t.Errorf("monitor %d's view differs from the database:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestWriteHelperLifecycle checks that a database with many monitors gets
// a write helper on its first fan-out, that every monitor still gets the
// update, and that the helper stops once few monitors are left.
func TestWriteHelperLifecycle(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("the write helper needs two CPUs")
	}
	srv, sock := startServer(t, nil)
	d := srv.database("Test")
	var monitors []*client
	for i := range shareFrom + 4 {
		c := dial(t, sock)
		c.call("monitor_cond", fmt.Sprintf(`["Test","m%d",{"Box":[{"columns":["name"]}]}]`, i))
		monitors = append(monitors, c)
	}
	w := dial(t, sock)
	defer w.conn.Close()
	w.call("transact", `["Test",{"op":"insert","table":"Box","row":{"name":"x"}}]`)
	// Every monitor is checked, so that a failure says which missed.
	wait, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var missed []int
	for i, c := range monitors {
		select {
		case m := <-c.notes:
			if m.Method != "update2" {
				t.Errorf("monitor %d got %s", i, m.Method)
			}
		case <-wait.Done():
			missed = append(missed, i)
		}
	}
	if len(missed) > 0 {
		t.Fatalf("monitors %v of %d got no update within 10s", missed, len(monitors))
	}
	d.mu.Lock()
	h := d.helper
	d.mu.Unlock()
	if h == nil {
		t.Fatal("no write helper for a database with many monitors")
	}
	for _, c := range monitors[:len(monitors)-shareFrom/2+1] {
		c.conn.Close()
	}
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the write helper did not stop once few monitors were left")
	}
	for _, c := range monitors[len(monitors)-shareFrom/2+1:] {
		c.conn.Close()
	}
}
