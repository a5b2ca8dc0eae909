package hvtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/internal/daemon"
	"github.com/govn/govn/pinctrl"
)

// TestGovnChassisGatewayFailover: a distributed gateway port with two
// gateway chassis, hv2 at priority 20 and hv3 at 10, all three
// hypervisors govn chassis (the real ovn-northd). BFD over the tunnels
// comes up between the gateways and hv1, hv2 claims the chassisredirect
// port and vm1's traffic to an external host leaves through it. Then
// hv2's chassis is killed (SIGKILL): BFD notices (about 3 s, Open
// vSwitch's default timers), hv3 claims the port, hv1 sends to hv3, and
// the ping from vm1 goes on. The gap is logged; it must stay under 15 s
// on a loaded machine.
func TestGovnChassisGatewayFailover(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip(why)
	}
	var govn govnBinary
	t.Cleanup(govn.remove)
	bin := govn.get(t)
	govnHas(t, bin, "chassis")
	g := GovnChassis{Argv: []string{bin, "chassis"}}
	c := New(t, Options{Hypervisors: 3, Northd: RealNorthd(), Physnet: "physnet1", Chassis: func(int) Chassis { return g }})
	vm1, ext := gatewayHA(t, c)
	gatewayFailover(t, c, vm1, ext)
}

// TestBFDMixedGatewayFailover is TestGovnChassisGatewayFailover with
// the standby gateway hv3 the real ovn-controller and ovs-vswitchd: BFD
// between govn chassis and Open vSwitch's comes up both ways (the real
// side's tunnel interfaces say bfd_status:state=up), and when govn's hv2
// dies the real hv3 takes the port over and vm1's traffic goes through
// it.
func TestBFDMixedGatewayFailover(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip(why)
	}
	var govn govnBinary
	t.Cleanup(govn.remove)
	bin := govn.get(t)
	govnHas(t, bin, "chassis")
	g := GovnChassis{Argv: []string{bin, "chassis"}}
	c := New(t, Options{Hypervisors: 3, Northd: RealNorthd(), Physnet: "physnet1", Chassis: func(i int) Chassis {
		if i == 3 {
			return RealChassis{}
		}
		return g
	}})
	vm1, ext := gatewayHA(t, c)
	gatewayFailover(t, c, vm1, ext)
}

