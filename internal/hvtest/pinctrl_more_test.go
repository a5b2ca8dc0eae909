package hvtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// arpFrame is an ARP packet (op 1 request, 2 reply) from sha/spa to
// tpa, broadcast.
func arpFrame(op uint16, sha net.HardwareAddr, spa, tpa netip.Addr) []byte {
	f := make([]byte, 14+28)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], sha)
	binary.BigEndian.PutUint16(f[12:], 0x0806)
	a := f[14:]
	binary.BigEndian.PutUint16(a[0:], 1)
	binary.BigEndian.PutUint16(a[2:], 0x0800)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], op)
	copy(a[8:14], sha)
	s, d := spa.As4(), tpa.As4()
	copy(a[14:18], s[:])
	copy(a[24:28], d[:])
	return f
}

// tcpSYN is a TCP SYN from src (port 40001) to dst:port, sent to the
// MAC dmac.
func tcpSYN(dmac, smac net.HardwareAddr, src, dst netip.Addr, port uint16) []byte {
	f := make([]byte, 14+20+20)
	copy(f[0:6], dmac)
	copy(f[6:12], smac)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(ip[2:], 40)
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:], csum(0, ip[:20]))
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], 40001)
	binary.BigEndian.PutUint16(tcp[2:], port)
	binary.BigEndian.PutUint32(tcp[4:], 1)
	tcp[12], tcp[13] = 5<<4, 0x02
	binary.BigEndian.PutUint16(tcp[14:], 64240)
	var ps uint32
	for i := 0; i < 8; i += 2 {
		ps += uint32(binary.BigEndian.Uint16(ip[12+i:]))
	}
	binary.BigEndian.PutUint16(tcp[16:], csum(ps+6+20, tcp))
	return f
}

// csum is the Internet checksum of b, starting from sum.
func csum(sum uint32, b []byte) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// receive reads frames from the raw socket fd until match accepts one
// (true) or timeout passes (false).
func receive(fd int, timeout time.Duration, match func([]byte) bool) bool {
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 2048)
	for end := time.Now().Add(timeout); time.Now().Before(end); {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == nil && match(buf[:n]) {
			return true
		}
	}
	return false
}

