package chassisbench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the report for a terminal: a row a figure, govn's and
// OVN's side by side with govn/OVN, then the goals.
func (r *SuiteReport) WriteTable(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	o := r.OVN
	fmt.Fprintf(w, "govn: %s\n", r.Govn.Deployment)
	if o != nil {
		fmt.Fprintf(w, "OVN:  %s\n", o.Deployment)
	} else {
		fmt.Fprintf(w, "OVN side skipped: %s\n", r.OVNSkipped)
	}
	fmt.Fprintf(w, "\n\tgovn\tOVN\tgovn/OVN\t\n")
	g := r.Govn.figures()
	var of map[string]float64
	if o != nil {
		of = o.figures()
	}
	row := func(label, key, unit string) {
		ov, q := "-", "-"
		if o != nil {
			ov = num(of[key]) + unit
			if v, ok := r.Ratios[key]; ok {
				q = fmt.Sprintf("%.2f", v)
			}
		}
		fmt.Fprintf(w, "%s\t%s%s\t%s\t%s\t\n", label, num(g[key]), unit, ov, q)
	}
	s := r.Settings
	fmt.Fprintf(w, "ab -n %d -c 1 (median of %d), from hv1\t\t\t\t\n", s.Requests, s.Rounds)
	row("  req/s to the backend s1 (c2, through lr0)", "direct_req_per_sec", "")
	row("  req/s through the VIP (c1)", "vip_req_per_sec", "")
	row(fmt.Sprintf("  dp flows after %d requests to the VIP", s.WarmRequests), "vip_dp_flows_warm", "")
	row(fmt.Sprintf("  dp flows after %d more", s.Requests), "vip_dp_flows_timed", "")
	row(fmt.Sprintf("  dp flows after %d requests to the backend", s.WarmRequests), "direct_dp_flows_warm", "")
	row(fmt.Sprintf("  dp flows after %d more", s.Requests), "direct_dp_flows_timed", "")
	row("  chassis CPU s over the VIP runs", "vip_cpu_seconds", "")
	row("  chassis CPU s over the backend runs", "direct_cpu_seconds", "")
	row("  chassis CPU ms per request, VIP", "vip_cpu_ms_per_req", "")
	row("  chassis CPU ms per request, backend", "direct_cpu_ms_per_req", "")
	complete := func(sd *Side) string {
		var bad []string
		for _, h := range []HTTPFigures{sd.VIP, sd.Direct} {
			for _, run := range h.Runs {
				if run.Complete != run.Requests || run.Error != "" {
					bad = append(bad, fmt.Sprintf("%s %d/%d", strings.Fields(h.Target)[0], run.Complete, run.Requests))
				}
			}
		}
		if len(bad) == 0 {
			return "all"
		}
		return "NOT: " + strings.Join(bad, ", ")
	}
	ov := "-"
	if o != nil {
		ov = fmt.Sprintf("%s; switch restarts %d", complete(o), o.SwitchRestarts)
	}
	fmt.Fprintf(w, "  runs completed\t%s\t%s\t\t\n", complete(&r.Govn), ov)
	fmt.Fprintf(w, "ping from c1 (ms, median)\t\t\t\t\n")
	row("  first packet (dp flows deleted), s1 (one hypervisor)", "ping_same_first_ms", " ms")
	row("  new ping, dp flows cached, s1", "ping_same_newconn_ms", " ms")
	row("  steady, s1", "ping_same_steady_ms", " ms")
	row("  first packet (dp flows deleted), s2 (across Geneve)", "ping_cross_first_ms", " ms")
	row("  new ping, dp flows cached, s2", "ping_cross_newconn_ms", " ms")
	row("  steady, s2", "ping_cross_steady_ms", " ms")
	fmt.Fprintf(w, "iperf3 from c1, %.0f s each\t\t\t\t\n", s.Seconds)
	row("  TCP Mbit/s to s1 (one hypervisor)", "iperf_same_tcp_mbps", "")
	row("  UDP 64-byte pkt/s received, s1", "iperf_same_udp_pps", "")
	row("  TCP Mbit/s to s2 (across Geneve)", "iperf_cross_tcp_mbps", "")
	row("  UDP 64-byte pkt/s received, s2", "iperf_cross_udp_pps", "")
	for _, x := range []struct {
		label string
		f     *IperfFigures
		key   string
	}{{"  TCP Mbit/s to s1, govn with offloads", r.Govn.IperfSameHVOffloads, ""},
		{"  TCP Mbit/s to s2, govn with offloads", r.Govn.IperfCrossHVOffloads, "iperf_cross_tcp_offloads_mbps"}} {
		if x.f == nil {
			continue
		}
		q := "-"
		if v, ok := r.Ratios[x.key]; ok {
			q = fmt.Sprintf("%.2f (OVN without)", v)
		}
		fmt.Fprintf(w, "%s\t%s\t-\t%s\t\n", x.label, num(x.f.TCPMbitPerSec), q)
	}
	row(fmt.Sprintf("port-up p50 (%d ports)", s.Ports), "port_up_p50_ms", " ms")
	row(fmt.Sprintf("NB commit → every chassis, p50 (%d, --wait=hv)", s.Changes), "change_p50_ms", " ms")
	row("  p90", "change_p90_ms", " ms")
	fmt.Fprintf(w, "ACL over a %d-address set, hv1\t\t\t\t\n", s.AddressSet)
	row("  commit → every chassis", "addrset_commit_ms", " ms")
	row("  OpenFlow rules added", "addrset_rules_added", "")
	row("  rules after", "addrset_rules_after", "")
	row("  controller + switch RSS before (MiB)", "addrset_rss_before_mib", "")
	row("    of it AF_PACKET rings", "addrset_rss_before_rings_mib", "")
	row("    of it anonymous (heaps)", "addrset_rss_before_anon_mib", "")
	row("  controller + switch RSS after (MiB)", "addrset_rss_after_mib", "")
	row("  peak RSS (MiB)", "addrset_rss_peak_mib", "")
	for _, sd := range []*Side{&r.Govn, o} {
		if sd == nil {
			continue
		}
		for _, e := range sd.Errors {
			fmt.Fprintf(w, "error (%s)\t%s\t\t\t\n", sd.Deployment, e)
		}
	}
	fmt.Fprintf(w, "\ngoals\t\t\t\t\n")
	for _, gl := range r.Goals {
		met := "MISSED"
		switch {
		case gl.Unknown:
			met = "unknown"
		case gl.Met:
			met = "met"
		}
		fmt.Fprintf(w, "  %s (%s)\t%.3g\t%s\t\t\n", gl.Name, gl.Want, gl.Value, met)
	}
	w.Flush()
}

// num formats a figure with the digits that matter: whole above 100,
// three significant digits below.
func num(v float64) string {
	if v >= 100 || v <= -100 || v == float64(int64(v)) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