// gatewayHA builds, on a cluster of three hypervisors with a provider
// network: switch ls1 with vm1 on hv1, router lr1 joining it to the
// provider switch pub by the distributed gateway port lr1-pub, gateway
// chassis hv2 (priority 20) and hv3 (10), SNAT of ls1 to the port's
// address, and an external host on the provider network.
func gatewayHA(t *testing.T, c *Cluster) (vm1, ext *VM) {
	t.Helper()
	dumpOnFailure(t, c)
	t.Cleanup(func() {
		if t.Failed() {
			for _, hv := range c.HVs {
				s, err := bfdStates(hv)
				t.Logf("%s BFD sessions (%v): %v", hv.Name, err, s)
			}
		}
	})
	c.NBCtl(t, "lr-add", "lr1")
	for _, n := range []struct{ ls, mac, cidr string }{
		{"ls1", "0a:00:00:00:ff:11", "10.0.1.1/24"},
		{"pub", "0a:00:00:00:ff:01", "192.168.50.254/24"},
	} {
		lrp, lsp := "lr1-"+n.ls, n.ls+"-lr1"
		c.NBCtl(t, "ls-add", n.ls, "--", "lrp-add", "lr1", lrp, n.mac, n.cidr,
			"--", "lsp-add", n.ls, lsp, "--", "lsp-set-type", lsp, "router",
			"--", "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, "router-port="+lrp)
	}
	c.NBCtl(t, "lsp-add", "pub", "pub-ln", "--", "lsp-set-type", "pub-ln", "localnet",
		"--", "lsp-set-addresses", "pub-ln", "unknown", "--", "lsp-set-options", "pub-ln", "network_name=physnet1")
	c.NBCtl(t, "lrp-set-gateway-chassis", "lr1-pub", "hv2", "20")
	c.NBCtl(t, "lrp-set-gateway-chassis", "lr1-pub", "hv3", "10")
	c.NBCtl(t, "lr-nat-add", "lr1", "snat", "192.168.50.254", "10.0.1.0/24")
	c.NBCtl(t, "lsp-add", "ls1", "vm1", "--", "lsp-set-addresses", "vm1", "0a:00:00:00:01:01 10.0.1.11")
	vm1 = c.AddVM(t, c.Hypervisor(1), VMSpec{Name: "vm1", LSP: "vm1", MAC: "0a:00:00:00:01:01", Addr: "10.0.1.11/24", Gateway: "10.0.1.1"})
	ext = c.AddExternal(t, VMSpec{Name: "ext", MAC: "0a:00:00:00:03:01", Addr: "192.168.50.1/24"})
	c.WaitPortUp(t, "vm1")
	c.WaitHV(t)

	return vm1, ext
}

// gatewayFailover checks that vm1 reaches ext through hv2, kills hv2's
// chassis (a govn chassis) under ping and checks that hv3 takes over;
// then restarts hv2, which takes the port back.
func gatewayFailover(t *testing.T, c *Cluster, vm1, ext *VM) {
	t.Helper()
	hv2, hv3 := c.Hypervisor(2), c.Hypervisor(3)
	c.WaitBound(t, "cr-lr1-pub", hv2)
	// Every pair of the three is up: the gateways with each other and
	// with hv1, which the real ovn-northd lists in ref_chassis.
	for _, hv := range c.HVs {
		waitBFD(t, hv, func(s map[string]string) bool {
			for _, o := range c.HVs {
				if o != hv && s[o.Name] != "up" {
					return false
				}
			}
			return true
		}, "every session up")
		s, _ := bfdStates(hv)
		t.Logf("%s BFD sessions: %v", hv.Name, s)
	}
	if err := vm1.WaitPing(ext.IP(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// The traffic leaves through hv2: the provider bridge receives the
	// echo requests from hv2's link, not from hv3's.
	before2, before3 := providerRx(t, c, hv2), providerRx(t, c, hv3)
	if err := vm1.Ping(ext.IP(), 20); err != nil {
		t.Fatal(err)
	}
	if n := providerRx(t, c, hv2) - before2; n < 20 {
		t.Errorf("hv2, the active gateway, sent %d packets to the provider network for 20 echo requests", n)
	}
	if n := providerRx(t, c, hv3) - before3; n >= 10 {
		t.Errorf("hv3, the standby gateway, sent %d packets to the provider network during 20 echo requests", n)
	}

	// 20 s of ping at 100/s while hv2 dies.
	p := startPinger(t, vm1, ext.IP(), 2000)
	time.Sleep(2 * time.Second)
	pid, err := daemon.ReadPidfile(filepath.Join(hv2.Dir, "chassis.pid"))
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.WaitBound(t, "cr-lr1-pub", hv3)
	claimed := time.Now()
	r := p.wait(t)
	var lastBefore, firstAfter time.Time
	for _, at := range r.replies {
		if at.Before(killed) {
			lastBefore = at
		} else if firstAfter.IsZero() {
			firstAfter = at
		}
	}
	if lastBefore.IsZero() || firstAfter.IsZero() {
		t.Fatalf("no echo answered before (%v) or after (%v) the kill; %d of %d answered", lastBefore, firstAfter, r.received, r.sent)
	}
	gap := firstAfter.Sub(lastBefore)
	t.Logf("gateway failover: kill to hv3's claim in the Southbound %v; ping gap %v (kill to first answer %v); %d of %d echoes lost at 100/s",
		claimed.Sub(killed).Round(time.Millisecond), gap.Round(time.Millisecond), firstAfter.Sub(killed).Round(time.Millisecond),
		r.sent-r.received, r.sent)
	if gap > 15*time.Second {
		t.Errorf("ping gap %v across the failover; want under 15 s", gap)
	}
	if err := vm1.Ping(ext.IP(), 3); err != nil {
		t.Errorf("after the failover: %v", err)
	}
	waitBFD(t, c.Hypervisor(1), func(s map[string]string) bool { return s["hv2"] == "down" && s["hv3"] == "up" }, "hv2 down, hv3 up")

	// hv2 comes back: once its sessions are up it is the live gateway of
	// the highest priority again and takes the port back (as
	// ovn-controller does, no stickiness), and the traffic follows.
	for syscall.Kill(pid, 0) == nil {
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.Remove(hv2.DB); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	restarted := time.Now()
	hv2.Chassis.Start(t, hv2)
	c.WaitBound(t, "cr-lr1-pub", hv2)
	t.Logf("hv2 restarted: it holds the port again after %v", time.Since(restarted).Round(time.Millisecond))
	if err := vm1.WaitPing(ext.IP(), 20*time.Second); err != nil {
		t.Fatalf("after hv2 took the port back: %v", err)
	}
}

// bfdStates reads each BFD peer's state: from a govn chassis' bfd/show,
// or from the real ovs-vswitchd's tunnel interfaces (bfd_status:state;
// "" where BFD is off).
func bfdStates(hv *Hypervisor) (map[string]string, error) {
	if _, ok := hv.Chassis.(RealChassis); ok {
		return ovsBFDStates(hv)
	}
	out, err := run(context.Background(), ovsEnv(hv.Dir), inNS(hv.NS, "ovs-appctl", "-t", hv.Dir+"/chassis.ctl", "bfd/show")...)
	if err != nil {
		return nil, err
	}
	states := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(line, " ")
		if _, st, ok2 := strings.Cut(rest, ": state "); ok && ok2 {
			st, _, _ = strings.Cut(st, ",")
			states[name] = st
		}
	}
	return states, nil
}

// ovsBFDStates reads the real ovs-vswitchd's tunnel interfaces.
func ovsBFDStates(hv *Hypervisor) (map[string]string, error) {
	names, err := hv.VsctlErr("--bare", "--columns=name", "find", "Interface", "type=geneve")
	if err != nil {
		return nil, err
	}
	states := map[string]string{}
	for _, name := range strings.Fields(names) {
		ip, err := hv.VsctlErr("get", "Interface", name, "options:remote_ip")
		if err != nil {
			return nil, err
		}
		st, _ := hv.VsctlErr("--if-exists", "get", "Interface", name, "bfd_status:state")
		for _, o := range hv.Cluster.HVs {
			if strings.Trim(strings.TrimSpace(ip), `"`) == o.EncapIP.String() {
				states[o.Name] = strings.Trim(strings.TrimSpace(st), `"`)
			}
		}
	}
	return states, nil
}

// waitBFD waits until hv's sessions satisfy ok.
func waitBFD(t *testing.T, hv *Hypervisor, ok func(map[string]string) bool, what string) {
	t.Helper()
	var last map[string]string
	var lastErr error
	if err := waitFor(30*time.Second, hv.Name+" BFD: "+what, func() bool {
		last, lastErr = bfdStates(hv)
		return lastErr == nil && ok(last)
	}); err != nil {
		t.Fatalf("%v (last: %v, %v)", err, last, lastErr)
	}
}

// providerRx is how many packets the provider network's bridge has
// received from hv's link.
func providerRx(t *testing.T, c *Cluster, hv *Hypervisor) int {
	t.Helper()
	out := c.nsRun(t, c.underlayNS, "cat", "/sys/class/net/px"+hv.Name+"/statistics/rx_packets")
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("rx_packets of px%s: %q", hv.Name, out)
	}
	return n
}

// TestGovnChassisBFDRoute: a static route checked by BFD (ovn-nbctl
// --bfd lr-route-add) through the distributed gateway port of hv1, a
// govn chassis, to a next hop on the provider network that runs its own
// BFD (bfdPeer, in the external namespace: govn's BFDSession on a plain
// UDP socket, not govn chassis' I/O). hv1 runs the Southbound's BFD row,
// the session comes up and hv1 writes status up, which the real
// ovn-northd copies to the Northbound; the route is in the router's
// flows. The peer stops: the status goes down within the detection
// time (3 × 100 ms) and ovn-northd drops the route; it comes back with
// the peer. The same scenario runs on the real ovn-controller, which
// passes it too (slower to come up: 4-5 s here, govn 0.2-0.5 s, since
// govn answers a state change at once), and so do govn northd and govn
// chassis together.
func TestGovnChassisBFDRoute(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip(why)
	}
	var govn govnBinary
	t.Cleanup(govn.remove)
	bin := govn.get(t)
	govnHas(t, bin, "chassis")
	g := GovnChassis{Argv: []string{bin, "chassis"}}
	t.Run("govn-chassis", func(t *testing.T) { bfdRoute(t, RealNorthd(), g) })
	// The same with the real ovn-controller: the scenario and the peer
	// are what OVN itself passes.
	t.Run("ovn-controller", func(t *testing.T) { bfdRoute(t, RealNorthd(), RealChassis{}) })
	// And govn alone: govn northd copies the status and drops the route.
	t.Run("govn-northd+govn-chassis", func(t *testing.T) {
		govnHas(t, bin, "northd")
		bfdRoute(t, NorthdCommand{Argv: []string{bin, "northd"}}, g)
	})
}

func bfdRoute(t *testing.T, northd Northd, ch Chassis) {
	c := New(t, Options{Hypervisors: 1, Northd: northd, Physnet: "physnet1", Chassis: func(int) Chassis { return ch }})
	dumpOnFailure(t, c)
	hv1 := c.Hypervisor(1)
	t.Cleanup(func() {
		if _, real := ch.(RealChassis); t.Failed() && !real {
			out, err := run(context.Background(), ovsEnv(hv1.Dir), inNS(hv1.NS, "ovs-appctl", "-t", hv1.Dir+"/chassis.ctl", "bfd/show")...)
			t.Logf("hv1 bfd/show (%v):\n%s", err, out)
		}
	})
	c.NBCtl(t, "lr-add", "lr1", "--", "ls-add", "pub",
		"--", "lrp-add", "lr1", "lr1-pub", "0a:00:00:00:ff:01", "192.168.50.254/24",
		"--", "lsp-add", "pub", "pub-lr1", "--", "lsp-set-type", "pub-lr1", "router",
		"--", "lsp-set-addresses", "pub-lr1", "router", "--", "lsp-set-options", "pub-lr1", "router-port=lr1-pub",
		"--", "lsp-add", "pub", "pub-ln", "--", "lsp-set-type", "pub-ln", "localnet",
		"--", "lsp-set-addresses", "pub-ln", "unknown", "--", "lsp-set-options", "pub-ln", "network_name=physnet1")
	c.NBCtl(t, "lrp-set-gateway-chassis", "lr1-pub", "hv1", "10")
	ext := c.AddExternal(t, VMSpec{Name: "ext", MAC: "0a:00:00:00:03:01", Addr: "192.168.50.1/24"})
	bfd := strings.TrimSpace(c.NBCtl(t, "create", "BFD", "logical_port=lr1-pub", "dst_ip=192.168.50.1", "min_tx=100", "min_rx=100", "detect_mult=3"))
	c.NBCtl(t, "--bfd="+bfd, "lr-route-add", "lr1", "10.99.0.0/24", "192.168.50.1")
	c.WaitBound(t, "cr-lr1-pub", hv1)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	status := func() (sbStatus, nbStatus string) {
		sbStatus = strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=status", "find", "BFD", "logical_port=lr1-pub"))
		nbStatus = strings.Trim(strings.TrimSpace(c.NBCtl(t, "--if-exists", "get", "BFD", bfd, "status")), `"[]`)
		return
	}
	routed := func() bool { return strings.Contains(c.SBCtl(t, "lflow-list", "lr1"), "10.99.0.0/24") }
	waitStatus := func(want string, route bool) time.Duration {
		t.Helper()
		start := time.Now()
		var sbs, nbs string
		if err := waitFor(30*time.Second, "BFD status "+want, func() bool {
			sbs, nbs = status()
			return sbs == want && nbs == want && routed() == route
		}); err != nil {
			t.Fatalf("%v: Southbound %q, Northbound %q, route in the flows %v", err, sbs, nbs, routed())
		}
		return time.Since(start)
	}
	startPeer := func() *Daemon {
		return c.Start(t, ext.NS, "ext/bfd-peer", []string{bfdPeerEnv + "=192.168.50.1,192.168.50.254"}, self)
	}
	peer := startPeer()
	up := waitStatus("up", true)
	t.Logf("BFD up (Southbound and Northbound, route in the flows) %v after the peer started", up.Round(time.Millisecond))

	peer.Stop()
	down := waitStatus("down", false)
	t.Logf("peer stopped: status down and the route gone after %v (detection time 300 ms)", down.Round(time.Millisecond))

	startPeer()
	up = waitStatus("up", true)
	t.Logf("peer back: status up and the route back after %v", up.Round(time.Millisecond))
}

// bfdPeerEnv makes this test binary, re-executed, a BFD peer
// (bfdPeer) instead of running tests: LOCAL,REMOTE addresses.
const bfdPeerEnv = "GOVN_HVTEST_BFD_PEER"

func init() {
	spec := os.Getenv(bfdPeerEnv)
	if spec == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := bfdPeer(ctx, spec, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// bfdPeer runs one BFD session (100 ms, multiplier 3) from LOCAL to
// REMOTE over UDP, as a router next to OVN would, printing its state
// changes, until ctx ends.
func bfdPeer(ctx context.Context, spec string, out io.Writer) error {
	l, r, ok := strings.Cut(spec, ",")
	local, err1 := netip.ParseAddr(l)
	remote, err2 := netip.ParseAddr(r)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("bfd peer: want LOCAL,REMOTE addresses, have %q", spec)
	}
	rx, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, pinctrl.BFDPort)))
	if err != nil {
		return fmt.Errorf("bfd peer: %w", err)
	}
	defer rx.Close()
	tx, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, pinctrl.BFDSrcPortMin)),
		net.UDPAddrFromAddrPort(netip.AddrPortFrom(remote, pinctrl.BFDPort)))
	if err != nil {
		return fmt.Errorf("bfd peer: %w", err)
	}
	defer tx.Close()
	if sc, err := tx.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL, 255) })
	}
	pkts := make(chan []byte, 16)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := rx.ReadFromUDPAddrPort(buf)
			if err != nil {
				close(pkts)
				return
			}
			if from.Addr().Unmap() == remote {
				pkts <- append([]byte(nil), buf[:n]...)
			}
		}
	}()
	s := pinctrl.NewBFDSession(0x7e57, pinctrl.BFDConfig{MinTx: 100 * time.Millisecond, MinRx: 100 * time.Millisecond, DetectMult: 3}, time.Now())
	last := s.State()
	fmt.Fprintf(out, "state %s\n", last)
	timer := time.NewTimer(0)
	for {
		now := time.Now()
		for {
			ctl, ok := s.Advance(now)
			if !ok {
				break
			}
			if _, err := tx.Write(ctl.Append(nil)); err != nil {
				fmt.Fprintf(out, "send: %v\n", err)
			}
		}
		if st := s.State(); st != last {
			last = st
			fmt.Fprintf(out, "state %s\n", st)
		}
		wait := time.Second
		if e := s.NextEvent(); !e.IsZero() {
			wait = max(time.Until(e), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case b, ok := <-pkts:
			if !ok {
				return errors.New("bfd peer: socket closed")
			}
			if ctl, err := pinctrl.ParseBFDControl(b); err != nil {
				fmt.Fprintf(out, "dropped: %v\n", err)
			} else if err := s.Receive(&ctl, time.Now()); err != nil {
				fmt.Fprintf(out, "refused: %v\n", err)
			}
		case <-timer.C:
		}
	}
}
