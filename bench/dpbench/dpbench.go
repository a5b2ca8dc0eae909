// Package dpbench measures govn's datapath against the real Open vSwitch
// userspace datapath on this machine, with the same topology and flows, one
// after the other: two host namespaces joined by veth pairs to a switch
// namespace, where either ovs-vswitchd (--disable-system, a bridge with
// datapath_type=netdev) or a govn switch process forwards with two flows,
// in_port=1 → output:2 and in_port=2 → output:1.
//
// For each switch it measures 64-byte UDP packets per second received
// (a sender blasting from one host, a counter in the other), TCP throughput
// between the hosts, and the switch process's CPU-seconds per second. The
// traffic tools and the govn switch are this binary, re-executed inside
// the namespaces (see Options.Self).
//
// # What bounds the UDP figure
//
// The sender, the receiver and the switch share the machine's cores, and
// every 64-byte datagram costs the kernel more than it costs either switch
// in its own code: the sender's UDP/IP stack, the veth transmits, and the
// receiving host's IP/UDP stack, which the kernel runs in the context of
// whoever transmits to it (the switch, in its send call). No switch can
// deliver more than is offered, so the offered rate is printed with every
// figure. As a yardstick, the bench also measures the kernel forwarding by
// itself (a tc mirred redirect between the switch ports, no switch
// process), when tc can do that here.
package dpbench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/govn/govn/datapath/systest/traffic"
)

// Options configure a run.
type Options struct {
	// Self runs a traffic tool or the govn switch: Self + SelfArgs +
	// ("--internal-traffic" TOOL ARGS... | "--internal-switch" PORTS...).
	Self     string
	SelfArgs []string
	// Duration of each measurement (default 5 s).
	Duration time.Duration
	// Rounds alternates the switches this many times (default 2); each
	// figure is the mean over the rounds. The machine is shared, so one
	// round is noisy.
	Rounds int
	// Log receives progress; nil discards it.
	Log *slog.Logger
}

// Figures are one switch's results.
type Figures struct {
	UDPPacketsPerSec float64 `json:"udp_rx_pps"`      // 64-byte frames received per second
	UDPOfferedPerSec float64 `json:"udp_offered_pps"` // frames the sender sent per second
	UDPSwitchCPU     float64 `json:"udp_switch_cpu"`  // switch CPU-seconds per second during UDP
	// UDPMicrosPerPacket is the switch's CPU time per received packet,
	// including the receiving host's stack the kernel runs in its sends.
	UDPMicrosPerPacket float64 `json:"udp_switch_us_per_pkt"`
	TCPMbitPerSec      float64 `json:"tcp_mbps"`
	TCPSwitchCPU       float64 `json:"tcp_switch_cpu"`
	SwitchDescription  string  `json:"switch"`
}

// Report is the outcome: both switches and govn's ratios to OVS.
//
// OVS's userspace datapath forwards a partial checksum as it is, so the
// receiving host drops the UDP and TCP it gets unless the senders turn
// transmit checksum offload (and with it TSO) off. OVS and Govn are
// therefore both measured with "ethtool -K eth0 tx off" in the hosts: the
// same conditions. GovnOffload is govn again with the hosts' offloads on,
// as they are by default, which govn handles.
type Report struct {
	OVS         Figures `json:"ovs"`
	Govn        Figures `json:"govn"`
	GovnOffload Figures `json:"govn_offloads_on"`
	// Kernel is the yardstick: tc mirred redirecting between the switch
	// ports, no switch process (zero if tc cannot do it here).
	Kernel   Figures `json:"kernel_redirect"`
	UDPRatio float64 `json:"udp_pps_ratio"`  // Govn / OVS
	TCPRatio float64 `json:"tcp_mbps_ratio"` // Govn / OVS
	// The same with the hosts' offloads on for govn (OVS cannot run so).
	UDPRatioOffload float64 `json:"udp_pps_ratio_offloads_on"`
	TCPRatioOffload float64 `json:"tcp_mbps_ratio_offloads_on"`
	Seconds         float64 `json:"seconds_per_measurement"`
	Rounds          int     `json:"rounds"`
}

