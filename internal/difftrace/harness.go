package difftrace

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govn/govn/internal/refovn"
)

// Options describe one comparison.
type Options struct {
	// Script is the Northbound script (bash with ovn-nbctl). A line
	// "# chassis: hv1 hv2" in it names chassis to register in each
	// Southbound before it runs.
	Script string
	// Reference and UnderTest build the two Southbounds; Reference
	// defaults to the real ovn-northd.
	Reference, UnderTest refovn.Northd
	// Filter, if set, keeps only the packets it returns true for.
	Filter func(Packet) bool
	// Dump, if set, is a file to write every reference trace to, as
	// compared (normalized), for reading what the battery does.
	Dump string
}

// Report is the outcome of one comparison.
type Report struct {
	Script     string
	Packets    int // packets in the battery
	Traces     int // (packet, conntrack state) pairs compared
	OvnTraces  [2]int
	Mismatches []Mismatch
	Skipped    []Skip
	Stages     []string // stages with logical flows in the reference Southbound
	Missed     []string // of those, the ones no reference trace reached
	Elapsed    time.Duration
	// Reference holds every reference trace as compared (normalized).
	Reference []Trace
}

// Trace is one normalized trace.
type Trace struct {
	Packet Packet
	CT     string
	Text   string
}

// Mismatch is a trace whose normalized forms differ.
type Mismatch struct {
	Packet               Packet
	CT                   string
	Reference, UnderTest string
}

// Skip is a trace the harness could not compare, and why.
type Skip struct {
	Packet Packet
	CT     string
	Reason string
}

// Summary is one line on the comparison.
func (r *Report) Summary() string {
	return fmt.Sprintf("%s: %d packets, %d traces (%d+%d ovn-trace runs), %d mismatches, %d skipped, stages reached %d/%d, %v",
		filepath.Base(r.Script), r.Packets, r.Traces, r.OvnTraces[0], r.OvnTraces[1], len(r.Mismatches), len(r.Skipped),
		len(r.Stages)-len(r.Missed), len(r.Stages), r.Elapsed.Round(100*time.Millisecond))
}

// side is one Northbound → northd → Southbound chain with its tracers.
type side struct {
	env     *refovn.Env
	sb      *southbound
	daemons map[string]*traceDaemon
	mu      sync.Mutex // guards daemons, runs, stages
	runs    int
	stages  map[string]bool
}

// tracesInFlight is how many traces a side runs at once, and
// oneShotParallel how many one-shot ovn-trace processes one trace starts
// at once.
const (
	tracesInFlight  = 4
	oneShotParallel = 4
)

