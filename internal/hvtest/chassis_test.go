package hvtest

import (
	"context"
	"strings"
	"testing"
	"time"
)

// govnChassisCluster starts a cluster whose hypervisors all run govn
// chassis, with the real ovn-northd. The scenarios here pass, so they run
// without GOVN_HVTEST_GOVN (which still gates forEachDeployment's, most
// of which govn chassis does not pass yet).
func govnChassisCluster(t *testing.T, hypervisors int) *Cluster {
	t.Helper()
	return govnChassisMix(t, hypervisors, 0)
}

// govnChassisMix is govnChassisCluster with hypervisor realFrom and
// those after it running the real ovs-vswitchd and ovn-controller (0:
// none).
func govnChassisMix(t *testing.T, hypervisors, realFrom int) *Cluster {
	t.Helper()
	if why := Available(); why != "" {
		t.Skip(why)
	}
	var govn govnBinary
	t.Cleanup(govn.remove)
	bin := govn.get(t)
	govnHas(t, bin, "chassis")
	g := GovnChassis{Argv: []string{bin, "chassis"}}
	return New(t, Options{Hypervisors: hypervisors, Northd: RealNorthd(), Chassis: func(i int) Chassis {
		if realFrom > 0 && i >= realFrom {
			return RealChassis{}
		}
		return g
	}})
}

// TestGovnChassisOneHypervisor: two VMs on one logical switch on one govn
// chassis ping each other; the chassis registered itself, bound both
// ports (up, ovn-installed) and keeps their conntrack zones in its local
// database.
func TestGovnChassisOneHypervisor(t *testing.T) {
	c := govnChassisCluster(t, 1)
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

	if out := c.SBCtl(t, "--bare", "--columns=name", "list", "Chassis"); strings.TrimSpace(out) != "hv1" {
		t.Errorf("Chassis names: %q, want hv1", out)
	}
	if out := c.SBCtl(t, "--bare", "--columns=other_config", "list", "Chassis"); !strings.Contains(out, "port-up-notif=true") {
		t.Errorf("Chassis other_config lacks port-up-notif: %q", out)
	}
	if out := c.SBCtl(t, "--bare", "--columns=type,ip", "list", "Encap"); !strings.Contains(out, "geneve") || !strings.Contains(out, hv1.EncapIP.String()) {
		t.Errorf("Encap: %q", out)
	}
	for _, vm := range []string{"vm1", "vm2"} {
		port := vms[vm].Port
		if out := hv1.Vsctl(t, "get", "Interface", port, "external_ids:ovn-installed"); strings.Trim(strings.TrimSpace(out), `"`) != "true" {
			t.Errorf("%s: ovn-installed = %q", port, out)
		}
		if out := hv1.Vsctl(t, "get", "Interface", port, "ofport"); strings.TrimSpace(out) == "[]" || strings.HasPrefix(out, "-") {
			t.Errorf("%s: ofport = %q", port, out)
		}
		if out := hv1.Vsctl(t, "get", "Open_vSwitch", ".", "external_ids:ct-zone-"+vm); strings.Trim(strings.TrimSpace(out), `"`) == "" {
			t.Errorf("no ct zone for %s", vm)
		}
	}
	if err := vms["vm1"].WaitPing(vms["vm2"].IP(), 20*time.Second); err != nil {
		for _, cmd := range []string{"dpctl/dump-flows", "dpctl/show"} {
			out, err := run(context.Background(), ovsEnv(hv1.Dir), inNS(hv1.NS, "ovs-appctl", "-t", hv1.Dir+"/chassis.ctl", cmd)...)
			t.Logf("%s (%v):\n%s", cmd, err, out)
		}
		out, _ := run(context.Background(), nil, inNS(vms["vm1"].NS, "ip", "neigh")...)
		t.Logf("vm1 neighbours:\n%s", out)
		t.Fatalf("vm1 -> vm2: %v", err)
	}
	if err := vms["vm2"].Ping(vms["vm1"].IP(), 3); err != nil {
		t.Errorf("vm2 -> vm1: %v", err)
	}
	// The control socket answers the real ovs-appctl.
	if out := hv1.Run(t, "ovs-appctl", "-t", hv1.Dir+"/chassis.ctl", "ct-zone-list"); !strings.Contains(out, "vm1 ") || !strings.Contains(out, "vm2 ") {
		t.Errorf("ct-zone-list:\n%s", out)
	}
	if out := hv1.Run(t, "ovs-appctl", "-t", hv1.Dir+"/chassis.ctl", "dump-flows"); !strings.Contains(out, "table=65") {
		t.Errorf("dump-flows has no table 65:\n%s", out)
	}
}

// TestGovnChassisGeneve: VMs of one logical switch on two govn chassis
// ping each other over Geneve, both ways; and with a real OVN chassis
// (ovn-controller and ovs-vswitchd) on the other side.
func TestGovnChassisGeneve(t *testing.T) {
	t.Run("govn+govn", func(t *testing.T) { geneveScenario(t, govnChassisCluster(t, 2)) })
	t.Run("govn+ovn", func(t *testing.T) { geneveScenario(t, govnChassisMix(t, 2, 2)) })
}