// add adds o's figures to f, for means over rounds.
func (f *Figures) add(o Figures, scale float64) {
	f.UDPPacketsPerSec += o.UDPPacketsPerSec * scale
	f.UDPOfferedPerSec += o.UDPOfferedPerSec * scale
	f.UDPSwitchCPU += o.UDPSwitchCPU * scale
	f.UDPMicrosPerPacket += o.UDPMicrosPerPacket * scale
	f.TCPMbitPerSec += o.TCPMbitPerSec * scale
	f.TCPSwitchCPU += o.TCPSwitchCPU * scale
	f.SwitchDescription = o.SwitchDescription
}

// udpPayload makes 64-byte frames (60 bytes plus the 4-byte FCS) out of
// Ethernet, IPv4 and UDP headers.
const udpPayload = 18

// The hosts' addresses.
const (
	h1Addr = "10.90.0.1"
	h2Addr = "10.90.0.2"
	h1MAC  = "02:00:00:00:90:01"
	h2MAC  = "02:00:00:00:90:02"
)

// Check reports why the bench cannot run here, or nil.
func Check() error {
	if os.Geteuid() != 0 {
		return errors.New("root is needed (for network namespaces)")
	}
	for _, b := range []string{"ip", "ethtool", "ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s is needed: %w", b, err)
		}
	}
	return nil
}

// bench is one run's state: the namespaces and what to clean up.
type bench struct {
	opts       Options
	log        *slog.Logger
	sw, h1, h2 string
	cleanups   []func()
}

func (b *bench) cleanup() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
}