// TestGovnChassisVirtualPort: a virtual port vip (10.0.0.100, parents
// vm1 and vm2) on govn chassis with the real ovn-northd. vm2's
// gratuitous ARP for the VIP binds vip to the chassis with vm2 as its
// virtual_parent (bind_vport), and a frame to vip's MAC from vm1 then
// reaches vm2's interface; vm1's ARP reply for the VIP moves it to vm1.
func TestGovnChassisVirtualPort(t *testing.T) {
	c := govnChassisCluster(t, 1)
	hv := c.Hypervisor(1)
	c.NBCtl(t, "ls-add", "ls0")
	for _, p := range []struct{ name, addr string }{{"vm1", "0a:00:00:00:00:01 10.0.0.11"}, {"vm2", "0a:00:00:00:00:02 10.0.0.12"}} {
		c.NBCtl(t, "lsp-add", "ls0", p.name, "--", "lsp-set-addresses", p.name, p.addr)
	}
	c.NBCtl(t, "lsp-add", "ls0", "vip", "--", "lsp-set-type", "vip", "virtual",
		"--", "lsp-set-addresses", "vip", "0a:00:00:00:00:64 10.0.0.100",
		"--", "lsp-set-options", "vip", "virtual-ip=10.0.0.100", "virtual-parents=vm1,vm2")
	vm1 := c.AddVM(t, hv, VMSpec{Name: "vm1", LSP: "vm1", MAC: "0a:00:00:00:00:01", Addr: "10.0.0.11/24"})
	vm2 := c.AddVM(t, hv, VMSpec{Name: "vm2", LSP: "vm2", MAC: "0a:00:00:00:00:02", Addr: "10.0.0.12/24"})
	c.WaitPortUp(t, "vm1")
	c.WaitPortUp(t, "vm2")
	c.WaitHV(t)
	defer func() {
		if t.Failed() {
			t.Logf("pinctrl/show:\n%s", hv.Run(t, "ovn-appctl", "-t", hv.Dir+"/chassis.ctl", "pinctrl/show"))
			t.Logf("vip: %s", c.SBCtl(t, "--columns=chassis,virtual_parent,up", "find", "Port_Binding", "logical_port=vip"))
		}
	}()
	fd1, _, err := rawSocket(vm1.NS, vm1.Dev)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd1)
	fd2, _, err := rawSocket(vm2.NS, vm2.Dev)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd2)
	vipIP := netip.MustParseAddr("10.0.0.100")
	vipMAC, _ := net.ParseMAC("0a:00:00:00:00:64")
	mac1, _ := net.ParseMAC(vm1.MAC)
	mac2, _ := net.ParseMAC(vm2.MAC)
	chassis := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=_uuid", "find", "Chassis", "name="+hv.Name))
	waitParent := func(parent string, announce func()) {
		t.Helper()
		if err := waitFor(20*time.Second, "vip bound behind "+parent, func() bool {
			announce()
			out := c.SBCtl(t, "--bare", "--columns=virtual_parent,chassis", "find", "Port_Binding", "logical_port=vip")
			f := strings.Fields(out)
			return len(f) == 2 && f[0] == parent && f[1] == chassis
		}); err != nil {
			t.Fatal(err)
		}
	}
	// vm2's gratuitous ARP (a request for its own address).
	waitParent("vm2", func() { _, _ = unix.Write(fd2, arpFrame(1, mac2, vipIP, vipIP)) })
	c.WaitHV(t)
	// A frame for vip's MAC from vm1 comes out of vm2's interface.
	probe := missFrame(vipMAC, mac1, vm1.Addr.Addr(), vipIP)
	got := false
	for range 20 {
		_, _ = unix.Write(fd1, probe)
		if receive(fd2, 500*time.Millisecond, func(b []byte) bool { return len(b) >= 12 && bytes.Equal(b[0:6], vipMAC) && bytes.Equal(b[6:12], mac1) }) {
			got = true
			break
		}
	}
	if !got {
		t.Errorf("a frame to the virtual port's MAC did not reach its parent vm2")
	}
	// vm1 answers for the VIP: the port moves.
	waitParent("vm1", func() { _, _ = unix.Write(fd1, arpFrame(2, mac1, vipIP, vipIP)) })
	if up := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=up", "find", "Port_Binding", "logical_port=vip")); up != "true" {
		t.Errorf("vip up = %q, want true", up)
	}
}