func geneveScenario(t *testing.T, c *Cluster) {
	c.NBCtl(t, "ls-add", "ls0")
	vms := map[string]*VM{}
	for i, vm := range []struct{ name, mac, ip string }{
		{"vm1", "0a:00:00:00:00:01", "10.0.0.11"},
		{"vm2", "0a:00:00:00:00:02", "10.0.0.12"},
	} {
		c.NBCtl(t, "lsp-add", "ls0", vm.name, "--", "lsp-set-addresses", vm.name, vm.mac+" "+vm.ip)
		vms[vm.name] = c.AddVM(t, c.Hypervisor(i+1), VMSpec{Name: vm.name, LSP: vm.name, MAC: vm.mac, Addr: vm.ip + "/24"})
	}
	c.WaitPortUp(t, "vm1")
	c.WaitPortUp(t, "vm2")
	if err := vms["vm1"].WaitPing(vms["vm2"].IP(), 20*time.Second); err != nil {
		for _, hv := range []*Hypervisor{c.Hypervisor(1), c.Hypervisor(2)} {
			out, err := run(context.Background(), ovsEnv(hv.Dir), inNS(hv.NS, "ovs-appctl", "-t", hv.Dir+"/chassis.ctl", "dpctl/dump-flows")...)
			t.Logf("%s dpctl/dump-flows (%v):\n%s", hv.Name, err, out)
		}
		t.Fatalf("vm1 -> vm2: %v", err)
	}
	if err := vms["vm2"].Ping(vms["vm1"].IP(), 3); err != nil {
		t.Errorf("vm2 -> vm1: %v", err)
	}
}

// TestGovnChassisRouted: VMs on two logical switches joined by a
// distributed logical router ping each other, on one govn chassis and
// across two.
func TestGovnChassisRouted(t *testing.T) {
	c := govnChassisCluster(t, 2)
	c.NBCtl(t, "lr-add", "lr1")
	for _, n := range []struct{ ls, mac, cidr string }{
		{"ls1", "0a:00:00:00:ff:11", "10.0.1.1/24"},
		{"ls2", "0a:00:00:00:ff:12", "10.0.2.1/24"},
	} {
		lrp, lsp := "lr1-"+n.ls, n.ls+"-lr1"
		c.NBCtl(t, "ls-add", n.ls, "--", "lrp-add", "lr1", lrp, n.mac, n.cidr,
			"--", "lsp-add", n.ls, lsp, "--", "lsp-set-type", lsp, "router",
			"--", "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, "router-port="+lrp)
	}
	type vmDef struct {
		name, ls, mac, ip, gw string
		hv                    int
	}
	defs := []vmDef{
		{"vm1", "ls1", "0a:00:00:00:01:01", "10.0.1.11", "10.0.1.1", 1},
		{"vm2", "ls2", "0a:00:00:00:02:02", "10.0.2.12", "10.0.2.1", 1},
		{"vm3", "ls2", "0a:00:00:00:02:03", "10.0.2.13", "10.0.2.1", 2},
	}
	vms := map[string]*VM{}
	for _, d := range defs {
		c.NBCtl(t, "lsp-add", d.ls, d.name, "--", "lsp-set-addresses", d.name, d.mac+" "+d.ip)
		vms[d.name] = c.AddVM(t, c.Hypervisor(d.hv), VMSpec{Name: d.name, LSP: d.name, MAC: d.mac, Addr: d.ip + "/24", Gateway: d.gw})
	}
	for _, d := range defs {
		c.WaitPortUp(t, d.name)
	}
	for _, p := range [][2]string{{"vm1", "vm2"}, {"vm2", "vm1"}, {"vm1", "vm3"}, {"vm3", "vm1"}} {
		t.Run(p[0]+"-"+p[1], func(t *testing.T) {
			if err := vms[p[0]].WaitPing(vms[p[1]].IP(), 20*time.Second); err != nil {
				hv := c.Hypervisor(1)
				out, err2 := run(context.Background(), ovsEnv(hv.Dir), inNS(hv.NS, "ovs-appctl", "-t", hv.Dir+"/chassis.ctl", "dpctl/dump-flows")...)
				t.Logf("hv1 dpctl/dump-flows (%v):\n%s", err2, out)
				t.Fatal(err)
			}
		})
	}
}

// TestGovnChassisLoadBalancer: a client reaches every backend of a
// load-balancer VIP on its switch (no hairpin: the client is no backend),
// one backend on its chassis and one on another.
func TestGovnChassisLoadBalancer(t *testing.T) {
	c := govnChassisCluster(t, 2)
	hv1 := c.Hypervisor(1)
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
	vms["vm2"].HTTPServe(t, 80)
	vms["vm3"].HTTPServe(t, 80)
	c.NBCtl(t, "lb-add", "lb0", "172.16.0.100:80", "10.0.0.12:80,10.0.0.13:80", "tcp")
	c.NBCtl(t, "--wait=hv", "ls-lb-add", "ls0", "lb0")
	if missing := curlUntilAll(t, vms["vm1"], "http://172.16.0.100/", []string{"vm2", "vm3"}); len(missing) > 0 {
		out, err := run(context.Background(), ovsEnv(hv1.Dir), inNS(hv1.NS, "ovs-appctl", "-t", hv1.Dir+"/chassis.ctl", "dpctl/dump-flows")...)
		t.Logf("dpctl/dump-flows (%v):\n%s", err, out)
		t.Fatalf("backends %v never answered the VIP", missing)
	}
}
