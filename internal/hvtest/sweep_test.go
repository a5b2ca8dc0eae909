package hvtest

import (
	"os"
	"os/exec"
	"path/filepath"
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

// TestSweepKeepsLocked: a cluster named for a pid this process cannot see
// (as from another pid namespace) is left alone while its lock is held,
// and swept once it is released.
func TestSweepKeepsLocked(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip(why)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	prefix := runPrefix(gone.Process.Pid) + "lockt"
	dir, err := os.MkdirTemp("", prefix+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ns := prefix + "-central"
	mustRun(t, nil, "ip", "netns", "add", ns)
	t.Cleanup(func() { removeNS(ns) })
	lock, err := holdLock(filepath.Join(dir, lockFile))
	if err != nil {
		t.Fatal(err)
	}
	Sweep(t)
	if _, err := os.Stat("/run/netns/" + ns); err != nil {
		t.Errorf("the sweep removed the locked cluster's namespace: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the sweep removed the locked cluster's directory: %v", err)
	}
	lock.Close()
	Sweep(t)
	if _, err := os.Stat("/run/netns/" + ns); !os.IsNotExist(err) {
		t.Errorf("namespace %s survived the sweep once unlocked (%v)", ns, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s survived the sweep once unlocked (%v)", dir, err)
	}
}
