package sandbox

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/govn/govn/internal/lab"
)

// part is one part of the demo: build makes it in the Northbound and in
// the namespaces and returns the checks that prove it works.
type part struct {
	what  string
	build func() ([]Check, error)
}

// demo is the demo topology, part by part, in the order they are built;
// a further part is one more entry, with its checks.
func (s *Sandbox) demo() []part {
	parts := []part{
		{"switches ls1 and ls2 joined by router lr0; VMs vm1, vm2 on ls1 and web1-3 on ls2, across the hypervisors", s.buildNetwork},
		{"load balancer lb0: VIP " + vip + ":80 to HTTP servers on web1-3, on ls1", s.buildLB},
		{"ACL on ls2: no ICMP from vm2", s.buildACL},
		{"DHCP on ls1: vm3 on hv3 without an address", s.buildDHCP},
		{"gateway router gw on hv3: SNAT from ls1 and ls2 to the provider network, host ext there", s.buildGateway},
	}
	return parts
}

// vip is the load balancer's virtual address, on no subnet.
const vip = "172.16.0.100"

// pingTimeout bounds the wait for a first answer: flows and tunnel
// neighbours take a moment to settle.
const pingTimeout = 20 * time.Second

// routerMAC is the MAC of lr0's port on a switch.
func routerMAC(ls string) string {
	switch ls {
	case "ls1":
		return "0a:00:00:00:01:01"
	case "ls2":
		return "0a:00:00:00:02:01"
	}
	return ""
}

// buildNetwork makes the two switches, the router and the five VMs: vm1
// on hv1 and vm2 on hv2 on ls1; web1, web2, web3 on hv1, hv2, hv3 on ls2.
func (s *Sandbox) buildNetwork() ([]Check, error) {
	if _, err := s.NBCtl("lr-add", "lr0"); err != nil {
		return nil, err
	}
	for _, n := range []struct{ ls, mac, cidr string }{
		{"ls1", routerMAC("ls1"), "10.0.1.1/24"},
		{"ls2", routerMAC("ls2"), "10.0.2.1/24"},
	} {
		lrp, lsp := "lr0-"+n.ls, n.ls+"-lr0"
		if _, err := s.NBCtl("ls-add", n.ls, "--", "lrp-add", "lr0", lrp, n.mac, n.cidr,
			"--", "lsp-add", n.ls, lsp, "--", "lsp-set-type", lsp, "router",
			"--", "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, "router-port="+lrp); err != nil {
			return nil, err
		}
		s.network = append(s.network, fmt.Sprintf("%s: logical switch, %s, router port %s (%s)", n.ls, netip.MustParsePrefix(n.cidr).Masked(), lrp, n.mac))
	}
	s.network = append(s.network, "lr0: distributed logical router between ls1 and ls2")
	for _, v := range []struct {
		name, ls, mac, addr, gw string
		hv                      int
	}{
		{"vm1", "ls1", "0a:00:00:00:01:11", "10.0.1.11/24", "10.0.1.1", 1},
		{"vm2", "ls1", "0a:00:00:00:01:12", "10.0.1.12/24", "10.0.1.1", 2},
		{"web1", "ls2", "0a:00:00:00:02:21", "10.0.2.21/24", "10.0.2.1", 1},
		{"web2", "ls2", "0a:00:00:00:02:22", "10.0.2.22/24", "10.0.2.1", 2},
		{"web3", "ls2", "0a:00:00:00:02:23", "10.0.2.23/24", "10.0.2.1", 3},
	} {
		addr := netip.MustParsePrefix(v.addr)
		if _, err := s.NBCtl("lsp-add", v.ls, v.name, "--", "lsp-set-addresses", v.name, v.mac+" "+addr.Addr().String()); err != nil {
			return nil, err
		}
		vm := &VM{Name: v.name, Switch: v.ls, MAC: v.mac, Addr: addr, Gateway: v.gw, HV: s.HVs[v.hv-1]}
		if err := s.addVM(vm); err != nil {
			return nil, err
		}
	}
	vm1, vm2, web1, web2, web3 := s.vm("vm1"), s.vm("vm2"), s.vm("web1"), s.vm("web2"), s.vm("web3")
	return []Check{
		s.pingCheck(vm1, vm2, "on ls1, across hypervisors"),
		s.pingCheck(vm2, vm1, "on ls1, back"),
		s.pingCheck(web1, web3, "on ls2, across hypervisors"),
		s.pingCheck(vm1, web1, "routed by lr0, on one hypervisor"),
		s.pingCheck(vm1, web2, "routed by lr0, across hypervisors"),
		s.pingCheck(web3, vm1, "routed by lr0, back"),
		{Name: "vm1 (hv1) pings lr0's addresses 10.0.1.1 and 10.0.2.1: the router answers", Run: func() error {
			for _, a := range []string{"10.0.1.1", "10.0.2.1"} {
				if err := ping(vm1, a); err != nil {
					return err
				}
			}
			return nil
		}},
	}, nil
}

