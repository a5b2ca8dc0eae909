package difftrace

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govn/govn/internal/refovn"
)

// govnNorthd builds ./cmd/govn and returns govn northd as a Northd, or
// skips the test while govn has no working "northd" subcommand.
func govnNorthd(t *testing.T) refovn.Northd {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "govn")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/govn/govn/cmd/govn").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/govn: %v\n%s", err, out)
	}
	if err := exec.Command(bin, "northd", "--help").Run(); err != nil {
		t.Skipf("govn northd --help: %v (no govn northd yet)", err)
	}
	return refovn.Command(bin, "northd")
}

// TestDifftraceGovn compares govn northd with the real ovn-northd on every
// topology: the same outputs and field changes for every packet (issues 9
// and 10, acceptance b).
func TestDifftraceGovn(t *testing.T) {
	refovn.SkipUnlessInstalled(t, "ovn-trace")
	northd := govnNorthd(t)
	for _, script := range topologies(t) {
		name := strings.TrimSuffix(filepath.Base(script), ".sh")
		t.Run(name, func(t *testing.T) {
			opts := Options{Script: script, UnderTest: northd}
			if dir := os.Getenv("DIFFTRACE_DUMP"); dir != "" {
				opts.Dump = filepath.Join(dir, filepath.Base(script)+".traces")
			}
			check(t, Run(t, opts))
		})
	}
}
