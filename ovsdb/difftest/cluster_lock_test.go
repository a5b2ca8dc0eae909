package difftest

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// clusterNorthd is one real ovn-northd given every member of the NB and SB
// clusters, as an active/standby pair of ovn-northd is deployed.
type clusterNorthd struct {
	name string
	ctl  string
	cmd  *exec.Cmd
}

func startClusterNorthd(t *testing.T, c *govnCluster, name string) *clusterNorthd {
	t.Helper()
	n := &clusterNorthd{name: name, ctl: filepath.Join(c.Dir, "northd-"+name+".ctl")}
	n.cmd = startDaemon(t, c.Dir, "ovn-northd", "--no-chdir",
		"--ovnnb-db="+c.Remote(), "--ovnsb-db="+c.Remote(),
		"--pidfile="+filepath.Join(c.Dir, "northd-"+name+".pid"),
		"--log-file="+filepath.Join(c.Dir, "northd-"+name+".log"),
		"--unixctl="+n.ctl)
	return n
}

// status is what ovn-northd's status command says it is: "active",
// "standby", "paused", or "" when it does not answer.
func (n *clusterNorthd) status() string {
	if n.cmd == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ovs-appctl", "-t", n.ctl, "status").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "Status:"))
}

func (n *clusterNorthd) kill() {
	n.cmd.Process.Kill()
	n.cmd = nil
}

// activeOf returns the northds that say they are active.
func activeOf(ns []*clusterNorthd) (active []*clusterNorthd, statuses []string) {
	for _, n := range ns {
		s := n.status()
		statuses = append(statuses, n.name+"="+s)
		if s == "active" {
			active = append(active, n)
		}
	}
	return active, statuses
}

// waitOneActive waits until exactly one of ns is active and every other
// standby, and stays so for a second, and returns the active one and how
// long it took.
func waitOneActive(t *testing.T, ns []*clusterNorthd, d time.Duration) (*clusterNorthd, time.Duration) {
	t.Helper()
	start := time.Now()
	var last []string
	for time.Since(start) < d {
		active, st := activeOf(ns)
		last = st
		if len(active) == 1 && strings.Count(strings.Join(st, " "), "=standby") == len(ns)-1 {
			took := time.Since(start)
			stable := true
			for i := 0; i < 4 && stable; i++ {
				time.Sleep(250 * time.Millisecond)
				a, st := activeOf(ns)
				stable = len(a) == 1 && a[0] == active[0]
				last = st
			}
			if stable {
				return active[0], took
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("after %v not exactly one active ovn-northd: %v", d, last)
	return nil, 0
}

// doubleActive samples ns until stop and counts the samples in which more
// than one said it was active.
func doubleActive(ns func() []*clusterNorthd, stop <-chan struct{}) (count func() int) {
	var n atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if a, _ := activeOf(ns()); len(a) > 1 {
				n.Add(1)
			}
		}
	}()
	return func() int { wg.Wait(); return int(n.Load()) }
}

// northdWorks checks that the active ovn-northd, through the clusters,
// turns a new logical switch into a Southbound datapath.
func northdWorks(t *testing.T, ctx context.Context, c *govnCluster, sw string) {
	t.Helper()
	out := run(ctx, c.Dir, "ovn-nbctl", "--db="+c.Remote(), "--wait=sb", "--timeout=30", "ls-add", sw)
	if strings.Contains(out, "[exit]") {
		t.Fatalf("ovn-nbctl --wait=sb ls-add %s through the cluster:\n%s", sw, out)
	}
	dp := run(ctx, c.Dir, "ovn-sbctl", "--db="+c.Remote(), "--columns=external_ids", "list", "Datapath_Binding")
	if !strings.Contains(dp, sw) {
		t.Fatalf("no Southbound datapath for %s:\n%s", sw, dp)
	}
}

// TestClusterNorthdActiveStandby runs two real ovn-northd against 3-server
// NB and SB clusters, of ovsdb-server and of govn db, and checks that the
// `ovn_northd` lock on the Southbound makes exactly one active, that the
// standby takes over when the active one is killed (kill -9) and when the
// SB leader that the lock holder talks to (ovn-northd is a leader-only
// client) is killed, and that the two never both say they are active.
// ovsdb-server keeps locks in each server's memory, not in the Raft log:
// leader-only clients all lock on the leader, and after the leader dies
// they lock again on the new one. govn db does the same.
func TestClusterNorthdActiveStandby(t *testing.T) {
	need(t, "ovn-northd", "ovn-nbctl", "ovn-sbctl", "ovs-appctl", "ovsdb-server", "ovsdb-tool")
	for _, kind := range []string{kindReal, kindGovn} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
			defer cancel()
			c := startCluster(t, kind, "nb", "sb")
			var mu sync.Mutex
			northds := []*clusterNorthd{startClusterNorthd(t, c, "a"), startClusterNorthd(t, c, "b")}
			running := func() []*clusterNorthd {
				mu.Lock()
				defer mu.Unlock()
				var r []*clusterNorthd
				for _, n := range northds {
					if n.cmd != nil {
						r = append(r, n)
					}
				}
				return r
			}
			stop := make(chan struct{})
			doubles := doubleActive(running, stop)

			active, took := waitOneActive(t, running(), 60*time.Second)
			t.Logf("%s: %s active after %v", kind, active.name, took.Round(time.Millisecond))
			northdWorks(t, ctx, c, "sw-start")
			// ovn-northd probes unix: connections only when told to;
			// the SIGSTOP step below needs its probe.
			if out := run(ctx, c.Dir, "ovn-nbctl", "--db="+c.Remote(), "set", "NB_Global", ".", "options:northd_probe_interval=1000"); strings.Contains(out, "[exit]") {
				t.Fatal(out)
			}

			// kill -9 of the active ovn-northd: the standby takes over.
			mu.Lock()
			active.kill()
			mu.Unlock()
			next, took := waitOneActive(t, running(), 60*time.Second)
			t.Logf("%s: %s killed, %s active after %v", kind, active.name, next.name, took.Round(time.Millisecond))
			northdWorks(t, ctx, c, "sw-after-northd-kill")
			mu.Lock()
			northds = append(northds, startClusterNorthd(t, c, "c"))
			mu.Unlock()
			if a, _ := waitOneActive(t, running(), 60*time.Second); a != next {
				t.Errorf("%s: a new standby ovn-northd took the lock from the active one (%s active, was %s)", kind, a.name, next.name)
			}

			// kill -9 of the SB leader, which holds the lock for the
			// active ovn-northd: the lock moves to the new leader, and
			// one ovn-northd (either) holds it there.
			l := c.leader(t, "OVN_Southbound", -1)
			l.Kill()
			nl := c.leader(t, "OVN_Southbound", l.Index)
			a, took := waitOneActive(t, running(), 60*time.Second)
			t.Logf("%s: SB leader m%d killed, new leader m%d, %s active after %v", kind, l.Index, nl.Index, a.name, took.Round(time.Millisecond))
			northdWorks(t, ctx, c, "sw-after-leader-kill")
			restart(t, l)
			close(stop)
			// ovn-northd says it is active until it notices that it
			// lost its connection, so a sample may catch both active
			// for a moment; with ovsdb-server too. Counted, not refused.
			t.Logf("%s: samples with two active: %d", kind, doubles())

			// SIGSTOP of the SB leader (as a partition would cut it
			// off): the ovn-northd connected to it give up on it
			// after their inactivity probe (1 s) and one locks on the new
			// leader, so that a change made through the other members
			// reaches the Southbound; once resumed, the old leader is
			// a follower and one ovn-northd is active.
			l = c.leader(t, "OVN_Southbound", -1)
			stop = make(chan struct{})
			doubles = doubleActive(running, stop)
			l.Signal(syscall.SIGSTOP)
			stopped := time.Now()
			nl = c.leader(t, "OVN_Southbound", l.Index)
			var others []string
			for _, m := range c.Members {
				if m != l {
					others = append(others, "unix:"+m.Sock)
				}
			}
			for i := 0; ; i++ {
				out := run(ctx, c.Dir, "ovn-nbctl", "--db="+strings.Join(others, ","), "--wait=sb", "--timeout=10", "ls-add", fmt.Sprintf("sw-during-stop-%d", i))
				if !strings.Contains(out, "[exit]") {
					break
				}
				if time.Since(stopped) > 90*time.Second {
					t.Fatalf("%s: no ovn-northd served the Southbound in 90 s with the SB leader stopped:\n%s", kind, out)
				}
			}
			t.Logf("%s: SB leader m%d stopped, new leader m%d, a change through the others reached the Southbound after %v", kind, l.Index, nl.Index, time.Since(stopped).Round(time.Millisecond))
			l.Signal(syscall.SIGCONT)
			a, _ = waitOneActive(t, running(), 60*time.Second)
			northdWorks(t, ctx, c, "sw-after-leader-cont")
			close(stop)
			t.Logf("%s: after SIGCONT %s active; samples with two active while the leader was stopped: %d", kind, a.name, doubles())
		})
	}
}

