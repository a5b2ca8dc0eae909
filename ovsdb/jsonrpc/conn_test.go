package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// socketPair returns two connected unix sockets, closed at the end of the
// test.
func socketPair(t testing.TB) (a, b net.Conn) {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	a, err = net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// echoServer answers "echo" with its params, "fail" with an OVSDB error,
// and notifies "tick" N times for "ticks" [N].
func echoServer(ctx context.Context, c *Conn, m *Message) {
	switch m.Method {
	case "echo":
		_ = c.Reply(m.ID, m.Params)
	case "fail":
		_ = c.ReplyError(m.ID, map[string]string{"error": "constraint violation", "details": "no"})
	case "ticks":
		var n []int
		_ = json.Unmarshal(m.Params, &n)
		for i := range n[0] {
			_ = c.Notify("tick", []int{i})
		}
		_ = c.Reply(m.ID, "done")
	default:
		if m.Kind() == KindRequest {
			_ = c.ReplyError(m.ID, "unknown method")
		}
	}
}

func newPair(t *testing.T, serverOpts, clientOpts Options) (server, client *Conn) {
	t.Helper()
	a, b := socketPair(t)
	ctx := t.Context()
	server = NewConn(ctx, a, serverOpts)
	client = NewConn(ctx, b, clientOpts)
	t.Cleanup(func() { client.Close(); server.Close() })
	return server, client
}

func TestCallReply(t *testing.T) {
	_, client := newPair(t, Options{Handler: echoServer}, Options{})
	ctx := t.Context()
	var got []any
	if err := client.Call(ctx, "echo", []any{"a", 1.0, map[string]any{"b": []any{}}}, &got); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[a 1 map[b:[]]]" {
		t.Errorf("echo returned %v", got)
	}

	err := client.Call(ctx, "fail", nil, nil)
	var rpcErr *Error
	if !errors.As(err, &rpcErr) || rpcErr.Name() != "constraint violation" || rpcErr.Details() != "no" {
		t.Errorf("fail: got %v", err)
	}
	if err := client.Call(ctx, "nope", nil, nil); !IsUnknownMethod(err) {
		t.Errorf("nope: got %v, want unknown method", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	_, client := newPair(t, Options{Handler: echoServer}, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for g := range 20 {
		wg.Go(func() {
			for i := range 50 {
				want := strconv.Itoa(g*1000 + i)
				var got []string
				if err := client.Call(t.Context(), "echo", []string{want}, &got); err != nil {
					errs <- err
					return
				}
				if len(got) != 1 || got[0] != want {
					errs <- fmt.Errorf("sent %s, got %v", want, got)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestNotificationsInOrder(t *testing.T) {
	var mu sync.Mutex
	var got []int
	_, client := newPair(t, Options{Handler: echoServer}, Options{Handler: func(_ context.Context, _ *Conn, m *Message) {
		if m.Kind() != KindNotification || m.Method != "tick" {
			t.Errorf("unexpected %v %s", m.Kind(), m.Method)
			return
		}
		var p []int
		_ = json.Unmarshal(m.Params, &p)
		mu.Lock()
		got = append(got, p[0])
		mu.Unlock()
	}})
	const n = 2000
	if err := client.Call(t.Context(), "ticks", []int{n}, nil); err != nil {
		t.Fatal(err)
	}
	// The reply was sent after the notifications and is read after them.
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("got %d notifications, want %d", len(got), n)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("notification %d carries %d", i, v)
		}
	}
}

func TestNoHandlerAnswersUnknownMethod(t *testing.T) {
	_, client := newPair(t, Options{}, Options{})
	if err := client.Call(t.Context(), "echo", nil, nil); !IsUnknownMethod(err) {
		t.Errorf("got %v, want unknown method", err)
	}
}

func TestCallContextCancelled(t *testing.T) {
	release := make(chan *Message, 1)
	_, client := newPair(t, Options{Handler: func(_ context.Context, c *Conn, m *Message) {
		if m.Method == "slow" {
			release <- m
			return
		}
		echoServer(t.Context(), c, m)
	}}, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := client.Call(ctx, "slow", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want deadline exceeded", err)
	}
	// The late answer is dropped and the connection keeps working.
	<-release
	if err := client.Call(t.Context(), "echo", nil, nil); err != nil {
		t.Fatal(err)
	}
}

// With CancelAbandoned, a call whose context ends sends "cancel" naming
// its id, after the request itself, and the peer's late error reply is
// dropped without a warning.
func TestCancelAbandoned(t *testing.T) {
	type seen struct {
		method string
		id     json.RawMessage
		params json.RawMessage
	}
	got := make(chan seen, 4)
	_, client := newPair(t, Options{Handler: func(_ context.Context, c *Conn, m *Message) {
		got <- seen{m.Method, m.ID, m.Params}
		switch m.Method {
		case "slow": // answered only when cancelled
		case "cancel":
			var ids []json.RawMessage
			_ = json.Unmarshal(m.Params, &ids)
			if len(ids) == 1 {
				_ = c.ReplyError(ids[0], map[string]string{"error": "canceled"})
			}
		default:
			echoServer(t.Context(), c, m)
		}
	}}, Options{CancelAbandoned: true, Logger: slog.New(failOnWarn{t})})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := client.Call(ctx, "slow", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want deadline exceeded", err)
	}
	next := func() seen {
		t.Helper()
		select {
		case m := <-got:
			return m
		case <-time.After(5 * time.Second):
			t.Fatal("the server received nothing more")
			return seen{}
		}
	}
	slow, cancelled := next(), next()
	if slow.method != "slow" || cancelled.method != "cancel" {
		t.Fatalf("server saw %q then %q, want slow then cancel", slow.method, cancelled.method)
	}
	if cancelled.id != nil && string(cancelled.id) != "null" {
		t.Errorf("cancel has id %s, want a notification", cancelled.id)
	}
	if want := "[" + string(slow.id) + "]"; string(cancelled.params) != want {
		t.Errorf("cancel params %s, want %s", cancelled.params, want)
	}
	// The connection keeps working, and the late reply was expected.
	if err := client.Call(t.Context(), "echo", nil, nil); err != nil {
		t.Fatal(err)
	}
}

// A Conn closed while an abandoned call is still unanswered ends cleanly.
func TestCloseWithAbandonedCall(t *testing.T) {
	_, client := newPair(t, Options{Handler: func(context.Context, *Conn, *Message) {}}, Options{CancelAbandoned: true})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := client.Call(ctx, "never", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want deadline exceeded", err)
	}
	client.Close()
	<-client.Done()
}

// failOnWarn is a slog handler that fails the test on warnings and errors.
type failOnWarn struct{ t *testing.T }

func (h failOnWarn) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h failOnWarn) Handle(_ context.Context, r slog.Record) error {
	h.t.Errorf("unexpected log: %s", r.Message)
	return nil
}
func (h failOnWarn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h failOnWarn) WithGroup(string) slog.Handler      { return h }

func TestPeerHangsUp(t *testing.T) {
	a, b := socketPair(t)
	client := NewConn(t.Context(), b, Options{})
	defer client.Close()
	got := make(chan error, 1)
	go func() { got <- client.Call(t.Context(), "echo", nil, nil) }()
	buf := make([]byte, 100)
	if _, err := a.Read(buf); err != nil { // the request arrived
		t.Fatal(err)
	}
	a.Close()
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Errorf("pending call: %v, want ErrClosed", err)
	}
	<-client.Done()
	if !errors.Is(client.Err(), io.EOF) {
		t.Errorf("Err = %v, want io.EOF", client.Err())
	}
	if err := client.Notify("x", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Notify after close: %v", err)
	}
}

func TestMalformedInputEndsConn(t *testing.T) {
	for _, input := range []string{`{"method":1}`, `"str"`, `{"a":[}`, `{"id":1}`} {
		a, b := socketPair(t)
		c := NewConn(t.Context(), b, Options{Handler: echoServer})
		if _, err := a.Write([]byte(input)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.Done():
			if c.Err() == nil || !strings.Contains(c.Err().Error(), "jsonrpc") {
				t.Errorf("%s: Err = %v", input, c.Err())
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: connection still open", input)
		}
	}
}

func TestBacklogClosesConn(t *testing.T) {
	a, b := socketPair(t)
	_ = a // never read
	c := NewConn(t.Context(), b, Options{MaxBacklog: 1 << 20})
	payload := json.RawMessage(`["` + strings.Repeat("x", 64<<10) + `"]`)
	var err error
	for range 10000 {
		if err = c.Notify("flood", payload); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("flooding a peer that does not read: %v", err)
	}
	<-c.Done()
	if !errors.Is(c.Err(), ErrBacklog) {
		t.Errorf("Err = %v, want ErrBacklog", c.Err())
	}
}

func TestCloseFlushes(t *testing.T) {
	a, b := socketPair(t)
	server := NewConn(t.Context(), a, Options{})
	for i := range 100 {
		if err := server.Notify("n", []int{i}); err != nil {
			t.Fatal(err)
		}
	}
	server.Close()
	if !errors.Is(server.Err(), ErrClosed) {
		t.Errorf("Err after Close = %v", server.Err())
	}
	r := NewReader(b, 0)
	for i := range 100 {
		m, err := r.ReadMessage()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if string(m.Params) != fmt.Sprintf("[%d]", i) {
			t.Fatalf("message %d: %s", i, m.Params)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after the queued messages: %v, want EOF", err)
	}
}

// TestAgainstOvsdbServer talks to the real ovsdb-server: list_dbs, echo and
// an error for an unknown method.
func TestAgainstOvsdbServer(t *testing.T) {
	server, err := exec.LookPath("ovsdb-server")
	if err != nil {
		t.Skip("ovsdb-server not installed")
	}
	tool, err := exec.LookPath("ovsdb-tool")
	if err != nil {
		t.Skip("ovsdb-tool not installed")
	}
	dir := t.TempDir()
	schema := filepath.Join(dir, "s.ovsschema")
	if err := os.WriteFile(schema, []byte(`{"name":"T","version":"1.0.0","tables":{"t":{"columns":{"n":{"type":"integer"}}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "t.db")
	if out, err := exec.Command(tool, "create", db, schema).CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool create: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "db.sock")
	cmd := exec.Command(server, "--no-chdir", "--remote=punix:"+sock, "--unixctl="+filepath.Join(dir, "ctl"),
		"--log-file="+filepath.Join(dir, "log"), "--pidfile="+filepath.Join(dir, "pid"), db)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var nc net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if nc, err = Dial(t.Context(), "unix:"+sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := NewConn(t.Context(), nc, Options{})
	defer c.Close()
	var dbs []string
	if err := c.Call(t.Context(), "list_dbs", nil, &dbs); err != nil {
		t.Fatal(err)
	}
	if strings.Join(dbs, ",") != "_Server,T" && strings.Join(dbs, ",") != "T,_Server" {
		t.Errorf("list_dbs = %v", dbs)
	}
	var echo []any
	if err := c.Call(t.Context(), "echo", []any{"hi", 2.0}, &echo); err != nil || fmt.Sprint(echo) != "[hi 2]" {
		t.Errorf("echo = %v, %v", echo, err)
	}
	if err := c.Call(t.Context(), "no_such_method", nil, nil); !IsUnknownMethod(err) {
		t.Errorf("unknown method: %v", err)
	}
}

// TestNewThenStart checks that New neither reads nor calls the handler
// before Start, and that messages queued before Start are sent.
func TestNewThenStart(t *testing.T) {
	a, b := socketPair(t)
	var stored *Conn
	got := make(chan bool, 1)
	c := New(t.Context(), a, Options{Handler: func(_ context.Context, conn *Conn, m *Message) {
		got <- stored == conn
	}})
	if _, err := b.Write([]byte(`{"method":"ping","params":[],"id":null}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.Notify("queued", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
		t.Fatal("handler called before Start")
	case <-time.After(50 * time.Millisecond):
	}
	stored = c
	c.Start()
	c.Start()
	if ok := <-got; !ok {
		t.Error("handler saw a different Conn")
	}
	m, err := NewReader(b, 0).ReadMessage()
	if err != nil || m.Method != "queued" {
		t.Errorf("queued message: %v %v", m, err)
	}
	c.Close()

	// Close without Start does not hang.
	x, _ := socketPair(t)
	New(t.Context(), x, Options{}).Close()
}
