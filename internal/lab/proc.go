package lab

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Daemon is a process started inside a namespace by Start.
type Daemon struct {
	Name string // for messages, e.g. "hv1/ovs-vswitchd"
	Log  string // file with its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
}

// Exited reports whether the daemon has stopped, and how.
func (d *Daemon) Exited() (bool, error) {
	select {
	case <-d.done:
		return true, d.err
	default:
		return false, nil
	}
}

// Pid is the daemon's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Err is how the daemon ended; nil while it runs.
func (d *Daemon) Err() error {
	_, err := d.Exited()
	return err
}

// StopGrace is how long a daemon has to exit after SIGTERM before Stop
// kills it.
const StopGrace = 5 * time.Second

// Stop sends SIGTERM, waits up to StopGrace, then kills the daemon; it
// returns once the process is gone. Stopping a stopped daemon does nothing.
func (d *Daemon) Stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(StopGrace):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// Start runs args inside the namespace ns (exec'd by ip netns exec, so the
// daemon is the child itself) with env added to this process's
// environment, in directory dir, its output going to dir/NAME.out (with
// '/' in name as '-'); it registers the daemon's Stop with cl.
func Start(cl Cleaner, dir, ns, name string, env []string, args ...string) (*Daemon, error) {
	return start(cl, false, dir, ns, name, env, args)
}

// StartGroup is Start with the daemon in a process group of its own, so
// that a terminal's Ctrl-C reaches only this process, which then stops
// the daemon in its own time.
func StartGroup(cl Cleaner, dir, ns, name string, env []string, args ...string) (*Daemon, error) {
	return start(cl, true, dir, ns, name, env, args)
}

func start(cl Cleaner, ownGroup bool, dir, ns, name string, env, args []string) (*Daemon, error) {
	logName := filepath.Join(dir, strings.ReplaceAll(name, "/", "-")+".out")
	out, err := os.Create(logName)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = dir
	if ownGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	d := &Daemon{Name: name, Log: logName, cmd: cmd, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		out.Close()
		close(d.done)
	}()
	cl.Cleanup(d.Stop)
	return d, nil
}

// Tail returns the last n lines of a file, for failure messages.
func Tail(name string, n int) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Run runs a command to completion and returns its combined output; env,
// if not nil, is added to this process's environment. The error names the
// command and carries the output.
func Run(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// CommandTimeout bounds the commands that RunTimed runs: generous, for a
// starved machine.
const CommandTimeout = time.Minute

// RunTimed is Run with CommandTimeout.
func RunTimed(env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	return Run(ctx, env, args...)
}

// InNS prefixes args so that they run inside the namespace ns.
func InNS(ns string, args ...string) []string {
	return append([]string{"ip", "netns", "exec", ns}, args...)
}

// WaitFor polls cond every 50 ms until it holds or timeout passes; the
// error says what was awaited.
func WaitFor(timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// SocketTimeout is how long WaitSocket waits.
const SocketTimeout = 20 * time.Second

// WaitSocket waits until a daemon accepts connections on a unix socket
// path (the file appears at bind, a moment before the daemon listens: a
// client in between gets "Connection refused").
func WaitSocket(path string) error {
	return WaitFor(SocketTimeout, "socket "+path, func() bool { return Accepting(path) })
}

// Accepting reports whether a daemon accepts connections on the unix
// socket path.
func Accepting(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// OVSEnv points the OVS and OVN run, log and database directories of a
// daemon or tool at dir: the defaults under /var may be missing, and are
// shared.
func OVSEnv(dir string) []string {
	var env []string
	for _, v := range []string{"OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVN_RUNDIR", "OVN_LOGDIR", "OVN_DBDIR"} {
		env = append(env, v+"="+dir)
	}
	return env
}
