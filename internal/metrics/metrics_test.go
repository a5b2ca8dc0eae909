package metrics

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/datapath/switchd"
	"github.com/govn/govn/incproc"
	"github.com/govn/govn/ovsdb/server"
	"github.com/govn/govn/pinctrl"
)

var quiet = slog.New(slog.DiscardHandler)

func TestServe(t *testing.T) {
	reg := NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "govn_test_total", Help: "A test counter."})
	c.Add(3)
	reg.MustRegister(c)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Serve(ctx, "127.0.0.1:0", reg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + s.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"govn_test_total 3\n", "go_goroutines ", "process_resident_memory_bytes "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if resp, err := http.Get("http://" + s.Addr().String() + "/nothing"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("/nothing: %v %v, want 404", resp.Status, err)
	}
	cancel()
	select {
	case err := <-s.Done():
		if err != nil {
			t.Errorf("after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still serving 5 s after cancel")
	}
	if _, err := Serve(context.Background(), "256.0.0.1:1", reg, quiet); err == nil || !strings.Contains(err.Error(), "metrics: listening on") {
		t.Errorf("bad address: %v", err)
	}
}

func TestEngine(t *testing.T) {
	stats := []incproc.NodeStats{
		{Name: "SB_port_binding", Recompute: 4},
		{Name: "lflow_output", Recompute: 1, Compute: 7, Cancel: 2, RecomputeTime: 1500 * time.Millisecond, HandleTime: 250 * time.Millisecond,
			Inputs: []incproc.InputStats{{Name: "SB_port_binding", Handled: 6, Unhandled: 1, Time: 100 * time.Millisecond}}},
	}
	c := Engine("chassis", func() []incproc.NodeStats { return stats })
	want := `
# HELP govn_chassis_engine_compute_total Runs in which the node's handlers alone brought it up to date.
# TYPE govn_chassis_engine_compute_total counter
govn_chassis_engine_compute_total{node="SB_port_binding"} 0
govn_chassis_engine_compute_total{node="lflow_output"} 7
# HELP govn_chassis_engine_input_handled_total Changes of an input that the node's handler handled.
# TYPE govn_chassis_engine_input_handled_total counter
govn_chassis_engine_input_handled_total{input="SB_port_binding",node="lflow_output"} 6
# HELP govn_chassis_engine_input_unhandled_total Changes of an input that made the node recompute.
# TYPE govn_chassis_engine_input_unhandled_total counter
govn_chassis_engine_input_unhandled_total{input="SB_port_binding",node="lflow_output"} 1
# HELP govn_chassis_engine_recompute_seconds_total Time spent recomputing the node.
# TYPE govn_chassis_engine_recompute_seconds_total counter
govn_chassis_engine_recompute_seconds_total{node="SB_port_binding"} 0
govn_chassis_engine_recompute_seconds_total{node="lflow_output"} 1.5
# HELP govn_chassis_engine_recompute_total Runs in which the node recomputed.
# TYPE govn_chassis_engine_recompute_total counter
govn_chassis_engine_recompute_total{node="SB_port_binding"} 4
govn_chassis_engine_recompute_total{node="lflow_output"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"govn_chassis_engine_compute_total", "govn_chassis_engine_input_handled_total", "govn_chassis_engine_input_unhandled_total",
		"govn_chassis_engine_recompute_seconds_total", "govn_chassis_engine_recompute_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c); n != 2*5+3 {
		t.Errorf("%d samples, want 13 (5 per node, 3 per input)", n)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestDB(t *testing.T) {
	st := server.Stats{Sessions: 3, Databases: map[string]server.DBStats{
		"OVN_Southbound": {Rows: 10, Monitors: 2, Transactions: 5, Commits: 4, MonitorUpdates: 8},
		"OVN_Northbound": {Rows: 1, Monitors: 1, Transactions: 2, Commits: 2, MonitorUpdates: 2},
	}}
	c := DB(func() server.Stats { return st })
	want := `
# HELP govn_db_commits_total Transactions that changed the database.
# TYPE govn_db_commits_total counter
govn_db_commits_total{db="OVN_Northbound"} 2
govn_db_commits_total{db="OVN_Southbound"} 4
# HELP govn_db_monitor_updates_total Update notifications queued for monitors (commits' fan-out).
# TYPE govn_db_monitor_updates_total counter
govn_db_monitor_updates_total{db="OVN_Northbound"} 2
govn_db_monitor_updates_total{db="OVN_Southbound"} 8
# HELP govn_db_sessions Client connections.
# TYPE govn_db_sessions gauge
govn_db_sessions 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "govn_db_commits_total", "govn_db_monitor_updates_total", "govn_db_sessions"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestPinctrl(t *testing.T) {
	st := pinctrl.Stats{Kinds: map[string]pinctrl.KindStats{"arp": {Handled: 5, RateDropped: 7}},
		MACBindings: pinctrl.MACBindingStats{Learned: 2, Written: 1}}
	c := Pinctrl(func() pinctrl.Stats { return st })
	want := `
# HELP govn_pinctrl_packets_total Packets sent to the controller, by kind and what became of them.
# TYPE govn_pinctrl_packets_total counter
govn_pinctrl_packets_total{kind="arp",result="error"} 0
govn_pinctrl_packets_total{kind="arp",result="handled"} 5
govn_pinctrl_packets_total{kind="arp",result="rate_dropped"} 7
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "govn_pinctrl_packets_total"); err != nil {
		t.Error(err)
	}
}

// TestDatapath runs a switch with two in-memory ports and a conntrack
// rule, sends a frame through it and reads the frame's traces in the
// metrics: an upcall, a megaflow, the rules, a connection in zone 5 and
// the ports' counters.
func TestDatapath(t *testing.T) {
	p1, p2 := port.NewChannel("p1", 8, false), port.NewChannel("p2", 8, false)
	rules, err := switchd.ParseFlows(strings.NewReader("in_port=1,udp actions=ct(commit,zone=5),output:2\npriority=0 actions=drop\n"))
	if err != nil {
		t.Fatal(err)
	}
	sw, err := switchd.New(switchd.Config{Ports: []switchd.Port{{No: 1, Kind: "channel", Port: p1}, {No: 2, Kind: "channel", Port: p2}},
		Rules: rules, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.Run(ctx, nil) }()
	defer func() { cancel(); <-done }()
	if err := p1.Inject(udpFrame(), port.Offload{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p2.Out():
	case <-time.After(5 * time.Second):
		t.Fatal("the frame did not come out of port 2")
	}
	c := Datapath(sw)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	want := `
# HELP govn_conntrack_entries Committed connections in a conntrack zone.
# TYPE govn_conntrack_entries gauge
govn_conntrack_entries{zone="5"} 1
# HELP govn_datapath_rules Rules in a flow table.
# TYPE govn_datapath_rules gauge
govn_datapath_rules{table="0"} 2
# HELP govn_datapath_upcalls_total Cache misses sent to the slow path.
# TYPE govn_datapath_upcalls_total counter
govn_datapath_upcalls_total 1
# HELP govn_port_rx_packets_total Packets received.
# TYPE govn_port_rx_packets_total counter
govn_port_rx_packets_total{name="p1",port="1"} 1
govn_port_rx_packets_total{name="p2",port="2"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"govn_conntrack_entries", "govn_datapath_rules", "govn_datapath_upcalls_total", "govn_port_rx_packets_total"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestEvents(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	n, c := NewNorthd(reg), NewChassis(reg)
	n.Wrote(3*time.Millisecond, 10, false)
	n.Wrote(0, 4, true) // no Northbound change: no latency
	c.Applied(2 * time.Millisecond)
	want := `
# HELP govn_northd_sb_ops_total Operations in the transactions that wrote the Southbound.
# TYPE govn_northd_sb_ops_total counter
govn_northd_sb_ops_total 14
# HELP govn_northd_sb_writes_recomputed_total Southbound writes that followed a full recompute.
# TYPE govn_northd_sb_writes_recomputed_total counter
govn_northd_sb_writes_recomputed_total 1
# HELP govn_northd_sb_writes_total Transactions that wrote the Southbound.
# TYPE govn_northd_sb_writes_total counter
govn_northd_sb_writes_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "govn_northd_sb_ops_total",
		"govn_northd_sb_writes_recomputed_total", "govn_northd_sb_writes_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(n.latency); got != 1 {
		t.Errorf("latency histogram: %d series", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if h := mf.GetMetric()[0].GetHistogram(); h != nil {
			counts[mf.GetName()] = h.GetSampleCount()
		}
	}
	if counts["govn_northd_nb_to_sb_seconds"] != 1 || counts["govn_chassis_sb_to_flows_seconds"] != 1 {
		t.Errorf("histogram sample counts %v, want one each", counts)
	}
}

// udpFrame is an Ethernet/IPv4/UDP frame from 10.0.0.1:1000 to
// 10.0.0.2:80 with a valid IP checksum.
func udpFrame() []byte {
	f := make([]byte, 14+20+8)
	copy(f[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(f[6:12], []byte{2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 28)
	ip[8], ip[9] = 64, 17
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], 1000)
	binary.BigEndian.PutUint16(udp[2:], 80)
	binary.BigEndian.PutUint16(udp[4:], 8)
	return f
}
