package hvtest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/internal/lab"
)

// Daemon is a process the cluster started inside one of its namespaces;
// it is stopped when the test ends.
type Daemon = lab.Daemon

// Start runs args inside the namespace ns (the command is exec'd by
// ip netns exec, so the daemon is the child itself) with env added to the
// test's environment, its output going to dir/NAME.out, and stops it when
// the test ends: SIGTERM, then SIGKILL after a grace period. On a failed
// test the end of its output is logged.
func (c *Cluster) Start(t testing.TB, ns, name string, env []string, args ...string) *Daemon {
	t.Helper()
	var d *Daemon
	// Registered before lab.Start registers the stop, so it runs after.
	t.Cleanup(func() {
		if d == nil || !t.Failed() {
			return
		}
		// Daemons with a --log-file write little else.
		logName := d.Log
		for _, a := range args {
			if f, ok := strings.CutPrefix(a, "--log-file="); ok {
				logName = f
			}
		}
		t.Logf("%s (%s) ended (%v); %s ends:\n%s", name, strings.Join(args, " "), d.Err(), logName, lab.Tail(logName, 30))
	})
	d, err := lab.Start(t, c.Dir, ns, name, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// run runs a command to completion and returns its combined output; the
// error names the command and carries the output.
func run(ctx context.Context, env []string, args ...string) (string, error) {
	return lab.Run(ctx, env, args...)
}

// mustRun is run that fails the test; commands get a generous minute.
func mustRun(t testing.TB, env []string, args ...string) string {
	t.Helper()
	out, err := lab.RunTimed(env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// inNS prefixes args so that they run inside the namespace ns.
func inNS(ns string, args ...string) []string { return lab.InNS(ns, args...) }

// waitFor polls cond every 50 ms until it holds or timeout passes; the
// error says what was awaited.
func waitFor(timeout time.Duration, what string, cond func() bool) error {
	return lab.WaitFor(timeout, what, cond)
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

// tail returns the last n lines of a file, for failure messages.
func tail(name string, n int) string { return lab.Tail(name, n) }

// stopGrace is how long a daemon has to exit after SIGTERM before it is
// killed.
const stopGrace = lab.StopGrace
