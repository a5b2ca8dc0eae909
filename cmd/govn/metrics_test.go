package main

import (
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// freeAddr returns a loopback TCP address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// scrape GETs addr's /metrics.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s: %v", addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s %v\n%s", addr, resp.Status, err, b)
	}
	return string(b)
}

// sample returns the value of the sample line that matches name and
// labels exactly (labels as Prometheus writes them, e.g. `{db="OVN_Northbound"}`).
func sample(t *testing.T, text, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no sample %s in:\n%s", series, text)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMetricsDBAndNorthd runs govn db and govn northd with --metrics and
// checks that a Northbound change shows in both: the Northbound's
// transactions and commits, the Southbound's monitor fan-out, northd's
// engine counters and its NB-to-SB latency histogram.
func TestMetricsDBAndNorthd(t *testing.T) {
	if _, err := exec.LookPath("ovn-nbctl"); err != nil {
		t.Skip("ovn-nbctl not installed")
	}
	govn := northdGovn(t)
	dbAddr := map[string]string{"nb": freeAddr(t), "sb": freeAddr(t)}
	e := &northdEnv{t: t, govn: govn, northd: "govn", dir: t.TempDir(), server: "govn", dbs: map[string]*exec.Cmd{},
		dbArgs: func(db string) []string { return []string{"--metrics=" + dbAddr[db]} }}
	e.createDBs()
	northdAddr := freeAddr(t)
	e.northdArgs = []string{"--ovnnb-db=unix:" + e.sock("nb"), "--ovnsb-db=unix:" + e.sock("sb"), "--metrics=" + northdAddr}
	_, ctl := e.startNorthd("northd")
	e.waitStatus(ctl, "active", 10*time.Second)

	before := scrape(t, dbAddr["nb"])
	commits := sample(t, before, `govn_db_commits_total{db="OVN_Northbound"}`)
	e.nbctl("--wait=sb", "ls-add", "sw0")
	e.nbctl("--wait=sb", "lsp-add", "sw0", "p1", "--", "lsp-set-addresses", "p1", "00:00:00:00:00:01 10.0.0.1")

	nb := scrape(t, dbAddr["nb"])
	if got := sample(t, nb, `govn_db_commits_total{db="OVN_Northbound"}`); got < commits+2 {
		t.Errorf("Northbound commits %v after two changes, %v before", got, commits)
	}
	if got := sample(t, nb, `govn_db_transactions_total{db="OVN_Northbound"}`); got < 2 {
		t.Errorf("Northbound transactions %v", got)
	}
	if got := sample(t, nb, `govn_db_monitors{db="OVN_Northbound"}`); got < 1 {
		t.Errorf("Northbound monitors %v, want northd's at least", got)
	}
	sb := scrape(t, dbAddr["sb"])
	if got := sample(t, sb, `govn_db_rows{db="OVN_Southbound"}`); got == 0 {
		t.Error("Southbound rows 0 after northd wrote it")
	}
	if got := sample(t, sb, `govn_db_monitor_updates_total{db="OVN_Southbound"}`); got < 1 {
		t.Errorf("Southbound monitor updates %v: nbctl --wait=sb monitors it", got)
	}
	nd := scrape(t, northdAddr)
	if got := sample(t, nd, `govn_northd_nb_to_sb_seconds_count`); got < 2 {
		t.Errorf("northd NB-to-SB latencies observed: %v, want at least the two changes", got)
	}
	if got := sample(t, nd, `govn_northd_sb_writes_total`); got < 2 {
		t.Errorf("northd SB writes %v", got)
	}
	// Both changes were handled incrementally, through the northd node's
	// handler for the Logical_Switch(_Port) inputs.
	if got := sample(t, nd, `govn_northd_engine_compute_total{node="northd"}`); got < 2 {
		t.Errorf("northd node's incremental runs %v, want at least 2", got)
	}
	if got := sample(t, nd, `govn_northd_engine_input_handled_total{input="NB_logical_switch_port",node="northd"}`); got < 1 {
		t.Errorf("Logical_Switch_Port changes handled %v, want at least 1", got)
	}
	if got := sample(t, nd, `process_resident_memory_bytes`); got == 0 {
		t.Error("no process metrics")
	}
}

// TestMetricsBusyAddress: a daemon given an address it cannot listen on
// refuses to start and says why.
func TestMetricsBusyAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	code, _, stderr := runCapture("db", "--create=nb", "--remote=punix:"+dir+"/nb.sock", "--unixctl=none",
		"--metrics="+l.Addr().String(), dir+"/nb.db")
	if code == 0 || !regexp.MustCompile(`metrics: listening on`).MatchString(stderr) {
		t.Fatalf("govn db on a busy metrics address: exit %d, stderr %q", code, stderr)
	}
}
