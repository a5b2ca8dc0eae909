package difftrace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/govn/govn/unixctl"
)

// ovn-trace runs one trace per process, and a process spends most of its
// time reading the Southbound: tens of milliseconds a packet. A daemon
// (ovn-trace --detach) reads it once and answers "trace" requests on its
// control socket in a millisecond or two, so the harness keeps one
// daemon per conntrack state per Southbound. Two limits of the daemon
// shape how it is used:
//
//   - Its "trace" command takes no --ct. The --ct flags given at start
//     form one queue that every ct action of every later trace takes the
//     next state from (the queue is never rewound), after which the
//     default state applies. A queue of one repeated state gives every ct
//     action that state, whichever trace takes it, so a daemon is started
//     with ctQueue copies of one state; a trace that reaches the end of the
//     queue says so ("default (use --ct to customize)"), and the daemon is
//     restarted and the trace repeated.
//   - --lb-dst and --select-id exist only for one-shot runs. Without them
//     ovn-trace picks a load-balancer backend and an ECMP member at random.
//     A trace whose detailed form shows such a choice is therefore traced
//     again by one-shot processes, once per backend (--lb-dst) and once
//     per select() member (--select-id).
const ctQueue = 20000

// errAborted is a trace during which ovn-trace crashed.
var errAborted = errors.New("ovn-trace aborted")

// traceDaemon is one ovn-trace --detach on one Southbound with one
// conntrack state.
type traceDaemon struct {
	dir, db, ct string
	ctl, pid    string

	mu      sync.Mutex // guards running and gen; held while (re)starting
	running bool
	gen     int // counts starts, so that one failure restarts it once
}

func newTraceDaemon(dir, db, ct string) *traceDaemon {
	name := "trace-" + strings.ReplaceAll(ct, ",", "-")
	return &traceDaemon{dir: dir, db: db, ct: ct,
		ctl: filepath.Join(dir, name+".ctl"), pid: filepath.Join(dir, name+".pid")}
}

func ctFlags(ct string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "--ct=" + ct
	}
	return out
}

// ensure starts the daemon unless it runs, and returns its generation.
func (d *traceDaemon) ensure(ctx context.Context) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.running {
		if err := d.start(ctx); err != nil {
			return 0, err
		}
		d.gen++
	}
	return d.gen, nil
}

// restart stops generation gen of the daemon, unless another caller
// already did; the next ensure starts it again.
func (d *traceDaemon) restart(gen int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gen == gen && d.running {
		d.stopLocked()
	}
}

func (d *traceDaemon) generation() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen
}

// alive reports whether the process in the daemon's pidfile runs.
func (d *traceDaemon) alive() bool {
	b, err := os.ReadFile(d.pid)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && pid > 0 && syscall.Kill(pid, 0) == nil
}

// start runs the daemon; ovn-trace --detach returns once it has read the
// Southbound.
func (d *traceDaemon) start(ctx context.Context) error {
	args := append([]string{"--detach", "--no-chdir", "--pidfile=" + d.pid, "--unixctl=" + d.ctl,
		"--log-file=" + strings.TrimSuffix(d.pid, ".pid") + ".log", "--db=" + d.db}, ctFlags(d.ct, ctQueue)...)
	cmd := exec.CommandContext(ctx, "ovn-trace", args...)
	cmd.Dir = d.dir
	cmd.Env = runEnv(d.dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("start ovn-trace --detach --ct=%s: %v\n%s", d.ct, err, out)
	}
	d.running = true
	return nil
}

// stop ends the daemon: "exit" on its control socket, then SIGKILL to
// the pid in its pidfile if it is still there.
func (d *traceDaemon) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked()
}

func (d *traceDaemon) stopLocked() {
	if !d.running {
		return
	}
	d.running = false
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	unixctl.Call(ctx, d.ctl, "exit")
	if b, err := os.ReadFile(d.pid); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// trace runs one trace with --detailed and --minimal. A daemon that dies
// during it is restarted and errAborted returned.
func (d *traceDaemon) trace(ctx context.Context, dp, microflow string) (string, error) {
	for attempt := 0; ; attempt++ {
		gen, err := d.ensure(ctx)
		if err != nil {
			return "", err
		}
		out, err := unixctl.Call(ctx, d.ctl, "trace", "--detailed", "--minimal", dp, microflow)
		var ce *unixctl.CommandError
		switch {
		case errors.As(err, &ce):
			return "", fmt.Errorf("ovn-trace refused the trace: %s", ce.Message)
		case err != nil:
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			// Another trace may have restarted the daemon under this one;
			// only a daemon that died of this trace is an abort.
			if attempt < 3 && (d.generation() != gen || d.alive()) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			d.restart(gen)
			return "", errAborted
		case strings.Contains(out, "default (use --ct to customize)"):
			if attempt >= 3 {
				return "", fmt.Errorf("ovn-trace --ct=%s: the conntrack state queue runs out within one trace", d.ct)
			}
			d.restart(gen) // the --ct queue ran out: start over
			continue
		}
		return out, nil
	}
}

// oneShot runs ovn-trace as one process, for the options a daemon does
// not take (--lb-dst, --select-id).
func oneShot(ctx context.Context, dir, db, ct string, extra []string, dp, microflow string) (string, error) {
	args := append([]string{"--db=" + db, "--detailed", "--minimal"}, ctFlags(ct, 64)...)
	args = append(append(args, extra...), dp, microflow)
	cmd := exec.CommandContext(ctx, "ovn-trace", args...)
	cmd.Dir = dir
	cmd.Env = runEnv(dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
		return "", errAborted
	}
	if err != nil {
		return "", fmt.Errorf("ovn-trace %s: %v\n%s", strings.Join(extra, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func runEnv(dir string) []string {
	env := os.Environ()
	for _, v := range []string{"OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVN_RUNDIR", "OVN_LOGDIR", "OVN_DBDIR"} {
		env = append(env, v+"="+dir)
	}
	return env
}

// A trace printed with --detailed and --minimal: the microflow, then
// "# Detailed trace." and "# Minimal trace." sections.
type traceText struct {
	header, detailed, minimal string
}

func splitTrace(out string) traceText {
	var t traceText
	head, rest, _ := strings.Cut(out, "# Detailed trace.\n")
	t.header = strings.TrimSpace(head)
	t.detailed, t.minimal, _ = strings.Cut(rest, "# Minimal trace.\n")
	return t
}

var (
	lbBackends = regexp.MustCompile(`ct_lb(?:_mark)?\(backends=([^;)]*)`)
	selectIDs  = regexp.MustCompile(`= select\(([^)]*)\)`)
)

// choices are the random choices a detailed trace shows: the backends of
// each ct_lb with backends, the member ids of each select().
type choices struct {
	backends [][]string
	selects  [][]string
}

func randomChoices(detailed string) choices {
	var c choices
	for _, m := range lbBackends.FindAllStringSubmatch(detailed, -1) {
		c.backends = append(c.backends, strings.Split(strings.TrimSpace(m[1]), ","))
	}
	for _, m := range selectIDs.FindAllStringSubmatch(detailed, -1) {
		var ids []string
		for _, f := range strings.Split(m[1], ",") {
			id, _, _ := strings.Cut(strings.TrimSpace(f), "=")
			ids = append(ids, strings.TrimSpace(id))
		}
		c.selects = append(c.selects, ids)
	}
	return c
}

func (c choices) none() bool { return len(c.backends) == 0 && len(c.selects) == 0 }