// TestGovnChassisControllerEvent: with NB_Global options
// controller_event=true, traffic to a load balancer VIP without
// backends (options event=true) makes govn chassis write one
// Controller_Event row (empty_lb_backends, with the VIP, protocol and
// load balancer) however many packets hit it; after the CMS deletes the
// row, the next packet raises it again.
func TestGovnChassisControllerEvent(t *testing.T) {
	c := govnChassisCluster(t, 1)
	hv := c.Hypervisor(1)
	c.NBCtl(t, "set", "NB_Global", ".", "options:controller_event=true")
	c.NBCtl(t, "ls-add", "ls0", "--", "lsp-add", "ls0", "vm1", "--", "lsp-set-addresses", "vm1", "0a:00:00:00:00:01 10.0.0.11")
	lb := strings.TrimSpace(c.NBCtl(t, "create", "Load_Balancer", "name=lb0", `vips:"10.0.0.100:80"=""`, "protocol=tcp", "options:event=true"))
	c.NBCtl(t, "ls-lb-add", "ls0", "lb0")
	vm1 := c.AddVM(t, hv, VMSpec{Name: "vm1", LSP: "vm1", MAC: "0a:00:00:00:00:01", Addr: "10.0.0.11/24"})
	c.WaitPortUp(t, "vm1")
	c.WaitHV(t)
	defer func() {
		if t.Failed() {
			t.Logf("pinctrl/show:\n%s", hv.Run(t, "ovn-appctl", "-t", hv.Dir+"/chassis.ctl", "pinctrl/show"))
			t.Logf("lflows: %s", c.SBCtl(t, "lflow-list", "ls0"))
		}
	}()
	fd, _, err := rawSocket(vm1.NS, vm1.Dev)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	mac1, _ := net.ParseMAC(vm1.MAC)
	syn := tcpSYN(net.HardwareAddr{0x0a, 0, 0, 0, 0, 0x64}, mac1, vm1.Addr.Addr(), netip.MustParseAddr("10.0.0.100"), 80)
	connect := func() { _, _ = unix.Write(fd, syn) }
	events := func() []string {
		out := c.SBCtl(t, "--bare", "--columns=event_type,event_info", "list", "Controller_Event")
		var rows []string
		for _, r := range strings.Split(strings.TrimSpace(out), "\n\n") {
			if r = strings.TrimSpace(r); r != "" {
				rows = append(rows, r)
			}
		}
		return rows
	}
	if err := waitFor(30*time.Second, "a Controller_Event row", func() bool { connect(); return len(events()) > 0 }); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		connect()
	}
	time.Sleep(2 * time.Second) // any duplicate would be written by now
	rows := events()
	if len(rows) != 1 {
		t.Fatalf("Controller_Event rows %q, want one", rows)
	}
	for _, want := range []string{"empty_lb_backends", "vip=10.0.0.100:80", "protocol=tcp", "load_balancer=" + lb} {
		if !strings.Contains(rows[0], want) {
			t.Errorf("Controller_Event %q has no %s", rows[0], want)
		}
	}
	if ch := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=chassis", "list", "Controller_Event")); ch != strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=_uuid", "find", "Chassis", "name="+hv.Name)) {
		t.Errorf("Controller_Event chassis %q, want %s's", ch, hv.Name)
	}
	t.Logf("event row seen")
	c.SBCtl(t, "--all", "destroy", "Controller_Event")
	if err := waitFor(30*time.Second, "the event raised again", func() bool { connect(); return len(events()) == 1 }); err != nil {
		t.Error(err)
	}
}

// TestGovnChassisMLDQuerier: a snooping switch with mcast_querier, its
// eth_src and an ip6_src sends MLDv2 general queries (from fe80::fe to
// ff02::1, hop limit 1, behind a Hop-by-Hop header) every
// mcast_query_interval (sent on the chassis' 1 s tick); a VM's
// interface sees them.
func TestGovnChassisMLDQuerier(t *testing.T) {
	c := govnChassisCluster(t, 1)
	hv := c.Hypervisor(1)
	c.NBCtl(t, "ls-add", "ls1", "--", "set", "Logical_Switch", "ls1", "other_config:mcast_snoop=true",
		"--", "lsp-add", "ls1", "vm1", "--", "lsp-set-addresses", "vm1", "0a:00:00:00:00:01 10.0.0.11")
	vm1 := c.AddVM(t, hv, VMSpec{Name: "vm1", LSP: "vm1", MAC: "0a:00:00:00:00:01", Addr: "10.0.0.11/24"})
	c.WaitPortUp(t, "vm1")
	fd, _, err := rawSocket(vm1.NS, vm1.Dev)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	c.NBCtl(t, "--wait=hv", "set", "Logical_Switch", "ls1", "other_config:mcast_querier=true",
		"other_config:mcast_eth_src=0a:00:00:00:00:fe", "other_config:mcast_ip6_src=fe80::fe",
		"other_config:mcast_query_interval=2")
	src := netip.MustParseAddr("fe80::fe").As16()
	n := 0
	end := time.Now().Add(7 * time.Second)
	for time.Now().Before(end) {
		receive(fd, time.Until(end), func(b []byte) bool {
			if len(b) >= 14+48+28 && binary.BigEndian.Uint16(b[12:]) == 0x86dd && b[14+6] == 0 && b[14+7] == 1 &&
				bytes.Equal(b[14+8:14+24], src[:]) && b[14+40] == 58 && b[14+48] == 130 {
				n++
			}
			return false
		})
	}
	t.Logf("vm1 saw %d MLD queries in 7 s", n)
	if n < 2 || n > 5 {
		t.Errorf("vm1 saw %d MLD queries from fe80::fe in 7 s, want one every 2 s\npinctrl/show:\n%s", n,
			hv.Run(t, "ovn-appctl", "-t", hv.Dir+"/chassis.ctl", "pinctrl/show"))
	}
}

