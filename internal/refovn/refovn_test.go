package refovn

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestStartRunsNorthd brings up the databases and the real ovn-northd,
// runs a script, waits for the Southbound and checks what northd wrote;
// after the subtest's cleanup no process it started is left.
func TestStartRunsNorthd(t *testing.T) {
	SkipUnlessInstalled(t)
	var pidfiles []string
	var pids []int
	t.Run("env", func(t *testing.T) {
		e := Start(t, RealNorthd)
		ctx := context.Background()
		if err := e.AddChassis(ctx, "hv1", "hv2"); err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(t.TempDir(), "nb.sh")
		os.WriteFile(script, []byte("set -e\novn-nbctl ls-add sw -- lsp-add sw p1 -- lsp-set-addresses p1 '0a:00:00:00:00:01 10.0.0.1'\n"), 0o644)
		if err := e.RunScript(ctx, script); err != nil {
			t.Fatal(err)
		}
		if err := e.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		out, err := e.SBCtl(ctx, "--bare", "--columns=logical_port", "list", "Port_Binding")
		if err != nil || strings.TrimSpace(out) != "p1" {
			t.Errorf("Port_Binding logical ports %q, %v; want p1", out, err)
		}
		out, err = e.SBCtl(ctx, "--bare", "--columns=name", "list", "Chassis")
		if err != nil || !strings.Contains(out, "hv1") || !strings.Contains(out, "hv2") {
			t.Errorf("Chassis %q, %v; want hv1 and hv2", out, err)
		}
		for _, f := range []string{"nb.pid", "sb.pid", "northd.pid"} {
			pidfiles = append(pidfiles, filepath.Join(e.Dir, f))
			b, err := os.ReadFile(filepath.Join(e.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			pids = append(pids, pid)
		}
	})
	for i, pid := range pids {
		if pid <= 0 || syscall.Kill(pid, 0) == nil {
			t.Errorf("%s: process %d still runs after cleanup", pidfiles[i], pid)
		}
	}
}