// Run builds the topology, measures OVS then govn, and tears it all down.
func Run(ctx context.Context, opts Options) (Report, error) {
	if err := Check(); err != nil {
		return Report{}, err
	}
	if opts.Duration <= 0 {
		opts.Duration = 5 * time.Second
	}
	b := &bench{opts: opts, log: opts.Log}
	if b.log == nil {
		b.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	defer b.cleanup()
	if err := b.topology(ctx); err != nil {
		return Report{}, err
	}
	if opts.Rounds <= 0 {
		opts.Rounds = 2
	}
	var r Report
	r.Seconds = opts.Duration.Seconds()
	r.Rounds = opts.Rounds
	scale := 1 / float64(opts.Rounds)
	for round := range opts.Rounds {
		b.log.Info("round", "n", round+1)
		if err := b.setOffloads(ctx, false); err != nil {
			return r, err
		}
		f, err := b.measure(ctx, b.startOVS)
		if err != nil {
			return r, fmt.Errorf("OVS: %w", err)
		}
		r.OVS.add(f, scale)
		if f, err = b.measure(ctx, b.startGovn); err != nil {
			return r, fmt.Errorf("govn: %w", err)
		}
		r.Govn.add(f, scale)
		if err := b.setOffloads(ctx, true); err != nil {
			return r, err
		}
		if f, err = b.measure(ctx, b.startGovn); err != nil {
			return r, fmt.Errorf("govn with offloads: %w", err)
		}
		r.GovnOffload.add(f, scale)
		if err := b.setOffloads(ctx, false); err != nil {
			return r, err
		}
		if f, err = b.measure(ctx, b.startKernelRedirect); err != nil {
			b.log.Info("no kernel yardstick", "err", err)
		} else {
			r.Kernel.add(f, scale)
		}
	}
	r.UDPRatio = ratio(r.Govn.UDPPacketsPerSec, r.OVS.UDPPacketsPerSec)
	r.TCPRatio = ratio(r.Govn.TCPMbitPerSec, r.OVS.TCPMbitPerSec)
	r.UDPRatioOffload = ratio(r.GovnOffload.UDPPacketsPerSec, r.OVS.UDPPacketsPerSec)
	r.TCPRatioOffload = ratio(r.GovnOffload.TCPMbitPerSec, r.OVS.TCPMbitPerSec)
	return r, nil
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// setOffloads turns the hosts' transmit checksum offload (and so TSO) on
// or off.
func (b *bench) setOffloads(ctx context.Context, on bool) error {
	v := "off"
	if on {
		v = "on"
	}
	for _, ns := range []string{b.h1, b.h2} {
		if err := runCmd(ctx, b.inNS(ns, "ethtool", "-K", "eth0", "tx", v)...); err != nil {
			return err
		}
	}
	return nil
}

func randomSuffix() string {
	var x [3]byte
	_, _ = rand.Read(x[:])
	return hex.EncodeToString(x[:])
}

func runCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (b *bench) inNS(ns string, args ...string) []string {
	return append([]string{"ip", "netns", "exec", ns}, args...)
}

// topology makes the namespaces and veth pairs: h1.eth0 — sw.p1 and
// h2.eth0 — sw.p2.
func (b *bench) topology(ctx context.Context) error {
	sfx := randomSuffix()
	b.sw, b.h1, b.h2 = "gvbsw"+sfx, "gvbh1"+sfx, "gvbh2"+sfx
	for _, ns := range []string{b.sw, b.h1, b.h2} {
		if err := runCmd(ctx, "ip", "netns", "add", ns); err != nil {
			return err
		}
		b.cleanups = append(b.cleanups, func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		if err := runCmd(ctx, b.inNS(ns, "ip", "link", "set", "lo", "up")...); err != nil {
			return err
		}
		_ = exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1").Run()
	}
	hosts := []struct{ ns, swPort, addr, mac, peerAddr, peerMAC string }{
		{b.h1, "p1", h1Addr, h1MAC, h2Addr, h2MAC},
		{b.h2, "p2", h2Addr, h2MAC, h1Addr, h1MAC},
	}
	for _, h := range hosts {
		steps := [][]string{
			{"ip", "link", "add", "eth0", "netns", h.ns, "type", "veth", "peer", "name", h.swPort, "netns", b.sw},
			b.inNS(h.ns, "ip", "link", "set", "eth0", "address", h.mac),
			b.inNS(h.ns, "ip", "addr", "add", h.addr+"/24", "dev", "eth0"),
			b.inNS(h.ns, "ip", "link", "set", "eth0", "up"),
			// A static neighbour: the flows forward by port, and the
			// measurement should not include ARP.
			b.inNS(h.ns, "ip", "neigh", "replace", h.peerAddr, "lladdr", h.peerMAC, "dev", "eth0", "nud", "permanent"),
			b.inNS(b.sw, "ip", "link", "set", h.swPort, "up"),
		}
		for _, s := range steps {
			if err := runCmd(ctx, s...); err != nil {
				return err
			}
		}
	}
	return nil
}

// switchProc is a running switch: its process (for CPU time) and how to
// stop it.
type switchProc struct {
	pid  int
	desc string
	stop func()
}

// measure starts a switch, runs the UDP and TCP measurements through it
// and stops it.
func (b *bench) measure(ctx context.Context, start func(context.Context) (*switchProc, error)) (Figures, error) {
	sp, err := start(ctx)
	if err != nil {
		return Figures{}, err
	}
	defer sp.stop()
	f := Figures{SwitchDescription: sp.desc}
	if err := b.waitForPath(ctx); err != nil {
		return f, err
	}
	d := b.opts.Duration
	secs := strconv.FormatFloat(d.Seconds(), 'f', 3, 64)

	// UDP: the sink counts for d after its first datagram; the blaster
	// runs a little longer so the sink's window is always loaded.
	cpu0, t0 := cpuSeconds(sp.pid), time.Now()
	sink := b.tool(ctx, b.h2, "udp-sink", h2Addr+":9000", secs)
	var sinkOut strings.Builder
	sink.Stdout = &sinkOut
	if err := sink.Start(); err != nil {
		return f, err
	}
	if err := waitListening(ctx, sink, "udp", 9000); err != nil {
		_ = sink.Process.Kill()
		_ = sink.Wait()
		return f, err
	}
	blastSecs := strconv.FormatFloat(d.Seconds()+1, 'f', 3, 64)
	blastOut, err := b.tool(ctx, b.h1, "udp-blast", h2Addr+":9000", blastSecs, strconv.Itoa(udpPayload)).Output()
	if err != nil {
		_ = sink.Process.Kill()
		_ = sink.Wait()
		return f, fmt.Errorf("udp-blast: %w", err)
	}
	if err := sink.Wait(); err != nil {
		return f, fmt.Errorf("udp-sink: %w", err)
	}
	cpu1, t1 := cpuSeconds(sp.pid), time.Now()
	var rx, tx traffic.Result
	if err := json.Unmarshal([]byte(sinkOut.String()), &rx); err != nil {
		return f, fmt.Errorf("udp-sink output %q: %w", sinkOut.String(), err)
	}
	if err := json.Unmarshal(blastOut, &tx); err != nil {
		return f, fmt.Errorf("udp-blast output %q: %w", blastOut, err)
	}
	f.UDPPacketsPerSec = float64(rx.Packets) / rx.Seconds
	f.UDPOfferedPerSec = float64(tx.Packets) / tx.Seconds
	f.UDPSwitchCPU = (cpu1 - cpu0) / t1.Sub(t0).Seconds()
	if f.UDPPacketsPerSec > 0 {
		f.UDPMicrosPerPacket = f.UDPSwitchCPU / f.UDPPacketsPerSec * 1e6
	}
	b.log.Info("udp", "switch", sp.desc, "rx_pps", int(f.UDPPacketsPerSec), "offered_pps", int(f.UDPOfferedPerSec), "cpu", f.UDPSwitchCPU)

	// TCP: one stream for d.
	sinkCtx, cancelSink := context.WithCancel(ctx)
	defer cancelSink()
	tsink := b.tool(sinkCtx, b.h2, "tcp-count-sink", h2Addr+":5001")
	if err := tsink.Start(); err != nil {
		return f, err
	}
	defer func() { cancelSink(); _ = tsink.Wait() }()
	if err := waitListening(ctx, tsink, "tcp", 5001); err != nil {
		return f, err
	}
	cpu0, t0 = cpuSeconds(sp.pid), time.Now()
	out, err := b.tool(ctx, b.h1, "tcp-stream", h2Addr+":5001", secs).Output()
	if err != nil {
		return f, fmt.Errorf("tcp-stream: %w", err)
	}
	cpu1, t1 = cpuSeconds(sp.pid), time.Now()
	var tr traffic.Result
	if err := json.Unmarshal(out, &tr); err != nil {
		return f, fmt.Errorf("tcp-stream output %q: %w", out, err)
	}
	f.TCPMbitPerSec = float64(tr.Bytes) * 8 / tr.Seconds / 1e6
	f.TCPSwitchCPU = (cpu1 - cpu0) / t1.Sub(t0).Seconds()
	b.log.Info("tcp", "switch", sp.desc, "mbps", int(f.TCPMbitPerSec), "cpu", f.TCPSwitchCPU)
	return f, nil
}

// tool returns the command running a traffic tool in a namespace.
func (b *bench) tool(ctx context.Context, ns string, args ...string) *exec.Cmd {
	a := append(append([]string{b.opts.Self}, b.opts.SelfArgs...), "--internal-traffic")
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, append(a, args...)...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// waitListening waits until the server tool started as cmd listens on
// port: a fixed sleep is too short when the machine is busy.
func waitListening(ctx context.Context, cmd *exec.Cmd, network string, port uint16) error {
	deadline := time.Now().Add(20 * time.Second)
	for !traffic.Listening(cmd.Process.Pid, network, port) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no %s server listening on port %d in the namespace after 20 s", network, port)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// waitForPath pings h2 from h1 until it answers (the switch is up).
func (b *bench) waitForPath(ctx context.Context) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		cmd := b.tool(ctx, b.h1, "ping", h2Addr, "1")
		cmd.Stderr = nil
		err := cmd.Run()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no path from h1 to h2 through the switch: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cpuSeconds returns the user+system CPU time of a process so far (0 for
// pid 0: no process).
func cpuSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ is 100 on Linux
}

// startOVS starts ovsdb-server and ovs-vswitchd in the switch namespace
// with a netdev bridge on p1 and p2 and the two flows.
func (b *bench) startOVS(ctx context.Context) (*switchProc, error) {
	dir, err := os.MkdirTemp("", "govn-dpbench-ovs-")
	if err != nil {
		return nil, err
	}
	var procs []*exec.Cmd
	stop := func() {
		for i := len(procs) - 1; i >= 0; i-- {
			_ = procs[i].Process.Kill()
			_ = procs[i].Wait()
		}
		os.RemoveAll(dir)
	}
	env := append(os.Environ(), "OVS_RUNDIR="+dir, "OVS_LOGDIR="+dir, "OVS_DBDIR="+dir, "OVS_SYSCONFDIR="+dir)
	p := func(n string) string { return filepath.Join(dir, n) }
	db := "unix:" + p("db.sock")
	start := func(args ...string) error {
		cmd := exec.Command("ip", append([]string{"netns", "exec", b.sw}, args...)...)
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s: %w", args[0], err)
		}
		procs = append(procs, cmd)
		return nil
	}
	fail := func(err error) (*switchProc, error) { stop(); return nil, err }
	if err := runCmd(ctx, "ovsdb-tool", "create", p("conf.db"), "/usr/share/openvswitch/vswitch.ovsschema"); err != nil {
		return fail(err)
	}
	if err := start("ovsdb-server", p("conf.db"), "--remote=punix:"+p("db.sock"), "--pidfile="+p("ovsdb-server.pid"),
		"--unixctl="+p("ovsdb-server.ctl"), "--log-file="+p("ovsdb-server.log")); err != nil {
		return fail(err)
	}
	if err := waitFile(p("db.sock"), 10*time.Second); err != nil {
		return fail(err)
	}
	if err := start("ovs-vswitchd", db, "--disable-system", "--pidfile="+p("ovs-vswitchd.pid"),
		"--unixctl="+p("ovs-vswitchd.ctl"), "--log-file="+p("ovs-vswitchd.log")); err != nil {
		return fail(err)
	}
	vsctl := []string{"ovs-vsctl", "--db=" + db, "--timeout=30",
		"--", "add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev",
		"--", "add-port", "br0", "p1", "--", "set", "interface", "p1", "ofport_request=1",
		"--", "add-port", "br0", "p2", "--", "set", "interface", "p2", "ofport_request=2"}
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", b.sw}, vsctl...)...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("ovs-vsctl: %w: %s", err, out))
	}
	mgmt := "unix:" + p("br0.mgmt")
	for _, fl := range []string{"in_port=1,actions=output:2", "in_port=2,actions=output:1"} {
		if err := waitFile(p("br0.mgmt"), 10*time.Second); err != nil {
			return fail(err)
		}
		if err := runCmd(ctx, "ovs-ofctl", "add-flow", mgmt, fl); err != nil {
			return fail(err)
		}
	}
	return &switchProc{pid: procs[1].Process.Pid, desc: "ovs-vswitchd (userspace datapath, netdev bridge)", stop: stop}, nil
}

func waitFile(path string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startGovn starts the govn switch (SwitchMain) in the switch namespace.
func (b *bench) startGovn(ctx context.Context) (*switchProc, error) {
	args := append(append([]string{"netns", "exec", b.sw, b.opts.Self}, b.opts.SelfArgs...), "--internal-switch", "p1", "p2")
	cmd := exec.Command("ip", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("govn switch: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() && sc.Text() == readyLine {
			ready <- nil
		} else {
			ready <- errors.New("govn switch did not start")
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case err := <-ready:
		if err != nil {
			stop()
			return nil, err
		}
	case <-time.After(20 * time.Second):
		stop()
		return nil, errors.New("govn switch: not ready after 20 s")
	}
	return &switchProc{pid: cmd.Process.Pid, desc: "govn datapath (AF_PACKET ports)", stop: stop}, nil
}

// startKernelRedirect makes the kernel forward between p1 and p2 by
// itself: a tc ingress filter on each port redirecting every frame to the
// other. There is no switch process (pid 0).
func (b *bench) startKernelRedirect(ctx context.Context) (*switchProc, error) {
	undo := func() {
		for _, dev := range []string{"p1", "p2"} {
			_ = exec.Command("ip", "netns", "exec", b.sw, "tc", "qdisc", "del", "dev", dev, "clsact").Run()
		}
	}
	for _, pair := range [][2]string{{"p1", "p2"}, {"p2", "p1"}} {
		steps := [][]string{
			b.inNS(b.sw, "tc", "qdisc", "add", "dev", pair[0], "clsact"),
			b.inNS(b.sw, "tc", "filter", "add", "dev", pair[0], "ingress", "u32", "match", "u32", "0", "0",
				"action", "mirred", "egress", "redirect", "dev", pair[1]),
		}
		for _, s := range steps {
			if err := runCmd(ctx, s...); err != nil {
				undo()
				return nil, err
			}
		}
	}
	return &switchProc{desc: "kernel tc mirred redirect (no switch process)", stop: undo}, nil
}

// WriteTable prints the report as a table.
func (r Report) WriteTable(w io.Writer) {
	row := func(name, unit string, o, g, gOff, k float64, ratio bool) {
		fmt.Fprintf(w, "%-30s %12s %12s %12s %12s", name, format(o, unit), format(g, unit), format(gOff, unit), format(k, unit))
		if ratio && o > 0 {
			fmt.Fprintf(w, " %8.2fx %8.2fx", g/o, gOff/o)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%-30s %12s %12s %12s %12s %9s %9s\n", fmt.Sprintf("datapath (%.0fs x %d rounds)", r.Seconds, r.Rounds),
		"OVS 3.1", "govn", "govn+offl", "kernel tc", "govn/OVS", "+offl/OVS")
	row("64-byte UDP received (pps)", "n", r.OVS.UDPPacketsPerSec, r.Govn.UDPPacketsPerSec, r.GovnOffload.UDPPacketsPerSec, r.Kernel.UDPPacketsPerSec, true)
	row("  offered by sender (pps)", "n", r.OVS.UDPOfferedPerSec, r.Govn.UDPOfferedPerSec, r.GovnOffload.UDPOfferedPerSec, r.Kernel.UDPOfferedPerSec, false)
	row("  switch CPU (s/s)", "f", r.OVS.UDPSwitchCPU, r.Govn.UDPSwitchCPU, r.GovnOffload.UDPSwitchCPU, r.Kernel.UDPSwitchCPU, false)
	row("  switch CPU per packet (us)", "f", r.OVS.UDPMicrosPerPacket, r.Govn.UDPMicrosPerPacket, r.GovnOffload.UDPMicrosPerPacket, r.Kernel.UDPMicrosPerPacket, false)
	row("TCP throughput (Mbit/s)", "n", r.OVS.TCPMbitPerSec, r.Govn.TCPMbitPerSec, r.GovnOffload.TCPMbitPerSec, r.Kernel.TCPMbitPerSec, true)
	row("  switch CPU (s/s)", "f", r.OVS.TCPSwitchCPU, r.Govn.TCPSwitchCPU, r.GovnOffload.TCPSwitchCPU, r.Kernel.TCPSwitchCPU, false)
	fmt.Fprintln(w, "OVS, govn, kernel tc: hosts with tx checksum offload off (OVS needs it); govn+offl: offloads on (the default)")
	fmt.Fprintln(w, "kernel tc: the kernel redirecting between the switch ports, no switch process (a yardstick, 0 if tc cannot)")
	fmt.Fprintf(w, "goals: UDP >= 5x OVS: %.2fx (%.2fx with offloads); TCP >= 1.5x OVS: %.2fx (%.2fx with offloads)\n",
		r.UDPRatio, r.UDPRatioOffload, r.TCPRatio, r.TCPRatioOffload)
}

func format(v float64, unit string) string {
	if unit == "f" {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}