// TestGovnChassisGatewayMTU: a gateway router on govn chassis whose
// port to ls2 has options:gateway_mtu=1300 answers a 1428-byte datagram
// with DF from vm1 (ls1) to vm2 (ls2) with ICMP "fragmentation needed"
// and MTU 1300 (check_pkt_larger and icmp4_error), which vm1's ping
// reports; a datagram that fits goes through.
func TestGovnChassisGatewayMTU(t *testing.T) {
	c := govnChassisCluster(t, 1)
	hv := c.Hypervisor(1)
	c.NBCtl(t, "lr-add", "lr1", "--", "set", "Logical_Router", "lr1", "options:chassis="+hv.Name)
	for _, n := range []struct{ ls, mac, cidr string }{
		{"ls1", "0a:00:00:00:ff:11", "10.0.1.1/24"},
		{"ls2", "0a:00:00:00:ff:12", "10.0.2.1/24"},
	} {
		lrp, lsp := "lr1-"+n.ls, n.ls+"-lr1"
		c.NBCtl(t, "ls-add", n.ls, "--", "lrp-add", "lr1", lrp, n.mac, n.cidr,
			"--", "lsp-add", n.ls, lsp, "--", "lsp-set-type", lsp, "router",
			"--", "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, "router-port="+lrp)
	}
	c.NBCtl(t, "set", "Logical_Router_Port", "lr1-ls2", "options:gateway_mtu=1300")
	c.NBCtl(t, "lsp-add", "ls1", "vm1", "--", "lsp-set-addresses", "vm1", "0a:00:00:00:01:01 10.0.1.11")
	c.NBCtl(t, "lsp-add", "ls2", "vm2", "--", "lsp-set-addresses", "vm2", "0a:00:00:00:02:02 10.0.2.12")
	vm1 := c.AddVM(t, hv, VMSpec{Name: "vm1", LSP: "vm1", MAC: "0a:00:00:00:01:01", Addr: "10.0.1.11/24", Gateway: "10.0.1.1"})
	vm2 := c.AddVM(t, hv, VMSpec{Name: "vm2", LSP: "vm2", MAC: "0a:00:00:00:02:02", Addr: "10.0.2.12/24", Gateway: "10.0.2.1"})
	c.WaitPortUp(t, "vm1")
	c.WaitPortUp(t, "vm2")
	c.WaitHV(t)
	if err := vm1.WaitPing(vm2.IP(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	ping := func(size string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, _ := vm1.Command(ctx, "ping", "-n", "-c", "1", "-W", "2", "-M", "do", "-s", size, vm2.IP()).CombinedOutput()
		return string(out)
	}
	if out := ping("1200"); !strings.Contains(out, " 0% packet loss") {
		t.Errorf("1228-byte ping with DF through the 1300-byte gateway MTU:\n%s", out)
	}
	var out string
	for range 5 {
		// The first answer is "Frag needed" from the router; once the
		// kernel has learned the MTU, ping says so itself.
		if out = ping("1400"); strings.Contains(out, "mtu = 1300") || strings.Contains(out, "mtu=1300") {
			if strings.Contains(out, "Frag needed") {
				t.Logf("%s", out)
			}
			return
		}
	}
	t.Errorf("1428-byte ping with DF through the 1300-byte gateway MTU: no \"fragmentation needed\" with MTU 1300:\n%s\npinctrl/show:\n%s",
		out, hv.Run(t, "ovn-appctl", "-t", hv.Dir+"/chassis.ctl", "pinctrl/show"))
}

// dhcpExchange sends a DHCP message of type typ (options opts after
// option 53, a client of MAC mac, transaction xid) from raw socket fd,
// broadcast, until a reply of type want comes; it returns the reply's
// BOOTP message.
func dhcpExchange(t *testing.T, fd int, mac net.HardwareAddr, xid uint32, typ, want byte, opts []byte) []byte {
	t.Helper()
	m := make([]byte, 240)
	m[0], m[1], m[2] = 1, 1, 6
	binary.BigEndian.PutUint32(m[4:], xid)
	binary.BigEndian.PutUint16(m[10:], 0x8000) // broadcast the reply
	copy(m[28:], mac)
	copy(m[236:], []byte{99, 130, 83, 99})
	m = append(append(append(m, 53, 1, typ), opts...), 255)
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	udp := make([]byte, 8+len(m))
	binary.BigEndian.PutUint16(udp[0:], 68)
	binary.BigEndian.PutUint16(udp[2:], 67)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], m)
	frame := ipFrame(bcast, mac, netip.IPv4Unspecified(), netip.AddrFrom4([4]byte{255, 255, 255, 255}), 17, 64, udp, 6)
	var reply []byte
	for range 15 {
		_, _ = unix.Write(fd, frame)
		if receive(fd, time.Second, func(b []byte) bool {
			if len(b) < 14+28+240 || binary.BigEndian.Uint16(b[12:]) != 0x0800 || b[14+9] != 17 {
				return false
			}
			hl := int(b[14]&0xf) * 4
			u := b[14+hl:]
			if len(u) < 8+240 || binary.BigEndian.Uint16(u[2:]) != 68 {
				return false
			}
			r := u[8:]
			if r[0] != 2 || binary.BigEndian.Uint32(r[4:]) != xid {
				return false
			}
			if o := dhcpOptions(r)[53]; len(o) == 1 && o[0] == want {
				reply = append([]byte(nil), r...)
				return true
			}
			return false
		}) {
			return reply
		}
	}
	t.Fatalf("no DHCP reply of type %d to type %d", want, typ)
	return nil
}

// dhcpOptions returns a BOOTP message's options by code.
func dhcpOptions(m []byte) map[byte][]byte {
	opts := map[byte][]byte{}
	for p := 240; p+1 < len(m) && m[p] != 255; {
		if m[p] == 0 {
			p++
			continue
		}
		n := int(m[p+1])
		if p+2+n > len(m) {
			break
		}
		opts[m[p]] = m[p+2 : p+2+n]
		p += 2 + n
	}
	return opts
}

// classlessRoutes decodes option 121 (RFC 3442): each route is the
// prefix length, as many octets of the destination as it needs, and the
// router.
func classlessRoutes(b []byte) (map[netip.Prefix]netip.Addr, error) {
	routes := map[netip.Prefix]netip.Addr{}
	for len(b) > 0 {
		bits := int(b[0])
		n := (bits + 7) / 8
		if bits > 32 || len(b) < 1+n+4 {
			return nil, fmt.Errorf("bad classless route at % x", b)
		}
		var d [4]byte
		copy(d[:], b[1:1+n])
		routes[netip.PrefixFrom(netip.AddrFrom4(d), bits)] = netip.AddrFrom4([4]byte(b[1+n : 1+n+4]))
		b = b[1+n+4:]
	}
	return routes, nil
}

// TestGovnChassisDHCPClasslessRoutes (issue 12, acceptance a): a VM's
// DHCP client (in Go, through a packet socket in the VM) gets from govn
// chassis an ACK whose classless static routes (option 121) are the
// DHCP_Options' classless_static_route, each prefix length encoded in
// as few octets as RFC 3442 says; installed as a client installs them,
// they route the VM's traffic.
func TestGovnChassisDHCPClasslessRoutes(t *testing.T) {
	c := govnChassisCluster(t, 1)
	hv := c.Hypervisor(1)
	c.NBCtl(t, "ls-add", "ls0")
	d := strings.TrimSpace(c.NBCtl(t, "create", "DHCP_Options", "cidr=10.0.0.0/24"))
	c.NBCtl(t, "dhcp-options-set-options", d, "lease_time=3600", "router=10.0.0.1", "server_id=10.0.0.1",
		"server_mac=0a:00:00:00:00:fe",
		"classless_static_route={30.0.0.0/24,10.0.0.10,40.0.0.5/32,10.0.0.11,50.0.0.0/8,10.0.0.12,0.0.0.0/0,10.0.0.1}")
	c.NBCtl(t, "lsp-add", "ls0", "vm1", "--", "lsp-set-addresses", "vm1", "0a:00:00:00:00:01 10.0.0.21",
		"--", "lsp-set-dhcpv4-options", "vm1", d)
	vm1 := c.AddVM(t, hv, VMSpec{Name: "vm1", LSP: "vm1", MAC: "0a:00:00:00:00:01"})
	c.WaitPortUp(t, "vm1")
	c.WaitHV(t)
	fd, _, err := rawSocket(vm1.NS, vm1.Dev)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	mac, _ := net.ParseMAC(vm1.MAC)
	const xid = 0x1215c0de
	params := []byte{55, 4, 1, 3, 6, 121}
	offer := dhcpExchange(t, fd, mac, xid, 1, 2, params)
	yi := netip.AddrFrom4([4]byte(offer[16:20]))
	req := append([]byte{50, 4}, yi.AsSlice()...)
	if sid := dhcpOptions(offer)[54]; len(sid) == 4 {
		req = append(append(req, 54, 4), sid...)
	}
	ack := dhcpExchange(t, fd, mac, xid, 3, 5, append(req, params...))
	opts := dhcpOptions(ack)
	if yi.String() != "10.0.0.21" {
		t.Fatalf("offered %s, want 10.0.0.21", yi)
	}
	// 24 bits in 3 octets, 32 in 4, 8 in 1, 0 in none.
	wantRaw := "18 1e 00 00 0a 00 00 0a 20 28 00 00 05 0a 00 00 0b 08 32 0a 00 00 0c 00 0a 00 00 01"
	if got := fmt.Sprintf("% x", opts[121]); got != wantRaw {
		t.Errorf("option 121 %s, want %s", got, wantRaw)
	}
	routes, err := classlessRoutes(opts[121])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("classless routes: %v", routes)
	// Configure the VM as a client does: address, then the routes
	// (RFC 3442: option 121 replaces the router option).
	ip := func(args ...string) string {
		t.Helper()
		out, err := vm1.Command(context.Background(), append([]string{"ip"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	ip("addr", "add", "10.0.0.21/24", "dev", "eth0")
	for p, via := range routes {
		ip("route", "replace", p.String(), "via", via.String(), "dev", "eth0")
	}
	for dst, via := range map[string]string{"30.0.0.5": "10.0.0.10", "40.0.0.5": "10.0.0.11", "50.1.2.3": "10.0.0.12", "8.8.8.8": "10.0.0.1"} {
		if out := ip("route", "get", dst); !strings.Contains(out, "via "+via+" ") {
			t.Errorf("route to %s: %s, want via %s", dst, strings.TrimSpace(out), via)
		}
	}
}
