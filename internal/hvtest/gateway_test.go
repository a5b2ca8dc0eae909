package hvtest

import (
	"strings"
	"testing"
	"time"
)

// TestGatewayRouter: a distributed cluster router between two switches
// with VMs on two hypervisors, and behind it, over a join switch, a gateway
// router bound to hv2 whose external port is on a localnet switch of the
// provider network: routed ping across hypervisors; SNAT out to an
// external host; DNAT and dnat_and_snat in from it (and dnat_and_snat's
// address on the VM's own outgoing traffic); a load-balancer VIP on the
// gateway router reached from outside, every backend answering, with and
// without lb_force_snat_ip (router_ip and an address), and
// dnat_force_snat_ip (issue 10 (c)).
func TestGatewayRouter(t *testing.T) { forEachDeployment(t, gatewayRouter) }

// The gateway router's addresses: its join port and its external port,
// which is also the SNAT address; a DNAT, a dnat_and_snat and a VIP
// address on the provider network.
const (
	gwJoinIP  = "100.64.0.2"
	gwSNATIP  = "192.168.60.254"
	gwDNATIP  = "192.168.60.101" // to vm1
	gwDSNATIP = "192.168.60.100" // to and from vm2
	gwVIP     = "192.168.60.200"
	extIP     = "192.168.60.1"
	// Force-SNAT addresses for load-balanced and DNATed connections.
	gwLBSNATIP   = "172.16.99.2"
	gwDNATSNATIP = "172.16.99.1"
)

