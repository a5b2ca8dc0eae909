package chassisbench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/govn/govn/bench/procstat"
	"github.com/govn/govn/datapath/systest/traffic"
	"github.com/govn/govn/internal/hvtest"
	"github.com/govn/govn/internal/lab"
)

// vip is the load balancer's virtual IP, on ls-c. It is outside the
// client's subnet, so that the client sends to it through its gateway:
// nothing answers ARP for a switch's VIP.
const vip = "10.0.9.100"

// meter runs the measurements on one deployment's cluster.
type meter struct {
	ctx  context.Context
	t    *tb
	c    *hvtest.Cluster
	log  *slog.Logger
	opts *SuiteOptions
	real bool // the real OVN: ovs-vswitchd and ovn-controller
	tool lab.Tool
	// c1 is the client of everything but the ab runs to the backend,
	// which c2 makes. c1's connections through the VIP leave conntrack
	// entries in ls-c's zone (TIME_WAIT, two minutes) whose reply tuple
	// is s1:80 → c1:PORT; a direct connection from c1 that reuses PORT
	// has that same reply tuple, and both switches then take s1's
	// SYN-ACK for the old connection's and drop it (seen with tcpdump:
	// s1 answers every retransmitted SYN, c1 gets none).
	c1, c2, s1, s2 *hvtest.VM
	servers        int // iperf3 servers started so far, to name the next
}

