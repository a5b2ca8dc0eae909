package northdbench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/govn/govn/bench/procstat"
)

// Config configures a run.
type Config struct {
	Shape Shape
	// Changes of each kind (20).
	Changes int
	// Recomputes timed per subject, alternating (3).
	Recomputes int
	// GovnOnOvsdbServer adds a third subject: govn northd on the real
	// ovsdb-server, which shows the databases' share.
	GovnOnOvsdbServer bool
	// NoOVN leaves ovn-northd out: govn alone, for clusters the
	// reference would take minutes on (the report has no ratios then).
	NoOVN bool
	// Keep keeps the directory of databases and logs.
	Keep   bool
	Logger *slog.Logger
}

// The subjects.
const (
	SubjectGovn      = "govn"       // govn northd on govn db
	SubjectOVN       = "ovn"        // ovn-northd on ovsdb-server
	SubjectGovnOvsdb = "govn-ovsdb" // govn northd on ovsdb-server
)

// subject is one northd with its own Northbound and Southbound.
type subject struct {
	name, northdKind, dbKind string
	dir                      string
	nbServer, sbServer       *dbServer
	nb, sb                   *db
	northd                   *proc
	ctl                      string
	nbctl                    *nbctlDaemon
	changer                  *changer
	rep                      *SubjectReport
}

func (s *subject) govn() bool { return s.northdKind == "govn northd" }

