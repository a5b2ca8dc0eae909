package ovsdbbench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRunOvsdbServerAgainstItself runs a small bench of the real
// ovsdb-server against itself: every figure must come out positive and the
// servers must be gone afterwards.
func TestRunOvsdbServerAgainstItself(t *testing.T) {
	target, err := OvsdbServer()
	if err != nil {
		t.Skip(err)
	}
	cfg := Config{Inserts: 300, Clients: 3, Monitors: 10, Commits: 5, BigRows: 3000, Rounds: 1, TempDir: shortTempDir(t)}
	r, err := Run(t.Context(), target, target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, res := range r.Results {
		for _, m := range r.metrics() {
			if v := m.value(&res); !(v > 0) {
				t.Errorf("result %d: %s = %v, want > 0", i, m.label, v)
			}
		}
		if res.InsertTransactions == 0 {
			t.Errorf("result %d: no insert transactions counted", i)
		}
	}
	if out, _ := exec.Command("sh", "-c", "ls "+cfg.TempDir).Output(); len(out) != 0 {
		t.Errorf("temporary directories left behind: %s", out)
	}
}

// TestBadTarget reports a server that cannot start.
func TestBadTarget(t *testing.T) {
	bad := Target{
		Name:    "false",
		Create:  func(ctx context.Context, db, schema string) error { return nil },
		Command: func(db, sock, dir string) *exec.Cmd { return exec.Command("false") },
	}
	if _, err := Run(t.Context(), bad, bad, Config{TempDir: shortTempDir(t)}); err == nil {
		t.Fatal("a server that exits at once was accepted")
	}
}

// shortTempDir is a temporary directory with a path short enough for unix
// socket names (t.TempDir's can exceed their 108 bytes).
func shortTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "ovb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestRunGovn builds the govn binary and runs a small bench of govn db
// against the real ovsdb-server, as "govn bench ovsdb --quick" would.
func TestRunGovn(t *testing.T) {
	baseline, err := OvsdbServer()
	if err != nil {
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
	cfg := Config{Inserts: 300, Clients: 3, Monitors: 10, Commits: 5, BigRows: 3000, Rounds: 1, TempDir: shortTempDir(t)}
	r, err := Run(t.Context(), Govn(bin), baseline, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Results[0].Server != "govn" || r.Results[1].Server != "ovsdb-server" {
		t.Errorf("servers %q and %q", r.Results[0].Server, r.Results[1].Server)
	}
	for _, m := range r.metrics() {
		if v := m.value(&r.Results[0]); !(v > 0) {
			t.Errorf("govn: %s = %v, want > 0", m.label, v)
		}
	}
}
