package difftest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNorthdFailover runs two real ovn-northd against the same NB and SB,
// which makes them contend for the SB lock "ovn_northd": one is active,
// the other standby. Killing the active one must hand the lock to the
// standby, which then keeps the SB up to date. Run against the target and
// the real ovsdb-server; both must show the same states and flows.
func TestNorthdFailover(t *testing.T) {
	need(t, "ovn-northd", "ovn-nbctl", "ovn-sbctl", "ovs-appctl", "ovsdb-server", "ovsdb-tool")
	for _, kind := range []string{kindReal, target()} {
		t.Run(kind, func(t *testing.T) {
			c := startCentral(t, kind) // its northd is the first one
			ctx := t.Context()
			if out := c.nbctl(ctx, "ls-add", "sw0", "--", "lsp-add", "sw0", "p1"); strings.Contains(out, "[exit]") {
				t.Fatalf("ls-add: %s", out)
			}
			ctl2 := filepath.Join(c.dir, "northd2.ctl")
			startDaemon(t, c.dir, "ovn-northd", "--no-chdir",
				"--ovnnb-db="+c.nb.remote(), "--ovnsb-db="+c.sb.remote(),
				"--pidfile="+filepath.Join(c.dir, "northd2.pid"),
				"--log-file="+filepath.Join(c.dir, "northd2.log"),
				"--unixctl="+ctl2)
			ctl1 := filepath.Join(c.dir, "northd.ctl")
			waitStatus(t, ctl1, "active")
			waitStatus(t, ctl2, "standby")

			// Kill the active northd: the standby must take the lock.
			pid, err := exec.Command("cat", filepath.Join(c.dir, "northd.pid")).Output()
			if err != nil {
				t.Fatal(err)
			}
			if err := exec.Command("kill", "-9", strings.TrimSpace(string(pid))).Run(); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, ctl2, "active")
			out := c.nbctl(ctx, "lsp-add", "sw0", "p2", "--", "lsp-set-addresses", "p2", "50:54:00:00:00:02 10.0.0.2")
			if strings.Contains(out, "[exit]") {
				t.Fatalf("after failover, --wait=sb did not complete: %s", out)
			}
			flows := c.lflows(ctx)
			if !strings.Contains(flows, `outport = "p2"`) {
				t.Errorf("after failover the SB has no flows for p2:\n%s", tail(flows, 1500))
			}
		})
	}
}

// waitStatus waits until the ovn-northd behind ctl reports want
// ("active" or "standby").
func waitStatus(t *testing.T, ctl, want string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, err := exec.Command("ovs-appctl", "-t", ctl, "status").CombinedOutput()
		last = fmt.Sprintf("%s (%v)", strings.TrimSpace(string(out)), err)
		if err == nil && strings.Contains(string(out), "Status: "+want) {
			return
		}
	}
	t.Fatalf("%s: status is %s, want %s", filepath.Base(ctl), last, want)
}
