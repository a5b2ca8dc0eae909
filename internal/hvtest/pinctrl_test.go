package hvtest

import (
	"context"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGovnChassisPinctrl: the packets govn chassis answers itself, with
// the real ovn-northd. On one hypervisor, a router joins ls1 (vm1, whose
// address comes by DHCP) and ls2 (vm2, whose IP no Northbound row
// names, so the router must ARP for it):
//   - vm1's DHCPv4 lease has its address, router, DNS server and MTU;
//   - routed traffic to vm2 makes the router ARP, the answer fills
//     MAC_Binding, and then the ping flows;
//   - ping with TTL 1 through the router gets "time exceeded";
//   - a DHCPv6 Solicit gets the port's IPv6 address in an Advertise;
//   - a router port with ipv6_ra_configs send_periodic advertises on its
//     switch every 3-4 s;
//   - a port with unknown addresses gets its MAC into FDB (put_fdb);
//   - a DNS query for a name in the switch's DNS records is answered;
//   - UDP to a port a reject ACL covers gets ICMP port unreachable;
//   - TCP to a port a reject ACL covers gets a RST (connection refused,
//     at once, where without the ACL the server answers).
func TestGovnChassisPinctrl(t *testing.T) {
	c := govnChassisCluster(t, 1)
	hv := c.Hypervisor(1)
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
	dhcp := strings.TrimSpace(c.NBCtl(t, "create", "DHCP_Options", "cidr=10.0.1.0/24"))
	c.NBCtl(t, "dhcp-options-set-options", dhcp, "lease_time=3600", "router=10.0.1.1", "server_id=10.0.1.1",
		"server_mac=0a:00:00:00:ff:11", "dns_server={8.8.8.8}", "mtu=1400")
	c.NBCtl(t, "lsp-add", "ls1", "vm1", "--", "lsp-set-addresses", "vm1", "0a:00:00:00:01:01 10.0.1.11",
		"--", "lsp-set-dhcpv4-options", "vm1", dhcp)
	// vm2's port knows its MAC only: the router has no static binding
	// for its IP.
	c.NBCtl(t, "lsp-add", "ls2", "vm2", "--", "lsp-set-addresses", "vm2", "0a:00:00:00:02:02")
	vm1 := c.AddVM(t, hv, VMSpec{Name: "vm1", LSP: "vm1", MAC: "0a:00:00:00:01:01"})
	vm2 := c.AddVM(t, hv, VMSpec{Name: "vm2", LSP: "vm2", MAC: "0a:00:00:00:02:02", Addr: "10.0.2.12/24", Gateway: "10.0.2.1"})
	c.WaitPortUp(t, "vm1")
	c.WaitPortUp(t, "vm2")
	c.NBCtl(t, "--wait=hv", "sync")
	defer func() {
		if t.Failed() {
			for _, cmd := range []string{"pinctrl/show", "dpctl/dump-flows"} {
				out, err := run(context.Background(), ovsEnv(hv.Dir), inNS(hv.NS, "ovs-appctl", "-t", hv.Dir+"/chassis.ctl", cmd)...)
				t.Logf("%s (%v):\n%s", cmd, err, out)
			}
		}
	}()

	t.Run("dhcp", func(t *testing.T) {
		l, err := vm1.DHCPLease(t)
		if err != nil {
			t.Fatal(err)
		}
		if l.Addr.String() != "10.0.1.11/24" || l.Router != "10.0.1.1" || l.DNS != "8.8.8.8" || l.MTU != 1400 {
			t.Errorf("lease %+v, want 10.0.1.11/24 router 10.0.1.1 DNS 8.8.8.8 MTU 1400", l)
		}
	})
	if !vm1.Addr.IsValid() {
		vm1.SetAddr(t, netip.MustParsePrefix("10.0.1.11/24"), "10.0.1.1") // go on without DHCP
	}

	t.Run("arp-for-unknown-neighbor", func(t *testing.T) {
		if out := c.SBCtl(t, "--bare", "--columns=mac", "find", "MAC_Binding", "ip=10.0.2.12"); strings.TrimSpace(out) != "" {
			t.Fatalf("MAC_Binding for vm2 before any traffic: %s", out)
		}
		if err := vm1.WaitPing(vm2.IP(), 20*time.Second); err != nil {
			t.Fatal(err)
		}
		out := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=mac,logical_port", "find", "MAC_Binding", "ip=10.0.2.12"))
		if !strings.Contains(out, "0a:00:00:00:02:02") || !strings.Contains(out, "lr1-ls2") {
			t.Errorf("MAC_Binding for 10.0.2.12: %q, want 0a:00:00:00:02:02 on lr1-ls2", out)
		}
		if err := vm1.Ping(vm2.IP(), 5); err != nil {
			t.Error(err)
		}
	})

	t.Run("ttl-exceeded", func(t *testing.T) {
		var out []byte
		for range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			out, _ = vm1.Command(ctx, "ping", "-n", "-c", "1", "-W", "2", "-t", "1", vm2.IP()).CombinedOutput()
			cancel()
			if strings.Contains(string(out), "From 10.0.1.1") && strings.Contains(string(out), "Time to live exceeded") {
				return
			}
		}
		t.Errorf("ping -t 1 through the router: no time exceeded from 10.0.1.1:\n%s", out)
	})

	t.Run("dns", func(t *testing.T) {
		python(t)
		dns := strings.TrimSpace(c.NBCtl(t, "create", "DNS", `records={"vm2.ovn.org"="10.0.2.12"}`))
		c.NBCtl(t, "--wait=hv", "add", "Logical_Switch", "ls1", "dns_records", dns)
		// A query for vm2.ovn.org to the DNS server the lease named: the
		// switch answers it.
		const query = `import socket,struct,sys
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(2)
q=struct.pack('>HHHHHH',0x1234,0x100,1,0,0,0)+b'\x03vm2\x03ovn\x03org\x00'+struct.pack('>HH',1,1)
s.sendto(q,(sys.argv[1],53));print(s.recv(512).hex())`
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := vm1.Command(ctx, "python3", "-c", query, "8.8.8.8").CombinedOutput()
		reply := strings.TrimSpace(string(out))
		if err != nil {
			t.Fatalf("DNS query: %v: %s", err, reply)
		}
		// Header: id 1234, a response, one question, one answer; the
		// answer's data is 10.0.2.12.
		if !strings.HasPrefix(reply, "1234") || reply[4] < '8' || reply[8:16] != "00010001" || !strings.HasSuffix(reply, "0a00020c") {
			t.Errorf("DNS reply %s, want an answer 10.0.2.12", reply)
		}
	})

	var vm3 *VM // on ls1, with IPv6 on; lives as long as the test
	outer := t
	t.Run("dhcpv6", func(t *testing.T) {
		python(t)
		d6 := strings.TrimSpace(c.NBCtl(t, "create", "DHCP_Options", `cidr="aef0::/64"`))
		c.NBCtl(t, "dhcp-options-set-options", d6, "server_id=00:00:00:10:00:01")
		c.NBCtl(t, "lsp-add", "ls1", "vm3", "--", "lsp-set-addresses", "vm3", "0a:00:00:00:01:03 10.0.1.13 aef0::13",
			"--", "lsp-set-dhcpv6-options", "vm3", d6)
		vm3 = c.AddVM(outer, hv, VMSpec{Name: "vm3", LSP: "vm3", MAC: "0a:00:00:00:01:03", Addr: "10.0.1.13/24"})
		c.WaitPortUp(t, "vm3")
		c.NBCtl(t, "--wait=hv", "sync")
		// A Solicit with an IA_NA (IAID 7) from the link-local address,
		// retried while that address is still tentative.
		const solicit = `import socket,struct,time
s=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET,socket.SO_BINDTODEVICE,b'eth0')
s.bind(('::',546));s.settimeout(1)
m=bytes([1,0x11,0x22,0x33])+struct.pack('>HH',1,10)+bytes([0,3,0,1,10,0,0,0,1,3])+struct.pack('>HHIII',3,12,7,0,0)
for i in range(10):
    try:
        s.sendto(m,('ff02::1:2',547,0,socket.if_nametoindex('eth0')));print(s.recv(1500).hex());break
    except OSError: time.sleep(0.5)`
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// The cluster's namespaces have IPv6 off; vm3 needs its
		// link-local address.
		if out, err := vm3.Command(ctx, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=0",
			"net.ipv6.conf.all.disable_ipv6=0", "net.ipv6.conf.eth0.disable_ipv6=0").CombinedOutput(); err != nil {
			t.Fatalf("enabling IPv6 on vm3: %v: %s", err, out)
		}
		out, err := vm3.Command(ctx, "python3", "-c", solicit).CombinedOutput()
		reply := strings.TrimSpace(string(out))
		// An Advertise of the transaction holding aef0::13 in an IA_NA
		// of IAID 7.
		if err != nil || !strings.HasPrefix(reply, "02112233") || !strings.Contains(reply, "00030028"+"00000007") ||
			!strings.Contains(reply, "aef00000000000000000000000000013") {
			t.Errorf("DHCPv6 reply %q (%v), want an Advertise of aef0::13", reply, err)
		}
	})

	t.Run("periodic-ra", func(t *testing.T) {
		if vm3 == nil || !vm3.Addr.IsValid() {
			t.Skip("no IPv6 VM (dhcpv6 failed)")
		}
		c.NBCtl(t, "--wait=hv", "set", "Logical_Router_Port", "lr1-ls1", `networks="10.0.1.1/24","aef0::1/64"`,
			"ipv6_ra_configs:address_mode=slaac", "ipv6_ra_configs:send_periodic=true",
			"ipv6_ra_configs:min_interval=3", "ipv6_ra_configs:max_interval=4", "ipv6_ra_configs:mtu=1400")
		// Two unsolicited advertisements within 12 s, each with the
		// prefix aef0::/64.
		const listen = `import socket,time
s=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_ICMPV6);s.settimeout(1)
end=time.time()+12;n=0
while time.time()<end and n<2:
    try: d,a=s.recvfrom(1500)
    except socket.timeout: continue
    if d[0]==134 and bytes.fromhex('aef00000000000000000000000000000') in d: n+=1;print(a[0])`
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := vm3.Command(ctx, "python3", "-c", listen).CombinedOutput()
		got := strings.Fields(string(out))
		if err != nil || len(got) != 2 || !strings.HasPrefix(got[0], "fe80::") {
			t.Errorf("periodic router advertisements: %q (%v), want 2 from the router's link-local address", out, err)
		}
	})

	t.Run("put-fdb", func(t *testing.T) {
		// A port with unknown addresses: the switch learns where its MAC
		// is from its traffic.
		c.NBCtl(t, "lsp-add", "ls2", "vm4", "--", "lsp-set-addresses", "vm4", "unknown")
		vm4 := c.AddVM(t, hv, VMSpec{Name: "vm4", LSP: "vm4", MAC: "0a:00:00:00:02:04", Addr: "10.0.2.14/24"})
		c.WaitPortUp(t, "vm4")
		if err := vm4.WaitPing(vm2.IP(), 20*time.Second); err != nil {
			t.Fatal(err)
		}
		key := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=tunnel_key", "find", "Port_Binding", "logical_port=vm4"))
		if err := waitFor(10*time.Second, "FDB row of vm4", func() bool {
			out := c.SBCtl(t, "--bare", "--columns=port_key", "find", "FDB", `mac="0a:00:00:00:02:04"`)
			return strings.TrimSpace(out) == key
		}); err != nil {
			t.Error(err)
		}
	})

	t.Run("reject-acl-udp-unreachable", func(t *testing.T) {
		python(t)
		c.NBCtl(t, "--wait=hv", "acl-add", "ls2", "to-lport", "1000", "udp.dst == 9999", "reject")
		// A connected UDP socket learns of ICMP port unreachable as
		// ECONNREFUSED on its next receive.
		const probe = `import socket,sys
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(3);s.connect((sys.argv[1],9999))
try:
    s.send(b'x');s.recv(10);print('answered')
except ConnectionRefusedError: print('refused')
except socket.timeout: print('timeout')`
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := vm1.Command(ctx, "python3", "-c", probe, vm2.IP()).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != "refused" {
			t.Errorf("UDP through a reject ACL: %s (%v), want refused", got, err)
		}
	})

	t.Run("reject-acl-resets-tcp", func(t *testing.T) {
		vm2.HTTPServe(t, 8080)
		url := "http://" + vm2.IP() + ":8080/"
		if err := waitFor(20*time.Second, "HTTP to vm2", func() bool { _, err := vm1.Curl(url); return err == nil }); err != nil {
			t.Fatal(err)
		}
		c.NBCtl(t, "--wait=hv", "acl-add", "ls2", "to-lport", "1000", "tcp.dst == 8080", "reject")
		start := time.Now()
		_, err := vm1.Curl(url)
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("GET through a reject ACL: %v, want connection refused", err)
		}
		t.Logf("refused after %v", took)
	})
}

