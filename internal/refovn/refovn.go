// Package refovn starts the real OVN central daemons for tests: an
// ovsdb-server for the Northbound and one for the Southbound, each on a unix
// socket in the test's own directory, and a northd between them — the real
// ovn-northd, or any other program that takes ovn-northd's options (govn
// northd). A test then changes the Northbound with an ovn-nbctl script,
// waits until the Southbound reflects it and reads the Southbound with the
// real tools (ovn-sbctl, ovn-trace).
//
// Every process runs in its own process group and is killed in t.Cleanup,
// so nothing is left behind when a test fails; the processes that are
// direct children also die with the test binary (Pdeathsig). Tests skip
// when the OVN binaries are not installed.
package refovn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The schemas Debian's ovn-common installs.
const (
	NBSchema = "/usr/share/ovn/ovn-nb.ovsschema"
	SBSchema = "/usr/share/ovn/ovn-sb.ovsschema"
)

// startTimeout bounds how long a server or northd may take to come up,
// and a script or sync to finish.
const startTimeout = 60 * time.Second

// Binaries are the programs Start needs.
func Binaries() []string {
	return []string{"ovsdb-tool", "ovsdb-server", "ovn-northd", "ovn-nbctl", "ovn-sbctl"}
}

// SkipUnlessInstalled skips the test unless every program Start needs, and
// every one named in extra, is installed, and the schemas are there.
func SkipUnlessInstalled(t testing.TB, extra ...string) {
	t.Helper()
	for _, p := range append(Binaries(), extra...) {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s not installed", p)
		}
	}
	for _, f := range []string{NBSchema, SBSchema} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("OVN schema missing: %v", err)
		}
	}
}

// Northd starts a northd that reads the Northbound at unix socket nbSock
// and writes the Southbound at sbSock. It returns once the process runs;
// stop ends it and waits for it (calling stop twice is harmless). Files
// the northd needs (pidfile, control socket, log) go in the sockets'
// directory.
type Northd func(ctx context.Context, nbSock, sbSock string) (stop func(), err error)

// RealNorthd is the real ovn-northd.
func RealNorthd(ctx context.Context, nbSock, sbSock string) (func(), error) {
	dir := filepath.Dir(sbSock)
	return Command("ovn-northd", "--log-file="+filepath.Join(dir, "northd.log"))(ctx, nbSock, sbSock)
}

// Command is a Northd that runs program with args followed by
// ovn-northd's options --ovnnb-db, --ovnsb-db, --unixctl and --pidfile;
// its standard error goes to northd.stderr in the sockets' directory. For
// govn northd: Command("/path/to/govn", "northd").
func Command(program string, args ...string) Northd {
	return func(ctx context.Context, nbSock, sbSock string) (func(), error) {
		dir := filepath.Dir(sbSock)
		all := append(append([]string(nil), args...),
			"--ovnnb-db=unix:"+nbSock, "--ovnsb-db=unix:"+sbSock,
			"--unixctl="+filepath.Join(dir, "northd.ctl"),
			"--pidfile="+filepath.Join(dir, "northd.pid"))
		p, err := startProcess(dir, filepath.Join(dir, "northd.stderr"), program, all...)
		if err != nil {
			return nil, err
		}
		return p.stop, nil
	}
}

// Env is one running pair of databases with a northd between them.
type Env struct {
	// Dir is the private directory of this Env: databases, sockets, logs.
	Dir string
	// NB and SB are the paths of the databases' unix sockets.
	NB, SB string

	stopNorthd func()
}

// NBRemote and SBRemote are the databases as OVS tools name them.
func (e *Env) NBRemote() string { return "unix:" + e.NB }
func (e *Env) SBRemote() string { return "unix:" + e.SB }

// Start creates empty Northbound and Southbound databases, serves each with
// its own real ovsdb-server and starts northd between them. Everything is
// stopped and removed in t.Cleanup. Start skips the test when the OVN
// binaries are missing and fails it when something does not come up.
func Start(t testing.TB, northd Northd) *Env {
	t.Helper()
	SkipUnlessInstalled(t)
	// Not t.TempDir(): its long paths would not fit a unix socket's name.
	dir, err := os.MkdirTemp("", "refovn-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &Env{Dir: dir, NB: filepath.Join(dir, "nb.sock"), SB: filepath.Join(dir, "sb.sock")}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, db := range []struct{ name, schema, sock string }{{"nb", NBSchema, e.NB}, {"sb", SBSchema, e.SB}} {
		stop, err := startServer(ctx, dir, db.name, db.schema, db.sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
	}
	stop, err := northd(ctx, e.NB, e.SB)
	if err != nil {
		t.Fatalf("start northd: %v", err)
	}
	e.stopNorthd = stop
	t.Cleanup(e.StopNorthd)
	return e
}

// StopNorthd stops the northd; the databases keep running. A test that
// reads a finished Southbound can stop northd so that nothing changes it
// under the reader.
func (e *Env) StopNorthd() {
	if e.stopNorthd != nil {
		e.stopNorthd()
		e.stopNorthd = nil
	}
}

// startServer creates database name from schema in dir and serves it on
// the unix socket sock with ovsdb-server.
func startServer(ctx context.Context, dir, name, schema, sock string) (func(), error) {
	file := filepath.Join(dir, name+".db")
	if out, err := exec.CommandContext(ctx, "ovsdb-tool", "create", file, schema).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ovsdb-tool create %s: %v\n%s", file, err, out)
	}
	p, err := startProcess(dir, filepath.Join(dir, name+".stderr"), "ovsdb-server", "--no-chdir",
		"--remote=punix:"+sock,
		"--unixctl="+filepath.Join(dir, name+".ctl"),
		"--pidfile="+filepath.Join(dir, name+".pid"),
		"--log-file="+filepath.Join(dir, name+".log"),
		file)
	if err != nil {
		return nil, err
	}
	if err := waitSocket(ctx, sock, p); err != nil {
		p.stop()
		return nil, fmt.Errorf("ovsdb-server for %s: %w\n%s", name, err, Tail(filepath.Join(dir, name+".log"), 2000))
	}
	return p.stop, nil
}

