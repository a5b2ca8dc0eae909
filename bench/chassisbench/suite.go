package chassisbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"time"

	"github.com/govn/govn/internal/hvtest"
	"github.com/govn/govn/internal/lab"
)

// The whole bench (issue 14 item 3): RunSuite builds the deployments on
// the same namespace layout and topology and runs every measurement on one
// after the other: by default both are up at once and each measurement
// (each timed ab run too) runs on one, then the other, so that the
// drifting load of a shared machine weighs on both alike (SuiteOptions.
// Sequential builds, measures and tears down one deployment before the
// next instead). The deployments:
//
//   - OVN: the real ovsdb-server (NB, SB), ovn-northd, and on each
//     hypervisor ovsdb-server, ovs-vswitchd (userspace datapath, with
//     --monitor so that a crash restarts it and the bench goes on) and
//     ovn-controller;
//   - govn: govn db (NB, SB), govn northd and govn chassis.
//
// The topology (see buildTopology): two hypervisors over Geneve; switch
// ls-c with the clients c1 and c2 (hv1); switch ls-s with the servers s1 (hv1) and
// s2 (hv2); router lr0 between them; load balancer lb0 on ls-c, VIP
// 10.0.9.100:80 → s1:80; a stateful ACL on ls-s (allow-related to
// tcp.dst == 80), so that all IP traffic on ls-s goes through conntrack.
// Port-up latency runs on a switch of its own, ls0, as in Run.

// SuiteOptions configure RunSuite; zero values take the defaults.
type SuiteOptions struct {
	// Govn is the govn binary: the bench runs it as govn db, govn northd,
	// govn chassis and govn lab-tool (the HTTP servers).
	Govn string
	// OVN says to measure the real OVN too.
	OVN bool
	// Requests is ab -n of the timed runs (default 5000); WarmRequests
	// that of the run after which the datapath flows are first counted
	// (default 1000); Rounds how many timed runs (default 3; the figure
	// is their median).
	Requests, WarmRequests, Rounds int
	// Seconds is the length of each iperf3 test (default 5 s).
	Seconds time.Duration
	// Pings is how many first-packet pings, and ten times that the
	// steady-state echoes (default 20).
	Pings int
	// Ports is how many ports the port-up measurement binds (default 20).
	Ports int
	// Changes is how many Northbound commits are timed for the change
	// latency (default 20).
	Changes int
	// AddressSet is the size of the address set of the ACL measurement
	// (default 10,000).
	AddressSet int
	// Sequential builds one deployment, measures it and tears it down
	// before the next; by default both are up at once and each
	// measurement runs on one, then the other (the timed ab runs
	// alternating too), so that the drifting load of a shared machine
	// weighs on both alike.
	Sequential bool
	// Log receives progress; nil for none.
	Log *slog.Logger
}

