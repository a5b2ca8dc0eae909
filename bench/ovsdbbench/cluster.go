package ovsdbbench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/govn/govn/bench/procstat"
)

// ClusterTarget is an OVSDB server implementation run as a cluster.
type ClusterTarget struct {
	Name string
	// CreateCluster makes the file db of a new cluster's first member, at
	// the peer address local (tcp:IP:PORT), from the schema file.
	CreateCluster func(ctx context.Context, db, schema, local string) error
	// JoinCluster makes the file db of a server at local that is to join
	// the cluster of database name whose members include remotes.
	JoinCluster func(ctx context.Context, db, name, local string, remotes []string) error
	// Command returns the command that serves the files dbs on the unix
	// socket sock, with its control socket at ctl; dir is a private
	// directory for its other files (a log file "log" in it is shown when
	// it fails).
	Command func(dbs []string, sock, ctl, dir string) *exec.Cmd
}

// OvsdbServerCluster returns the real ovsdb-server as a ClusterTarget
// (files made by ovsdb-tool create-cluster and join-cluster, whose
// default election timer is 1000 ms).
func OvsdbServerCluster() (ClusterTarget, error) {
	server, tool, err := ovsdbServerAndTool()
	if err != nil {
		return ClusterTarget{}, err
	}
	return ClusterTarget{
		Name: "ovsdb-server",
		CreateCluster: func(ctx context.Context, db, schema, local string) error {
			return runQuiet(ctx, tool, "create-cluster", db, schema, local)
		},
		JoinCluster: func(ctx context.Context, db, name, local string, remotes []string) error {
			return runQuiet(ctx, tool, append([]string{"join-cluster", db, name, local}, remotes...)...)
		},
		Command: func(dbs []string, sock, ctl, dir string) *exec.Cmd {
			return exec.Command(server, append([]string{"--no-chdir", "--remote=punix:" + sock, "--unixctl=" + ctl,
				"--pidfile=" + filepath.Join(dir, "pid"), "--log-file=" + filepath.Join(dir, "log")}, dbs...)...)
		},
	}, nil
}

// GovnCluster returns govn db, run from the govn binary at path, as a
// ClusterTarget (its default election timer is 1000 ms too).
func GovnCluster(path string) ClusterTarget {
	return ClusterTarget{
		Name: "govn",
		CreateCluster: func(ctx context.Context, db, schema, local string) error {
			return runQuiet(ctx, path, "db", "create-cluster", db, schema, local)
		},
		JoinCluster: func(ctx context.Context, db, name, local string, remotes []string) error {
			return runQuiet(ctx, path, append([]string{"db", "join-cluster", db, name, local}, remotes...)...)
		},
		Command: func(dbs []string, sock, ctl, dir string) *exec.Cmd {
			return exec.Command(path, append([]string{"db", "--remote=punix:" + sock, "--unixctl=" + ctl}, dbs...)...)
		},
	}
}

// Cluster is a 3-server cluster of one ClusterTarget on loopback: each
// member one process serving one clustered file per database on its own
// unix socket, the members talking to each other over TCP.
type Cluster struct {
	Target  ClusterTarget
	Dir     string
	DBs     []string // the databases' names
	Members []*Member
	appctl  string
	keep    bool
}

// Member is one server of a Cluster.
type Member struct {
	Index int
	Dir   string
	Sock  string // the clients' unix socket
	Ctl   string // the control socket
	Files []string

	c    *Cluster
	cmd  *exec.Cmd
	out  *os.File
	exit chan struct{}
}

// ClusterSize is the number of servers StartCluster runs.
const ClusterSize = 3

// StartCluster makes a cluster of t serving one database per schema
// (each the text of an .ovsschema), in a new directory under parent
// (os.TempDir() if ""): create-cluster on the first member, join-cluster
// on the others. It starts the members and waits until every one is a
// member of every database's cluster and each database has a leader.
// Close stops it; keep leaves its directory behind.
func StartCluster(ctx context.Context, t ClusterTarget, parent string, keep bool, schemas ...[]byte) (*Cluster, error) {
	appctl, err := exec.LookPath("ovs-appctl")
	if err != nil {
		return nil, fmt.Errorf("ovs-appctl is needed for cluster/status: %w", err)
	}
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "cl")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Target: t, Dir: dir, appctl: appctl, keep: keep}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	for i := range ClusterSize {
		md := filepath.Join(dir, fmt.Sprintf("m%d", i))
		if err := os.Mkdir(md, 0o755); err != nil {
			return nil, err
		}
		m := &Member{Index: i, Dir: md, Sock: filepath.Join(md, "db.sock"), Ctl: filepath.Join(md, "db.ctl"), c: c}
		if len(m.Sock) > 100 {
			return nil, fmt.Errorf("socket path %s is too long for a unix socket; use a shorter temporary directory", m.Sock)
		}
		c.Members = append(c.Members, m)
	}
	for k, text := range schemas {
		var s struct{ Name string }
		if err := json.Unmarshal(text, &s); err != nil || s.Name == "" {
			return nil, fmt.Errorf("schema %d has no name: %v", k, err)
		}
		c.DBs = append(c.DBs, s.Name)
		sf := filepath.Join(dir, fmt.Sprintf("db%d.ovsschema", k))
		if err := os.WriteFile(sf, text, 0o644); err != nil {
			return nil, err
		}
		first, err := freeTCP()
		if err != nil {
			return nil, err
		}
		for i, m := range c.Members {
			f := filepath.Join(m.Dir, fmt.Sprintf("db%d.db", k))
			if i == 0 {
				err = t.CreateCluster(ctx, f, sf, first)
			} else {
				var local string
				if local, err = freeTCP(); err == nil {
					err = t.JoinCluster(ctx, f, s.Name, local, []string{first})
				}
			}
			if err != nil {
				return nil, fmt.Errorf("%s: member %d's file of %s: %w", t.Name, i, s.Name, err)
			}
			m.Files = append(m.Files, f)
		}
	}
	for _, m := range c.Members {
		if err := m.Start(ctx); err != nil {
			return nil, err
		}
	}
	for _, m := range c.Members {
		for _, db := range c.DBs {
			err := waitFor(ctx, fmt.Sprintf("%s member %d to be a member of %s's cluster", t.Name, m.Index, db), 30*time.Second, func() bool {
				return strings.Contains(m.Status(db), "Status: cluster member")
			})
			if err != nil {
				return nil, fmt.Errorf("%w\n%s", err, m.LogTail())
			}
		}
	}
	for _, db := range c.DBs {
		if _, err := c.Leader(ctx, db, -1); err != nil {
			return nil, err
		}
	}
	ok = true
	return c, nil
}