func gatewayRouter(t *testing.T, opts Options) {
	tm := newTimer(t)
	defer tm.total()
	done := tm.step("cluster up")
	opts.Physnet = "physnet1"
	c := New(t, opts)
	done()

	done = tm.step("routers, switches, ports and VMs")
	// link joins router lr to switch ls with a router port of mac and cidr.
	link := func(lr, ls, mac, cidr string) {
		lrp, lsp := lr+"-"+ls, ls+"-"+lr
		c.NBCtl(t, "lrp-add", lr, lrp, mac, cidr,
			"--", "lsp-add", ls, lsp, "--", "lsp-set-type", lsp, "router",
			"--", "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, "router-port="+lrp)
	}
	c.NBCtl(t, "lr-add", "lr0", "--", "ls-add", "ls1", "--", "ls-add", "ls2", "--", "ls-add", "join", "--", "ls-add", "pub")
	link("lr0", "ls1", "0a:00:00:00:ff:11", "10.0.1.1/24")
	link("lr0", "ls2", "0a:00:00:00:ff:12", "10.0.2.1/24")
	link("lr0", "join", "0a:00:00:00:ff:21", "100.64.0.1/24")
	c.NBCtl(t, "lr-add", "gw", "--", "set", "Logical_Router", "gw", "options:chassis=hv2")
	link("gw", "join", "0a:00:00:00:ff:22", gwJoinIP+"/24")
	link("gw", "pub", "0a:00:00:00:ff:01", gwSNATIP+"/24")
	c.NBCtl(t, "lsp-add", "pub", "pub-ln", "--", "lsp-set-type", "pub-ln", "localnet",
		"--", "lsp-set-addresses", "pub-ln", "unknown", "--", "lsp-set-options", "pub-ln", "network_name=physnet1")
	c.NBCtl(t, "lr-route-add", "lr0", "0.0.0.0/0", gwJoinIP)
	c.NBCtl(t, "lr-route-add", "gw", "10.0.0.0/16", "100.64.0.1")
	c.NBCtl(t, "lr-nat-add", "gw", "snat", gwSNATIP, "10.0.0.0/16")
	c.NBCtl(t, "lr-nat-add", "gw", "dnat", gwDNATIP, "10.0.1.11")
	c.NBCtl(t, "lr-nat-add", "gw", "dnat_and_snat", gwDSNATIP, "10.0.2.12")
	c.NBCtl(t, "lb-add", "lbgw", gwVIP+":80", "10.0.1.11:80,10.0.2.12:80", "tcp")
	c.NBCtl(t, "lr-lb-add", "gw", "lbgw")
	c.NBCtl(t, "lsp-add", "ls1", "vm1", "--", "lsp-set-addresses", "vm1", "0a:00:00:00:01:01 10.0.1.11")
	c.NBCtl(t, "lsp-add", "ls2", "vm2", "--", "lsp-set-addresses", "vm2", "0a:00:00:00:02:02 10.0.2.12")
	vm1 := c.AddVM(t, c.Hypervisor(1), VMSpec{Name: "vm1", LSP: "vm1", MAC: "0a:00:00:00:01:01", Addr: "10.0.1.11/24", Gateway: "10.0.1.1"})
	vm2 := c.AddVM(t, c.Hypervisor(2), VMSpec{Name: "vm2", LSP: "vm2", MAC: "0a:00:00:00:02:02", Addr: "10.0.2.12/24", Gateway: "10.0.2.1"})
	// On the provider subnet only: it reaches the VMs through NAT alone.
	ext := c.AddExternal(t, VMSpec{Name: "ext", MAC: "0a:00:00:00:03:01", Addr: extIP + "/24"})
	for _, vm := range []*VM{vm1, vm2, ext} {
		vm.HTTPServe(t, 80)
	}
	c.WaitPortUp(t, "vm1")
	c.WaitPortUp(t, "vm2")
	// The gateway router's ports are l3gateway ports, which hv2 claims.
	c.WaitBound(t, "gw-pub", c.Hypervisor(2))
	c.WaitHV(t)
	done()

	t.Run("routed-ping", func(t *testing.T) {
		defer tm.step("routed ping across hypervisors")()
		pingPairs(t, [][2]*VM{{vm1, vm2}, {vm2, vm1}})
	})

	// get GETs url from a VM, retrying for a while (the first packets
	// wait for ARP and tunnels), and returns the body without its newline.
	get := func(t *testing.T, from *VM, url string) string {
		t.Helper()
		var body string
		var last error
		if err := waitFor(20*time.Second, "GET "+url+" from "+from.Name, func() bool {
			b, err := from.Curl(url)
			body, last = strings.TrimSpace(b), err
			return err == nil
		}); err != nil {
			t.Fatalf("%v (last: %v)", err, last)
		}
		return body
	}

	t.Run("snat", func(t *testing.T) {
		defer tm.step("SNAT out through the gateway router")()
		// vm1 is on hv1, the gateway on hv2: its traffic crosses a tunnel
		// to the gateway before it leaves on the provider network.
		if err := vm1.WaitPing(extIP, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := get(t, vm1, "http://"+extIP+"/ip"); got != gwSNATIP {
			t.Errorf("ext saw vm1 as %s, want the SNAT address %s", got, gwSNATIP)
		}
	})

	t.Run("dnat", func(t *testing.T) {
		defer tm.step("DNAT in from outside")()
		if got := get(t, ext, "http://"+gwDNATIP+"/peer"); got != "vm1 "+extIP {
			t.Errorf("GET %s from ext: %q, want vm1 seeing ext's own address %s", gwDNATIP, got, extIP)
		}
	})

	t.Run("dnat-and-snat", func(t *testing.T) {
		defer tm.step("dnat_and_snat in and out")()
		if err := ext.WaitPing(gwDSNATIP, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := get(t, ext, "http://"+gwDSNATIP+"/peer"); got != "vm2 "+extIP {
			t.Errorf("GET %s from ext: %q, want vm2 seeing ext's own address %s", gwDSNATIP, got, extIP)
		}
		if got := get(t, vm2, "http://"+extIP+"/ip"); got != gwDSNATIP {
			t.Errorf("ext saw vm2 as %s, want its dnat_and_snat address %s", got, gwDSNATIP)
		}
	})

	t.Run("load-balancer", func(t *testing.T) {
		defer tm.step("gateway VIP from outside")()
		peersUntilAll(t, ext, "http://"+gwVIP+"/peer", map[string]string{"vm1": extIP, "vm2": extIP})
	})

	t.Run("lb-force-snat", func(t *testing.T) {
		defer tm.step("gateway VIP with lb_force_snat_ip")()
		// The backends now see the gateway's address on the port toward
		// them, the join port.
		c.NBCtl(t, "--wait=hv", "set", "Logical_Router", "gw", "options:lb_force_snat_ip=router_ip")
		// Once in about thirty runs (govn northd, the real
		// ovn-controller) this failed right after the change, for reasons
		// not found: wait for the first forced SNAT, logging the first
		// three answers before it. ovn-northd marks a connection
		// force_snat in ct_lb_mark only if every chassis reports
		// other_config:ovn-ct-lb-related=true; without the mark the
		// connection's later packets miss the SNAT and are reset.
		url := "http://" + gwVIP + "/peer"
		start, tries := time.Now(), 0
		if err := waitFor(10*time.Second, "GET "+url+" from ext seen from "+gwJoinIP, func() bool {
			tries++
			body, err := ext.Curl(url)
			_, peer, _ := strings.Cut(strings.TrimSpace(body), " ")
			if err != nil || peer != gwJoinIP {
				if tries <= 3 {
					t.Logf("before the first forced SNAT: %q, %v", body, err)
				}
				return false
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if tries > 1 {
			t.Logf("first forced SNAT after %d requests, %v", tries, time.Since(start))
		}
		peersUntilAll(t, ext, "http://"+gwVIP+"/peer", map[string]string{"vm1": gwJoinIP, "vm2": gwJoinIP})
	})

	t.Run("force-snat-ips", func(t *testing.T) {
		defer tm.step("lb_force_snat_ip and dnat_force_snat_ip")()
		// Addresses of no network: the cluster router's default route
		// takes the replies back to the gateway, which unSNATs them.
		c.NBCtl(t, "--wait=hv", "set", "Logical_Router", "gw",
			"options:lb_force_snat_ip="+gwLBSNATIP, "options:dnat_force_snat_ip="+gwDNATSNATIP)
		// ovs-vswitchd revalidates its megaflows after an OpenFlow change
		// asynchronously, so --wait=hv does not promise that the very next
		// connection sees the new SNAT (seen once on a loaded machine with
		// the real ovn-northd and ovn-controller): wait for it, bounded.
		var got string
		if err := waitFor(10*time.Second, "GET "+gwDNATIP+" from ext seen from "+gwDNATSNATIP, func() bool {
			got = get(t, ext, "http://"+gwDNATIP+"/peer")
			return got == "vm1 "+gwDNATSNATIP
		}); err != nil {
			t.Errorf("%v: last answer %q, want vm1 seeing the dnat_force_snat_ip %s", err, got, gwDNATSNATIP)
		}
		peersUntilAll(t, ext, "http://"+gwVIP+"/peer", map[string]string{"vm1": gwLBSNATIP, "vm2": gwLBSNATIP})
	})
}

// peersUntilAll GETs url (a /peer path) from vm until every backend of
// want has answered, at most 30 times; every request must succeed and
// every backend must see the client as want says.
func peersUntilAll(t *testing.T, vm *VM, url string, want map[string]string) {
	t.Helper()
	seen := map[string]int{}
	for i, failed := 0, 0; i < 30 && len(seen) < len(want); i++ {
		body, err := vm.Curl(url)
		if err != nil {
			t.Errorf("request %d: %v", i+1, err)
			if failed++; failed == 3 {
				break // the VIP is down; more tries would only take time
			}
			continue
		}
		name, peer, _ := strings.Cut(strings.TrimSpace(body), " ")
		seen[name]++
		if w, ok := want[name]; !ok {
			t.Errorf("request %d: answered by %q, want one of the backends", i+1, body)
		} else if peer != w {
			t.Errorf("request %d: %s saw %s as %s, want %s", i+1, name, vm.Name, peer, w)
		}
	}
	t.Logf("%s → %s: %v", vm.Name, url, seen)
	for name := range want {
		if seen[name] == 0 {
			t.Errorf("backend %s never answered %s", name, url)
		}
	}
}
