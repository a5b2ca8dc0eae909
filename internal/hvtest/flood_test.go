package hvtest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/govn/govn/bench/procstat"
	"github.com/govn/govn/internal/lab"
)

// rawSocket opens an AF_PACKET socket on device dev of network namespace
// ns (a name under /run/netns), from this process: the socket is made on
// a thread moved into ns for the moment, and stays in ns after. It
// returns the socket and the device's index.
func rawSocket(ns, dev string) (fd, ifindex int, err error) {
	type result struct{ fd, ifindex int }
	done := make(chan result, 1)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked if the thread cannot go home: it dies with the goroutine
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer home.Close()
		target, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		fd, ferr := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		var idx int
		if ferr == nil {
			var ifi *net.Interface
			if ifi, ferr = net.InterfaceByName(dev); ferr == nil {
				idx = ifi.Index
				ferr = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: idx})
			}
			if ferr != nil {
				unix.Close(fd)
			}
		}
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			if ferr == nil {
				unix.Close(fd)
			}
			errc <- fmt.Errorf("setns back: %w", err)
			return
		}
		runtime.UnlockOSThread()
		if ferr != nil {
			errc <- fmt.Errorf("raw socket on %s in %s: %w", dev, ns, ferr)
			return
		}
		done <- result{fd, idx}
	}()
	select {
	case r := <-done:
		return r.fd, r.ifindex, nil
	case err := <-errc:
		return -1, 0, err
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// missFrame is lab.MissFrame: a datagram through router MAC rmac to dst,
// an ARP miss if nobody has dst yet.
func missFrame(rmac, smac net.HardwareAddr, src, dst netip.Addr) []byte {
	return lab.MissFrame(rmac, smac, src, dst)
}

// pinctrlCounter reads "KIND: handled H, rate-dropped D, errors E" from
// pinctrl/show.
func pinctrlCounter(out, kind string) (handled, dropped, errs int, ok bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(kind) + `: handled (\d+), rate-dropped (\d+), errors (\d+)`).FindStringSubmatch(out)
	if m == nil {
		return 0, 0, 0, false
	}
	handled, _ = strconv.Atoi(m[1])
	dropped, _ = strconv.Atoi(m[2])
	errs, _ = strconv.Atoi(m[3])
	return handled, dropped, errs, true
}

