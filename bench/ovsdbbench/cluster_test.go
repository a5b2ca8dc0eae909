package ovsdbbench

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunClusterSmoke builds the govn binary and runs a small cluster
// bench of govn db's 3-server cluster against ovsdb-server's, as "govn
// bench ovsdb --cluster --quick" would: every figure must come out, no
// acknowledged transaction may be lost, and nothing may be left behind.
// No goal is judged here.
func TestRunClusterSmoke(t *testing.T) {
	baseline, err := OvsdbServerCluster()
	if err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("ovs-appctl"); err != nil {
		t.Skip(err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build govn with")
	}
	bin := filepath.Join(t.TempDir(), "govn")
	if out, err := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, "github.com/govn/govn/cmd/govn").CombinedOutput(); err != nil {
		t.Fatalf("building govn: %v\n%s", err, out)
	}
	cfg := ClusterConfig{Inserts: 100, Clients: 3, Rounds: 1, Monitors: 6, Commits: 4, Failovers: 1, TempDir: shortTempDir(t)}
	r, err := RunCluster(t.Context(), GovnCluster(bin), baseline, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, res := range r.Results {
		for _, m := range r.metrics() {
			v := m.value(&res)
			if m.key == "lost_acked_txns" {
				if v != 0 {
					t.Errorf("%s lost %v acknowledged transactions of %d", res.Server, v, res.Acked)
				}
				continue
			}
			if !(v > 0) {
				t.Errorf("result %d (%s): %s = %v, want > 0", i, res.Server, m.label, v)
			}
		}
		if res.Acked == 0 || len(res.FailoverMs) != cfg.Failovers {
			t.Errorf("%s: %d transactions acknowledged, %d failovers timed", res.Server, res.Acked, len(res.FailoverMs))
		}
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "failover after kill -9") || !strings.Contains(table.String(), "govn") {
		t.Errorf("table:\n%s", table.String())
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil || back["subject"] == nil || back["ratio"] == nil {
		t.Errorf("JSON %s: %v", b, err)
	}
	if out, _ := exec.Command("sh", "-c", "ls "+cfg.TempDir).Output(); len(out) != 0 {
		t.Errorf("temporary directories left behind: %s", out)
	}
	t.Logf("\n%s", table.String())
}