// python skips the test without python3, which some probes use.
func python(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
}

// TestGovnChassisGARP: a gateway router bound to a govn chassis
// announces its port's address and its NAT addresses (nat-addresses =
// router) with gratuitous ARPs on the provider network through the
// localnet port, at once when they appear and again a second later.
func TestGovnChassisGARP(t *testing.T) {
	python(t)
	if why := Available(); why != "" {
		t.Skip(why)
	}
	var govn govnBinary
	t.Cleanup(govn.remove)
	bin := govn.get(t)
	govnHas(t, bin, "chassis")
	g := GovnChassis{Argv: []string{bin, "chassis"}}
	c := New(t, Options{Hypervisors: 1, Northd: RealNorthd(), Physnet: "physnet1", Chassis: func(int) Chassis { return g }})
	c.NBCtl(t, "lr-add", "gw", "--", "set", "Logical_Router", "gw", "options:chassis=hv1",
		"--", "lrp-add", "gw", "gw-pub", "0a:00:00:00:ff:01", "192.168.60.254/24",
		"--", "ls-add", "pub", "--", "lsp-add", "pub", "pub-gw", "--", "lsp-set-type", "pub-gw", "router",
		"--", "lsp-set-addresses", "pub-gw", "router", "--", "lsp-set-options", "pub-gw", "router-port=gw-pub", "nat-addresses=router",
		"--", "lsp-add", "pub", "pub-ln", "--", "lsp-set-type", "pub-ln", "localnet",
		"--", "lsp-set-addresses", "pub-ln", "unknown", "--", "lsp-set-options", "pub-ln", "network_name=physnet1")
	ext := c.AddExternal(t, VMSpec{Name: "ext", MAC: "0a:00:00:00:03:01", Addr: "192.168.60.1/24"})
	c.WaitBound(t, "pub-gw", c.Hypervisor(1))
	c.WaitHV(t)
	// Count the gratuitous ARPs for 192.168.60.100 from the router's MAC
	// while the NAT rule that brings the address is added.
	const listen = `import socket,time
s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x0806));s.bind(('eth0',0));s.settimeout(1)
ip=bytes([192,168,60,100]);end=time.time()+8;n=0
while time.time()<end:
    try: d=s.recv(100)
    except socket.timeout: continue
    a=d[14:]
    if d[6:12]==bytes.fromhex('0a000000ff01') and a[6:8]==b'\x00\x01' and a[14:18]==ip and a[24:28]==ip: n+=1
print(n)`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := ext.Command(ctx, "python3", "-c", listen)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the capture is on
	c.NBCtl(t, "lr-nat-add", "gw", "dnat_and_snat", "192.168.60.100", "10.0.1.11")
	err := cmd.Wait()
	got := strings.TrimSpace(out.String())
	if n, _ := strconv.Atoi(got); err != nil || n < 2 {
		hv := c.Hypervisor(1)
		show, _ := run(context.Background(), ovsEnv(hv.Dir), inNS(hv.NS, "ovs-appctl", "-t", hv.Dir+"/chassis.ctl", "pinctrl/show")...)
		t.Errorf("gratuitous ARPs for 192.168.60.100 on the provider network: %q (%v), want 2 or more\npinctrl/show:\n%s\nnat_addresses: %s",
			got, err, show, c.SBCtl(t, "--bare", "--columns=nat_addresses", "find", "Port_Binding", "logical_port=pub-gw"))
	}
}