// Run builds the cluster's Northbound for each subject, starts each northd
// on it and measures them (see the package documentation).
func Run(ctx context.Context, b Binaries, cfg Config) (*Report, error) {
	cfg.Shape = cfg.Shape.withDefaults()
	if cfg.Shape.Nodes < 1 {
		return nil, fmt.Errorf("northdbench: need at least 1 node")
	}
	if cfg.Changes <= 0 {
		cfg.Changes = 20
	}
	if cfg.Recomputes <= 0 {
		cfg.Recomputes = 3
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp("", "nbench")
	if err != nil {
		return nil, err
	}
	if cfg.Keep {
		log.Info("keeping the bench's files", "dir", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	rep := &Report{Nodes: cfg.Shape.Nodes, Shape: cfg.Shape, Changes: cfg.Changes}
	subs := []*subject{{name: SubjectGovn, northdKind: "govn northd", dbKind: govnDB}}
	if !cfg.NoOVN {
		subs = append(subs, &subject{name: SubjectOVN, northdKind: "ovn-northd", dbKind: ovsdbServer})
	}
	if cfg.GovnOnOvsdbServer {
		subs = append(subs, &subject{name: SubjectGovnOvsdb, northdKind: "govn northd", dbKind: ovsdbServer})
	}
	defer func() {
		for _, s := range subs {
			s.close()
		}
	}()

	ops := cfg.Shape.Northbound()
	rep.NBRows = len(ops)
	for _, s := range subs {
		s.rep = &SubjectReport{Name: s.name, Northd: s.northdKind, DB: s.dbKind, Changes: make(map[string]*Latency)}
		rep.Subjects = append(rep.Subjects, s.rep)
		if err := s.setUp(ctx, b, dir, ops, cfg.Shape); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		log.Info("northbound built", "subject", s.name, "rows", len(ops), "took", s.rep.BuildNB)
	}

	// Cold start, one northd at a time.
	for _, s := range subs {
		if err := s.coldStart(ctx, b); err != nil {
			return nil, fmt.Errorf("%s: cold start: %w", s.name, err)
		}
		log.Info("first complete southbound", "subject", s.name, "took", s.rep.ColdStart)
		if _, _, err := busyUntilIdle(ctx, s.northd.pid(), time.Now(), 300*time.Millisecond, 10*time.Minute); err != nil {
			return nil, fmt.Errorf("%s: after the cold start: %w", s.name, err)
		}
		if err := s.countSB(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		if s.nbctl, err = startNbctl(ctx, b.OvnNbctl, s.dir, s.nbServer.sock); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}

	// Full recomputes, alternating.
	for r := 0; r < cfg.Recomputes; r++ {
		for _, s := range subs {
			if err := s.recompute(ctx); err != nil {
				return nil, fmt.Errorf("%s: recompute: %w", s.name, err)
			}
		}
	}
	for _, s := range subs {
		s.rep.Recompute = median(s.rep.recomputes)
		s.rep.RecomputeCPU = median(s.rep.recomputeCPU)
		if len(s.rep.recomputeEngine) > 0 {
			s.rep.RecomputeEngine = median(s.rep.recomputeEngine)
		}
		log.Info("full recompute", "subject", s.name, "took", s.rep.Recompute)
	}

	// Changes, alternating.
	for _, kind := range ChangeKinds {
		before := make([]map[string]map[string]int, len(subs))
		for i, s := range subs {
			if before[i], err = s.stats(ctx); err != nil {
				return nil, err
			}
			s.rep.Changes[kind] = &Latency{}
		}
		for i := 0; i < cfg.Changes; i++ {
			for _, s := range subs {
				if err := s.change(ctx, kind, i); err != nil {
					return nil, fmt.Errorf("%s: %s %d: %w", s.name, kind, i, err)
				}
			}
		}
		for i, s := range subs {
			after, err := s.stats(ctx)
			if err != nil {
				return nil, err
			}
			l := s.rep.Changes[kind]
			l.finish()
			l.Recomputes = recomputes(after) - recomputes(before[i])
			if l.Recomputes > 0 {
				s.rep.FellBack = append(s.rep.FellBack, kind)
			}
			log.Info("change", "subject", s.name, "kind", kind, "p50", l.P50, "p90", l.P90, "recomputes", l.Recomputes)
		}
	}

	for _, s := range subs {
		if err := s.finish(ctx, b); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return rep, nil
}

// recomputes is the number of full recomputes of the nodes that compile
// the Northbound: govn's "northd", ovn-northd's "northd" and "lflow".
func recomputes(stats map[string]map[string]int) int {
	return stats["northd"]["recompute"] + stats["lflow"]["recompute"]
}

func (s *subject) setUp(ctx context.Context, b Binaries, parent string, ops Ops, shape Shape) error {
	s.dir = filepath.Join(parent, s.name)
	if err := os.Mkdir(s.dir, 0o755); err != nil {
		return err
	}
	var err error
	if s.nbServer, err = startDB(ctx, b, s.dbKind, s.dir, "nb", b.NBSchema); err != nil {
		return err
	}
	if s.sbServer, err = startDB(ctx, b, s.dbKind, s.dir, "sb", b.SBSchema); err != nil {
		return err
	}
	if s.nb, err = s.nbServer.open(ctx, "OVN_Northbound"); err != nil {
		return err
	}
	if s.sb, err = s.sbServer.open(ctx, "OVN_Southbound"); err != nil {
		return err
	}
	start := time.Now()
	if _, err := s.nb.transact(ctx, ops); err != nil {
		return fmt.Errorf("building the northbound: %w", err)
	}
	s.rep.BuildNB = Duration(time.Since(start))
	r := changeRefs{}
	if r.lbGroup, err = s.nb.uuidOf(ctx, "Load_Balancer_Group", lbGroup); err != nil {
		return err
	}
	for i := 0; i < shape.Services; i++ {
		u, err := s.nb.uuidOf(ctx, "Load_Balancer", fmt.Sprintf("Service_default/svc%d_TCP_cluster", i))
		if err != nil {
			return err
		}
		r.lbs = append(r.lbs, u)
	}
	s.changer = newChanger(shape, r)
	return nil
}

// coldStart starts the northd and waits for its first complete
// Southbound: sb_cfg reaching nb_cfg, which a northd writes once the
// Southbound transaction for that Northbound has committed.
func (s *subject) coldStart(ctx context.Context, b Binaries) error {
	s.ctl = filepath.Join(s.dir, "northd.ctl")
	nbArg, sbArg := "--ovnnb-db=unix:"+s.nbServer.sock, "--ovnsb-db=unix:"+s.sbServer.sock
	var args []string
	if s.govn() {
		args = []string{b.Govn, "northd", nbArg, sbArg, "--unixctl=" + s.ctl, "--log-file=" + filepath.Join(s.dir, "northd.log")}
	} else {
		args = []string{b.OvnNorthd, "--no-chdir", nbArg, sbArg, "--unixctl=" + s.ctl,
			"--log-file=" + filepath.Join(s.dir, "northd.log"), "-vconsole:off"}
	}
	env := []string{"OVN_RUNDIR=" + s.dir, "OVS_RUNDIR=" + s.dir, "OVN_LOGDIR=" + s.dir, "OVS_LOGDIR=" + s.dir}
	start := time.Now()
	var err error
	if s.northd, err = startProc("northd", s.dir, args, env); err != nil {
		return err
	}
	if err := s.waitSBCfg(ctx, 1, 20*time.Minute); err != nil {
		return err
	}
	s.rep.ColdStart = Duration(time.Since(start))
	u, err := procUsage(s.northd.pid())
	if err != nil {
		return err
	}
	s.rep.ColdStartCPU = Duration(u.cpu)
	s.rep.ColdStartPeakRSS = u.peakRSS
	return nil
}

// waitSBCfg polls NB_Global until sb_cfg is at least cfg.
func (s *subject) waitSBCfg(ctx context.Context, cfg int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		_, sbCfg, err := s.nb.sbCfg(ctx)
		if err != nil {
			return err
		}
		if sbCfg >= cfg {
			return nil
		}
		if !s.northd.alive() {
			return fmt.Errorf("%s exited: %v: %s", s.northdKind, s.northd.err, s.northd.tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sb_cfg still %d after %v", sbCfg, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (s *subject) countSB(ctx context.Context) error {
	var err error
	if s.rep.LogicalFlows, err = s.sb.count(ctx, "Logical_Flow"); err != nil {
		return err
	}
	s.rep.DPGroups, err = s.sb.count(ctx, "Logical_DP_Group")
	if err != nil {
		return err
	}
	// Groups no flow refers to (ovsdb-server keeps them: the table is a
	// root table).
	flows, err := s.sb.selectRows(ctx, "Logical_Flow", nil, "logical_dp_group")
	if err != nil {
		return err
	}
	used := make(map[string]bool)
	for _, f := range flows {
		var ref []any
		if json.Unmarshal(f["logical_dp_group"], &ref) == nil && len(ref) == 2 && ref[0] == "uuid" {
			used[ref[1].(string)] = true
		}
	}
	s.rep.UnusedDPGroups = s.rep.DPGroups - len(used)
	return nil
}

// recompute times one inc-engine/recompute: from the command until the
// northd has gone idle again.
func (s *subject) recompute(ctx context.Context) error {
	before, err := s.stats(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := call(ctx, s.ctl, "inc-engine/recompute"); err != nil {
		return err
	}
	last, cpu, err := busyUntilIdle(ctx, s.northd.pid(), start, 500*time.Millisecond, 10*time.Minute)
	if err != nil {
		return err
	}
	s.rep.recomputes = append(s.rep.recomputes, Duration(last.Sub(start)))
	s.rep.recomputeCPU = append(s.rep.recomputeCPU, Duration(cpu))
	after, err := s.stats(ctx)
	if err != nil {
		return err
	}
	if recomputes(after) <= recomputes(before) {
		return fmt.Errorf("inc-engine/recompute: the engine did not recompute")
	}
	if s.govn() {
		w, err := s.lastWrite(ctx)
		if err != nil {
			return err
		}
		// Another run may have followed the recompute (a late update of
		// the Southbound): its time is then not the recompute's.
		if w["last-run-recomputed"] == 1 {
			s.rep.recomputeEngine = append(s.rep.recomputeEngine, Duration(time.Duration(w["last-run-engine-usec"])*time.Microsecond))
		}
	}
	return nil
}

// lastWrite reads govn's northd/last-write, booleans as 0 or 1.
func (s *subject) lastWrite(ctx context.Context) (map[string]int64, error) {
	text, err := call(ctx, s.ctl, "northd/last-write")
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64)
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch v {
		case "true":
			out[k] = 1
		case "false":
			out[k] = 0
		default:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("northd/last-write: %q", line)
			}
			out[k] = n
		}
	}
	return out, nil
}

func (s *subject) stats(ctx context.Context) (map[string]map[string]int, error) {
	text, err := call(ctx, s.ctl, "inc-engine/show-stats")
	if err != nil {
		return nil, fmt.Errorf("%s: inc-engine/show-stats: %w", s.name, err)
	}
	return engineStats(text), nil
}

// change makes change i of kind with ovn-nbctl --wait=sb, times it, and
// waits until the northd is idle again.
func (s *subject) change(ctx context.Context, kind string, i int) error {
	var seq int64
	if s.govn() {
		w, err := s.lastWrite(ctx)
		if err != nil {
			return err
		}
		seq = w["seq"]
	}
	cpu0, err := procstat.CPUTime(s.northd.pid())
	if err != nil {
		return err
	}
	took, out, err := s.nbctl.run(ctx, append([]string{"--wait=sb"}, s.changer.args(kind, i)...)...)
	if err != nil {
		return err
	}
	if err := s.changer.made(kind, i, out); err != nil {
		return err
	}
	l := s.rep.Changes[kind]
	l.samples = append(l.samples, Duration(took))
	if s.govn() {
		w, err := s.lastWrite(ctx)
		if err != nil {
			return err
		}
		if w["seq"] > seq {
			l.inside = append(l.inside, Duration(time.Duration(w["nb-to-sb-usec"])*time.Microsecond))
		}
	}
	if _, _, err = busyUntilIdle(ctx, s.northd.pid(), time.Now(), 100*time.Millisecond, 10*time.Minute); err != nil {
		return err
	}
	cpu1, err := procstat.CPUTime(s.northd.pid())
	l.cpu = append(l.cpu, Duration(cpu1-cpu0))
	return err
}

// finish takes the northd's resource use, then stops everything and
// measures the compacted Southbound.
func (s *subject) finish(ctx context.Context, b Binaries) error {
	if err := s.countSB(ctx); err != nil {
		return err
	}
	u, err := procUsage(s.northd.pid())
	if err != nil {
		return err
	}
	s.rep.PeakRSS, s.rep.RSS, s.rep.CPU = u.peakRSS, u.rss, Duration(u.cpu)
	for _, srv := range []*dbServer{s.nbServer, s.sbServer} {
		u, err := procUsage(srv.pid())
		if err != nil {
			return err
		}
		s.rep.DBPeakRSS += u.peakRSS
		s.rep.DBCPU += Duration(u.cpu)
	}
	st, err := s.stats(ctx)
	if err != nil {
		return err
	}
	s.rep.Engine = st
	s.close()
	// The Southbound as a compacted file, in each server's own format.
	compacted := filepath.Join(s.dir, "sb-compacted.db")
	var cmd []string
	switch s.dbKind {
	case govnDB:
		cmd = []string{b.Govn, "db", "convert", s.sbServer.file, b.SBSchema, compacted}
	default:
		cmd = []string{b.OvsdbTool, "compact", s.sbServer.file, compacted}
	}
	if out, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("compacting the southbound: %w: %s", err, out)
	}
	fi, err := os.Stat(compacted)
	if err != nil {
		return err
	}
	s.rep.SBBytes = fi.Size()
	return nil
}

// close stops what the subject started.
func (s *subject) close() {
	if s.nbctl != nil {
		s.nbctl.stop()
		s.nbctl = nil
	}
	for _, c := range []*db{s.nb, s.sb} {
		if c != nil {
			c.close()
		}
	}
	s.nb, s.sb = nil, nil
	for _, p := range []*proc{s.northd} {
		if p != nil {
			p.stop()
		}
	}
	for _, srv := range []*dbServer{s.nbServer, s.sbServer} {
		if srv != nil {
			srv.stop()
		}
	}
}

// Duration is a time.Duration that shows as milliseconds in JSON.
type Duration time.Duration

// MarshalJSON writes the duration in milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(float64(d) / float64(time.Millisecond))
}

func (d Duration) String() string { return time.Duration(d).Round(10 * time.Microsecond).String() }

func median(v []Duration) Duration { return percentile(v, 50) }

// percentile is the nearest-rank percentile p of v.
func percentile(v []Duration, p int) Duration {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := (p*len(s) + 99) / 100
	return s[max(i-1, 0)]
}
