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
	runs    int
	stages  map[string]bool
}

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
	ctx := context.Background()
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
	for _, p := range pkts {
		for _, ct := range p.CT {
			jobs = append(jobs, job{p, ct})
		}
	}
	results := [2][]outcome{make([]outcome, len(jobs)), make([]outcome, len(jobs))}
	for i, s := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, jb := range jobs {
				results[i][j] = s.trace(ctx, jb.p, jb.ct)
			}
		}()
	}
	wg.Wait()

	r := &Report{Script: opts.Script, Packets: len(pkts), Traces: len(jobs)}
	for j, jb := range jobs {
		ref, test := results[0][j], results[1][j]
		switch {
		case ref.err != nil || test.err != nil:
			t.Fatalf("trace %q --ct=%s: reference: %v; under test: %v", jb.p.Name, jb.ct, ref.err, test.err)
		case ref.skip != "" || test.skip != "":
			r.Skipped = append(r.Skipped, Skip{jb.p, jb.ct, strings.TrimSpace(ref.skip + " " + test.skip)})
		case ref.text != test.text:
			r.Mismatches = append(r.Mismatches, Mismatch{jb.p, jb.ct, ref.text, test.text})
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
	text string
	skip string
	err  error
}

var stageLine = regexp.MustCompile(`(?m)^\s*\d+\. (l[sr]_(?:in|out)_[a-z0-9_]+)`)

func (s *side) noteStages(detailed string) {
	for _, m := range stageLine.FindAllStringSubmatch(detailed, -1) {
		s.stages[m[1]] = true
	}
}

// trace traces p with conntrack state ct and resolves ovn-trace's random
// choices by tracing each alternative (see tracer.go).
func (s *side) trace(ctx context.Context, p Packet, ct string) outcome {
	d := s.daemons[ct]
	if d == nil {
		d = newTraceDaemon(s.env.Dir, s.env.SBRemote(), ct)
		s.daemons[ct] = d
	}
	s.runs++
	raw, err := d.trace(ctx, p.Datapath, p.Flow)
	if errors.Is(err, errAborted) {
		return outcome{text: "<ovn-trace aborted>"}
	}
	if err != nil {
		return outcome{err: err}
	}
	tt := splitTrace(raw)
	s.noteStages(tt.detailed)
	c := randomChoices(tt.detailed)
	if c.none() {
		return outcome{text: normalize(tt, s.sb.marks)}
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
	var parts []string
	for _, be := range backends {
		for _, id := range selects {
			var extra []string
			label := ""
			if be != "" {
				extra = append(extra, "--lb-dst="+be)
				label = "lb-dst=" + be + "\n"
			}
			if id != "" {
				extra = append(extra, "--select-id="+id)
			}
			s.runs++
			out, err := oneShot(ctx, s.env.Dir, s.env.SBRemote(), ct, extra, p.Datapath, p.Flow)
			if errors.Is(err, errAborted) {
				parts = append(parts, label+"<ovn-trace aborted>")
				continue
			}
			if err != nil {
				return outcome{err: err}
			}
			tt := splitTrace(out)
			s.noteStages(tt.detailed)
			if c2 := randomChoices(tt.detailed); len(c2.backends) > 1 || len(c2.selects) > 1 {
				return outcome{skip: "more than one random choice (load balancing or ECMP) in one trace"}
			}
			parts = append(parts, label+normalize(tt, s.sb.marks))
		}
	}
	slices.Sort(parts)
	return outcome{text: strings.Join(parts, "\n--\n")}
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
