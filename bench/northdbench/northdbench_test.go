package northdbench

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNorthboundNames checks that the generated cluster names every
// switch, router, port and group once.
func TestNorthboundNames(t *testing.T) {
	for _, nodes := range []int{1, 3, 300} {
		ops := Shape{Nodes: nodes}.Northbound()
		seen := make(map[string]bool)
		counts := make(map[string]int)
		for _, op := range ops {
			if op["op"] != "insert" {
				continue
			}
			table := op["table"].(string)
			counts[table]++
			row := op["row"].(map[string]any)
			name, ok := row["name"].(string)
			if !ok || table == "ACL" {
				continue
			}
			key := table + " " + name
			if strings.HasPrefix(table, "Logical_Switch_Port") || strings.HasPrefix(table, "Logical_Router_Port") {
				key = "port " + name // port names are one namespace
			}
			if seen[key] {
				t.Errorf("%d nodes: %s twice", nodes, key)
			}
			seen[key] = true
		}
		want := map[string]int{
			"Logical_Switch":              2*nodes + 1,      // node and external switches, join
			"Logical_Switch_Port":         nodes*(30+5) + 1, // pods, mgmt, stor, jtor, etor, localnet; the cluster router's jtor
			"Logical_Router":              nodes + 1,        // gateway routers and the cluster router
			"Logical_Router_Port":         3*nodes + 1,      // rtos, rtoj, rtoe; the cluster router's rtoj
			"Load_Balancer":               max(10, nodes),   // a service a node
			"Port_Group":                  10,               // a policy a namespace
			"ACL":                         30,               // three a policy
			"Gateway_Chassis":             nodes,            // on each rtos
			"NAT":                         nodes,            // SNAT on each gateway router
			"Logical_Router_Static_Route": 3 * nodes,        // two on each gateway router, one on the cluster router
		}
		for table, n := range want {
			if counts[table] != n {
				t.Errorf("%d nodes: %d %s rows, want %d", nodes, counts[table], table, n)
			}
		}
	}
}

// TestServiceBackends: 2 to 10 backends, every one a pod's address.
func TestServiceBackends(t *testing.T) {
	s := Shape{Nodes: 5}.withDefaults()
	pods := make(map[string]bool)
	for k := 0; k < s.Nodes; k++ {
		for p := 0; p < s.PodsPerNode; p++ {
			pods[s.podOf(k, p).ip] = true
		}
	}
	for i := 0; i < s.Services; i++ {
		vips := s.serviceVIPs(i, 0)
		if len(vips) != 2 {
			t.Fatalf("service %d: %d VIPs", i, len(vips))
		}
		for vip, list := range vips {
			backends := strings.Split(list, ",")
			if len(backends) < 2 || len(backends) > 10 {
				t.Errorf("service %d VIP %s: %d backends", i, vip, len(backends))
			}
			for _, b := range backends {
				ip, _, _ := strings.Cut(b, ":")
				if !pods[ip] {
					t.Errorf("service %d: backend %s is no pod", i, b)
				}
			}
		}
	}
}

func TestEngineStats(t *testing.T) {
	text := "Node: northd\n- recompute:           12\n- compute:              3\n- cancel:               0\nNode: lflow\n- recompute:            4\n"
	st := engineStats(text)
	if st["northd"]["recompute"] != 12 || st["northd"]["compute"] != 3 || st["lflow"]["recompute"] != 4 {
		t.Errorf("parsed %v", st)
	}
	if recomputes(st) != 16 {
		t.Errorf("recomputes %d, want 16", recomputes(st))
	}
}

