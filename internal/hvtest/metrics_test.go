package hvtest

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGovnChassisMetrics runs govn chassis with --metrics on its
// namespace's loopback and checks, after two VMs have pinged, that the
// scrape shows the engine, the Southbound-to-flows latency, the
// datapath's rules and megaflows, and the VMs' port counters; and that
// other_config:flow-limit in the local database sets the megaflow cap.
func TestGovnChassisMetrics(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip(why)
	}
	var govn govnBinary
	t.Cleanup(govn.remove)
	bin := govn.get(t)
	govnHas(t, bin, "chassis")
	const addr = "127.0.0.1:9476" // the hypervisor's own loopback
	c := New(t, Options{Hypervisors: 1, Northd: RealNorthd(), Chassis: func(int) Chassis {
		return GovnChassis{Argv: []string{bin, "chassis", "--metrics=" + addr}}
	}})
	hv1 := c.Hypervisor(1)
	c.NBCtl(t, "ls-add", "ls0")
	vms := map[string]*VM{}
	for _, vm := range []struct{ name, mac, ip string }{
		{"vm1", "0a:00:00:00:00:01", "10.0.0.11"},
		{"vm2", "0a:00:00:00:00:02", "10.0.0.12"},
	} {
		c.NBCtl(t, "lsp-add", "ls0", vm.name, "--", "lsp-set-addresses", vm.name, vm.mac+" "+vm.ip)
		vms[vm.name] = c.AddVM(t, hv1, VMSpec{Name: vm.name, LSP: vm.name, MAC: vm.mac, Addr: vm.ip + "/24"})
	}
	c.WaitPortUp(t, "vm1")
	c.WaitPortUp(t, "vm2")
	if err := vms["vm1"].WaitPing(vms["vm2"].IP(), 20*time.Second); err != nil {
		t.Fatalf("vm1 -> vm2: %v", err)
	}
	// The hypervisor's loopback is its own: scrape from inside its
	// namespace, with the test binary's own HTTP client (no curl needed).
	tl, err := vmTool()
	if err != nil {
		t.Fatal(err)
	}
	scrape := func() string {
		t.Helper()
		body, err := tl.Curl(hv1.NS, "http://"+addr+"/metrics")
		if err != nil {
			t.Fatalf("scraping the chassis' metrics: %v", err)
		}
		return body
	}
	text := scrape()
	value := func(series string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no sample %s in the scrape:\n%s", series, text)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	if v := value(`govn_chassis_engine_recompute_total{node="lflow_output"}`); v < 1 {
		t.Errorf("lflow_output recomputes %v: the first run recomputes", v)
	}
	if v := value("govn_chassis_sb_to_flows_seconds_count"); v < 1 {
		t.Errorf("Southbound changes programmed: %v", v)
	}
	if v := value("govn_datapath_upcalls_total"); v < 1 {
		t.Errorf("upcalls %v after a ping", v)
	}
	if !regexp.MustCompile(`(?m)^govn_datapath_rules\{table="\d+"\} [1-9]`).MatchString(text) {
		t.Error("no table with rules")
	}
	rx := regexp.MustCompile(`(?m)^govn_port_rx_packets_total\{name="` + regexp.QuoteMeta(vms["vm1"].Port) + `",port="\d+"\} (\S+)$`).FindStringSubmatch(text)
	if rx == nil {
		t.Fatalf("no counters of vm1's port %s in the scrape:\n%s", vms["vm1"].Port, text)
	}
	if v, _ := strconv.ParseFloat(rx[1], 64); v < 1 {
		t.Errorf("vm1's port received %v packets", v)
	}

	hv1.Vsctl(t, "set", "Open_vSwitch", ".", "other_config:flow-limit=1234")
	if err := waitFor(10*time.Second, "flow limit 1234 in upcall/show", func() bool {
		out, err := run(context.Background(), ovsEnv(hv1.Dir), inNS(hv1.NS, "ovs-appctl", "-t", hv1.Dir+"/chassis.ctl", "upcall/show")...)
		return err == nil && strings.Contains(out, "(limit 1234)")
	}); err != nil {
		t.Error(err)
	}
	text = scrape()
	if v := value("govn_datapath_flow_limit"); v != 1234 {
		t.Errorf("govn_datapath_flow_limit %v after other_config:flow-limit=1234", v)
	}
}