// TestClusterLocksArePerServer compares what ovsdb-server's and govn db's
// clusters answer two clients that lock the same name on different
// members, with leader-only clients' view of it: each server grants its
// own locks (they are not replicated), so a lock taken on one member does
// not stop a client of another, and on one member the second waits.
func TestClusterLocksArePerServer(t *testing.T) {
	need(t, "ovsdb-server", "ovsdb-tool", "ovs-appctl")
	results := map[string]string{}
	for _, kind := range []string{kindReal, kindGovn} {
		c := startCluster(t, kind, "sb")
		l := c.leader(t, "OVN_Southbound", -1)
		var order []*clusterMember
		order = append(order, l)
		for _, m := range c.Members {
			if m != l {
				order = append(order, m)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		var got []string
		// Two clients on the leader, one on each follower.
		for i, m := range []*clusterMember{order[0], order[0], order[1], order[2]} {
			conn, err := dialMember(m)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.conn.Close()
			res, err := conn.conn.CallRaw(ctx, "lock", []any{"difftest"})
			if err != nil {
				t.Fatalf("%s: lock on member %d: %v", kind, m.Index, err)
			}
			var r struct{ Locked bool }
			if err := json.Unmarshal(res, &r); err != nil {
				t.Fatalf("%s: lock reply %s", kind, res)
			}
			role := "follower"
			if i < 2 {
				role = "leader"
			}
			got = append(got, fmt.Sprintf("client %d on the %s: locked=%v", i, role, r.Locked))
		}
		cancel()
		results[kind] = strings.Join(got, "\n")
		for _, m := range c.Members {
			m.Kill()
		}
	}
	if results[kindGovn] != results[kindReal] {
		t.Errorf("locks on a cluster differ:\novsdb-server:\n%s\ngovn db:\n%s", results[kindReal], results[kindGovn])
	}
	t.Logf("both:\n%s", results[kindReal])
}