func TestPercentile(t *testing.T) {
	var v []Duration
	for i := 10; i >= 1; i-- {
		v = append(v, Duration(i))
	}
	for _, tc := range []struct{ p, want int }{{50, 5}, {90, 9}, {100, 10}, {1, 1}} {
		if got := percentile(v, tc.p); got != Duration(tc.want) {
			t.Errorf("p%d = %d, want %d", tc.p, got, tc.want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}

// TestSmoke runs the whole bench on a 2-node cluster with the real OVN
// binaries (as govn bench northd --nodes 2 would): every figure is taken,
// both govn northd agree on the Southbound's size, and no change made
// govn northd recompute. No speed is checked.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts seven daemons")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build govn with")
	}
	bin := filepath.Join(t.TempDir(), "govn")
	bins, err := FindBinaries(bin)
	if err != nil {
		t.Skip(err)
	}
	if out, err := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, "github.com/govn/govn/cmd/govn").CombinedOutput(); err != nil {
		t.Fatalf("building govn: %v\n%s", err, out)
	}
	r, err := Run(t.Context(), bins, Config{Shape: Shape{Nodes: 2}, Changes: 2, Recomputes: 1, GovnOnOvsdbServer: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Subjects) != 3 {
		t.Fatalf("%d subjects", len(r.Subjects))
	}
	for _, s := range r.Subjects {
		// A recompute at two nodes can finish within one tick of the
		// CPU clock that /proc shows (10 ms), so it may time as zero.
		if s.Recompute < 0 {
			t.Errorf("%s: recompute = %v", s.Name, s.Recompute)
		}
		for name, v := range map[string]float64{"cold start": float64(s.ColdStart),
			"logical flows": float64(s.LogicalFlows), "dp groups": float64(s.DPGroups), "sb bytes": float64(s.SBBytes),
			"peak rss": float64(s.PeakRSS), "cold start peak rss": float64(s.ColdStartPeakRSS), "rss": float64(s.RSS), "cpu": float64(s.CPU)} {
			if !(v > 0) {
				t.Errorf("%s: %s = %v", s.Name, name, v)
			}
		}
		for _, k := range ChangeKinds {
			l := s.Changes[k]
			if l == nil || l.P50 <= 0 || l.P90 < l.P50 || l.P90 > Duration(5*time.Minute) {
				t.Errorf("%s: %s latency %+v", s.Name, k, l)
			}
			if s.Northd == "govn northd" && l != nil && l.InsideP50 <= 0 {
				t.Errorf("%s: %s: no latency measured inside govn northd", s.Name, k)
			}
		}
		if s.Northd == "govn northd" && len(s.FellBack) > 0 {
			t.Errorf("%s recomputed everything for %v", s.Name, s.FellBack)
		}
	}
	if a, b := r.Subjects[0], r.Subjects[2]; a.LogicalFlows != b.LogicalFlows || a.DPGroups != b.DPGroups {
		t.Errorf("govn northd on govn db made %d flows, %d groups; on ovsdb-server %d, %d",
			a.LogicalFlows, a.DPGroups, b.LogicalFlows, b.DPGroups)
	}
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "pod-add p50") {
		t.Errorf("table without the pod add:\n%s", buf.String())
	}
}

// TestTableWithoutOVN: a run without ovn-northd (--no-ovn) prints its
// figures with no ratio column; with it, each govn figure has its ratio.
func TestTableWithoutOVN(t *testing.T) {
	subject := func(name, northd string, coldStart time.Duration) *SubjectReport {
		s := &SubjectReport{Name: name, Northd: northd, DB: "db", ColdStart: Duration(coldStart), Changes: map[string]*Latency{}}
		for _, k := range ChangeKinds {
			s.Changes[k] = &Latency{P50: Duration(time.Millisecond)}
		}
		return s
	}
	for _, tc := range []struct {
		name      string
		subjects  []*SubjectReport
		wantRatio bool
	}{
		{"govn alone", []*SubjectReport{subject(SubjectGovn, "govn northd", 2*time.Second)}, false},
		{"side by side", []*SubjectReport{subject(SubjectGovn, "govn northd", 2*time.Second), subject(SubjectOVN, "ovn-northd", 4*time.Second)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			r := &Report{Nodes: 500, Subjects: tc.subjects}
			if err := r.WriteTable(&buf); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			if !strings.Contains(out, "pod-add p50") || !strings.Contains(out, "2.00 s") {
				t.Errorf("figures missing:\n%s", out)
			}
			if got := strings.Contains(out, "ratio") && strings.Contains(out, "0.500x"); got != tc.wantRatio {
				t.Errorf("ratio shown %v, want %v:\n%s", got, tc.wantRatio, out)
			}
		})
	}
}
