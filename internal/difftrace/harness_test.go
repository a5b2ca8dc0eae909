package difftrace

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/govn/govn/internal/refovn"
)

// topologies are the Northbound scripts of testdata, each compared: all
// of them, those whose name contains $DIFFTRACE_ONLY, or with -short the
// NAT ones.
func topologies(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.sh")
	if err != nil || len(files) == 0 {
		t.Fatalf("no topologies in testdata: %v", err)
	}
	only := os.Getenv("DIFFTRACE_ONLY")
	if only == "" && testing.Short() {
		only = "-nat" // the two router NAT topologies
	}
	if only != "" {
		var keep []string
		for _, f := range files {
			if strings.Contains(f, only) {
				keep = append(keep, f)
			}
		}
		files = keep
	}
	return files
}

// check fails t for every mismatch of r (the first few in full).
func check(t *testing.T, r *Report) {
	t.Helper()
	t.Log(r.Summary())
	if len(r.Missed) > 0 {
		t.Logf("stages no trace reached: %s", strings.Join(r.Missed, " "))
	}
	for _, s := range r.Skipped {
		t.Logf("skipped %q --ct=%s: %s", s.Packet.Name, s.CT, s.Reason)
	}
	if len(r.Mismatches) > 0 {
		t.Logf("mismatches by kind of packet: %s", mismatchDigest(r.Mismatches))
	}
	for i, m := range r.Mismatches {
		if i == 5 {
			t.Errorf("... and %d more mismatches", len(r.Mismatches)-i)
			break
		}
		t.Errorf("%s --ct=%s differs:\n  ovn-trace %s '%s'\nreference:\n%s\nunder test:\n%s", m.Packet.Name, m.CT, m.Packet.Datapath, m.Packet.Flow, m.Reference, m.UnderTest)
	}
}

// TestDifftraceReference compares the real ovn-northd with itself on every
// topology: the harness must be deterministic, so every trace agrees.
//
// Every topology takes minutes on two cores, so by default only
// features-a-switch runs (TestDifftraceGovn, which runs in CI, would also
// fail on a harness that disagreed with itself); DIFFTRACE_REFERENCE=all
// runs them all.
func TestDifftraceReference(t *testing.T) {
	refovn.SkipUnlessInstalled(t, "ovn-trace")
	for _, script := range topologies(t) {
		name := strings.TrimSuffix(filepath.Base(script), ".sh")
		t.Run(name, func(t *testing.T) {
			if name != "features-a-switch" && os.Getenv("DIFFTRACE_REFERENCE") != "all" && os.Getenv("DIFFTRACE_ONLY") == "" {
				t.Skip("set DIFFTRACE_REFERENCE=all to check the harness on every topology")
			}
			opts := Options{Script: script, UnderTest: refovn.RealNorthd}
			if dir := os.Getenv("DIFFTRACE_DUMP"); dir != "" {
				opts.Dump = filepath.Join(dir, filepath.Base(script)+".traces")
			}
			r := Run(t, opts)
			check(t, r)
			if r.Packets < 100 {
				t.Errorf("only %d packets: the battery should reach every stage", r.Packets)
			}
		})
	}
}

// mismatchDigest counts mismatches by the kind of packet (the words of
// its name after the source port, addresses left out), most first.
func mismatchDigest(ms []Mismatch) string {
	counts := map[string]int{}
	for _, m := range ms {
		var kind []string
		for _, w := range strings.Fields(m.Packet.Name)[1:] {
			if strings.ContainsAny(w, ".:") || strings.Contains(w, "=") {
				continue
			}
			kind = append(kind, w)
			if len(kind) == 2 {
				break
			}
		}
		counts[strings.Join(kind, " ")]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", k, counts[k])
	}
	return b.String()
}

// TestAbortWorkaround traces the packets that make ovn-trace 23.03 abort
// (neighbor solicitations for router addresses: nd_na_router; router
// solicitations: put_nd_ra_opts) and checks that they are traced in full
// after the Southbound rewrite, the markers turned back into the actions.
func TestAbortWorkaround(t *testing.T) {
	refovn.SkipUnlessInstalled(t, "ovn-trace")
	r := Run(t, Options{Script: "testdata/features-a.sh", UnderTest: refovn.RealNorthd, Filter: func(p Packet) bool {
		return strings.HasPrefix(p.Name, "sw0-p1 nd ns ") || p.Name == "sw0-p1 router solicitation"
	}})
	check(t, r)
	found := map[string]bool{}
	for _, tr := range r.Reference {
		if strings.Contains(tr.Text, "aborted") || strings.Contains(tr.Text, "pkt.mark = 42") {
			t.Errorf("%s: %s", tr.Packet.Name, tr.Text)
		}
		for _, want := range []string{"nd_na_router {", `put_nd_ra_opts(addr_mode = "slaac", slla = 00:00:00:00:ff:01, prefix = aef0::/64);`} {
			if strings.Contains(tr.Text, want) {
				found[want] = true
			}
		}
	}
	if len(found) != 2 {
		t.Errorf("traces show %v of nd_na_router and put_nd_ra_opts", found)
	}
}
