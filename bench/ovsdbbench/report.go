package ovsdbbench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// metric is one line of a report whose figures for one server are an R
// (Result, ClusterResult).
type metric[R any] struct {
	label  string
	key    string // JSON name
	higher bool   // higher is better
	value  func(*R) float64
}

// writeMetrics prints ms as an aligned table of s's and b's figures with
// a ratio column (s / b).
func writeMetrics[R any](out *strings.Builder, ms []metric[R], sName, bName string, s, b *R) {
	width := len("metric")
	for _, m := range ms {
		width = max(width, len(m.label))
	}
	col := max(12, len(sName)+2, len(bName)+2)
	fmt.Fprintf(out, "%-*s%*s%*s%9s  %s\n", width, "metric", col, sName, col, bName, "ratio", "better")
	for _, m := range ms {
		better := "lower"
		if m.higher {
			better = "higher"
		}
		fmt.Fprintf(out, "%-*s%*s%*s%8.2fx  %s\n", width, m.label, col, format(m.value(s)), col, format(m.value(b)), ratio(m.value(s), m.value(b)), better)
	}
}

// ratios is s / b per metric, by JSON name.
func ratios[R any](ms []metric[R], s, b *R) map[string]float64 {
	out := map[string]float64{}
	for _, m := range ms {
		out[m.key] = ratio(m.value(s), m.value(b))
	}
	return out
}

func (r *Report) metrics() []metric[Result] {
	var ms []metric[Result]
	if slices.Contains(r.InsertModes, ModeDefault) {
		ms = append(ms,
			metric[Result]{"insert txn/s, 1 client, default", "insert_txn_per_s_1_client", true, func(x *Result) float64 { return x.InsertTPS1 }},
			metric[Result]{fmt.Sprintf("insert txn/s, %d clients, default", r.Clients), "insert_txn_per_s_n_clients", true, func(x *Result) float64 { return x.InsertTPSN }})
	}
	if slices.Contains(r.InsertModes, ModeDurable) {
		ms = append(ms,
			metric[Result]{"insert txn/s, 1 client, durable", "durable_insert_txn_per_s_1_client", true, func(x *Result) float64 { return x.DurableTPS1 }},
			metric[Result]{fmt.Sprintf("insert txn/s, %d clients, durable", r.Clients), "durable_insert_txn_per_s_n_clients", true, func(x *Result) float64 { return x.DurableTPSN }})
	}
	if len(r.InsertModes) > 0 {
		ms = append(ms, metric[Result]{fmt.Sprintf("server CPU us per insert, %d clients, %s", r.Clients, r.InsertModes[0]), "insert_cpu_us_per_txn_n_clients", false, func(x *Result) float64 { return x.InsertCPUUs }})
	}
	return append(ms, []metric[Result]{
		{fmt.Sprintf("fan-out to %d monitors, p50 ms", r.Monitors), "fanout_p50_ms", false, func(x *Result) float64 { return x.FanoutP50Ms }},
		{fmt.Sprintf("fan-out to %d monitors, p99 ms", r.Monitors), "fanout_p99_ms", false, func(x *Result) float64 { return x.FanoutP99Ms }},
		{"fan-out to the first monitor, p50 ms", "fanout_first_p50_ms", false, func(x *Result) float64 { return x.FanoutFirstP50Ms }},
		{"server CPU us per fan-out commit", "fanout_cpu_us_per_commit", false, func(x *Result) float64 { return x.FanoutCPUUs }},
		{fmt.Sprintf("initial monitor of %d rows, ms", r.BigRows), "initial_monitor_ms", false, func(x *Result) float64 { return x.InitialMonitorMs }},
		{"peak RSS, MiB", "peak_rss_mib", false, func(x *Result) float64 { return x.PeakRSSMiB }},
		{"RSS at end, MiB", "rss_mib", false, func(x *Result) float64 { return x.RSSMiB }},
	}...)
}

// modeNote explains the insert modes under the table.
const modeNote = `(inserts "default": plain transactions; govn db replies after its log is fsynced,
 ovsdb-server without fsync. "durable": each ends with {"op":"commit","durable":true},
 so both servers fsync before replying. Fan-out: from sending a commit until every
 monitor has its update, not counting the writer's reply.)
`

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// WriteTable prints the report as an aligned table with a ratio column
// (subject / baseline).
func (r *Report) WriteTable(w io.Writer) error {
	s, b := &r.Results[0], &r.Results[1]
	var out strings.Builder
	writeMetrics(&out, r.metrics(), s.Server, b.Server, s, b)
	out.WriteString(modeNote)
	if r.DiskSyncUs > 0 {
		fmt.Fprintf(&out, "(this disk: appending a record and fdatasync take %.0f us, median: one client waiting for\n each fsync makes at most %.0f transactions/s, on any server)\n", r.DiskSyncUs, 1e6/r.DiskSyncUs)
	}
	if r.CPUs > 0 {
		fmt.Fprintf(&out, "(ratio = %s / %s; %d CPUs, load average %.2f at the start)\n", s.Server, b.Server, r.CPUs, r.LoadAverage)
	}
	_, err := io.WriteString(w, out.String())
	return err
}

func format(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// MarshalJSON writes the report as one object: the sizes, "subject" and
// "baseline" with their figures, and "ratio" (subject / baseline) per
// figure.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		*plain
		Subject  Result             `json:"subject"`
		Baseline Result             `json:"baseline"`
		Ratio    map[string]float64 `json:"ratio"`
	}{(*plain)(r), r.Results[0], r.Results[1], ratios(r.metrics(), &r.Results[0], &r.Results[1])})
}
