package unixctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startServer serves cmds on a socket in a temporary directory and returns
// its path; the server stops when the test ends.
func startServer(t *testing.T, ctx context.Context, cmds map[string]Command) (path string, done <-chan struct{}, serveErr *error) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "sub", "test.ctl")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	serveErr = new(error)
	go func() { *serveErr = Serve(ctx, l, cmds); close(finished) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	return path, finished, serveErr
}

func testCommands() map[string]Command {
	return map[string]Command{
		"echo": func(args []string) (string, error) { return strings.Join(args, "|") + "\n", nil },
		"fail": func(args []string) (string, error) { return "", errors.New("it failed: " + strings.Join(args, " ")) },
	}
}

func TestCallRoundTrip(t *testing.T) {
	path, _, _ := startServer(t, t.Context(), testCommands())
	tests := []struct {
		cmd     string
		args    []string
		want    string
		wantErr string
	}{
		{cmd: "echo", args: []string{"a", "b c", `"q"`, "ünï"}, want: "a|b c|\"q\"|ünï\n"},
		{cmd: "echo", want: "\n"},
		{cmd: "fail", args: []string{"x"}, wantErr: "it failed: x"},
		{cmd: "nope", wantErr: `"nope" is not a valid command`},
		{cmd: "list-commands", want: "The available commands are:\n  echo\n  fail\n  list-commands\n"},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			got, err := Call(t.Context(), path, tt.cmd, tt.args...)
			if tt.wantErr != "" {
				var ce *CommandError
				if !errors.As(err, &ce) || !strings.Contains(ce.Message, tt.wantErr) {
					t.Fatalf("Call(%s) error = %v, want a CommandError containing %q", tt.cmd, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Call(%s) = %q, %v; want %q", tt.cmd, got, err, tt.want)
			}
		})
	}
}

func TestCallNoDaemon(t *testing.T) {
	_, err := Call(t.Context(), filepath.Join(t.TempDir(), "none.ctl"), "echo")
	var ce *CommandError
	if err == nil || errors.As(err, &ce) {
		t.Fatalf("Call to a missing socket = %v, want a connection error", err)
	}
}

// TestExitReplies checks that a command that ends the server's context
// still gets its reply out, and that Serve then returns.
func TestExitReplies(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmds := map[string]Command{"exit": func([]string) (string, error) {
		cancel()
		time.Sleep(20 * time.Millisecond) // let Serve see the cancellation first
		return "bye\n", nil
	}}
	path, done, serveErr := startServer(t, ctx, cmds)
	got, err := Call(t.Context(), path, "exit")
	if err != nil || got != "bye\n" {
		t.Fatalf("exit = %q, %v; want \"bye\\n\"", got, err)
	}
	select {
	case <-done:
		if *serveErr != nil {
			t.Fatalf("Serve: %v", *serveErr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still running after exit")
	}
}

func TestListenRefusesLiveSocket(t *testing.T) {
	path, _, _ := startServer(t, t.Context(), testCommands())
	if l, err := Listen(path); err == nil {
		l.Close()
		t.Fatal("Listen on a socket a server answers on succeeded")
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stale.ctl")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	// A closed unix listener removes its file; keep the file as a crashed
	// daemon would leave it.
	l.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false)
	l.Close()
	l, err = Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l.Close()
}

func TestDispatch(t *testing.T) {
	cmds := testCommands()
	tests := []struct {
		method, params string
		want, wantErr  string
	}{
		{"echo", `["x","y"]`, "x|y\n", ""},
		{"echo", ``, "\n", ""},
		{"echo", `null`, "\n", ""},
		{"echo", `[1]`, "", "array of strings"},
		{"echo", `{"a":"b"}`, "", "array of strings"},
		{"", `[]`, "", "not a valid command"},
	}
	for _, tt := range tests {
		got, err := Dispatch(cmds, tt.method, json.RawMessage(tt.params))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Dispatch(%q, %s) error = %v, want %q", tt.method, tt.params, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Dispatch(%q, %s) = %q, %v; want %q", tt.method, tt.params, got, err, tt.want)
		}
	}
}