// buildTopology makes the bench's logical network and its VMs, and waits
// until the client reaches both servers.
func (m *meter) buildTopology() {
	t, c := m.t, m.c
	nb := func(args ...string) { c.NBCtl(t, args...) }
	nb("ls-add", "ls-c")
	nb("ls-add", "ls-s")
	nb("lr-add", "lr0")
	for _, l := range []struct{ sw, lrp, mac, net string }{
		{"ls-c", "lr0-c", "00:00:00:00:01:01", "10.0.1.1/24"},
		{"ls-s", "lr0-s", "00:00:00:00:02:01", "10.0.2.1/24"},
	} {
		nb("lrp-add", "lr0", l.lrp, l.mac, l.net)
		p := l.sw + "-lr0"
		nb("lsp-add", l.sw, p, "--", "lsp-set-type", p, "router", "--", "lsp-set-addresses", p, "router",
			"--", "lsp-set-options", p, "router-port="+l.lrp)
	}
	vms := []struct {
		sw string
		hv int
		vm **hvtest.VM
		hvtest.VMSpec
	}{
		{"ls-c", 1, &m.c1, hvtest.VMSpec{Name: "c1", LSP: "c1", MAC: "0a:00:00:00:01:11", Addr: "10.0.1.11/24", Gateway: "10.0.1.1"}},
		{"ls-c", 1, &m.c2, hvtest.VMSpec{Name: "c2", LSP: "c2", MAC: "0a:00:00:00:01:12", Addr: "10.0.1.12/24", Gateway: "10.0.1.1"}},
		{"ls-s", 1, &m.s1, hvtest.VMSpec{Name: "s1", LSP: "s1", MAC: "0a:00:00:00:02:21", Addr: "10.0.2.21/24", Gateway: "10.0.2.1"}},
		{"ls-s", 2, &m.s2, hvtest.VMSpec{Name: "s2", LSP: "s2", MAC: "0a:00:00:00:02:22", Addr: "10.0.2.22/24", Gateway: "10.0.2.1"}},
	}
	for _, v := range vms {
		nb("lsp-add", v.sw, v.LSP, "--", "lsp-set-addresses", v.LSP, v.MAC+" "+ip(v.VMSpec))
	}
	nb("lb-add", "lb0", vip+":80", "10.0.2.21:80", "tcp")
	nb("ls-lb-add", "ls-c", "lb0")
	nb("acl-add", "ls-s", "to-lport", "1002", "ip4 && tcp.dst == 80", "allow-related")
	for _, v := range vms {
		*v.vm = c.AddVM(t, c.Hypervisor(v.hv), v.VMSpec)
	}
	for _, v := range vms {
		c.WaitPortUp(t, v.LSP)
	}
	for _, s := range []*hvtest.VM{m.s1, m.s2} {
		if _, err := m.tool.HTTPServe(t, c.Dir, s.NS, "vm-"+s.Name+"/http", 80, s.Name); err != nil {
			t.Fatal(err)
		}
	}
	// ab -c 1 opens a connection per request, tens of thousands in a
	// run, and the server keeps each in TIME_WAIT for a minute: the whole
	// port range makes a reused source port unlikely.
	for _, cl := range []*hvtest.VM{m.c1, m.c2} {
		if _, err := lab.RunTimed(nil, lab.InNS(cl.NS, "sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65535")...); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitHV(t)
	for _, s := range []*hvtest.VM{m.s1, m.s2} {
		if err := m.c1.WaitPing(s.IP(), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []struct {
		from *hvtest.VM
		to   string
	}{{m.c2, m.s1.IP()}, {m.c1, vip}} {
		var last error
		if err := lab.WaitFor(30*time.Second, "HTTP to "+u.to, func() bool {
			body, err := m.tool.Curl(u.from.NS, "http://"+u.to+"/")
			if last = err; err == nil && strings.TrimSpace(body) != "s1" {
				last = fmt.Errorf("answer %q, want s1", body)
			}
			return last == nil
		}); err != nil {
			t.Fatalf("from %s: %v: %v", u.from.Name, err, last)
		}
	}
}

// proc is a process of a chassis.
type proc struct {
	pid        int
	controller bool // the controller (ovn-controller) rather than the switch
}

// procs are the chassis processes of hypervisor hv, read from their
// pidfiles (a restarted ovs-vswitchd has a new pid).
func (m *meter) procs(hv *hvtest.Hypervisor) []proc {
	var names []string
	if m.real {
		names = []string{"ovs-vswitchd", "ovn-controller"}
	} else {
		names = []string{"chassis"}
	}
	var ps []proc
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(hv.Dir, n+".pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			ps = append(ps, proc{pid: pid, controller: n == "ovn-controller"})
		}
	}
	return ps
}

// cpuMark is the CPU time of each chassis process, by pid, at one
// moment.
type cpuMark map[proc]float64

// mark reads the CPU time the chassis processes of every hypervisor have
// used so far.
func (m *meter) mark() cpuMark {
	mk := cpuMark{}
	for _, hv := range m.c.HVs {
		for _, p := range m.procs(hv) {
			if d, err := procstat.CPUTime(p.pid); err == nil {
				mk[p] = d.Seconds()
			}
		}
	}
	return mk
}

// since is the CPU time used from mark to now. A process that was not
// there at mark (a restarted ovs-vswitchd) counts from zero; what a
// crashed one used is lost.
func (m *meter) since(mk cpuMark) CPUFigures {
	var f CPUFigures
	for p, now := range m.mark() {
		d := now - mk[p]
		if p.controller {
			f.Controller += d
		} else {
			f.Switch += d
		}
	}
	return CPUFigures{Switch: round3(f.Switch), Controller: round3(f.Controller), Total: round3(f.Switch + f.Controller)}
}

// restarts counts the crashes that ovs-vswitchd's monitor restarted, on
// every hypervisor (govn chassis has no monitor: 0).
func (m *meter) restarts() int {
	if !m.real {
		return 0
	}
	n := 0
	for _, hv := range m.c.HVs {
		b, _ := os.ReadFile(filepath.Join(hv.Dir, "ovs-vswitchd.log"))
		n += strings.Count(string(b), "restarting")
	}
	return n
}

// appctl runs an ovs-appctl command on hv's switch.
func (m *meter) appctl(hv *hvtest.Hypervisor, args ...string) (string, error) {
	target := "ovs-vswitchd"
	if !m.real {
		target = filepath.Join(hv.Dir, "chassis.ctl")
	}
	ctx, cancel := context.WithTimeout(m.ctx, time.Minute)
	defer cancel()
	return lab.Run(ctx, lab.OVSEnv(hv.Dir), append([]string{"ovs-appctl", "--timeout=60", "-t", target}, args...)...)
}

// dpFlows counts the datapath flows of every hypervisor.
func (m *meter) dpFlows() (int, error) {
	n := 0
	for _, hv := range m.c.HVs {
		out, err := m.appctl(hv, "dpctl/dump-flows")
		if err != nil {
			return 0, err
		}
		for _, l := range strings.Split(out, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "flow-dump from") && !strings.HasPrefix(l, "#") {
				n++
			}
		}
		m.log.Debug("datapath flows", "hv", hv.Name, "dump", out)
	}
	return n, nil
}

// delFlows deletes every hypervisor's datapath flows.
func (m *meter) delFlows() error {
	for _, hv := range m.c.HVs {
		if _, err := m.appctl(hv, "dpctl/del-flows"); err != nil {
			return err
		}
	}
	return nil
}

// rules counts the OpenFlow rules of hv's integration bridge.
func (m *meter) rules(hv *hvtest.Hypervisor) (int, error) {
	ctx, cancel := context.WithTimeout(m.ctx, 2*time.Minute)
	defer cancel()
	var out string
	var err error
	if m.real {
		out, err = lab.Run(ctx, lab.OVSEnv(hv.Dir), "ovs-ofctl", "--timeout=60", "dump-flows", "br-int")
	} else {
		out, err = m.appctl(hv, "dump-flows")
	}
	if err != nil {
		return 0, err
	}
	return strings.Count(out, "actions="), nil
}

// rss is the resident memory of hv's controller and switch, in MiB, and
// their peaks summed.
func (m *meter) rss(hv *hvtest.Hypervisor) (controller, sw, peak float64) {
	for _, p := range m.procs(hv) {
		pk, cur, err := procstat.Memory(p.pid)
		if err != nil {
			continue
		}
		if p.controller {
			controller += mib(cur)
		} else {
			sw += mib(cur)
		}
		peak += mib(pk)
	}
	return controller, sw, peak
}

// resident is the resident memory by kind of hv's controller and switch
// together.
func (m *meter) resident(hv *hvtest.Hypervisor) procstat.Resident {
	var sum procstat.Resident
	for _, p := range m.procs(hv) {
		r, err := procstat.ResidentByKind(p.pid)
		if err != nil {
			continue
		}
		sum.Anon += r.Anon
		sum.File += r.File
		sum.Socket += r.Socket
		sum.Other += r.Other
	}
	return sum
}

func mib(b int64) float64 { return math1(float64(b) / (1 << 20)) }

// math1 rounds to one decimal.
func math1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// httpRun is one target's ab runs under way.
type httpRun struct {
	f      HTTPFigures
	client *hvtest.VM
	url    string
	cpu0   cpuMark
	rates  []float64
}

// httpStart makes the warm-up run from client to addr and counts the
// datapath flows after it.
func (m *meter) httpStart(client *hvtest.VM, addr, label string) (*httpRun, error) {
	h := &httpRun{f: HTTPFigures{Target: label + " " + addr + ":80", Completed: true}, client: client,
		url: "http://" + addr + ":80/"}
	h.f.Runs = append(h.f.Runs, m.ab(client, h.url, m.opts.WarmRequests))
	var err error
	if h.f.Flows1k, err = m.dpFlows(); err != nil {
		return nil, err
	}
	h.cpu0 = m.mark()
	return h, nil
}

// httpRound makes timed run i; the datapath flows are counted after the
// first.
func (m *meter) httpRound(h *httpRun, i int) error {
	r := m.ab(h.client, h.url, m.opts.Requests)
	h.f.Runs = append(h.f.Runs, r)
	h.rates = append(h.rates, r.ReqPerSec)
	if i == 0 {
		var err error
		h.f.Flows5k, err = m.dpFlows()
		return err
	}
	return nil
}

// httpEnd sums the runs up.
func (m *meter) httpEnd(h *httpRun) HTTPFigures {
	f := h.f
	f.CPU = m.since(h.cpu0)
	for _, r := range f.Runs {
		if r.Complete != r.Requests || r.Error != "" {
			f.Completed = false
		}
	}
	f.ReqPerSec = medianOf(h.rates)
	done := 0
	for _, r := range f.Runs[1:] {
		done += r.Complete
	}
	if done > 0 {
		f.CPUMsPerRequest = round3(f.CPU.Total * 1000 / float64(done))
	}
	return f
}

var (
	abRate     = regexp.MustCompile(`Requests per second:\s+([\d.]+)`)
	abComplete = regexp.MustCompile(`Complete requests:\s+(\d+)`)
	abFailed   = regexp.MustCompile(`Failed requests:\s+(\d+)`)
	abTaken    = regexp.MustCompile(`Time taken for tests:\s+([\d.]+)`)
	abPartial  = regexp.MustCompile(`Total of (\d+) requests completed`)
)

// ab runs ab -n n -c 1 from client and parses what it printed; a run that
// ends in an error says so in Error, with the requests it completed.
func (m *meter) ab(client *hvtest.VM, url string, n int) ABRun {
	r := ABRun{Requests: n}
	restarts := m.restarts()
	ctx, cancel := context.WithTimeout(m.ctx, time.Duration(n)*20*time.Millisecond+time.Minute)
	defer cancel()
	start := time.Now()
	out, err := client.Command(ctx, "ab", "-q", "-n", strconv.Itoa(n), "-c", "1", "-s", "10", url).CombinedOutput()
	r.parse(string(out), err, time.Since(start))
	r.SwitchRestarted = m.restarts() > restarts
	m.log.Info("ab", "url", url, "n", n, "req_per_sec", r.ReqPerSec, "complete", r.Complete, "failed", r.Failed, "error", r.Error)
	return r
}

// parse fills in the run from ab's output; err is how ab exited and
// took how long it ran (for a run that ends before ab's summary).
func (r *ABRun) parse(text string, err error, took time.Duration) {
	r.Seconds = round3(took.Seconds())
	num := func(re *regexp.Regexp) float64 {
		if s := re.FindStringSubmatch(text); s != nil {
			v, _ := strconv.ParseFloat(s[1], 64)
			return v
		}
		return 0
	}
	r.ReqPerSec, r.Complete, r.Failed = num(abRate), int(num(abComplete)), int(num(abFailed))
	if t := num(abTaken); t > 0 {
		r.Seconds = t
	}
	if err == nil {
		return
	}
	r.Complete = int(num(abPartial))
	last := strings.TrimSpace(text)
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	r.Error = fmt.Sprintf("%v: %s", err, last)
	if r.ReqPerSec == 0 && r.Seconds > 0 {
		r.ReqPerSec = math1(float64(r.Complete) / r.Seconds)
	}
}

var pingTime = regexp.MustCompile(`time=([\d.]+) ms`)

// pingTimes runs ping in c1 and returns the RTTs it printed, in order.
func (m *meter) pingTimes(args ...string) []float64 {
	ctx, cancel := context.WithTimeout(m.ctx, time.Minute)
	defer cancel()
	out, _ := m.c1.Command(ctx, append([]string{"ping", "-n"}, args...)...).CombinedOutput()
	var ts []float64
	for _, s := range pingTime.FindAllStringSubmatch(string(out), -1) {
		v, _ := strconv.ParseFloat(s[1], 64)
		ts = append(ts, v)
	}
	return ts
}

// ping measures the RTT from c1 to vm: of first packets, and steady.
func (m *meter) ping(vm *hvtest.VM) (PingFigures, error) {
	f := PingFigures{Target: vm.Name + " " + vm.IP()}
	var first []float64
	for i := 0; i < m.opts.Pings; i++ {
		if err := m.delFlows(); err != nil {
			return f, err
		}
		ts := m.pingTimes("-c", "1", "-W", "2", vm.IP())
		if len(ts) == 0 {
			f.Lost++
			continue
		}
		first = append(first, ts[0])
	}
	f.FirstMs = medianOf(first)
	var fresh []float64
	for i := 0; i < m.opts.Pings; i++ {
		ts := m.pingTimes("-c", "1", "-W", "2", vm.IP())
		if len(ts) == 0 {
			f.Lost++
			continue
		}
		fresh = append(fresh, ts[0])
	}
	f.NewConnMs = medianOf(fresh)
	n := 10 * m.opts.Pings
	ts := m.pingTimes("-c", strconv.Itoa(n), "-i", "0.02", "-W", "2", vm.IP())
	f.Lost += n - len(ts)
	if len(ts) > 1 {
		f.SteadyMs = medianOf(ts[1:])
	}
	m.log.Info("ping", "to", vm.Name, "first_ms", f.FirstMs, "new_conn_ms", f.NewConnMs, "steady_ms", f.SteadyMs, "lost", f.Lost)
	return f, nil
}

// iperfResult is the part of iperf3 -J's output read here.
type iperfResult struct {
	End struct {
		SumReceived struct {
			Seconds       float64 `json:"seconds"`
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
		Sum struct {
			Seconds     float64 `json:"seconds"`
			Packets     int64   `json:"packets"`
			LostPackets int64   `json:"lost_packets"`
		} `json:"sum"`
	} `json:"end"`
	Error string `json:"error"`
}

// iperf runs iperf3 from c1 to vm: TCP, then 64-byte UDP at full speed.
func (m *meter) iperf(vm *hvtest.VM) (IperfFigures, error) {
	f := IperfFigures{Target: vm.Name + " " + vm.IP()}
	secs := strconv.Itoa(int(m.opts.Seconds.Round(time.Second).Seconds()))
	cpu0 := m.mark()
	tcp, err := m.iperf3(vm, "-t", secs)
	if err != nil {
		return f, fmt.Errorf("TCP to %s: %w", vm.Name, err)
	}
	f.TCPCPU = m.since(cpu0)
	cpu1 := m.mark()
	f.TCPMbitPerSec = math1(tcp.End.SumReceived.BitsPerSecond / 1e6)
	udp, err := m.iperf3(vm, "-t", secs, "-u", "-l", "64", "-b", "0")
	if err != nil {
		return f, fmt.Errorf("UDP to %s: %w", vm.Name, err)
	}
	f.UDPCPU = m.since(cpu1)
	if s := udp.End.Sum; s.Seconds > 0 {
		f.UDPSentPerSec = math1(float64(s.Packets) / s.Seconds)
		f.UDPPacketsPerSec = math1(float64(s.Packets-s.LostPackets) / s.Seconds)
	}
	m.log.Info("iperf3", "to", vm.Name, "tcp_mbps", f.TCPMbitPerSec, "udp_rx_pps", f.UDPPacketsPerSec, "udp_tx_pps", f.UDPSentPerSec)
	return f, nil
}

// iperfOffloads runs iperf3's TCP test from c1 to vm with transmit
// checksum offload and TSO/GSO on at both VMs and their ports (OVS's
// userspace datapath cannot forward such frames: the bench runs it for
// govn alone), then turns them off again.
func (m *meter) iperfOffloads(vm *hvtest.VM) (IperfFigures, error) {
	f := IperfFigures{Target: vm.Name + " " + vm.IP() + ", offloads on"}
	set := func(on string) error {
		for _, v := range []*hvtest.VM{m.c1, vm} {
			for _, d := range [][2]string{{v.NS, v.Dev}, {v.HV.NS, v.Port}} {
				if _, err := lab.NSRun(d[0], "ethtool", "-K", d[1], "tx", on, "sg", on, "tso", on, "gso", on); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := set("on"); err != nil {
		return f, err
	}
	defer func() { _ = set("off") }()
	secs := strconv.Itoa(int(m.opts.Seconds.Round(time.Second).Seconds()))
	cpu0 := m.mark()
	tcp, err := m.iperf3(vm, "-t", secs)
	if err != nil {
		return f, fmt.Errorf("TCP to %s with offloads: %w", vm.Name, err)
	}
	f.TCPCPU = m.since(cpu0)
	f.TCPMbitPerSec = math1(tcp.End.SumReceived.BitsPerSecond / 1e6)
	m.log.Info("iperf3 with offloads", "to", vm.Name, "tcp_mbps", f.TCPMbitPerSec)
	return f, nil
}

// iperf3 starts a one-off iperf3 server in vm, runs the client in c1 with
// args and returns its report.
func (m *meter) iperf3(vm *hvtest.VM, args ...string) (*iperfResult, error) {
	m.servers++
	name := fmt.Sprintf("vm-%s/iperf3-%d", vm.Name, m.servers)
	srv, err := lab.Start(m.t, m.c.Dir, vm.NS, name, nil, "iperf3", "-s", "-1", "-4", "-p", "5201")
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	if err := lab.WaitFor(20*time.Second, "iperf3 listening in "+vm.Name, func() bool {
		return traffic.Listening(srv.Pid(), "tcp", 5201)
	}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(m.ctx, m.opts.Seconds+time.Minute)
	defer cancel()
	out, err := m.c1.Command(ctx, append([]string{"iperf3", "-J", "-c", vm.IP(), "-p", "5201"}, args...)...).Output()
	var r iperfResult
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		return nil, fmt.Errorf("iperf3 %v: %v; output %q", err, jerr, out)
	}
	if r.Error != "" {
		return nil, fmt.Errorf("iperf3: %s", r.Error)
	}
	if err != nil {
		return nil, fmt.Errorf("iperf3: %w", err)
	}
	return &r, nil
}

// portUp binds new ports on hv1 one after another and times each until
// its first packet through (see Run).
func (m *meter) portUp() Figures {
	s := &side{name: m.c.Prefix, log: m.log, c: m.c}
	s.addProbe(m.t)
	for i := 0; i <= m.opts.Ports; i++ {
		s.bind(m.ctx, m.t, i, 5*time.Second)
	}
	f := s.summary()
	f.Chassis = ""
	return f
}

// changes times Northbound commits until every chassis has them: ACLs
// and logical switch ports added in turn, each with ovn-nbctl --wait=hv.
func (m *meter) changes() (ChangeFigures, error) {
	var samples []time.Duration
	for i := 0; i < m.opts.Changes; i++ {
		var args []string
		if i%2 == 0 {
			args = []string{"acl-add", "ls-s", "to-lport", "900",
				fmt.Sprintf("ip4.src == 10.200.%d.%d && tcp.dst == 9999", i/250, 1+i%250), "drop"}
		} else {
			name := "chg" + strconv.Itoa(i)
			args = []string{"lsp-add", "ls-s", name, "--", "lsp-set-addresses", name,
				fmt.Sprintf("0a:00:00:05:%02x:%02x 10.0.2.%d", i>>8, i&0xff, 100+i%150)}
		}
		start := time.Now()
		if _, err := m.c.NBCtlErr(append([]string{"--wait=hv"}, args...)...); err != nil {
			return ChangeFigures{}, err
		}
		samples = append(samples, time.Since(start))
	}
	var f Figures
	f.summarize(samples)
	m.log.Info("change latency", "p50_ms", f.P50Ms, "p90_ms", f.P90Ms)
	return ChangeFigures{Changes: f.Ports, P50Ms: f.P50Ms, P90Ms: f.P90Ms, SamplesMs: f.SamplesMs}, nil
}

// addressSet adds an address set of AddressSet addresses and an ACL over
// it, and measures hv1's rules and memory before and after.
func (m *meter) addressSet() (AddrSetFigures, error) {
	hv := m.c.Hypervisor(1)
	f := AddrSetFigures{Addresses: m.opts.AddressSet}
	var err error
	if f.RulesBefore, err = m.rules(hv); err != nil {
		return f, err
	}
	ctl, sw, _ := m.rss(hv)
	f.MemBeforeMiB = math1(ctl + sw)
	res := m.resident(hv)
	f.RingsBeforeMiB, f.AnonBeforeMiB = mib(res.Socket), mib(res.Anon)
	args := []string{"add", "Address_Set", "as_big", "addresses"}
	for i := 0; i < m.opts.AddressSet; i++ {
		a := 10<<24 | 128<<16 | i
		args = append(args, fmt.Sprintf(`"%d.%d.%d.%d"`, a>>24, a>>16&255, a>>8&255, a&255))
	}
	if _, err := m.c.NBCtlErr("create", "Address_Set", "name=as_big"); err != nil {
		return f, err
	}
	if _, err := m.c.NBCtlErr(args...); err != nil {
		return f, err
	}
	if _, err := m.c.NBCtlErr("--wait=hv", "sync"); err != nil {
		return f, err
	}
	start := time.Now()
	if _, err := m.c.NBCtlErr("--wait=hv", "acl-add", "ls-s", "to-lport", "1001",
		`outport == "s1" && ip4.src == $as_big && tcp.dst == 8080`, "allow-related"); err != nil {
		return f, err
	}
	f.CommitMs = math1(ms(time.Since(start)))
	if f.RulesAfter, err = m.rules(hv); err != nil {
		return f, err
	}
	ctl, sw, peak := m.rss(hv)
	f.ControllerMiB, f.SwitchMiB = math1(ctl), math1(sw)
	f.MemAfterMiB, f.PeakMiB = math1(ctl+sw), math1(peak)
	m.log.Info("address set", "commit_ms", f.CommitMs, "rules_before", f.RulesBefore, "rules_after", f.RulesAfter,
		"rss_before_mib", f.MemBeforeMiB, "rss_after_mib", f.MemAfterMiB)
	return f, nil
}
