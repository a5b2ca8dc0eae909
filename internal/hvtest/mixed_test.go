package hvtest

import (
	"context"
	"strings"
	"testing"
)

// TestGovnChassisMixed: a govn chassis (hv1) and a real OVN hypervisor
// (hv2: ovn-controller with ovs-vswitchd's userspace datapath) on one
// Southbound interoperate over Geneve: ping and TCP in both directions,
// and a load-balancer VIP whose backends are on both hypervisors answers
// clients on either side with every backend (issue 11 (b)).
func TestGovnChassisMixed(t *testing.T) {
	c := govnChassisMix(t, 2, 2)
	hv1, hv2 := c.Hypervisor(1), c.Hypervisor(2)
	// A router port answers ARP for the VMs' gateway, so that they reach
	// the VIP, which is off their subnet.
	c.NBCtl(t, "ls-add", "ls0")
	c.NBCtl(t, "lr-add", "lr0", "--", "lrp-add", "lr0", "lr0-ls0", "0a:00:00:00:00:fe", "10.0.0.1/24")
	c.NBCtl(t, "lsp-add", "ls0", "ls0-lr0", "--", "lsp-set-type", "ls0-lr0", "router",
		"--", "lsp-set-addresses", "ls0-lr0", "router", "--", "lsp-set-options", "ls0-lr0", "router-port=lr0-ls0")
	// vm1 and vm2 are the backends, vm3 and vm4 the load balancer's
	// clients (no backend calls its own VIP: hairpin is another test).
	vms := map[string]*VM{}
	for _, vm := range []struct {
		name, mac, ip string
		hv            *Hypervisor
	}{
		{"vm1", "0a:00:00:00:00:01", "10.0.0.11", hv1},
		{"vm2", "0a:00:00:00:00:02", "10.0.0.12", hv2},
		{"vm3", "0a:00:00:00:00:03", "10.0.0.13", hv1},
		{"vm4", "0a:00:00:00:00:04", "10.0.0.14", hv2},
	} {
		c.NBCtl(t, "lsp-add", "ls0", vm.name, "--", "lsp-set-addresses", vm.name, vm.mac+" "+vm.ip)
		vms[vm.name] = c.AddVM(t, vm.hv, VMSpec{Name: vm.name, LSP: vm.name, MAC: vm.mac, Addr: vm.ip + "/24", Gateway: "10.0.0.1"})
	}
	for name := range vms {
		c.WaitPortUp(t, name)
	}
	vm1, vm2, vm3, vm4 := vms["vm1"], vms["vm2"], vms["vm3"], vms["vm4"]
	vm1.HTTPServe(t, 80)
	vm2.HTTPServe(t, 80)
	dumpOnFailure(t, c)

	t.Run("ping", func(t *testing.T) {
		pingPairs(t, [][2]*VM{{vm1, vm2}, {vm2, vm1}, {vm3, vm2}, {vm4, vm1}})
	})

	t.Run("tcp", func(t *testing.T) {
		for _, p := range [][2]*VM{{vm1, vm2}, {vm2, vm1}} {
			body, err := p[0].Curl("http://" + p[1].IP() + "/")
			if err != nil {
				t.Error(err)
				continue
			}
			if strings.TrimSpace(body) != p[1].Name {
				t.Errorf("GET from %s to %s: %q, want %q", p[0].Name, p[1].IP(), body, p[1].Name)
			}
		}
	})

	t.Run("load-balancer", func(t *testing.T) {
		c.NBCtl(t, "lb-add", "lb0", "172.16.0.100:80", "10.0.0.11:80,10.0.0.12:80", "tcp")
		c.NBCtl(t, "--wait=hv", "ls-lb-add", "ls0", "lb0")
		for _, client := range []*VM{vm3, vm4} {
			if missing := curlUntilAll(t, client, "http://172.16.0.100/", []string{"vm1", "vm2"}); len(missing) > 0 {
				t.Errorf("from %s on %s: backends %v never answered the VIP", client.Name, client.HV.Name, missing)
			}
		}
	})
}

// dumpOnFailure logs, if the test has failed by the time it ends, the
// datapath flows of every hypervisor: govn chassis' through its control
// socket, the real ovs-vswitchd's through ovs-appctl.
func dumpOnFailure(t *testing.T, c *Cluster) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, hv := range c.HVs {
			target := hv.Dir + "/chassis.ctl"
			if _, ok := hv.Chassis.(RealChassis); ok {
				target = "ovs-vswitchd"
			}
			out, err := run(context.Background(), ovsEnv(hv.Dir), inNS(hv.NS, "ovs-appctl", "-t", target, "dpctl/dump-flows")...)
			t.Logf("%s dpctl/dump-flows (%v):\n%s", hv.Name, err, out)
		}
	})
}