// TestRealOVSAppctl drives the server with the real ovs-appctl.
func TestRealOVSAppctl(t *testing.T) {
	bin, err := exec.LookPath("ovs-appctl")
	if err != nil {
		t.Skip("ovs-appctl not installed")
	}
	path, _, _ := startServer(t, t.Context(), testCommands())
	run := func(args ...string) (stdout, stderr string, code int) {
		cmd := exec.CommandContext(t.Context(), bin, append([]string{"-t", path}, args...)...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("ovs-appctl: %v", err)
		}
		return o.String(), e.String(), code
	}
	if out, errOut, code := run("echo", "a", "b c"); code != 0 || out != "a|b c\n" {
		t.Errorf("ovs-appctl echo: %q, stderr %q, status %d", out, errOut, code)
	}
	if out, errOut, code := run("fail", "x"); code != 2 || !strings.Contains(errOut, "it failed: x") {
		t.Errorf("ovs-appctl fail: %q, stderr %q, status %d; want status 2 and the error", out, errOut, code)
	}
	if out, _, code := run("list-commands"); code != 0 || !strings.Contains(out, "  echo\n") {
		t.Errorf("ovs-appctl list-commands: %q, status %d", out, code)
	}
}

// FuzzDispatch feeds arbitrary request methods and params to the request
// handling: it must answer or refuse, never panic, and pass exactly the
// strings it was given.
func FuzzDispatch(f *testing.F) {
	f.Add("echo", []byte(`["a","b"]`))
	f.Add("list-commands", []byte(``))
	f.Add("echo", []byte(`[1,"b"]`))
	f.Add("echo", []byte(`["\u0000"]`))
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		var got []string
		cmds := map[string]Command{"echo": func(args []string) (string, error) { got = args; return "", nil }}
		_, err := Dispatch(cmds, method, params)
		if err == nil && method == "echo" && len(got) > 0 {
			var want []string
			if json.Unmarshal(params, &want) != nil || len(want) != len(got) {
				t.Fatalf("params %q gave args %q", params, got)
			}
		}
	})
}

// failingListener fails its first Accept as a process out of descriptors
// does.
type failingListener struct {
	net.Listener
	failed bool
}

func (l *failingListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// Running out of descriptors for a moment must not end the control
// socket: the daemon would lose it for good.
func TestServeSurvivesEMFILE(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.ctl")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Serve(ctx, &failingListener{Listener: l}, testCommands())
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	callCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if _, err := Call(callCtx, path, "list-commands"); err != nil {
		t.Fatalf("after EMFILE: %v", err)
	}
}

// brokenListener fails every Accept for good and records Close.
type brokenListener struct {
	net.Listener
	closed bool
}

func (l *brokenListener) Accept() (net.Conn, error) { return nil, errors.New("listener broken") }
func (l *brokenListener) Close() error              { l.closed = true; return l.Listener.Close() }

func TestServeClosesListenerWhenAcceptFails(t *testing.T) {
	l, err := Listen(filepath.Join(t.TempDir(), "test.ctl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	bl := &brokenListener{Listener: l}
	if err := Serve(t.Context(), bl, testCommands()); err == nil {
		t.Fatal("Serve returned nil on a broken listener")
	}
	if !bl.closed {
		t.Error("Serve returned without closing its listener")
	}
}

// TestListenRefusesBusySocket checks that a live daemon whose accept
// queue is full, so that connecting fails without being refused, keeps
// its socket.
func TestListenRefusesBusySocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.ctl")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil { // never accepts: one pending connection fills it
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		c, err := net.Dial("unix", path)
		if err != nil {
			break
		}
		t.Cleanup(func() { c.Close() })
		if i == 8 {
			t.Skip("the accept queue never filled")
		}
	}
	if l, err := Listen(path); err == nil {
		l.Close()
		t.Fatal("Listen took the socket of a daemon that is only busy")
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the busy daemon's socket is gone: %v", err)
	}
}