// freeTCP returns a loopback address nothing listens on (for a moment).
func freeTCP() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return "tcp:" + l.Addr().String(), nil
}

// waitFor polls cond every 25 ms until it holds, for up to d.
func waitFor(ctx context.Context, what string, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", d, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
	return nil
}

// Close kills every member and, unless the cluster is kept, removes its
// directory.
func (c *Cluster) Close() {
	for _, m := range c.Members {
		m.Kill()
	}
	if !c.keep {
		os.RemoveAll(c.Dir)
	}
}

// Remote is every member's socket, as clients of a cluster are given.
func (c *Cluster) Remote() string {
	var r []string
	for _, m := range c.Members {
		r = append(r, "unix:"+m.Sock)
	}
	return strings.Join(r, ",")
}

// Leader waits up to 30 s for a member other than number not to lead db
// and returns it.
func (c *Cluster) Leader(ctx context.Context, db string, not int) (*Member, error) {
	var l *Member
	err := waitFor(ctx, c.Target.Name+": a leader of "+db, 30*time.Second, func() bool {
		for _, m := range c.Members {
			if m.Index != not && strings.Contains(m.Status(db), "Role: leader") {
				l = m
				return true
			}
		}
		return false
	})
	return l, err
}

// CPUTime is the CPU time the running members have used, all together.
func (c *Cluster) CPUTime() time.Duration {
	var sum time.Duration
	for _, m := range c.Members {
		if m.cmd == nil {
			continue
		}
		if d, err := procstat.CPUTime(m.cmd.Process.Pid); err == nil {
			sum += d
		}
	}
	return sum
}

// Start runs the member and waits until its socket accepts connections.
func (m *Member) Start(ctx context.Context) error {
	if m.cmd != nil {
		return fmt.Errorf("member %d is running", m.Index)
	}
	cmd := m.c.Target.Command(m.Files, m.Sock, m.Ctl, m.Dir)
	out, err := os.OpenFile(filepath.Join(m.Dir, "stderr"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+m.Dir, "OVS_LOGDIR="+m.Dir, "OVS_DBDIR="+m.Dir)
	// Its own process group (a signal to the bench's terminal does not
	// reach it), and killed with the bench.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("%s: starting member %d: %w", m.c.Target.Name, m.Index, err)
	}
	m.cmd, m.out, m.exit = cmd, out, make(chan struct{})
	exit := m.exit
	go func() { cmd.Wait(); close(exit) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if nc, err := net.Dial("unix", m.Sock); err == nil {
			nc.Close()
			return nil
		}
		select {
		case <-exit:
			m.Kill()
			return fmt.Errorf("%s member %d exited at start:\n%s", m.c.Target.Name, m.Index, m.LogTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s member %d did not listen on %s within 20s:\n%s", m.c.Target.Name, m.Index, m.Sock, m.LogTail())
		}
	}
}

// Running reports whether the member's process is running (or stopped).
func (m *Member) Running() bool { return m.cmd != nil }

// Pid is the member's process id (0 when not running).
func (m *Member) Pid() int {
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// Kill kills the member with SIGKILL (resuming it first if stopped) and
// waits for it to exit.
func (m *Member) Kill() {
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGCONT)
	m.cmd.Process.Kill()
	<-m.exit
	m.out.Close()
	m.cmd = nil
}

// Signal sends sig to the running member.
func (m *Member) Signal(sig syscall.Signal) {
	if m.cmd != nil {
		m.cmd.Process.Signal(sig)
	}
}

// LogTail is the end of the member's log and standard error.
func (m *Member) LogTail() string {
	var s string
	for _, name := range []string{"log", "stderr"} {
		b, _ := os.ReadFile(filepath.Join(m.Dir, name))
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		if len(b) > 0 {
			s += fmt.Sprintf("--- member %d %s ---\n%s", m.Index, name, b)
		}
	}
	return s
}

// Status is cluster/status DB on the member's control socket ("" when it
// does not answer within 2 s).
func (m *Member) Status(db string) string {
	if m.cmd == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, m.c.appctl, "-t", m.Ctl, "cluster/status", db).Output()
	if err != nil {
		return ""
	}
	return string(out)
}
