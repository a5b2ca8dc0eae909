// Package chassisbench measures govn chassis against a real OVN
// hypervisor (ovn-controller with ovs-vswitchd's userspace datapath) on
// this machine. It backs "govn bench chassis".
//
// RunSuite is the whole bench (issue 14 item 3, see suite.go): govn (govn
// db, govn northd, govn chassis) and the real OVN (ovsdb-server,
// ovn-northd, ovn-controller, ovs-vswitchd) built one after the other on
// the same namespaces and topology, each measured for HTTP requests per
// second (ab) straight to a backend and through a load balancer's VIP,
// the datapath flows those leave, the chassis' CPU time, ping RTTs (the
// first packet after the datapath flows are deleted, a new connection,
// steady state), iperf3 TCP and 64-byte UDP on one hypervisor and across
// Geneve, port-up latency, the time from a Northbound commit until every
// chassis has it, and what an ACL over a large address set costs in rules
// and memory. The figures are judged against the goals as
// govn/OVN ratios.
//
// Run is port-up latency alone (issue 11 (c), "govn bench chassis
// --port-up"): the time from binding a VM's port to its first packet
// through. Each side gets a
// cluster of its own from package hvtest: the real ovn-northd, and two
// hypervisors in network namespaces that run the chassis under test; a
// probe VM sits on hv2. Both clusters run at once, and new VMs join hv1
// one after another, in turn on govn's cluster and on OVN's, so that the
// drifting load of a shared machine weighs on both alike. For each,
// untimed: its logical switch port is created and every chassis
// has caught up (ovn-nbctl --wait=hv); its namespace, veth and static
// neighbour entries (towards the probe, and the probe's towards it) are
// made, and ping starts in it, sending an echo request to the probe
// every 5 ms. Timed: the clock starts just before
//
//	ovs-vsctl add-port br-int vifN -- set Interface vifN external_ids:iface-id=pN
//
// and stops at the first echo reply (ping -D's timestamp). The reply
// crosses both chassis and the Geneve tunnel between them, so both must
// have acted on the new binding. The static neighbours keep ARP, whose
// retries come a second apart, out of the figure. A first port, not
// counted, warms up the tunnel (the first packets to a new tunnel
// neighbour are lost while it is resolved).
//
// The figures are p50 and p90 (nearest rank) over the ports. The issue's
// goal is a govn p50 of at most 100 ms.
//
// With Options.Flood (issue 12 (c), "--port-up --flood=RATE"), the ports
// come up under a flood of ARP misses on their own hypervisor: router lr0
// joins ls0 to lsf, a /16 where nobody is, and a flooder VM on hv1 sends
// RATE datagrams a second through lr0, each to the next address of lsf,
// from before the warm-up port to the end (lab's miss-flood tool). Each
// is a miss in the datapath's megaflows (the neighbour lookup examines
// the whole address) and an arp { } for the controller, which
// rate-limits them; hv1's megaflow cap (other_config:flow-limit) is
// FloodFlowLimit on both sides, so that the flood costs the chassis
// upcalls, not memory.
package chassisbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/govn/govn/internal/hvtest"
)

// Options configure Run.
type Options struct {
	// Govn is the program and leading arguments of govn chassis, e.g.
	// {"/usr/bin/govn", "chassis"}.
	Govn []string
	// Ports is how many ports to bind on each side (default 100).
	Ports int
	// OVN says to measure the real ovn-controller and ovs-vswitchd too.
	OVN bool
	// Timeout bounds the wait for one port's first reply (default 5 s);
	// a port that takes longer counts as failed.
	Timeout time.Duration
	// Flood, if positive, is the rate (datagrams a second) of the ARP
	// misses a VM on hv1 sends while the ports come up.
	Flood int
	// Log receives progress; nil for none.
	Log *slog.Logger
}

// GoalP50 is issue 11's goal for govn's median port-up latency, and
// issue 12's under a flood.
const GoalP50 = 100 * time.Millisecond

// FloodFlowLimit is hv1's megaflow cap on both sides under a flood.
const FloodFlowLimit = 2000

// Figures are one side's port-up latencies.
type Figures struct {
	Chassis string `json:"chassis"`
	// Ports is how many ports came up; Failed how many did not within
	// the timeout.
	Ports     int       `json:"ports"`
	Failed    int       `json:"failed"`
	P50Ms     float64   `json:"p50_ms"`
	P90Ms     float64   `json:"p90_ms"`
	MinMs     float64   `json:"min_ms"`
	MaxMs     float64   `json:"max_ms"`
	SamplesMs []float64 `json:"samples_ms"` // in the order the ports were bound
	// AddPortP50Ms is the median time ovs-vsctl add-port took (it
	// returns once the switch has the port: cur_cfg): part of the
	// latency, the rest being the controller's.
	AddPortP50Ms float64 `json:"add_port_p50_ms"`
}

