package ovsdbbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/govn/govn/bench/procstat"
	"github.com/govn/govn/ovsdb/jsonrpc"
)

// Target is an OVSDB server implementation to measure.
type Target struct {
	Name string
	// Create makes an empty database file db from the schema file.
	Create func(ctx context.Context, db, schema string) error
	// Command returns the command that serves db on the unix socket sock;
	// dir is a private directory for its other files.
	Command func(db, sock, dir string) *exec.Cmd
}

// ovsdbServerAndTool finds the real ovsdb-server and ovsdb-tool.
func ovsdbServerAndTool() (server, tool string, err error) {
	if server, err = exec.LookPath("ovsdb-server"); err != nil {
		return "", "", fmt.Errorf("the real ovsdb-server is needed: %w", err)
	}
	if tool, err = exec.LookPath("ovsdb-tool"); err != nil {
		return "", "", fmt.Errorf("ovsdb-tool is needed: %w", err)
	}
	return server, tool, nil
}

// OvsdbServer returns the real ovsdb-server as a Target.
func OvsdbServer() (Target, error) {
	server, tool, err := ovsdbServerAndTool()
	if err != nil {
		return Target{}, err
	}
	return Target{
		Name: "ovsdb-server",
		Create: func(ctx context.Context, db, schema string) error {
			return runQuiet(ctx, tool, "create", db, schema)
		},
		Command: func(db, sock, dir string) *exec.Cmd {
			return exec.Command(server, "--no-chdir", "--remote=punix:"+sock,
				"--unixctl="+filepath.Join(dir, "ctl"), "--log-file="+filepath.Join(dir, "log"),
				"--pidfile="+filepath.Join(dir, "pid"), db)
		},
	}, nil
}

// Govn returns govn db, run from the govn binary at path, as a Target.
func Govn(path string) Target {
	return Target{
		Name: "govn",
		Create: func(ctx context.Context, db, schema string) error {
			return runQuiet(ctx, path, "db", "create", db, schema)
		},
		Command: func(db, sock, dir string) *exec.Cmd {
			return exec.Command(path, "db", "--remote=punix:"+sock,
				"--unixctl="+filepath.Join(dir, "ctl"), "--pidfile="+filepath.Join(dir, "pid"), db)
		},
	}
}

func runQuiet(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// server is a running Target.
type server struct {
	target Target
	dir    string
	sock   string
	cmd    *exec.Cmd
	stderr *os.File
	exited chan error
}

// startServer creates a database from schema in a new directory under
// parent and serves it.
func startServer(ctx context.Context, t Target, parent, schema string) (*server, error) {
	dir, err := os.MkdirTemp(parent, "s")
	if err != nil {
		return nil, err
	}
	db := filepath.Join(dir, "bench.db")
	if sock := filepath.Join(dir, "db.sock"); len(sock) > 100 {
		return nil, fmt.Errorf("%s: socket path %s is too long for a unix socket; use a shorter temporary directory", t.Name, sock)
	}
	if err := t.Create(ctx, db, schema); err != nil {
		return nil, fmt.Errorf("%s: creating the database: %w", t.Name, err)
	}
	s := &server{target: t, dir: dir, sock: filepath.Join(dir, "db.sock"), exited: make(chan error, 1)}
	s.cmd = t.Command(db, s.sock, dir)
	if s.stderr, err = os.Create(filepath.Join(dir, "stderr")); err != nil {
		return nil, err
	}
	s.cmd.Stdout, s.cmd.Stderr = s.stderr, s.stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: starting: %w", t.Name, err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	// Ready when it answers list_dbs.
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := s.dial(ctx)
		if err == nil {
			err = c.Call(ctx, "list_dbs", nil, nil)
			c.Close()
			if err == nil {
				return s, nil
			}
		}
		select {
		case werr := <-s.exited:
			s.exited <- werr
			s.stderr.Close()
			return nil, fmt.Errorf("%s exited at start (%v): %s", t.Name, werr, s.stderrTail())
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not answer on %s within 15s: %v", t.Name, s.sock, err)
		}
	}
}

func (s *server) stderrTail() string {
	b, _ := os.ReadFile(s.stderr.Name())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// dial opens a JSON-RPC connection with no handler for requests.
func (s *server) dial(ctx context.Context) (*jsonrpc.Conn, error) {
	return s.dialHandler(ctx, nil)
}

func (s *server) dialHandler(ctx context.Context, h jsonrpc.Handler) (*jsonrpc.Conn, error) {
	return dialSock(ctx, s.sock, h)
}

// dialSock opens a JSON-RPC connection to the unix socket sock that
// answers inactivity probes and passes other requests to h (if not nil).
func dialSock(ctx context.Context, sock string, h jsonrpc.Handler) (*jsonrpc.Conn, error) {
	nc, err := jsonrpc.Dial(ctx, "unix:"+sock)
	if err != nil {
		return nil, err
	}
	return jsonrpc.NewConn(ctx, nc, jsonrpc.Options{Handler: echoing(h)}), nil
}

// echoing answers the server's inactivity probes, passing everything else
// to h.
func echoing(h jsonrpc.Handler) jsonrpc.Handler {
	return func(ctx context.Context, c *jsonrpc.Conn, m *jsonrpc.Message) {
		if m.Method == "echo" && m.Kind() == jsonrpc.KindRequest {
			_ = c.Reply(m.ID, m.Params)
			return
		}
		if h != nil {
			h(ctx, c, m)
		}
	}
}

// memory returns the server's peak and current resident set size in bytes.
func (s *server) memory() (peak, current int64, err error) {
	return procstat.Memory(s.cmd.Process.Pid)
}

// stop kills the server and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		s.exited <- err
	case <-time.After(3 * time.Second):
		_ = s.cmd.Process.Kill()
		s.exited <- <-s.exited
	}
	s.stderr.Close()
}

// cpuTime returns the CPU time the server's threads have used.
func (s *server) cpuTime() (time.Duration, error) {
	d, err := procstat.CPUTime(s.cmd.Process.Pid)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.target.Name, err)
	}
	return d, nil
}