func (o *SuiteOptions) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Requests, 5000)
	def(&o.WarmRequests, 1000)
	def(&o.Rounds, 3)
	def(&o.Pings, 20)
	def(&o.Ports, 20)
	def(&o.Changes, 20)
	def(&o.AddressSet, 10000)
	if o.Seconds <= 0 {
		o.Seconds = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// SuiteReport is the outcome of RunSuite.
type SuiteReport struct {
	Govn Side  `json:"govn"`
	OVN  *Side `json:"ovn,omitempty"`
	// OVNSkipped says why there is no OVN side, if there is none.
	OVNSkipped string `json:"ovn_skipped,omitempty"`
	// Ratios are govn's figure over OVN's, by figure name (see
	// Side.figures): above 1 govn has more.
	Ratios map[string]float64 `json:"ratios_govn_over_ovn,omitempty"`
	Goals  []Goal             `json:"goals"`
	// Settings echo the options.
	Settings Settings `json:"settings"`
}

// Settings are the sizes a report was measured with.
type Settings struct {
	Requests     int     `json:"ab_requests"`
	WarmRequests int     `json:"ab_warm_requests"`
	Rounds       int     `json:"ab_rounds"`
	Seconds      float64 `json:"iperf3_seconds"`
	Pings        int     `json:"first_packet_pings"`
	Ports        int     `json:"port_up_ports"`
	Changes      int     `json:"changes"`
	AddressSet   int     `json:"address_set_size"`
	// Sequential: one deployment after the other rather than alternating.
	Sequential bool `json:"sequential"`
}

// Goal is one of issue 14's goals and whether govn met it.
type Goal struct {
	Name  string  `json:"name"`
	Want  string  `json:"want"`
	Value float64 `json:"value"`
	Met   bool    `json:"met"`
	// Unknown is set when the goal cannot be judged (no OVN side, or a
	// figure missing).
	Unknown bool `json:"unknown,omitempty"`
}

// Side is every figure of one deployment.
type Side struct {
	Deployment string `json:"deployment"`
	// HTTP is ab -c 1 to s1:80 straight from c2 (through lr0) and from
	// c1 through the VIP.
	Direct HTTPFigures `json:"http_direct"`
	VIP    HTTPFigures `json:"http_vip"`
	// Ping from c1 to s1 (one hypervisor, through lr0) and to s2 (across
	// Geneve).
	PingSameHV  PingFigures `json:"ping_same_hv"`
	PingCrossHV PingFigures `json:"ping_cross_hv"`
	// Iperf3 from c1 to s1 and to s2.
	IperfSameHV  IperfFigures `json:"iperf3_same_hv"`
	IperfCrossHV IperfFigures `json:"iperf3_cross_hv"`
	// IperfOffloads are TCP with the VMs' offloads on (govn only: OVS's
	// userspace datapath drops their partially checksummed frames).
	IperfSameHVOffloads  *IperfFigures  `json:"iperf3_same_hv_offloads_on,omitempty"`
	IperfCrossHVOffloads *IperfFigures  `json:"iperf3_cross_hv_offloads_on,omitempty"`
	PortUp               Figures        `json:"port_up"`
	Change               ChangeFigures  `json:"change_latency"`
	AddressSet           AddrSetFigures `json:"acl_address_set"`
	// Errors are the measurements that failed on this side (the others
	// still ran).
	Errors []string `json:"errors,omitempty"`
	// SwitchRestarts is how often a switch process was restarted by its
	// monitor (it crashed) over the whole run, on any hypervisor.
	SwitchRestarts int `json:"switch_restarts"`
}

// HTTPFigures are the ab runs to one target.
type HTTPFigures struct {
	Target string `json:"target"`
	// ReqPerSec is the median over the timed runs (a run that did not
	// complete counts with the rate it reached).
	ReqPerSec float64 `json:"req_per_sec_p50"`
	Runs      []ABRun `json:"runs"`
	// Flows1k and Flows5k are the datapath flows on both hypervisors
	// right after the warm-up run and after the first timed run.
	Flows1k int `json:"dp_flows_after_warm"`
	Flows5k int `json:"dp_flows_after_timed"`
	// Completed says every run got every response.
	Completed bool `json:"all_runs_completed"`
	// CPU is the processes' CPU time over the timed runs, both
	// hypervisors.
	CPU CPUFigures `json:"cpu_seconds"`
	// CPUMsPerRequest is CPU.Total over the requests the timed runs
	// completed, in milliseconds.
	CPUMsPerRequest float64 `json:"cpu_ms_per_request"`
}

// ABRun is one ab run.
type ABRun struct {
	Requests  int     `json:"requests"`
	Complete  int     `json:"complete"`
	Failed    int     `json:"failed"`
	ReqPerSec float64 `json:"req_per_sec"`
	Seconds   float64 `json:"seconds"`
	Error     string  `json:"error,omitempty"`
	// SwitchRestarted says a switch process crashed during the run.
	SwitchRestarted bool `json:"switch_restarted,omitempty"`
}

// CPUFigures split CPU time between the switch and the controller; govn
// chassis is one process, so all of it is Switch.
type CPUFigures struct {
	Switch     float64 `json:"switch"`
	Controller float64 `json:"controller"`
	Total      float64 `json:"total"`
}

// PingFigures are ping RTTs in milliseconds (medians).
type PingFigures struct {
	Target string `json:"target"`
	// FirstMs is the RTT of a flow's first packet: a new ping (new ICMP
	// id, so a new connection) right after every chassis' datapath flows
	// were deleted (dpctl/del-flows), so that it takes the slow path.
	FirstMs float64 `json:"first_packet_ms"`
	// NewConnMs is the RTT of a new ping's first echo with the datapath
	// flows of earlier pings still cached: a new connection for
	// conntrack, no slow path.
	NewConnMs float64 `json:"new_connection_ms"`
	// SteadyMs is the median RTT of a run of echoes 20 ms apart, the
	// first left out.
	SteadyMs float64 `json:"steady_ms"`
	Lost     int     `json:"lost"`
}

// IperfFigures are one path's iperf3 results.
type IperfFigures struct {
	Target        string  `json:"target"`
	TCPMbitPerSec float64 `json:"tcp_mbps"`
	// UDPPacketsPerSec is the 64-byte datagrams (iperf3 -u -l 64 -b 0)
	// the server received per second; UDPSentPerSec those sent.
	UDPPacketsPerSec float64    `json:"udp_rx_pps"`
	UDPSentPerSec    float64    `json:"udp_tx_pps"`
	TCPCPU           CPUFigures `json:"tcp_cpu_seconds"`
	UDPCPU           CPUFigures `json:"udp_cpu_seconds"`
}

// ChangeFigures are the times from a Northbound commit to every chassis
// having it (ovn-nbctl --wait=hv), in milliseconds.
type ChangeFigures struct {
	Changes   int       `json:"changes"`
	P50Ms     float64   `json:"p50_ms"`
	P90Ms     float64   `json:"p90_ms"`
	SamplesMs []float64 `json:"samples_ms"`
}

// AddrSetFigures are what an ACL over a big address set costs the
// chassis of hv1 (where its port is).
type AddrSetFigures struct {
	Addresses int `json:"addresses"`
	// CommitMs is how long the ACL took to reach every chassis
	// (ovn-nbctl --wait=hv acl-add).
	CommitMs float64 `json:"commit_ms"`
	// RulesBefore and RulesAfter are the datapath rules (OpenFlow flows)
	// of hv1's integration bridge.
	RulesBefore int `json:"rules_before"`
	RulesAfter  int `json:"rules_after"`
	// Memory is the resident memory of hv1's controller and switch
	// processes, in MiB, before and after; PeakMiB their peak.
	MemBeforeMiB float64 `json:"rss_before_mib"`
	MemAfterMiB  float64 `json:"rss_after_mib"`
	PeakMiB      float64 `json:"rss_peak_mib"`
	// RingsBeforeMiB and AnonBeforeMiB split MemBeforeMiB: memory mapped
	// from sockets (AF_PACKET rings, allocated whole per port) and
	// anonymous memory (the heaps).
	RingsBeforeMiB float64 `json:"rss_before_rings_mib"`
	AnonBeforeMiB  float64 `json:"rss_before_anon_mib"`
	// Controller and switch alone, after (govn: all in Switch).
	ControllerMiB float64 `json:"controller_rss_after_mib"`
	SwitchMiB     float64 `json:"switch_rss_after_mib"`
}

// RunSuite runs every measurement on govn and, if asked, on the real OVN,
// one deployment after the other (OVN first).
func RunSuite(ctx context.Context, opts SuiteOptions) (*SuiteReport, error) {
	if opts.Govn == "" {
		return nil, errors.New("chassisbench: no govn binary")
	}
	opts.defaults()
	if why := hvtest.Available(); why != "" {
		return nil, fmt.Errorf("chassisbench: %s", why)
	}
	if m := missing("ab", "iperf3", "ping", "ovn-northd"); m != "" {
		return nil, fmt.Errorf("chassisbench: needs %s", m)
	}
	r := &SuiteReport{Settings: Settings{Requests: opts.Requests, WarmRequests: opts.WarmRequests,
		Rounds: opts.Rounds, Seconds: opts.Seconds.Seconds(), Pings: opts.Pings, Ports: opts.Ports,
		Changes: opts.Changes, AddressSet: opts.AddressSet}}
	govn := deployment{name: "govn db + govn northd + govn chassis", opts: hvtest.Options{
		Hypervisors: 2,
		DB:          []string{opts.Govn, "db"},
		Northd:      hvtest.NorthdCommand{Argv: []string{opts.Govn, "northd"}},
		Chassis: func(int) hvtest.Chassis {
			return hvtest.GovnChassis{Argv: []string{opts.Govn, "chassis"}}
		},
	}}
	deps := []deployment{govn}
	switch {
	case !opts.OVN:
		r.OVNSkipped = "not asked for"
	case missing("ovs-vswitchd", "ovn-controller", "ovsdb-server") != "":
		r.OVNSkipped = "needs " + missing("ovs-vswitchd", "ovn-controller", "ovsdb-server")
	default:
		real := deployment{name: "ovsdb-server + ovn-northd + ovn-controller + ovs-vswitchd", real: true,
			opts: hvtest.Options{Hypervisors: 2, Chassis: func(int) hvtest.Chassis { return hvtest.RealChassis{Monitor: true} }}}
		deps = []deployment{real, govn}
	}
	var sides []*Side
	var err error
	if opts.Sequential {
		for _, d := range deps {
			ss, err := runSides(ctx, &opts, []deployment{d})
			if err != nil {
				return nil, err
			}
			sides = append(sides, ss...)
		}
	} else if sides, err = runSides(ctx, &opts, deps); err != nil {
		return nil, err
	}
	for i, d := range deps {
		if d.real {
			r.OVN = sides[i]
		} else {
			r.Govn = *sides[i]
		}
	}
	r.Settings.Sequential = opts.Sequential
	r.judge()
	return r, nil
}

// deployment is one side: what hvtest runs.
type deployment struct {
	name string
	real bool
	opts hvtest.Options
}

// sideRun is a deployment up and being measured.
type sideRun struct {
	d         deployment
	m         *meter
	s         *Side
	restarts0 int
}

// runSides builds the deployments, all up at once, measures them, each
// measurement on one after the other in turn (the timed ab runs
// alternate too), and tears them down.
func runSides(ctx context.Context, opts *SuiteOptions, deps []deployment) ([]*Side, error) {
	var srs []*sideRun
	err := withTB(opts.Log, func(t *tb) {
		for _, d := range deps {
			log := opts.Log.With("deployment", d.name)
			log.Info("building the cluster")
			c := hvtest.New(t, d.opts)
			m := &meter{ctx: ctx, t: t, c: c, log: log, opts: opts, real: d.real,
				tool: lab.Tool{Argv: []string{opts.Govn, "lab-tool"}}}
			m.buildTopology()
			srs = append(srs, &sideRun{d: d, m: m, s: &Side{Deployment: d.name}, restarts0: m.restarts()})
		}
		each := func(name string, f func(i int, sr *sideRun) error) {
			for i, sr := range srs {
				if ctx.Err() != nil {
					t.Fatal(ctx.Err())
				}
				sr.m.log.Info(name)
				if err := f(i, sr); err != nil {
					sr.m.log.Warn(name+" failed", "err", err)
					sr.s.Errors = append(sr.s.Errors, name+": "+err.Error())
				}
			}
		}
		for _, tg := range []struct {
			name, label string
			direct      bool
		}{{"ab to the VIP", "vip", false}, {"ab to the backend", "direct", true}} {
			runs := make([]*httpRun, len(srs))
			each(tg.name+", warm-up", func(i int, sr *sideRun) (err error) {
				client, addr := sr.m.c1, vip
				if tg.direct {
					client, addr = sr.m.c2, sr.m.s1.IP()
				}
				runs[i], err = sr.m.httpStart(client, addr, tg.label)
				return
			})
			for round := 0; round < opts.Rounds; round++ {
				each(fmt.Sprintf("%s, run %d", tg.name, round+1), func(i int, sr *sideRun) error {
					if runs[i] == nil {
						return nil
					}
					return sr.m.httpRound(runs[i], round)
				})
			}
			for i, sr := range srs {
				if runs[i] == nil {
					continue
				}
				if tg.direct {
					sr.s.Direct = sr.m.httpEnd(runs[i])
				} else {
					sr.s.VIP = sr.m.httpEnd(runs[i])
				}
			}
		}
		each("ping", func(_ int, sr *sideRun) (err error) {
			if sr.s.PingSameHV, err = sr.m.ping(sr.m.s1); err != nil {
				return err
			}
			sr.s.PingCrossHV, err = sr.m.ping(sr.m.s2)
			return
		})
		each("iperf3", func(_ int, sr *sideRun) (err error) {
			if sr.s.IperfSameHV, err = sr.m.iperf(sr.m.s1); err != nil {
				return err
			}
			sr.s.IperfCrossHV, err = sr.m.iperf(sr.m.s2)
			return
		})
		each("iperf3 with offloads", func(_ int, sr *sideRun) error {
			if sr.d.real {
				return nil
			}
			for _, x := range []struct {
				vm  *hvtest.VM
				out **IperfFigures
			}{{sr.m.s1, &sr.s.IperfSameHVOffloads}, {sr.m.s2, &sr.s.IperfCrossHVOffloads}} {
				f, err := sr.m.iperfOffloads(x.vm)
				if err != nil {
					return err
				}
				*x.out = &f
			}
			return nil
		})
		each("port-up", func(_ int, sr *sideRun) error { sr.s.PortUp = sr.m.portUp(); return nil })
		each("change latency", func(_ int, sr *sideRun) (err error) { sr.s.Change, err = sr.m.changes(); return })
		each("ACL over an address set", func(_ int, sr *sideRun) (err error) {
			sr.s.AddressSet, err = sr.m.addressSet()
			return
		})
		for _, sr := range srs {
			sr.s.SwitchRestarts = sr.m.restarts() - sr.restarts0
		}
	})
	if err != nil {
		return nil, err
	}
	sides := make([]*Side, len(srs))
	for i, sr := range srs {
		sides[i] = sr.s
	}
	return sides, nil
}

// judge fills in the ratios and the goals.
func (r *SuiteReport) judge() {
	g := r.Govn.figures()
	if r.OVN != nil {
		o := r.OVN.figures()
		r.Ratios = map[string]float64{}
		for k, v := range g {
			if ov := o[k]; ov > 0 && v >= 0 {
				r.Ratios[k] = round3(v / ov)
			}
		}
	}
	ratio := func(name, k string, want float64, atLeast bool) {
		q, ok := r.Ratios[k]
		goal := Goal{Name: name, Value: q, Unknown: !ok}
		if atLeast {
			goal.Want = fmt.Sprintf("govn/OVN ≥ %.1f", want)
			goal.Met = ok && q >= want
		} else {
			goal.Want = fmt.Sprintf("govn/OVN ≤ %.1f", want)
			goal.Met = ok && q <= want
		}
		r.Goals = append(r.Goals, goal)
	}
	ratio("requests/s through the VIP", "vip_req_per_sec", 1.5, true)
	r.Goals = append(r.Goals, Goal{Name: "every ab run completes", Want: "all",
		Value: b2f(r.Govn.Direct.Completed && r.Govn.VIP.Completed), Met: r.Govn.Direct.Completed && r.Govn.VIP.Completed})
	// The larger of the two counts: a switch restarted by its monitor
	// starts with none.
	ratio("datapath flows through the VIP (the larger count)", "vip_dp_flows_max", 0.5, false)
	// Flows of the set-up traffic may expire meanwhile: the goal is that
	// connections add none.
	grew := max(r.Govn.VIP.Flows5k-r.Govn.VIP.Flows1k, r.Govn.Direct.Flows5k-r.Govn.Direct.Flows1k)
	r.Goals = append(r.Goals, Goal{Name: "no more datapath flows after the timed runs than after the warm-ups",
		Want: "growth ≤ 0", Value: float64(grew), Met: grew <= 0})
	ratio("first-packet ping RTT (one hypervisor)", "ping_same_first_ms", 0.5, false)
	ratio("steady ping RTT (one hypervisor)", "ping_same_steady_ms", 0.5, false)
	ratio("TCP throughput (one hypervisor)", "iperf_same_tcp_mbps", 1.5, true)
	ratio("64-byte UDP packets/s received (one hypervisor)", "iperf_same_udp_pps", 1.5, true)
	// govn with offloads against OVN without (OVN cannot run with them).
	if r.OVN != nil && r.Govn.IperfCrossHVOffloads != nil && r.OVN.IperfCrossHV.TCPMbitPerSec > 0 {
		q := round3(r.Govn.IperfCrossHVOffloads.TCPMbitPerSec / r.OVN.IperfCrossHV.TCPMbitPerSec)
		r.Ratios["iperf_cross_tcp_offloads_mbps"] = q
		r.Goals = append(r.Goals, Goal{Name: "TCP across hypervisors, govn with offloads (OVN without)",
			Want: "govn/OVN ≥ 3.0", Value: q, Met: q >= 3})
	}
	c := r.Govn.Change
	r.Goals = append(r.Goals, Goal{Name: "change latency p50", Want: "< 50 ms", Value: c.P50Ms,
		Met: c.Changes > 0 && c.P50Ms < 50, Unknown: c.Changes == 0})
}

// figures are a side's headline figures by name, for ratios.
func (s *Side) figures() map[string]float64 {
	return map[string]float64{
		"direct_req_per_sec":           s.Direct.ReqPerSec,
		"vip_req_per_sec":              s.VIP.ReqPerSec,
		"direct_dp_flows_warm":         float64(s.Direct.Flows1k),
		"direct_dp_flows_timed":        float64(s.Direct.Flows5k),
		"vip_dp_flows_warm":            float64(s.VIP.Flows1k),
		"vip_dp_flows_timed":           float64(s.VIP.Flows5k),
		"vip_dp_flows_max":             float64(max(s.VIP.Flows1k, s.VIP.Flows5k)),
		"vip_cpu_seconds":              s.VIP.CPU.Total,
		"direct_cpu_seconds":           s.Direct.CPU.Total,
		"vip_cpu_ms_per_req":           s.VIP.CPUMsPerRequest,
		"direct_cpu_ms_per_req":        s.Direct.CPUMsPerRequest,
		"ping_same_first_ms":           s.PingSameHV.FirstMs,
		"ping_same_steady_ms":          s.PingSameHV.SteadyMs,
		"ping_same_newconn_ms":         s.PingSameHV.NewConnMs,
		"ping_cross_newconn_ms":        s.PingCrossHV.NewConnMs,
		"ping_cross_first_ms":          s.PingCrossHV.FirstMs,
		"ping_cross_steady_ms":         s.PingCrossHV.SteadyMs,
		"iperf_same_tcp_mbps":          s.IperfSameHV.TCPMbitPerSec,
		"iperf_same_udp_pps":           s.IperfSameHV.UDPPacketsPerSec,
		"iperf_cross_tcp_mbps":         s.IperfCrossHV.TCPMbitPerSec,
		"iperf_cross_udp_pps":          s.IperfCrossHV.UDPPacketsPerSec,
		"port_up_p50_ms":               s.PortUp.P50Ms,
		"change_p50_ms":                s.Change.P50Ms,
		"change_p90_ms":                s.Change.P90Ms,
		"addrset_commit_ms":            s.AddressSet.CommitMs,
		"addrset_rules_after":          float64(s.AddressSet.RulesAfter),
		"addrset_rules_added":          float64(s.AddressSet.RulesAfter - s.AddressSet.RulesBefore),
		"addrset_rss_before_mib":       s.AddressSet.MemBeforeMiB,
		"addrset_rss_before_rings_mib": s.AddressSet.RingsBeforeMiB,
		"addrset_rss_before_anon_mib":  s.AddressSet.AnonBeforeMiB,
		"addrset_rss_after_mib":        s.AddressSet.MemAfterMiB,
		"addrset_rss_peak_mib":         s.AddressSet.PeakMiB,
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// medianOf is the median (nearest rank) of values; 0 for none.
func medianOf(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	v := append([]float64(nil), values...)
	sort.Float64s(v)
	return rank(v, 50)
}
