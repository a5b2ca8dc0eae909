package ovsdbbench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

func (r *ClusterReport) metrics() []metric[ClusterResult] {
	n := r.Clients
	return []metric[ClusterResult]{
		{"insert txn/s, 1 client", "insert_txn_per_s_1_client", true, func(x *ClusterResult) float64 { return x.InsertTPS1 }},
		{"commit latency p50 us, 1 client", "commit_p50_us_1_client", false, func(x *ClusterResult) float64 { return x.InsertP50Us1 }},
		{"commit latency p99 us, 1 client", "commit_p99_us_1_client", false, func(x *ClusterResult) float64 { return x.InsertP99Us1 }},
		{"server CPU us per txn (3 members), 1 client", "cpu_us_per_txn_1_client", false, func(x *ClusterResult) float64 { return x.InsertCPUUs1 }},
		{fmt.Sprintf("insert txn/s, %d clients", n), "insert_txn_per_s_n_clients", true, func(x *ClusterResult) float64 { return x.InsertTPSN }},
		{fmt.Sprintf("commit latency p50 us, %d clients", n), "commit_p50_us_n_clients", false, func(x *ClusterResult) float64 { return x.InsertP50UsN }},
		{fmt.Sprintf("commit latency p99 us, %d clients", n), "commit_p99_us_n_clients", false, func(x *ClusterResult) float64 { return x.InsertP99UsN }},
		{fmt.Sprintf("server CPU us per txn (3 members), %d clients", n), "cpu_us_per_txn_n_clients", false, func(x *ClusterResult) float64 { return x.InsertCPUUsN }},
		{fmt.Sprintf("fan-out to %d monitors on followers, p50 ms", r.Monitors), "fanout_p50_ms", false, func(x *ClusterResult) float64 { return x.FanoutP50Ms }},
		{fmt.Sprintf("fan-out to %d monitors on followers, p99 ms", r.Monitors), "fanout_p99_ms", false, func(x *ClusterResult) float64 { return x.FanoutP99Ms }},
		{"fan-out to the first monitor, p50 ms", "fanout_first_p50_ms", false, func(x *ClusterResult) float64 { return x.FanoutFirstP50Ms }},
		{"server CPU us per fan-out commit (3 members)", "fanout_cpu_us_per_commit", false, func(x *ClusterResult) float64 { return x.FanoutCPUUs }},
		{fmt.Sprintf("failover after kill -9 of the leader, median of %d, ms", r.Failovers), "failover_median_ms", false, func(x *ClusterResult) float64 { return x.FailoverMedianMs }},
		{"failover, slowest, ms", "failover_max_ms", false, func(x *ClusterResult) float64 { return x.FailoverMaxMs }},
		{"acknowledged transactions lost", "lost_acked_txns", false, func(x *ClusterResult) float64 { return float64(x.Lost) }},
	}
}

// WriteTable prints the report as an aligned table with a ratio column
// (subject / baseline).
func (r *ClusterReport) WriteTable(w io.Writer) error {
	s, b := &r.Results[0], &r.Results[1]
	var out strings.Builder
	writeMetrics(&out, r.metrics(), s.Server, b.Server, s, b)
	fmt.Fprintf(&out, "(3-server clusters on loopback, election timer 1000 ms; inserts and fan-out commits go to the leader;\n a transaction is acknowledged once on a majority's disk. Fan-out: from sending a commit until\n every monitor has its update. Failover: from SIGKILL of the leader until another member\n accepts a write, with a client writing through all members meanwhile.)\n")
	for _, x := range []*ClusterResult{s, b} {
		fmt.Fprintf(&out, "(%s failovers, ms: %s; %d of %d acknowledged transactions lost)\n", x.Server, joinFloats(x.FailoverMs), x.Lost, x.Acked)
	}
	if r.DiskSyncUs > 0 {
		fmt.Fprintf(&out, "(this disk: appending a record and fdatasync take %.0f us, median)\n", r.DiskSyncUs)
	}
	fmt.Fprintf(&out, "(ratio = %s / %s; %d CPUs, load average %.2f at the start, %.2f at the end)\n", s.Server, b.Server, r.CPUs, r.LoadAverage, r.LoadAverageEnd)
	_, err := io.WriteString(w, out.String())
	return err
}

func joinFloats(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(parts, " ")
}

// MarshalJSON writes the report as one object: the sizes, "subject" and
// "baseline" with their figures, and "ratio" (subject / baseline) per
// figure.
func (r *ClusterReport) MarshalJSON() ([]byte, error) {
	type plain ClusterReport
	return json.Marshal(struct {
		*plain
		Subject  ClusterResult      `json:"subject"`
		Baseline ClusterResult      `json:"baseline"`
		Ratio    map[string]float64 `json:"ratio"`
	}{(*plain)(r), r.Results[0], r.Results[1], ratios(r.metrics(), &r.Results[0], &r.Results[1])})
}
