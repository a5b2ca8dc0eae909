package unixctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/govn/govn/ovsdb/jsonrpc"
)

// Command is one command of the control socket: it gets the arguments and
// returns the text to print (ending in a newline, as ovs-appctl prints it
// as it is) or an error whose text the client prints instead.
type Command func(args []string) (string, error)

// Listen listens on the unix socket path, creating its directory if
// needed. A socket file left behind by a daemon that died (connecting is
// refused) is replaced; one that a live daemon still answers on, or that
// cannot be told dead (its daemon is too busy to take a connection), is
// an error.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("unixctl: create socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		c, err := net.Dial("unix", path)
		switch {
		case err == nil:
			c.Close()
			return nil, fmt.Errorf("unixctl: %s: another daemon is listening there", path)
		case !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT):
			return nil, fmt.Errorf("unixctl: %s: is another daemon listening there? %w", path, err)
		}
		os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("unixctl: listen: %w", err)
	}
	return l, nil
}

// Serve answers ovs-appctl requests on l with cmds until ctx ends, then
// returns nil; it returns an error only if accepting fails for good.
// Either way it closes l. Connections already open are answered until
// ctx ends.
func Serve(ctx context.Context, l net.Listener, cmds map[string]Command) error {
	s := &server{cmds: cmds, conns: map[*jsonrpc.Conn]bool{}}
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	defer l.Close() // also when accepting fails for good
	// Connections outlive ctx by the time it takes to send the replies of
	// running commands; shutdown closes them.
	connCtx := context.WithoutCancel(ctx)
	defer s.shutdown()
	for {
		nc, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if isTemporary(err) {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			return fmt.Errorf("unixctl: accept: %w", err)
		}
		c := jsonrpc.New(connCtx, nc, jsonrpc.Options{Handler: s.handle})
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		c.Start()
		go func() {
			<-c.Done()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// isTemporary reports whether an accept error passes (out of file
// descriptors, a connection reset before it was accepted).
func isTemporary(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ECONNRESET)
}

// server is Serve's state: the open connections and the commands running.
type server struct {
	cmds    map[string]Command
	running sync.WaitGroup // commands running, until their reply is queued

	mu      sync.Mutex
	conns   map[*jsonrpc.Conn]bool
	closing bool // shutdown began: no more commands are waited for
}

// handle answers one request.
func (s *server) handle(_ context.Context, c *jsonrpc.Conn, m *jsonrpc.Message) {
	if m.ID == nil {
		return // a notification: nothing to answer
	}
	// Register under mu, so that shutdown's Wait never races an Add: a
	// request arriving after shutdown began runs unregistered, on a
	// connection that is being closed anyway.
	s.mu.Lock()
	if !s.closing {
		s.running.Add(1)
		defer s.running.Done()
	}
	s.mu.Unlock()
	out, err := Dispatch(s.cmds, m.Method, m.Params)
	if err != nil {
		c.ReplyError(m.ID, err.Error())
		return
	}
	c.Reply(m.ID, out)
}

// shutdown waits for running commands' replies to be queued, then closes
// every connection, which sends what is queued. Serve calls it after its
// accept loop, so no connection joins later.
func (s *server) shutdown() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.running.Wait()
	s.mu.Lock()
	conns := make([]*jsonrpc.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Dispatch runs the command method with the JSON params of a request (an
// array of strings, or absent) and returns its output. It is what Serve
// does for each request; "list-commands" is answered here unless cmds
// defines it.
func Dispatch(cmds map[string]Command, method string, params json.RawMessage) (string, error) {
	var args []string
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &args); err != nil {
			return "", errors.New("command arguments must be an array of strings")
		}
	}
	cmd, ok := cmds[method]
	if !ok && method == "list-commands" {
		return ListCommands(cmds), nil
	}
	if !ok {
		return "", fmt.Errorf("%q is not a valid command (use list-commands to see a list of valid commands)", method)
	}
	return cmd(args)
}

// ListCommands formats the names of cmds, with list-commands itself, as
// ovs-appctl list-commands prints them.
func ListCommands(cmds map[string]Command) string {
	names := []string{"list-commands"}
	for n := range cmds {
		if n != "list-commands" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return "The available commands are:\n  " + strings.Join(names, "\n  ") + "\n"
}