// Report is the outcome of Run.
type Report struct {
	Govn Figures  `json:"govn"`
	OVN  *Figures `json:"ovn,omitempty"`
	// OVNSkipped says why there is no OVN side, if there is none.
	OVNSkipped string `json:"ovn_skipped,omitempty"`
	// Ratio is govn's p50 over OVN's: below 1 govn is faster.
	Ratio    float64 `json:"p50_ratio_govn_over_ovn,omitempty"`
	GoalP50  float64 `json:"goal_p50_ms"`
	GoalMet  bool    `json:"goal_met"`
	Interval float64 `json:"ping_interval_ms"`
	// Flood is the rate of ARP misses on hv1 while the ports came up (0:
	// none); FloodSent what each side's flooder sent, by chassis.
	Flood     int            `json:"flood_per_s,omitempty"`
	FloodSent map[string]int `json:"flood_sent,omitempty"`
}

// pingInterval is how often a new VM sends its echo request: the
// figures' resolution.
const pingInterval = 5 * time.Millisecond

// Run measures govn chassis and, if asked, the real OVN hypervisor. Both
// clusters are up at once and the ports are bound in turn, one on govn's
// and one on OVN's, so that the load of a shared machine, which drifts,
// weighs on both alike. It needs root and the OVN and OVS programs (the
// real ovn-northd serves both sides).
func Run(ctx context.Context, opts Options) (*Report, error) {
	if len(opts.Govn) == 0 {
		return nil, errors.New("chassisbench: no govn chassis command")
	}
	if opts.Ports <= 0 {
		opts.Ports = 100
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if why := hvtest.Available(); why != "" {
		return nil, fmt.Errorf("chassisbench: %s", why)
	}
	if opts.Flood < 0 || opts.Flood > 1000000 {
		return nil, fmt.Errorf("chassisbench: flood rate %d: want 0 to 1000000 a second", opts.Flood)
	}
	r := &Report{GoalP50: ms(GoalP50), Interval: ms(pingInterval), Flood: opts.Flood}
	sides := []*side{{name: "govn chassis", chassis: hvtest.GovnChassis{Argv: opts.Govn}}}
	switch {
	case !opts.OVN:
		r.OVNSkipped = "not asked for"
	case missing("ovs-vswitchd", "ovn-controller", "ovsdb-server") != "":
		r.OVNSkipped = "needs " + missing("ovs-vswitchd", "ovn-controller", "ovsdb-server")
	default:
		sides = append(sides, &side{name: "ovn-controller + ovs-vswitchd", chassis: hvtest.RealChassis{}})
	}
	err := withTB(opts.Log, func(t *tb) {
		for _, s := range sides {
			s.log = opts.Log.With("chassis", s.name)
			s.setUp(t)
		}
		if opts.Flood > 0 {
			for _, s := range sides {
				s.startFlood(t, opts.Govn[0], opts.Flood)
			}
		}
		for i := 0; i <= opts.Ports; i++ {
			for _, s := range sides {
				if ctx.Err() != nil {
					t.Fatal(ctx.Err())
				}
				s.bind(ctx, t, i, opts.Timeout)
			}
		}
		for _, s := range sides {
			s.stopFlood(t)
		}
	})
	if err != nil {
		return nil, err
	}
	if opts.Flood > 0 {
		r.FloodSent = map[string]int{}
		for _, s := range sides {
			r.FloodSent[s.name] = s.floodSent
		}
	}
	r.Govn = sides[0].summary()
	r.GoalMet = r.Govn.Ports > 0 && r.Govn.Failed == 0 && r.Govn.P50Ms <= ms(GoalP50)
	if len(sides) > 1 {
		o := sides[1].summary()
		r.OVN = &o
		if o.P50Ms > 0 {
			r.Ratio = r.Govn.P50Ms / o.P50Ms
		}
	}
	return r, nil
}

// missing returns the first program not on PATH, or "".
func missing(programs ...string) string {
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			return p
		}
	}
	return ""
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// probe is the VM on hv2 that every new port pings.
var probe = hvtest.VMSpec{Name: "probe", LSP: "probe", MAC: "0a:00:00:00:00:02", Addr: "10.0.0.2/16"}

// side is one chassis under test: its cluster and what it measured.
type side struct {
	name    string
	chassis hvtest.Chassis
	log     *slog.Logger
	c       *hvtest.Cluster
	probe   *hvtest.VM
	samples []time.Duration
	addPort []time.Duration // how long each counted add-port took
	failed  int
	// flooder is the miss-flood tool's process, if flooding;
	// floodSent what it sent, read when it stops.
	flooder   *hvtest.Daemon
	floodSent int
}