// Run builds both Southbounds from opts.Script, traces the generated
// battery on each and compares. Setup failures fail t; differences are
// returned in the Report for the caller to judge.
func Run(t testing.TB, opts Options) *Report {
	t.Helper()
	start := time.Now()
	refovn.SkipUnlessInstalled(t, "ovn-trace", "bash")
	if opts.Reference == nil {
		opts.Reference = refovn.RealNorthd
	}
	if opts.UnderTest == nil {
		t.Fatal("difftrace: no northd under test")
	}
	script, err := filepath.Abs(opts.Script)
	if err != nil {
		t.Fatal(err)
	}
	chassis, err := scriptChassis(script)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sides := [2]*side{}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	// Each side is set up in its own goroutine; refovn.Start must run on
	// the test goroutine, so the processes start first.
	for i, n := range []refovn.Northd{opts.Reference, opts.UnderTest} {
		sides[i] = &side{env: refovn.Start(t, n), daemons: map[string]*traceDaemon{}, stages: map[string]bool{}}
		s := sides[i]
		t.Cleanup(func() {
			for _, d := range s.daemons {
				d.stop()
			}
		})
	}
	for i, s := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.build(ctx, script, chassis)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s side: %v", [2]string{"reference", "under-test"}[i], err)
		}
	}
	topo, err := readTopology(ctx, sides[0].env.NBRemote())
	if err != nil {
		t.Fatal(err)
	}
	pkts := generate(topo)
	if opts.Filter != nil {
		pkts = slices.DeleteFunc(pkts, func(p Packet) bool { return !opts.Filter(p) })
	}
	type job struct {
		p  Packet
		ct string
	}
	var jobs []job
	var groups [][2]int // each packet's jobs: first index, count
	for _, p := range pkts {
		groups = append(groups, [2]int{len(jobs), len(p.CT)})
		for _, ct := range p.CT {
			jobs = append(jobs, job{p, ct})
		}
	}
	results := [2][]outcome{make([]outcome, len(jobs)), make([]outcome, len(jobs))}
	// ovn-trace mostly waits (for its daemon's turn, for a one-shot's
	// Southbound), so each side keeps a few traces in flight.
	// A trace without conntrack actions is the same in every conntrack
	// state (the state is only what --ct makes those actions report), so
	// a packet whose first trace has none is not traced again.
	for i, s := range sides {
		next := make(chan [2]int)
		for range tracesInFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for g := range next {
					first := g[0]
					for j := first; j < first+g[1]; j++ {
						if j > first && !results[i][first].usedCT && results[i][first].err == nil {
							results[i][j] = results[i][first]
							continue
						}
						results[i][j] = s.trace(ctx, jobs[j].p, jobs[j].ct)
					}
				}
			}()
		}
		go func() {
			for _, g := range groups {
				next <- g
			}
			close(next)
		}()
	}
	wg.Wait()

	r := &Report{Script: opts.Script, Packets: len(pkts), Traces: len(jobs)}
	for j, jb := range jobs {
		ref, test := results[0][j], results[1][j]
		r.Reference = append(r.Reference, Trace{jb.p, jb.ct, ref.text})
		switch {
		case ref.err != nil || test.err != nil:
			t.Fatalf("trace %q --ct=%s: reference: %v; under test: %v", jb.p.Name, jb.ct, ref.err, test.err)
		case ref.skip != "" || test.skip != "":
			r.Skipped = append(r.Skipped, Skip{jb.p, jb.ct, strings.TrimSpace(ref.skip + " " + test.skip)})
		case ref.text != test.text:
			r.Mismatches = append(r.Mismatches, Mismatch{jb.p, jb.ct, ref.text, test.text})
		}
	}
	if opts.Dump != "" {
		var b strings.Builder
		for j, jb := range jobs {
			fmt.Fprintf(&b, "### %s --ct=%s\n# ovn-trace %s '%s'\n%s%s\n\n", jb.p.Name, jb.ct, jb.p.Datapath, jb.p.Flow, results[0][j].text, results[0][j].skip)
		}
		if err := os.WriteFile(opts.Dump, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
	r.OvnTraces = [2]int{sides[0].runs, sides[1].runs}
	for st := range sides[0].sb.stages {
		r.Stages = append(r.Stages, st)
		if !sides[0].stages[st] {
			r.Missed = append(r.Missed, st)
		}
	}
	slices.Sort(r.Stages)
	slices.Sort(r.Missed)
	r.Elapsed = time.Since(start)
	return r
}

// build runs the script, waits for northd, stops it and prepares the
// Southbound for ovn-trace.
func (s *side) build(ctx context.Context, script string, chassis []string) error {
	if err := s.env.AddChassis(ctx, chassis...); err != nil {
		return err
	}
	if err := s.env.RunScript(ctx, script); err != nil {
		return err
	}
	if err := s.env.Sync(ctx); err != nil {
		return err
	}
	s.env.StopNorthd()
	sb, err := prepareSouthbound(ctx, s.env.SBRemote())
	if err != nil {
		return err
	}
	s.sb = sb
	return nil
}

// outcome is one side's normalized trace of one packet in one conntrack
// state, or why it has none.
type outcome struct {
	text   string
	skip   string
	err    error
	usedCT bool // the trace ran a conntrack action
}

// ctAction is an action that takes a conntrack state from --ct.
var ctAction = regexp.MustCompile(`\bct_(next|lb|lb_mark|dnat|snat|dnat_in_czone|snat_in_czone|commit_nat)\b`)

var stageLine = regexp.MustCompile(`(?m)^\s*\d+\. (l[sr]_(?:in|out)_[a-z0-9_]+)`)

func (s *side) noteStages(detailed string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range stageLine.FindAllStringSubmatch(detailed, -1) {
		s.stages[m[1]] = true
	}
}

// trace traces p with conntrack state ct and resolves ovn-trace's random
// choices by tracing each alternative (see tracer.go).
func (s *side) trace(ctx context.Context, p Packet, ct string) outcome {
	s.mu.Lock()
	d := s.daemons[ct]
	if d == nil {
		d = newTraceDaemon(s.env.Dir, s.env.SBRemote(), ct)
		s.daemons[ct] = d
	}
	s.runs++
	s.mu.Unlock()
	raw, err := d.trace(ctx, p.Datapath, p.Flow)
	if errors.Is(err, errAborted) {
		return outcome{text: "<ovn-trace aborted>"}
	}
	if err != nil {
		return outcome{err: err}
	}
	tt := splitTrace(raw)
	s.noteStages(tt.detailed)
	usedCT := ctAction.MatchString(tt.detailed)
	c := randomChoices(tt.detailed)
	if c.none() {
		return outcome{text: normalize(tt, s.sb.marks), usedCT: usedCT}
	}
	if len(c.backends) > 1 || len(c.selects) > 1 {
		return outcome{skip: "more than one random choice (load balancing or ECMP) in one trace"}
	}
	backends, selects := []string{""}, []string{""}
	if len(c.backends) == 1 {
		backends = c.backends[0]
	}
	if len(c.selects) == 1 {
		selects = c.selects[0]
	}
	// One-shot ovn-trace spends most of its time waiting for the
	// Southbound, not computing, so the alternatives run side by side.
	type alt struct {
		extra []string
		label string
	}
	var alts []alt
	for _, be := range backends {
		for _, id := range selects {
			var a alt
			if be != "" {
				a.extra = append(a.extra, "--lb-dst="+be)
				a.label = "lb-dst=" + be + "\n"
			}
			if id != "" {
				a.extra = append(a.extra, "--select-id="+id)
			}
			alts = append(alts, a)
		}
	}
	parts := make([]string, len(alts))
	results := make([]outcome, len(alts))
	sem := make(chan struct{}, oneShotParallel)
	var wg sync.WaitGroup
	for i, a := range alts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out, err := oneShot(ctx, s.env.Dir, s.env.SBRemote(), ct, a.extra, p.Datapath, p.Flow)
			if errors.Is(err, errAborted) {
				parts[i] = a.label + "<ovn-trace aborted>"
				return
			}
			if err != nil {
				results[i] = outcome{err: err}
				return
			}
			tt := splitTrace(out)
			s.noteStages(tt.detailed)
			if c2 := randomChoices(tt.detailed); len(c2.backends) > 1 || len(c2.selects) > 1 {
				results[i] = outcome{skip: "more than one random choice (load balancing or ECMP) in one trace"}
				return
			}
			parts[i] = a.label + normalize(tt, s.sb.marks)
		}()
	}
	wg.Wait()
	s.mu.Lock()
	s.runs += len(alts)
	s.mu.Unlock()
	for _, r := range results {
		if r.err != nil || r.skip != "" {
			return r
		}
	}
	slices.Sort(parts)
	return outcome{text: strings.Join(parts, "\n--\n"), usedCT: true}
}

// scriptChassis reads the "# chassis:" line of a script.
func scriptChassis(script string) ([]string, error) {
	f, err := os.Open(script)
	if err != nil {
		return nil, fmt.Errorf("difftrace: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "# chassis:"); ok {
			return strings.Fields(rest), nil
		}
	}
	return nil, sc.Err()
}