// waitSocket waits until something accepts connections on sock.
func waitSocket(ctx context.Context, sock string, p *process) error {
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return errors.New("exited before listening")
		case <-ctx.Done():
			return fmt.Errorf("nothing listens on %s: %w", sock, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Environ is the environment for OVS and OVN programs run against e: every
// run, log and database directory points into e.Dir, and OVN_NB_DB and
// OVN_SB_DB name e's databases.
func (e *Env) Environ() []string {
	env := runEnv(e.Dir)
	return append(env, "OVN_NB_DB="+e.NBRemote(), "OVN_SB_DB="+e.SBRemote())
}

func runEnv(dir string) []string {
	env := os.Environ()
	for _, v := range []string{"OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVN_RUNDIR", "OVN_LOGDIR", "OVN_DBDIR"} {
		env = append(env, v+"="+dir)
	}
	return env
}

// Run runs program with args in e's environment and returns its standard
// output; a failure carries the standard error.
func (e *Env) Run(ctx context.Context, program string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Dir = e.Dir
	cmd.Env = e.Environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v\n%s%s", program, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// NBCtl runs ovn-nbctl against e's Northbound.
func (e *Env) NBCtl(ctx context.Context, args ...string) (string, error) {
	return e.Run(ctx, "ovn-nbctl", append([]string{"--db=" + e.NBRemote()}, args...)...)
}

// SBCtl runs ovn-sbctl against e's Southbound.
func (e *Env) SBCtl(ctx context.Context, args ...string) (string, error) {
	return e.Run(ctx, "ovn-sbctl", append([]string{"--db=" + e.SBRemote()}, args...)...)
}

// RunScript runs a shell script (bash) that changes the Northbound with
// ovn-nbctl; OVN_NB_DB names e's Northbound.
func (e *Env) RunScript(ctx context.Context, script string) error {
	_, err := e.Run(ctx, "bash", script)
	return err
}

// AddChassis registers chassis in the Southbound as ovn-controller would,
// each with a Geneve Encap. The encap addresses are loopback addresses
// that nothing sends to: the rows only give northd and ovn-trace the
// chassis that gateway ports and gateway routers name.
func (e *Env) AddChassis(ctx context.Context, names ...string) error {
	for i, name := range names {
		if _, err := e.SBCtl(ctx, "chassis-add", name, "geneve", fmt.Sprintf("127.0.1.%d", i+1)); err != nil {
			return err
		}
	}
	return nil
}

// Sync waits until northd has brought the Southbound up to date with the
// Northbound (ovn-nbctl --wait=sb sync).
func (e *Env) Sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	_, err := e.NBCtl(ctx, fmt.Sprintf("--timeout=%d", int(startTimeout/time.Second)), "--wait=sb", "sync")
	if err != nil {
		return fmt.Errorf("wait for the Southbound: %w\nnorthd log:\n%s", err, e.NorthdLog())
	}
	return nil
}

// NorthdLog is the end of northd's log and standard error, for failure
// messages.
func (e *Env) NorthdLog() string {
	return Tail(filepath.Join(e.Dir, "northd.log"), 2000) + Tail(filepath.Join(e.Dir, "northd.stderr"), 2000)
}

// Tail is the last n bytes of a file ("" if it cannot be read).
func Tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// process is a child in its own process group.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// startProcess starts program in dir with the environment of runEnv(dir),
// its output appended to logPath.
func startProcess(dir, logPath, program string, args ...string) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(program, args...)
	cmd.Dir = dir
	cmd.Env = runEnv(dir)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", program, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), log: log}
	go func() { cmd.Wait(); log.Close(); close(p.done) }()
	return p, nil
}

// stop asks the process group to terminate, then kills it if it has not
// exited within a second, and waits for the process.
func (p *process) stop() {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.done:
	default:
		syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(time.Second):
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
	}
	// Anything the process left in its group goes too.
	syscall.Kill(-pgid, syscall.SIGKILL)
}