// The flood's topology: router lr0 between ls0 and lsf, whose /16 has
// nobody, and the flooder on hv1.
const (
	floodRouterMAC = "0a:00:00:00:ff:01"
	floodPrefix    = "10.2.0.0/16"
)

var flooder = hvtest.VMSpec{Name: "flooder", LSP: "flooder", MAC: "0a:00:00:00:00:03", Addr: "10.0.250.1/16", Gateway: "10.0.0.1"}

// startFlood makes the flood's router, switch and VM, caps hv1's
// megaflows at FloodFlowLimit, and starts rate datagrams a second from
// the flooder (govn is the binary whose lab-tool sends them).
func (s *side) startFlood(t *tb, govn string, rate int) {
	s.log.Info("starting the flood", "per_s", rate)
	c := s.c
	c.NBCtl(t, "lr-add", "lr0")
	for _, n := range []struct{ ls, mac, cidr string }{
		{"ls0", floodRouterMAC, "10.0.0.1/16"},
		{"lsf", "0a:00:00:00:ff:02", "10.2.0.1/16"},
	} {
		if n.ls != "ls0" {
			c.NBCtl(t, "ls-add", n.ls)
		}
		lrp, lsp := "lr0-"+n.ls, n.ls+"-lr0"
		c.NBCtl(t, "lrp-add", "lr0", lrp, n.mac, n.cidr,
			"--", "lsp-add", n.ls, lsp, "--", "lsp-set-type", lsp, "router",
			"--", "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, "router-port="+lrp)
	}
	c.NBCtl(t, "lsp-add", "ls0", flooder.LSP, "--", "lsp-set-addresses", flooder.LSP, flooder.MAC+" "+ip(flooder))
	hv1 := c.Hypervisor(1)
	hv1.Vsctl(t, "set", "Open_vSwitch", ".", "other_config:flow-limit="+strconv.Itoa(FloodFlowLimit))
	vm := c.AddVM(t, hv1, flooder)
	c.WaitPortUp(t, flooder.LSP)
	c.NBCtl(t, "--wait=hv", "sync")
	s.flooder = c.Start(t, vm.NS, "flooder", nil, govn, "lab-tool", "miss-flood", vm.Dev,
		strconv.Itoa(rate), "0", floodRouterMAC, floodPrefix)
}

// stopFlood stops the flooder and reads how much it sent.
func (s *side) stopFlood(t *tb) {
	if s.flooder == nil {
		return
	}
	s.flooder.Stop()
	out, err := os.ReadFile(s.flooder.Log)
	if err != nil {
		t.Fatalf("%s: flooder's output: %v", s.name, err)
	}
	m := regexp.MustCompile(`sent (\d+) refused (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s: the flooder ended (%v) without its count: %s", s.name, s.flooder.Err(), bytes.TrimSpace(out))
	}
	s.floodSent, _ = strconv.Atoi(string(m[1]))
	s.log.Info("flood stopped", "sent", s.floodSent, "refused", string(m[2]))
	s.flooder = nil
}

// setUp builds the side's cluster, switch and probe VM.
func (s *side) setUp(t *tb) {
	s.log.Info("building the cluster")
	s.c = hvtest.New(t, hvtest.Options{Hypervisors: 2, Chassis: func(int) hvtest.Chassis { return s.chassis }})
	s.addProbe(t)
}

// addProbe makes switch ls0 and the probe VM on hv2 that the new ports
// ping.
func (s *side) addProbe(t *tb) {
	s.c.NBCtl(t, "ls-add", "ls0")
	s.c.NBCtl(t, "lsp-add", "ls0", probe.LSP, "--", "lsp-set-addresses", probe.LSP, probe.MAC+" "+ip(probe))
	s.probe = s.c.AddVM(t, s.c.Hypervisor(2), probe)
	s.c.WaitPortUp(t, probe.LSP)
}

// bind binds port i (0 is the warm-up, not counted) and notes its
// latency.
func (s *side) bind(ctx context.Context, t *tb, i int, timeout time.Duration) {
	d, plugged, err := bindOne(ctx, t, s.c, s.probe, i, timeout)
	switch {
	case i == 0 && err != nil:
		t.Fatalf("%s: warm-up port: %v", s.name, err)
	case i == 0:
		s.log.Info("warm-up port up", "ms", ms(d))
	case err != nil:
		s.failed++
		s.log.Warn("port not up", "port", i, "err", err)
	default:
		s.samples = append(s.samples, d)
		s.addPort = append(s.addPort, plugged)
		s.log.Debug("port up", "port", i, "ms", ms(d), "add_port_ms", ms(plugged))
	}
}

func (s *side) summary() Figures {
	f := Figures{Chassis: s.name, Failed: s.failed}
	f.summarize(s.samples)
	f.AddPortP50Ms = median(s.addPort)
	s.log.Info("done", "p50_ms", f.P50Ms, "p90_ms", f.P90Ms, "failed", f.Failed)
	return f
}

// ip is a VM's address without its prefix length.
func ip(s hvtest.VMSpec) string {
	a, _, _ := strings.Cut(s.Addr, "/")
	return a
}

// bindOne makes port i and VM pI on hv1 and returns how long after the
// start of its add-port the probe's first reply reached it.
//
// It also returns how long ovs-vsctl took, which waits until the switch
// has applied the new port (cur_cfg).
func bindOne(ctx context.Context, t *tb, c *hvtest.Cluster, probeVM *hvtest.VM, i int, timeout time.Duration) (up, addPort time.Duration, err error) {
	name := "p" + strconv.Itoa(i)
	spec := hvtest.VMSpec{Name: name, LSP: name,
		MAC:  fmt.Sprintf("0a:00:00:01:%02x:%02x", i>>8, i&0xff),
		Addr: fmt.Sprintf("10.0.%d.%d/16", 1+i/250, 1+i%250)}
	c.NBCtl(t, "--wait=hv", "lsp-add", "ls0", name, "--", "lsp-set-addresses", name, spec.MAC+" "+ip(spec))
	vm := c.NewVM(t, c.Hypervisor(1), spec)
	for _, n := range []struct {
		in       *hvtest.VM
		ip, addr string
	}{{vm, probeVM.IP(), probeVM.MAC}, {probeVM, vm.IP(), vm.MAC}} {
		if out, err := n.in.Command(ctx, "ip", "neigh", "replace", n.ip, "lladdr", n.addr, "dev", n.in.Dev, "nud", "permanent").CombinedOutput(); err != nil {
			t.Fatalf("static neighbour in %s: %v: %s", n.in.Name, err, out)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, timeout+5*time.Second)
	defer cancel()
	var out bytes.Buffer
	ping := vm.Command(pctx, "ping", "-n", "-D", "-c", "1",
		"-i", strconv.FormatFloat(pingInterval.Seconds(), 'f', 3, 64),
		"-w", strconv.Itoa(int(math.Ceil(timeout.Seconds()))), probeVM.IP())
	ping.Stdout, ping.Stderr = &out, &out
	if err := ping.Start(); err != nil {
		t.Fatalf("ping in %s: %v", name, err)
	}
	start := time.Now()
	vm.Plug(t)
	plugged := time.Since(start)
	perr := ping.Wait()
	at, ok := firstReply(out.Bytes())
	if !ok {
		return 0, 0, fmt.Errorf("%s: no reply from the probe within %v (%v): %s", name, timeout, perr, bytes.TrimSpace(out.Bytes()))
	}
	return at.Sub(start), plugged, nil
}

var replyLine = regexp.MustCompile(`(?m)^\[(\d+)\.(\d+)\] \d+ bytes from `)

// firstReply is the time of the first echo reply in ping -D's output.
func firstReply(out []byte) (time.Time, bool) {
	m := replyLine.FindSubmatch(out)
	if m == nil {
		return time.Time{}, false
	}
	sec, err1 := strconv.ParseInt(string(m[1]), 10, 64)
	nsec, err2 := strconv.ParseInt((string(m[2]) + "000000000")[:9], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, false
	}
	return time.Unix(sec, nsec), true
}

// summarize fills in the figures from the samples.
func (f *Figures) summarize(samples []time.Duration) {
	f.Ports = len(samples)
	f.SamplesMs = make([]float64, len(samples))
	for i, d := range samples {
		f.SamplesMs[i] = math.Round(ms(d)*1000) / 1000
	}
	if len(samples) == 0 {
		return
	}
	sorted := append([]float64(nil), f.SamplesMs...)
	sort.Float64s(sorted)
	f.P50Ms, f.P90Ms = rank(sorted, 50), rank(sorted, 90)
	f.MinMs, f.MaxMs = sorted[0], sorted[len(sorted)-1]
}

// median is the p50 of samples in milliseconds (0 for none).
func median(samples []time.Duration) float64 {
	if len(samples) == 0 {
		return 0
	}
	v := make([]float64, len(samples))
	for i, d := range samples {
		v[i] = ms(d)
	}
	sort.Float64s(v)
	return rank(v, 50)
}

// rank is the p-th percentile of sorted values by nearest rank.
func rank(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}
