package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/internal/lab"
)

// buildGovn builds ./cmd/govn into a fresh directory that the test
// removes, readable by everyone (the not-root test runs it as nobody).
func buildGovn(t *testing.T) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = "/usr/local/go/bin/go"
	}
	dir, err := os.MkdirTemp("", "govnsb-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "govn")
	if out, err := exec.Command(goCmd, "build", "-o", bin, "github.com/govn/govn/cmd/govn").CombinedOutput(); err != nil {
		t.Skipf("cannot build ./cmd/govn: %v\n%s", err, out)
	}
	return bin
}

// needSandbox skips the test unless a sandbox can run here, and fails it
// if one is there already: the tests would refuse to start.
func needSandbox(t *testing.T) {
	t.Helper()
	if why := Available(); why != "" {
		t.Skip(why)
	}
	if ns := lab.Namespaces(Prefix); len(ns) > 0 {
		t.Fatalf("a sandbox's namespaces are there already (%v): remove them (govn sandbox --clean) before the test", ns)
	}
}

// snapshot is what the sandbox could leave behind, taken before and after.
type snapshot struct {
	links string // devices of this namespace
}

func takeSnapshot(t *testing.T) snapshot {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			names = append(names, strings.TrimSuffix(f[1], ":"))
		}
	}
	return snapshot{links: strings.Join(names, " ")}
}

// checkNothingLeft fails the test if a namespace of a sandbox, a process
// of bin, the directory dir or a new device of this namespace remains.
func checkNothingLeft(t *testing.T, bin, dir string, before snapshot) {
	t.Helper()
	if ns := lab.Namespaces(Prefix); len(ns) > 0 {
		t.Errorf("namespaces left behind: %v", ns)
		for _, n := range ns {
			lab.RemoveNS(n)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left behind (%v)", dir, err)
		_ = os.RemoveAll(dir)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range procs {
		if exe, err := os.Readlink(p); err == nil && (exe == bin || exe == bin+" (deleted)") {
			pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
			cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			t.Errorf("process %d left behind: %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if after := takeSnapshot(t); after.links != before.links {
		t.Errorf("devices of the root namespace changed:\nbefore %s\nafter  %s", before.links, after.links)
	}
}

// TestCheck is acceptance (a) of issue 14: govn sandbox --check, from a
// fresh build, passes every check in under 2 minutes and leaves nothing
// behind.
func TestCheck(t *testing.T) {
	needSandbox(t)
	bin := buildGovn(t)
	dir := filepath.Join(filepath.Dir(bin), "sb")
	before := takeSnapshot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, bin, "sandbox", "--check", "--dir="+dir).CombinedOutput()
	took := time.Since(start)
	t.Logf("govn sandbox --check (%v, %.1fs):\n%s", err, took.Seconds(), out)
	if err != nil {
		t.Errorf("govn sandbox --check: %v", err)
	}
	if !bytes.Contains(out, []byte("checks passed")) || bytes.Contains(out, []byte("FAIL")) {
		t.Errorf("the output does not say that every check passed")
	}
	if took > 2*time.Minute {
		t.Errorf("took %v, over the 2-minute budget", took)
	}
	checkNothingLeft(t, bin, dir, before)
}

// lines collects a command's output and says when a line contains a
// string.
type lines struct {
	mu  sync.Mutex
	buf strings.Builder
	ch  chan string
}

func (l *lines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l.mu.Lock()
		l.buf.WriteString(sc.Text() + "\n")
		l.mu.Unlock()
		select {
		case l.ch <- sc.Text():
		default:
		}
	}
	close(l.ch)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestInterrupted: a signal while the sandbox is being built, and one
// while it stays up with --keep, each make it remove everything and exit.
func TestInterrupted(t *testing.T) {
	needSandbox(t)
	bin := buildGovn(t)
	for _, c := range []struct {
		name  string
		args  []string
		after string // the signal follows the first line containing this
		sig   syscall.Signal
	}{
		{"SIGTERM while building", nil, "Building the demo network", syscall.SIGTERM},
		{"SIGINT with --keep", []string{"--keep"}, "stays up until interrupted", syscall.SIGINT},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(filepath.Dir(bin), "sb")
			before := takeSnapshot(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"sandbox", "--dir=" + dir}, c.args...)...)
			pr, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = cmd.Stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			out := &lines{ch: make(chan string, 100)}
			go out.read(pr)
			signalled := false
			for l := range out.ch {
				if !signalled && strings.Contains(l, c.after) {
					if err := cmd.Process.Signal(c.sig); err != nil {
						t.Fatal(err)
					}
					signalled = true
				}
			}
			err = cmd.Wait()
			t.Logf("output (%v):\n%s", err, out)
			if !signalled {
				t.Fatalf("no line with %q", c.after)
			}
			checkNothingLeft(t, bin, dir, before)
		})
	}
}

// TestRefuses: govn sandbox refuses, saying why, when not root and when
// a dead sandbox's directory is there; --clean removes that.
func TestRefuses(t *testing.T) {
	needSandbox(t)
	bin := buildGovn(t)
	dir := filepath.Join(filepath.Dir(bin), "sb")

	cmd := exec.Command(bin, "sandbox", "--check", "--dir="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("needs root")) {
		t.Errorf("as nobody: %v, %q; want a refusal that says it needs root", err, out)
	}

	// A sandbox whose process is gone: a pid just used and now free.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(gone.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "sandbox", "--check", "--dir="+dir).CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("previous sandbox")) || !bytes.Contains(out, []byte("--clean")) {
		t.Errorf("with a dead sandbox's directory: %v, %q; want a refusal that names --clean", err, out)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the refusal removed the other sandbox's directory: %v", err)
	}
	out, err = exec.Command(bin, "sandbox", "--clean", "--dir="+dir).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("removed directory "+dir)) {
		t.Errorf("--clean: %v, %q", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("--clean left %s (%v)", dir, err)
	}

	// A running one: this test process plays its owner.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--check"}, {"--clean"}} {
		out, err = exec.Command(bin, append([]string{"sandbox", "--dir=" + dir}, args...)...).CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte("kill "+strconv.Itoa(os.Getpid()))) {
			t.Errorf("%v with a running sandbox: %v, %q; want a refusal that says how to stop it", args, err, out)
		}
	}
}

// TestFailureCleansUp: when a step fails half way (here every govn
// chassis exits at once, after govn db, govn northd and the underlay are
// up), Start says which step failed, with the end of the daemon's log,
// and removes all it made.
func TestFailureCleansUp(t *testing.T) {
	needSandbox(t)
	bin := buildGovn(t)
	wrapper := filepath.Join(filepath.Dir(bin), "govn-no-chassis")
	script := "#!/bin/sh\nif [ \"$1\" = chassis ]; then echo 'no chassis today' >&2; exit 1; fi\nexec " + bin + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(filepath.Dir(bin), "sb")
	before := takeSnapshot(t)
	var progress bytes.Buffer
	sb, err := Start(context.Background(), Options{Govn: wrapper, Dir: dir, Progress: &progress})
	t.Logf("progress:\n%s", progress.String())
	if err == nil {
		sb.Close()
		t.Fatal("Start succeeded without a chassis")
	}
	t.Logf("Start: %v", err)
	if !strings.Contains(err.Error(), "govn chassis hv1") || !strings.Contains(err.Error(), "no chassis today") {
		t.Errorf("the error does not name the failed step and the chassis' last words: %v", err)
	}
	checkNothingLeft(t, bin, dir, before)
}
