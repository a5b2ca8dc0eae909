package ovsdbbench

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	return &Report{Clients: 16, Monitors: 200, Commits: 50, BigRows: 100000, InsertModes: []string{ModeDefault, ModeDurable}, CPUs: 2, LoadAverage: 1.5, DiskSyncUs: 250, Results: [2]Result{
		{Server: "govn", InsertTPS1: 20000, InsertTPSN: 60000, DurableTPS1: 900, DurableTPSN: 3000, FanoutP50Ms: 2, FanoutP99Ms: 4, FanoutCPUUs: 400, FanoutFirstP50Ms: 0.5, InsertCPUUs: 30, InitialMonitorMs: 150, PeakRSSMiB: 80, RSSMiB: 70},
		{Server: "ovsdb-server", InsertTPS1: 10000, InsertTPSN: 12000, DurableTPS1: 1000, DurableTPSN: 1500, FanoutP50Ms: 8, FanoutP99Ms: 10, FanoutCPUUs: 800, FanoutFirstP50Ms: 0.25, InsertCPUUs: 20, InitialMonitorMs: 600, PeakRSSMiB: 100, RSSMiB: 100},
	}}
}

func TestWriteTable(t *testing.T) {
	var b strings.Builder
	if err := sampleReport().WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := `metric                                                 govn  ovsdb-server    ratio  better
insert txn/s, 1 client, default                       20000         10000    2.00x  higher
insert txn/s, 16 clients, default                     60000         12000    5.00x  higher
insert txn/s, 1 client, durable                         900          1000    0.90x  higher
insert txn/s, 16 clients, durable                      3000          1500    2.00x  higher
server CPU us per insert, 16 clients, default          30.0          20.0    1.50x  lower
fan-out to 200 monitors, p50 ms                        2.00          8.00    0.25x  lower
fan-out to 200 monitors, p99 ms                        4.00          10.0    0.40x  lower
fan-out to the first monitor, p50 ms                   0.50          0.25    2.00x  lower
server CPU us per fan-out commit                        400           800    0.50x  lower
initial monitor of 100000 rows, ms                      150           600    0.25x  lower
peak RSS, MiB                                          80.0           100    0.80x  lower
RSS at end, MiB                                        70.0           100    0.70x  lower
` + modeNote + `(this disk: appending a record and fdatasync take 250 us, median: one client waiting for
 each fsync makes at most 4000 transactions/s, on any server)
(ratio = govn / ovsdb-server; 2 CPUs, load average 1.50 at the start)
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestReportJSON(t *testing.T) {
	b, err := json.Marshal(sampleReport())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Clients  int                `json:"clients"`
		BigRows  int                `json:"big_rows"`
		Subject  Result             `json:"subject"`
		Baseline Result             `json:"baseline"`
		Ratio    map[string]float64 `json:"ratio"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Clients != 16 || got.BigRows != 100000 || got.Subject.Server != "govn" || got.Baseline.InsertTPSN != 12000 {
		t.Errorf("decoded %+v from %s", got, b)
	}
	if got.Ratio["insert_txn_per_s_n_clients"] != 5 || got.Ratio["fanout_p50_ms"] != 0.25 || got.Ratio["durable_insert_txn_per_s_n_clients"] != 2 || len(got.Ratio) != 12 {
		t.Errorf("ratios %v", got.Ratio)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(101-i))
	}
	for p, want := range map[int]time.Duration{50: 50, 99: 99, 100: 100, 1: 1} {
		if got := percentile(ds, p); got != want {
			t.Errorf("p%d = %d, want %d", p, got, want)
		}
	}
	if percentile(nil, 50) != 0 || percentile([]time.Duration{7}, 99) != 7 {
		t.Error("edge cases")
	}
}

func TestSyncLatency(t *testing.T) {
	d, err := syncLatency(t.TempDir(), 5, 100)
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 {
		t.Errorf("append and fdatasync took %v", d)
	}
	if _, err := syncLatency("/nonexistent-dir", 1, 10); err == nil {
		t.Error("no error for a directory that does not exist")
	}
}