// ping waits for a first answer, then wants every echo of a burst back.
func ping(from *VM, dst string) error {
	if err := lab.WaitPing(from.NS, dst, pingTimeout); err != nil {
		return err
	}
	return lab.Ping(from.NS, dst, 3)
}

func (s *Sandbox) pingCheck(from, to *VM, how string) Check {
	return Check{
		Name: fmt.Sprintf("%s (%s) pings %s (%s, %s): %s", from.Name, from.HV.Name, to.Name, to.IP(), to.HV.Name, how),
		Run:  func() error { return ping(from, to.IP()) },
	}
}

// buildLB starts an HTTP server on each web VM, answering its name, and
// puts load balancer lb0 with the three as backends on ls1, the clients'
// switch.
func (s *Sandbox) buildLB() ([]Check, error) {
	var backends, names []string
	for _, name := range []string{"web1", "web2", "web3"} {
		vm := s.vm(name)
		if _, err := s.tool.HTTPServe(&s.cl, s.Dir, vm.NS, "vm-"+name+"/http", 80, name); err != nil {
			return nil, err
		}
		backends = append(backends, vm.IP()+":80")
		names = append(names, name)
	}
	if _, err := s.NBCtl("lb-add", "lb0", vip+":80", strings.Join(backends, ","), "tcp",
		"--", "ls-lb-add", "ls1", "lb0"); err != nil {
		return nil, err
	}
	s.network = append(s.network, fmt.Sprintf("lb0: load balancer on ls1, VIP %s:80 (TCP) to %s; each backend answers its name over HTTP", vip, strings.Join(backends, " ")))
	vm1, vm2 := s.vm("vm1"), s.vm("vm2")
	return []Check{
		{Name: "vm1 reaches each of web1, web2, web3 through the VIP http://" + vip + "/", Run: func() error {
			return s.curlEvery(vm1, "http://"+vip+"/", names)
		}},
		{Name: "vm2 reaches web2 directly (routed HTTP, across hypervisors)", Run: func() error {
			return s.curlWant(vm2, "http://"+s.vm("web2").IP()+"/", "web2")
		}},
	}, nil
}

// curlWant GETs url from vm and wants body want.
func (s *Sandbox) curlWant(vm *VM, url, want string) error {
	body, err := s.tool.Curl(vm.NS, url)
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(body); got != want {
		return fmt.Errorf("GET %s: %q, want %q", url, got, want)
	}
	return nil
}

