package chassisbench

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/internal/hvtest"
)

// TestSuiteSmoke runs the whole bench with tiny counts on both
// deployments: every measurement must produce its figure on each side
// (no figure is judged), and the table and JSON must come out.
func TestSuiteSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two clusters in namespaces (about 30 s)")
	}
	if why := hvtest.Available(); why != "" {
		t.Skip(why)
	}
	for _, b := range []string{"ovn-northd", "ovsdb-server", "ovs-vswitchd", "ovn-controller", "ab", "iperf3", "ping"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("needs %s", b)
		}
	}
	govn := buildGovn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var logs strings.Builder
	r, err := RunSuite(ctx, SuiteOptions{Govn: govn, OVN: true, Requests: 100, WarmRequests: 50, Rounds: 1,
		Seconds: time.Second, Pings: 2, Ports: 1, Changes: 2, AddressSet: 100,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Log("\n" + logs.String())
	if err != nil {
		t.Fatal(err)
	}
	if r.OVN == nil {
		t.Fatalf("no OVN side: %s", r.OVNSkipped)
	}
	for _, s := range []*Side{&r.Govn, r.OVN} {
		if len(s.Errors) > 0 {
			t.Errorf("%s: %v", s.Deployment, s.Errors)
		}
		// Figures that every completed run has, however loaded the
		// machine (a ping may be lost, a flow expire, a CPU reading be
		// zero over 100 requests): none is judged.
		figs := s.figures()
		for _, k := range []string{"vip_req_per_sec", "direct_req_per_sec", "vip_dp_flows_max",
			"ping_same_steady_ms", "iperf_same_tcp_mbps", "iperf_same_udp_pps", "iperf_cross_tcp_mbps",
			"port_up_p50_ms", "change_p50_ms", "addrset_rules_after"} {
			if figs[k] <= 0 {
				t.Errorf("%s: %s = %v, want a figure", s.Deployment, k, figs[k])
			}
		}
		if s.AddressSet.AnonBeforeMiB <= 0 {
			t.Errorf("%s: no anonymous memory measured before the ACL", s.Deployment)
		}
		if s.AddressSet.RulesAfter <= s.AddressSet.RulesBefore {
			t.Errorf("%s: the ACL over the address set added no rules (%d → %d)", s.Deployment,
				s.AddressSet.RulesBefore, s.AddressSet.RulesAfter)
		}
	}
	// govn chassis maps an AF_PACKET ring per port.
	if r.Govn.AddressSet.RingsBeforeMiB <= 0 {
		t.Errorf("govn: no AF_PACKET rings measured before the ACL")
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
}

func TestABParse(t *testing.T) {
	full := `This is ApacheBench, Version 2.3
Complete requests:      5000
Failed requests:        2
Time taken for tests:   3.327 seconds
Requests per second:    1503.01 [#/sec] (mean)
`
	var r ABRun
	r.parse(full, nil, 4*time.Second)
	if r.Complete != 5000 || r.Failed != 2 || r.ReqPerSec != 1503.01 || r.Seconds != 3.327 || r.Error != "" {
		t.Errorf("full run: %+v", r)
	}
	partial := "Benchmarking 10.0.2.21 (be patient)...apr_pollset_poll: The timeout specified has expired (70007)\nTotal of 2136 requests completed\n"
	r = ABRun{}
	r.parse(partial, errors.New("exit status 1"), 4*time.Second)
	if r.Complete != 2136 || r.ReqPerSec != 534 || !strings.Contains(r.Error, "2136 requests completed") {
		t.Errorf("aborted run: %+v", r)
	}
}

// TestJudge: ratios are govn over OVN and the goals follow them.
func TestJudge(t *testing.T) {
	r := &SuiteReport{
		Govn: Side{VIP: HTTPFigures{ReqPerSec: 3000, Flows1k: 10, Flows5k: 10, Completed: true},
			Direct: HTTPFigures{Completed: true}, Change: ChangeFigures{Changes: 3, P50Ms: 20}},
		OVN: &Side{VIP: HTTPFigures{ReqPerSec: 1500, Flows1k: 40, Flows5k: 47}},
	}
	r.judge()
	if r.Ratios["vip_req_per_sec"] != 2 || r.Ratios["vip_dp_flows_max"] != round3(10.0/47) {
		t.Errorf("ratios %v", r.Ratios)
	}
	goals := map[string]Goal{}
	for _, g := range r.Goals {
		goals[g.Name] = g
	}
	for name, met := range map[string]bool{
		"requests/s through the VIP":                                          true,
		"every ab run completes":                                              true,
		"datapath flows through the VIP (the larger count)":                   true,
		"change latency p50":                                                  true,
		"no more datapath flows after the timed runs than after the warm-ups": true,
	} {
		if g, ok := goals[name]; !ok || g.Met != met || g.Unknown {
			t.Errorf("goal %q: %+v, want met %v", name, g, met)
		}
	}
	if g := goals["TCP throughput (one hypervisor)"]; !g.Unknown || g.Met {
		t.Errorf("TCP goal without figures: %+v", g)
	}
}
