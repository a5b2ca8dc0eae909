package hvtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/internal/lab"
)

// TestGovnChassisServiceMonitor: a switch load balancer with a health
// check and two backends on two govn chassis. Each chassis probes its
// backend and writes the Service_Monitor status; a backend whose server
// stops goes offline and the VIP reaches only the other; started again,
// it is online and the VIP reaches both. The time each change took is
// logged.
func TestGovnChassisServiceMonitor(t *testing.T) {
	c := govnChassisCluster(t, 2)
	c.NBCtl(t, "ls-add", "ls0")
	c.NBCtl(t, "lr-add", "lr0", "--", "lrp-add", "lr0", "lr0-ls0", "0a:00:00:00:00:fe", "10.0.0.1/24")
	c.NBCtl(t, "lsp-add", "ls0", "ls0-lr0", "--", "lsp-set-type", "ls0-lr0", "router",
		"--", "lsp-set-addresses", "ls0-lr0", "router", "--", "lsp-set-options", "ls0-lr0", "router-port=lr0-ls0")
	vms := map[string]*VM{}
	for _, vm := range []struct {
		name, mac, ip string
		hv            int
	}{
		{"vm1", "0a:00:00:00:00:01", "10.0.0.11", 1},
		{"vm2", "0a:00:00:00:00:02", "10.0.0.12", 1},
		{"vm3", "0a:00:00:00:00:03", "10.0.0.13", 2},
	} {
		c.NBCtl(t, "lsp-add", "ls0", vm.name, "--", "lsp-set-addresses", vm.name, vm.mac+" "+vm.ip)
		vms[vm.name] = c.AddVM(t, c.Hypervisor(vm.hv), VMSpec{Name: vm.name, LSP: vm.name, MAC: vm.mac, Addr: vm.ip + "/24", Gateway: "10.0.0.1"})
	}
	for _, vm := range []string{"vm1", "vm2", "vm3"} {
		c.WaitPortUp(t, vm)
	}
	tl, err := vmTool()
	must(t, err)
	serve := func(vm *VM, name string) *lab.Daemon {
		t.Helper()
		d, err := tl.HTTPServe(t, c.Dir, vm.NS, "vm-"+vm.Name+"/"+name, 80, vm.Name)
		must(t, err)
		return d
	}
	vm2Server := serve(vms["vm2"], "http-80")
	serve(vms["vm3"], "http-80")
	c.NBCtl(t, "lb-add", "lb0", "172.16.0.100:80", "10.0.0.12:80,10.0.0.13:80", "tcp")
	c.NBCtl(t, "set", "load_balancer", "lb0",
		`ip_port_mappings:10.0.0.12=vm2:10.0.0.254`, `ip_port_mappings:10.0.0.13=vm3:10.0.0.254`)
	c.NBCtl(t, "--id=@hc", "create", "Load_Balancer_Health_Check", `vip="172.16.0.100:80"`,
		"options:interval=1", "options:timeout=1", "options:success_count=1", "options:failure_count=2",
		"--", "add", "Load_Balancer", "lb0", "health_check", "@hc")
	c.NBCtl(t, "--wait=hv", "ls-lb-add", "ls0", "lb0")
	// A UDP service: vm2 answers on 5353, vm3 has nothing there (its
	// kernel answers ICMP port unreachable).
	_, err = tl.UDPServe(t, c.Dir, vms["vm2"].NS, "vm-vm2/udp-5353", 5353, "vm2")
	must(t, err)
	c.NBCtl(t, "lb-add", "lb1", "172.16.0.100:53", "10.0.0.12:5353,10.0.0.13:5353", "udp")
	c.NBCtl(t, "set", "load_balancer", "lb1",
		`ip_port_mappings:10.0.0.12=vm2:10.0.0.254`, `ip_port_mappings:10.0.0.13=vm3:10.0.0.254`)
	c.NBCtl(t, "--id=@hc", "create", "Load_Balancer_Health_Check", `vip="172.16.0.100:53"`,
		"options:interval=1", "options:timeout=1", "options:success_count=1", "options:failure_count=2",
		"--", "add", "Load_Balancer", "lb1", "health_check", "@hc")
	c.NBCtl(t, "--wait=hv", "ls-lb-add", "ls0", "lb1")

	statusOf := func(ip, proto string) string {
		return strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=status", "find", "Service_Monitor", "ip="+ip, "protocol="+proto))
	}
	status := func(ip string) string { return statusOf(ip, "tcp") }
	waitFor := func(ip, proto, want string) {
		t.Helper()
		start := time.Now()
		if err := lab.WaitFor(30*time.Second, "Service_Monitor "+ip+" "+proto+" "+want, func() bool { return statusOf(ip, proto) == want }); err != nil {
			t.Fatalf("%v (status %q; Service_Monitor:\n%s)", err, statusOf(ip, proto), c.SBCtl(t, "list", "Service_Monitor"))
		}
		t.Logf("Service_Monitor %s %s %s after %v", ip, proto, want, time.Since(start).Round(10*time.Millisecond))
		c.NBCtl(t, "--wait=hv", "sync") // northd has seen the status, the chassis its flows
	}
	waitStatus := func(ip, want string) { t.Helper(); waitFor(ip, "tcp", want) }
	waitStatus("10.0.0.12", "online")
	waitStatus("10.0.0.13", "online")
	waitFor("10.0.0.12", "udp", "online")
	waitFor("10.0.0.13", "udp", "offline")
	// Each SYN-ACK was answered with a RST: no half-open connection is
	// left on the backends (one may be caught between its SYN-ACK and
	// the RST: look thrice; without RSTs they stay for a minute).
	for _, vm := range []string{"vm2", "vm3"} {
		var out string
		for range 3 {
			var err error
			out, err = run(context.Background(), nil, inNS(vms[vm].NS, "ss", "-Htn", "state", "syn-recv")...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(out) == "" {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		if strings.TrimSpace(out) != "" {
			t.Errorf("%s has half-open connections:\n%s", vm, out)
		}
	}
	if missing := curlUntilAll(t, vms["vm1"], "http://172.16.0.100/", []string{"vm2", "vm3"}); len(missing) > 0 {
		t.Fatalf("backends %v never answered the VIP", missing)
	}

	vm2Server.Stop()
	waitStatus("10.0.0.12", "offline")
	if got := status("10.0.0.13"); got != "online" {
		t.Errorf("vm3's monitor is %q while its server runs", got)
	}
	for i := range 10 {
		body, err := vms["vm1"].Curl("http://172.16.0.100/")
		if err != nil || strings.TrimSpace(body) != "vm3" {
			t.Errorf("request %d to the VIP with vm2 offline: %q, %v", i+1, body, err)
		}
	}

	serve(vms["vm2"], "http-80-again")
	waitStatus("10.0.0.12", "online")
	if missing := curlUntilAll(t, vms["vm1"], "http://172.16.0.100/", []string{"vm2", "vm3"}); len(missing) > 0 {
		t.Fatalf("backends %v never answered the VIP after vm2 came back", missing)
	}
}