// curlEvery GETs url from vm, each on a new connection, until every body
// in want has answered, at most 30 times; three failed requests end it.
func (s *Sandbox) curlEvery(vm *VM, url string, want []string) error {
	seen := map[string]int{}
	var errs []string
	for i := 0; i < 30 && len(seen) < len(want) && len(errs) < 3; i++ {
		body, err := s.tool.Curl(vm.NS, url)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		seen[strings.TrimSpace(body)]++
	}
	var missing []string
	for _, w := range want {
		if seen[w] == 0 {
			missing = append(missing, w)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var got []string
	for b, n := range seen {
		got = append(got, fmt.Sprintf("%s %d", b, n))
	}
	sort.Strings(got)
	return fmt.Errorf("%s never answered (answers: %v; errors: %v)", strings.Join(missing, ", "), got, errs)
}

// buildACL drops ICMP from vm2 to ls2's ports: vm2 still reaches the web
// servers over HTTP, vm1 still pings them.
func (s *Sandbox) buildACL() ([]Check, error) {
	vm1, vm2, web1, web3 := s.vm("vm1"), s.vm("vm2"), s.vm("web1"), s.vm("web3")
	match := fmt.Sprintf("ip4.src == %s && icmp4", vm2.IP())
	if _, err := s.NBCtl("acl-add", "ls2", "to-lport", "1001", match, "drop"); err != nil {
		return nil, err
	}
	s.network = append(s.network, fmt.Sprintf("ACL on ls2: to-lport priority 1001 %q drop", match))
	return []Check{
		{Name: "the ACL drops vm2's pings to web1 and web3", Run: func() error {
			// Connectivity first (vm1 pings them), so that silence means
			// the ACL, not a network still settling.
			for _, to := range []*VM{web1, web3} {
				if err := ping(vm1, to.IP()); err != nil {
					return fmt.Errorf("vm1, to compare: %w", err)
				}
				if err := lab.NoPing(vm2.NS, to.IP(), 3); err != nil {
					return err
				}
			}
			return nil
		}},
		{Name: "the ACL lets vm2's HTTP through: vm2 GETs web3", Run: func() error {
			return s.curlWant(vm2, "http://"+web3.IP()+"/", "web3")
		}},
	}, nil
}

// buildDHCP adds vm3 on ls1 (hv3), which gets its address, router and
// MTU by DHCP from the chassis (the Northbound's DHCP_Options on its
// port), and then reaches web1 through the router.
func (s *Sandbox) buildDHCP() ([]Check, error) {
	const mac, ip = "0a:00:00:00:01:13", "10.0.1.13"
	uuid, err := s.NBCtl("create", "DHCP_Options", "cidr=10.0.1.0/24")
	if err != nil {
		return nil, err
	}
	uuid = strings.TrimSpace(uuid)
	if _, err := s.NBCtl("dhcp-options-set-options", uuid, "lease_time=3600", "router=10.0.1.1",
		"server_id=10.0.1.1", "server_mac="+routerMAC("ls1"), "mtu=1400"); err != nil {
		return nil, err
	}
	if _, err := s.NBCtl("lsp-add", "ls1", "vm3", "--", "lsp-set-addresses", "vm3", mac+" "+ip,
		"--", "lsp-set-dhcpv4-options", "vm3", uuid); err != nil {
		return nil, err
	}
	vm := &VM{Name: "vm3", Switch: "ls1", MAC: mac, HV: s.HVs[2]}
	if err := s.addVM(vm); err != nil {
		return nil, err
	}
	s.network = append(s.network, "DHCP_Options 10.0.1.0/24 (router 10.0.1.1, MTU 1400) on vm3's port: vm3 gets "+ip+" from its chassis")
	return []Check{{Name: "vm3 (hv3) gets " + ip + "/24, router 10.0.1.1 and MTU 1400 by DHCP, then pings web1 (hv1)", Run: func() error {
		l, err := s.tool.DHCP(vm.NS, "eth0")
		if err != nil {
			return err
		}
		if l.Addr.String() != ip+"/24" || l.Router != "10.0.1.1" || l.MTU != 1400 {
			return fmt.Errorf("lease %+v, want %s/24, router 10.0.1.1, MTU 1400", l, ip)
		}
		if !vm.Addr.IsValid() {
			if err := lab.SetAddr(vm.NS, "eth0", l.Addr, l.Router); err != nil {
				return err
			}
			vm.Addr, vm.Gateway = l.Addr, l.Router
		}
		return ping(vm, s.vm("web1").IP())
	}}}, nil
}

// The gateway's addresses: its join port, its provider-network port
// (also the SNAT address) and the external host.
const (
	gwJoinIP = "100.64.0.2"
	gwSNATIP = "192.168.100.1"
	extIP    = "192.168.100.10"
)

// buildGateway joins lr0 to gateway router gw, bound to hv3, through
// switch join; gw's other port is on switch pub, whose localnet port
// reaches the provider network, where host ext serves HTTP. lr0 routes
// by default to gw, which SNATs the VMs' 10.0.0.0/16 to its own address.
func (s *Sandbox) buildGateway() ([]Check, error) {
	link := func(lr, ls, mac, cidr string) []string {
		lrp, lsp := lr+"-"+ls, ls+"-"+lr
		return []string{"--", "lrp-add", lr, lrp, mac, cidr,
			"--", "lsp-add", ls, lsp, "--", "lsp-set-type", lsp, "router",
			"--", "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, "router-port=" + lrp}
	}
	gwHV := s.HVs[2]
	args := []string{"ls-add", "join", "--", "ls-add", "pub",
		"--", "lr-add", "gw", "--", "set", "Logical_Router", "gw", "options:chassis=" + gwHV.Name}
	args = append(args, link("lr0", "join", "0a:00:00:00:64:01", "100.64.0.1/24")...)
	args = append(args, link("gw", "join", "0a:00:00:00:64:02", gwJoinIP+"/24")...)
	args = append(args, link("gw", "pub", "0a:00:00:00:c8:01", gwSNATIP+"/24")...)
	args = append(args, "--", "lsp-add", "pub", "pub-ln", "--", "lsp-set-type", "pub-ln", "localnet",
		"--", "lsp-set-addresses", "pub-ln", "unknown", "--", "lsp-set-options", "pub-ln", "network_name="+physnet,
		"--", "lr-route-add", "lr0", "0.0.0.0/0", gwJoinIP,
		"--", "lr-route-add", "gw", "10.0.0.0/16", "100.64.0.1",
		"--", "lr-nat-add", "gw", "snat", gwSNATIP, "10.0.0.0/16")
	if _, err := s.NBCtl(args...); err != nil {
		return nil, err
	}
	ext, err := s.addExternal("ext", "0a:00:00:00:c8:10", netip.MustParsePrefix(extIP+"/24"))
	if err != nil {
		return nil, err
	}
	if _, err := s.tool.HTTPServe(&s.cl, s.Dir, ext.NS, "ext/http", 80, "ext"); err != nil {
		return nil, err
	}
	s.network = append(s.network,
		fmt.Sprintf("gw: gateway router on %s, port %s on switch join (lr0 is 100.64.0.1 there and routes 0.0.0.0/0 to gw), port %s on switch pub", gwHV.Name, gwJoinIP, gwSNATIP),
		fmt.Sprintf("pub: switch with localnet port pub-ln on %s (bridge %s); SNAT on gw: 10.0.0.0/16 to %s", physnet, providerBridge, gwSNATIP),
		fmt.Sprintf("ext: host %s on the provider network (namespace %s), serving HTTP", extIP, ext.NS))
	vm1, web2 := s.vm("vm1"), s.vm("web2")
	return []Check{
		{Name: "vm1 (hv1) pings ext " + extIP + " through gw on hv3", Run: func() error { return ping(vm1, extIP) }},
		{Name: "ext sees vm1 and web2 as the SNAT address " + gwSNATIP, Run: func() error {
			for _, vm := range []*VM{vm1, web2} {
				if err := s.curlWant(vm, "http://"+extIP+"/ip", gwSNATIP); err != nil {
					return fmt.Errorf("%s: %w", vm.Name, err)
				}
			}
			return nil
		}},
	}, nil
}