// TestGovnChassisARPFlood (issue 12, acceptance c): a VM sends 10,000
// datagrams a second for 10 s through a router to addresses nobody has
// (a /16 on the router's other side), each an ARP miss that the router
// sends to pinctrl (arp { }). Meanwhile new ports are plugged in. The
// chassis' resident memory stays bounded, the new ports' flows are
// installed (ovn-installed) and they reach the first VM, and pinctrl/show
// counts what its rate limit (1,000 a second per kind) and the
// datapath's packet-in queue dropped. The chassis' flow limit is set low
// (upcall/set-flow-limit floodFlowLimit): each miss to a new address would
// be a megaflow, and at the limit the datapath forwards misses without
// caching them, so the memory's bound follows from the limit, not from
// the attack. The time to ovn-installed of one port without the flood
// and of floodPlugs ports under it is logged, by govn chassis' own
// measure and polled with ovs-vsctl; the test fails only if one under
// the flood took longer than portUpBound, ten times the acceptance's
// figure, which only a regression reaches (a quiet chassis takes a few
// milliseconds).
func TestGovnChassisARPFlood(t *testing.T) {
	// floodPlugs ports are plugged in one after another under the flood.
	const floodPlugs = 4
	// portUpBound is a generous bound on a port's time from its
	// iface-id to ovn-installed under the flood, by govn chassis' own
	// measure: the acceptance asks for 100 ms, but a loaded test machine
	// must not fail the test for noise; a chassis that lets the flood
	// stall flow installation for long (the flow-table update waiting
	// behind upcalls, a port's open waiting for the kernel) must.
	const portUpBound = time.Second
	// floodFlowLimit is the chassis' megaflow cap here: well above the
	// few dozen megaflows its ordinary traffic needs, well below the
	// 100,000 addresses of the flood.
	const floodFlowLimit = 2000
	c := govnChassisCluster(t, 1)
	hv := c.Hypervisor(1)
	c.NBCtl(t, "lr-add", "lr1")
	for _, n := range []struct{ ls, mac, cidr string }{
		{"ls1", "0a:00:00:00:ff:11", "10.0.1.1/24"},
		{"ls2", "0a:00:00:00:ff:12", "10.2.0.1/16"},
	} {
		lrp, lsp := "lr1-"+n.ls, n.ls+"-lr1"
		c.NBCtl(t, "ls-add", n.ls, "--", "lrp-add", "lr1", lrp, n.mac, n.cidr,
			"--", "lsp-add", n.ls, lsp, "--", "lsp-set-type", lsp, "router",
			"--", "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, "router-port="+lrp)
	}
	for i := 1; i <= 2+floodPlugs; i++ {
		name := fmt.Sprintf("vm%d", i)
		c.NBCtl(t, "lsp-add", "ls1", name, "--", "lsp-set-addresses", name, fmt.Sprintf("0a:00:00:00:01:%02x 10.0.1.%d", i, 10+i))
	}
	spec := func(i int) VMSpec {
		return VMSpec{Name: fmt.Sprintf("vm%d", i), LSP: fmt.Sprintf("vm%d", i), MAC: fmt.Sprintf("0a:00:00:00:01:%02x", i),
			Addr: fmt.Sprintf("10.0.1.%d/24", 10+i), Gateway: "10.0.1.1"}
	}
	appctl := func(args ...string) string {
		return hv.Run(t, append([]string{"ovn-appctl", "-t", hv.Dir + "/chassis.ctl"}, args...)...)
	}
	if out := appctl("upcall/set-flow-limit", strconv.Itoa(floodFlowLimit)); !strings.HasPrefix(out, "set flow_limit to ") {
		t.Fatalf("upcall/set-flow-limit: %s", out)
	}
	vm1 := c.AddVM(t, hv, spec(1))
	c.WaitPortUp(t, "vm1")
	c.NBCtl(t, "--wait=hv", "sync")
	show := func() string { return appctl("pinctrl/show") }
	defer func() {
		if t.Failed() {
			t.Logf("pinctrl/show:\n%s", show())
		}
	}()
	pidText, err := os.ReadFile(filepath.Join(hv.Dir, "chassis.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatalf("chassis.pid: %v", err)
	}
	_, rssBefore, err := procstat.Memory(pid)
	if err != nil {
		t.Fatal(err)
	}

	// plug plugs VM i in and returns the time to its ovn-installed,
	// polled every 10 ms (each poll runs ovs-vsctl).
	plug := func(vm *VM) time.Duration {
		start := time.Now()
		vm.Plug(t)
		if err := waitFor(60*time.Second, vm.Name+" ovn-installed", func() bool {
			out, err := hv.VsctlErr("--if-exists", "get", "Interface", vm.Port, "external_ids:ovn-installed")
			return err == nil && strings.Trim(strings.TrimSpace(out), `"`) == "true"
		}); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	vm2 := c.NewVM(t, hv, spec(2))
	var late []*VM // plugged in under the flood
	for i := 3; i < 3+floodPlugs; i++ {
		late = append(late, c.NewVM(t, hv, spec(i)))
	}
	quiet := plug(vm2)
	dpctlShow := func() string { return appctl("dpctl/show") }
	installed := func(show string) int {
		m := regexp.MustCompile(`installed:(\d+)`).FindStringSubmatch(show)
		if m == nil {
			t.Fatalf("dpctl/show has no installed count:\n%s", show)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	installedBefore := installed(dpctlShow())

	fd, _, err := rawSocket(vm1.NS, vm1.Dev)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	rmac, _ := net.ParseMAC("0a:00:00:00:ff:11")
	smac, _ := net.ParseMAC(vm1.MAC)
	src := vm1.Addr.Addr()
	frame := func(i int) []byte {
		i %= 65000
		return missFrame(rmac, smac, src, netip.AddrFrom4([4]byte{10, 2, byte(1 + i>>8), byte(i)}))
	}
	const rate, dur = 10000, 10 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type floodResult struct{ sent, refused int }
	fr := make(chan floodResult, 1)
	floodStart := time.Now()
	go func() {
		s, r := lab.Flood(ctx, fd, rate, dur, frame)
		fr <- floodResult{s, r}
	}()
	rssPeak := rssBefore
	sample := func() {
		if _, cur, err := procstat.Memory(pid); err == nil && cur > rssPeak {
			rssPeak = cur
		}
	}
	time.Sleep(3 * time.Second) // the flood is on
	sample()
	var under []time.Duration
	for _, vm := range late {
		under = append(under, plug(vm))
		time.Sleep(500 * time.Millisecond)
	}
	var res floodResult
	for waiting := true; waiting; {
		select {
		case res = <-fr:
			waiting = false
		case <-time.After(250 * time.Millisecond):
			sample()
		}
	}
	elapsed := time.Since(floodStart)
	sample()
	_, rssAfter, _ := procstat.Memory(pid)

	// The counters settle once the queue has drained.
	var out string
	var handled, dropped, errs int
	if err := waitFor(30*time.Second, "pinctrl's arp counters to settle", func() bool {
		prev := handled + dropped + errs
		out = show()
		var ok bool
		handled, dropped, errs, ok = pinctrlCounter(out, "arp")
		return ok && handled+dropped+errs == prev
	}); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	var dpIns, dpDrops int
	if m := regexp.MustCompile(`datapath packet-ins: sent (\d+), dropped (\d+)`).FindStringSubmatch(out); m != nil {
		dpIns, _ = strconv.Atoi(m[1])
		dpDrops, _ = strconv.Atoi(m[2])
	} else {
		t.Errorf("pinctrl/show has no datapath packet-ins line:\n%s", out)
	}
	// The datapath's own counters: lookups that reached it (the rest were
	// lost on the way, in the kernel's queues), upcalls, megaflows.
	dpShow := dpctlShow()
	megaflows := installed(dpShow) - installedBefore
	t.Logf("dpctl/show:\n%s", dpShow)
	t.Logf("flood: %d frames sent (%d refused by the VM's kernel) in %v, %.0f/s", res.sent, res.refused, elapsed.Round(time.Millisecond), float64(res.sent)/elapsed.Seconds())
	t.Logf("pinctrl arp: handled %d, rate-dropped %d, errors %d; datapath packet-ins %d, dropped (queue full) %d", handled, dropped, errs, dpIns, dpDrops)
	upcalls := appctl("upcall/show")
	t.Logf("upcall/show:\n%s", upcalls)
	t.Logf("chassis RSS: before %d MiB, peak during the flood %d MiB, after %d MiB; %d megaflows installed meanwhile (flow limit %d)",
		rssBefore>>20, rssPeak>>20, rssAfter>>20, megaflows, floodFlowLimit)
	t.Logf("plug to ovn-installed (ovs-vsctl add-port, then ovs-vsctl polled every 10 ms): %v without the flood, %v under it",
		quiet.Round(time.Millisecond), roundAll(under))
	own := portInstallTimes(t, filepath.Join(hv.Dir, "chassis.log"))
	var ownUnder []time.Duration
	for _, vm := range late {
		d, ok := own[vm.LSP]
		if !ok {
			t.Errorf("chassis.log has no \"port installed\" for %s", vm.LSP)
			continue
		}
		ownUnder = append(ownUnder, d)
		if d > portUpBound {
			t.Errorf("%s under the flood: %v from iface-id to ovn-installed (bound %v)", vm.LSP, d, portUpBound)
		}
	}
	t.Logf("govn chassis' own measure (iface-id seen to ovn-installed written): vm1 %v, vm2 %v without the flood, %v under it",
		own["vm1"].Round(time.Microsecond*100), own["vm2"].Round(time.Microsecond*100), roundAll(ownUnder))

	if res.sent < rate*int(dur/time.Second)/2 {
		t.Errorf("the flood sent only %d frames in %v", res.sent, elapsed)
	}
	// 1,000 a second with a burst of 1,000, and a few ARPs before.
	if max := int(1000*(elapsed.Seconds()+5)) + 1000; handled > max {
		t.Errorf("pinctrl answered %d ARP misses in %v: more than its limit allows (%d)", handled, elapsed, max)
	}
	if handled == 0 || dropped+dpDrops == 0 {
		t.Errorf("pinctrl/show: arp handled %d, rate-dropped %d, queue drops %d; want some answered and some dropped", handled, dropped, dpDrops)
	}
	if handled+dropped+errs > dpIns {
		t.Errorf("pinctrl counted %d arp packet-ins, the datapath sent %d", handled+dropped+errs, dpIns)
	}
	// The limit held: the flood's misses were forwarded uncached.
	m := regexp.MustCompile(`\(current (\d+)\) \(limit (\d+)\)[^\n]*\n.*flow_limit_hits:(\d+)`).FindStringSubmatch(upcalls)
	if m == nil {
		t.Fatalf("upcall/show has no flow counts:\n%s", upcalls)
	}
	current, _ := strconv.Atoi(m[1])
	limitHits, _ := strconv.Atoi(m[3])
	if current > floodFlowLimit || m[2] != strconv.Itoa(floodFlowLimit) || limitHits == 0 {
		t.Errorf("upcall/show: %d megaflows (limit %s), %d flow-limit hits; want at most %d, and hits", current, m[2], limitHits, floodFlowLimit)
	}
	// Bounded by the limit: a megaflow costs 4-7 KiB of RSS (measured
	// without a limit: 30,000 of them grew the chassis by 190 MiB), so
	// 12 KiB each up to the limit, 8 MiB for each port plugged in since
	// the first measure (its receive ring, 2 MiB locked, its transmit
	// ring, 2 MiB, and its receive goroutine's batch of 32 buffers of 64
	// KiB), and 64 MiB for the rest (pinctrl's queues and caches,
	// bounded by their sizes, the packet-in channel, the garbage
	// collector's slack).
	const portRSS = 8 << 20
	plugged := int64(1 + len(late))
	if bound := int64(64<<20) + int64(floodFlowLimit)*12<<10 + plugged*portRSS; rssPeak-rssBefore > bound {
		t.Errorf("chassis RSS grew from %d MiB to %d MiB during the flood, with a flow limit of %d and %d ports plugged in (bound %d MiB)",
			rssBefore>>20, rssPeak>>20, floodFlowLimit, plugged, bound>>20)
	}
	// The new ports work.
	for _, vm := range late {
		if err := vm.WaitPing(vm1.IP(), 20*time.Second); err != nil {
			t.Errorf("%s (plugged in under the flood) -> vm1: %v", vm.Name, err)
		}
	}
}

// portInstallTimes reads govn chassis' log for each logical port's time
// from its iface-id to ovn-installed ("port installed ... took=").
func portInstallTimes(t testing.TB, log string) map[string]time.Duration {
	t.Helper()
	text, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	took := map[string]time.Duration{}
	for _, m := range regexp.MustCompile(`msg="port installed" lport=(\S+) .*took=(\S+)`).FindAllSubmatch(text, -1) {
		d, err := time.ParseDuration(string(m[2]))
		if err != nil {
			t.Fatalf("chassis.log: %q: %v", m[0], err)
		}
		took[string(m[1])] = d
	}
	return took
}

// roundAll rounds durations to 0.1 ms for logging.
func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Microsecond)
	}
	return out
}
