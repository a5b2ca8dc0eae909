package hvtest

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSweep leaves a namespace with a process in it under the name of a
// dead test process, as a killed run would, and checks that Sweep removes
// both while it keeps this process's own.
func TestSweep(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip(why)
	}
	// A pid that was just used and is now free, for a "dead run".
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadNS := runPrefix(gone.Process.Pid) + "sweeptest"
	ownNS := runPrefix(os.Getpid()) + "sweeptest"
	for _, ns := range []string{deadNS, ownNS} {
		mustRun(t, nil, "ip", "netns", "add", ns)
		t.Cleanup(func() { removeNS(ns) })
	}
	sleeper := exec.Command("ip", "netns", "exec", deadNS, "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = sleeper.Wait(); close(waited) }()
	t.Cleanup(func() { _ = sleeper.Process.Kill(); <-waited })
	if err := waitFor(5*time.Second, "sleep in "+deadNS, func() bool {
		out, _ := exec.Command("ip", "netns", "pids", deadNS).Output()
		return strings.Contains(string(out), strconv.Itoa(sleeper.Process.Pid))
	}); err != nil {
		t.Fatal(err)
	}

	Sweep(t)
	if _, err := os.Stat("/run/netns/" + deadNS); !os.IsNotExist(err) {
		t.Errorf("namespace %s of a dead run survived the sweep (%v)", deadNS, err)
	}
	if _, err := os.Stat("/run/netns/" + ownNS); err != nil {
		t.Errorf("the sweep removed this run's namespace %s: %v", ownNS, err)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Errorf("the process in %s survived the sweep", deadNS)
	}
}
