package hvtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Daemon is a process the cluster started inside one of its namespaces;
// it is stopped when the test ends.
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

// stopGrace is how long a daemon has to exit after SIGTERM before it is
// killed.
const stopGrace = 5 * time.Second

// Start runs args inside the namespace ns (the command is exec'd by
// ip netns exec, so the daemon is the child itself) with env added to the
// test's environment, its output going to dir/NAME.out, and stops it when
// the test ends: SIGTERM, then SIGKILL after a grace period. On a failed
// test the end of its output is logged.
func (c *Cluster) Start(t testing.TB, ns, name string, env []string, args ...string) *Daemon {
	t.Helper()
	logName := filepath.Join(c.Dir, strings.ReplaceAll(name, "/", "-")+".out")
	out, err := os.Create(logName)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = c.Dir
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	d := &Daemon{Name: name, Log: logName, cmd: cmd, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		out.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(stopGrace):
			_ = cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			// Daemons with a --log-file write little else.
			for _, a := range args {
				if f, ok := strings.CutPrefix(a, "--log-file="); ok {
					logName = f
				}
			}
			t.Logf("%s (%s) ended (%v); %s ends:\n%s", name, strings.Join(args, " "), d.err, logName, tail(logName, 30))
		}
	})
	return d
}

// tail returns the last n lines of a file, for failure messages.
func tail(name string, n int) string {
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

// run runs a command to completion and returns its combined output; the
// error names the command and carries the output.
func run(ctx context.Context, env []string, args ...string) (string, error) {
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

// mustRun is run that fails the test; commands get a generous minute.
func mustRun(t testing.TB, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := run(ctx, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// inNS prefixes args so that they run inside the namespace ns.
func inNS(ns string, args ...string) []string {
	return append([]string{"ip", "netns", "exec", ns}, args...)
}

// waitFor polls cond every 50 ms until it holds or timeout passes; the
// error says what was awaited.
func waitFor(timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// needBinaries skips the test unless every named program is on PATH.
func needBinaries(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("needs %s", n)
		}
	}
}
