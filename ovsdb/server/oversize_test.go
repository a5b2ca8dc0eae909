package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
)

// These tests send one request of a few megabytes made of many tiny JSON
// values, the shape that costs a decoder the most memory per byte, and
// check that the server's heap grows by no more than a small multiple of the
// request's size, that the request gets an answer, and that another client
// is still served. GOVN_OVERSIZE_MB sets the request size (default 4; the
// worst cases that matter are tens of megabytes: try 64).

const oversizeSchema = `{
  "name": "Big",
  "version": "1.0.0",
  "tables": {
    "T": {
      "isRoot": true,
      "columns": {
        "name": {"type": "string"},
        "ints": {"type": {"key": "integer", "min": 0, "max": "unlimited"}},
        "strs": {"type": {"key": "string", "min": 0, "max": "unlimited"}},
        "kv": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}}
      }
    }
  }
}`

// maxHeapGrowth is the bound the tests assert on peak heap growth, as a
// multiple of the request's size. The goal is 8; the slack keeps the test
// from flaking on a garbage collector that runs late.
const maxHeapGrowth = 11

func oversizeBytes() int {
	mb := 4
	if s := os.Getenv("GOVN_OVERSIZE_MB"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			mb = n
		}
	}
	return mb << 20
}

// oversizeCases returns the requests' builders: each builds a whole
// JSON-RPC message of about size bytes (never more than
// jsonrpc.DefaultMaxMessageSize). Each is built only when its turn comes, so
// that the others do not inflate the heap the garbage collector paces
// itself by.
func oversizeCases(size int) []struct {
	name string
	req  func() []byte
} {
	fill := func(prefix string, elem func(i int) string, suffix string) func() []byte {
		return func() []byte { return fillRequest(size, prefix, elem, suffix) }
	}
	insert := func(col, tag string) string {
		return `{"id":1,"method":"transact","params":["Big",{"op":"insert","table":"T","row":{"` + col + `":["` + tag + `",[`
	}
	const endInsert = `]]}}]}`
	nested := strings.Repeat("[", 900) + strings.Repeat("]", 900)
	return []struct {
		name string
		req  func() []byte
	}{
		{"distinct-int-set", fill(insert("ints", "set"), strconv.Itoa, endInsert)},
		{"repeated-int-set", fill(insert("ints", "set"), func(int) string { return "0" }, endInsert)},
		{"one-char-string-set", fill(insert("strs", "set"), func(int) string { return `"a"` }, endInsert)},
		{"distinct-map", fill(insert("kv", "map"), func(i int) string { return `["` + strconv.Itoa(i) + `",""]` }, endInsert)},
		{"empty-arrays", fill(`{"id":1,"method":"echo","params":[`, func(int) string { return "[]" }, `]}`)},
		{"nested-arrays", fill(`{"id":1,"method":"echo","params":[`, func(int) string { return nested }, `]}`)},
		{"tiny-ops", fill(`{"id":1,"method":"transact","params":["Big"`, func(i int) string {
			if i == 0 {
				return ""
			}
			return `{"op":"comment","comment":""}`
		}, `]}`)},
		{"empty-objects", fill(`{"id":1,"method":"echo","params":[`, func(int) string { return "{}" }, `]}`)},
		{"wide-object", fill(`{"id":1,"method":"echo","params":[{`, func(i int) string { return `"` + strconv.Itoa(i) + `":0` }, `}]}`)},
	}
}

// fillRequest returns prefix, then as many elem(i) joined by commas as fit,
// then suffix, in at most size bytes.
func fillRequest(size int, prefix string, elem func(i int) string, suffix string) []byte {
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(prefix)
	for i := 0; ; i++ {
		e := elem(i)
		if b.Len()+len(e)+1+len(suffix) > size {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e)
	}
	b.WriteString(suffix)
	return b.Bytes()
}

// heapObjects returns the bytes of heap objects, live or not yet swept, read
// without stopping the world.
func heapObjects(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// peakHeapGrowth runs f while sampling the heap and returns the largest
// growth over the heap as it was (after a collection) before f, and the
// bytes allocated meanwhile. The collector runs often meanwhile, so that
// the peak is of what f holds live rather than of garbage that the
// collector's pacing (relative to the whole heap, here a database that
// earlier requests filled) lets accumulate.
func peakHeapGrowth(f func()) (growth, allocated uint64) {
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	runtime.GC()
	base := heapObjects(s)
	metrics.Read(allocs)
	allocBase := allocs[0].Value.Uint64()
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			if h := heapObjects(s); h > peak {
				peak = h
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	if h := heapObjects(s); h > peak {
		peak = h
	}
	metrics.Read(allocs)
	allocated = allocs[0].Value.Uint64() - allocBase
	if peak < base {
		return 0, allocated
	}
	return peak - base, allocated
}

func TestOversizeRequestMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("sends multi-megabyte requests")
	}
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
	if err := srv.AddDatabase(ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(oversizeSchema))), nil); err != nil {
		t.Fatal(err)
	}
	sock := serve(t, srv, nil)

	other := dial(t, sock)
	size := oversizeBytes()
	for _, tc := range oversizeCases(size) {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req()
			if len(req) > jsonrpc.DefaultMaxMessageSize {
				t.Fatalf("request of %d bytes is over the message limit", len(req))
			}
			nc, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			var reply []byte
			var readErr error
			growth, allocated := peakHeapGrowth(func() {
				go nc.Write(req)
				nc.SetReadDeadline(time.Now().Add(60 * time.Second))
				r := jsonrpc.NewReader(nc, 0)
				var m []byte
				m, readErr = r.Next()
				reply = append(reply, m[:min(len(m), 300)]...)
			})
			ratio := float64(growth) / float64(len(req))
			t.Logf("request %d bytes, peak heap growth %d bytes (%.1fx), allocated %d bytes (%.1fx); reply %s",
				len(req), growth, ratio, allocated, float64(allocated)/float64(len(req)), reply)
			if readErr != nil {
				t.Logf("no reply: %v", readErr)
			}
			if ratio > maxHeapGrowth {
				t.Errorf("peak heap growth is %.1f times the request's size, over %d", ratio, maxHeapGrowth)
			}
			if got := other.call("echo", `["still here"]`); got != `["still here"]` {
				t.Errorf("another client's echo got %s", got)
			}
		})
	}
}

// TestTooComplexParams checks that params whose decoded form would cost
// too much memory for their size are answered "resources exhausted", as
// ovsdb-server answers requests beyond its means, not "syntax error".
func TestTooComplexParams(t *testing.T) {
	_, sock := startServer(t, nil)
	c := dial(t, sock)
	defer c.conn.Close()
	params := []byte{'['}
	for len(params) < 1<<20 {
		params = append(params, "[],"...)
	}
	params = append(params, "[]]"...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.conn.CallRaw(ctx, "echo", json.RawMessage(params))
	if err == nil || !strings.Contains(err.Error(), ovsdb.ErrResourcesExhausted) {
		t.Fatalf("echo of a million empty arrays: %v, want %q", err, ovsdb.ErrResourcesExhausted)
	}
	if _, err := c.conn.CallRaw(ctx, "echo", json.RawMessage(`["still here"]`)); err != nil {
		t.Fatalf("the session did not go on: %v", err)
	}
}
