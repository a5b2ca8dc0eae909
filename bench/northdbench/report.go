package northdbench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is a run's figures.
type Report struct {
	Nodes    int              `json:"nodes"`
	Shape    Shape            `json:"shape"`
	NBRows   int              `json:"nb_rows"`
	Changes  int              `json:"changes_per_kind"`
	Subjects []*SubjectReport `json:"subjects"`
}

// SubjectReport is one northd's figures.
type SubjectReport struct {
	Name   string `json:"name"`
	Northd string `json:"northd"`
	DB     string `json:"db"`
	// BuildNB is the one transaction that built the Northbound.
	BuildNB Duration `json:"build_nb_ms"`
	// ColdStart is from starting the northd to sb_cfg reaching nb_cfg,
	// ColdStartCPU the northd's CPU time until then.
	ColdStart    Duration `json:"cold_start_ms"`
	ColdStartCPU Duration `json:"cold_start_cpu_ms"`
	// Recompute is from inc-engine/recompute until the northd is idle
	// again (median), RecomputeCPU its CPU time meanwhile;
	// RecomputeEngine the engine run alone as govn northd measures it.
	Recompute       Duration `json:"recompute_ms"`
	RecomputeCPU    Duration `json:"recompute_cpu_ms"`
	RecomputeEngine Duration `json:"recompute_engine_ms,omitempty"`
	// Changes are the latencies of each change kind.
	Changes map[string]*Latency `json:"changes"`
	// FellBack are the change kinds during which the engine recomputed.
	FellBack     []string `json:"fell_back_to_recompute"`
	LogicalFlows int      `json:"logical_flows"`
	DPGroups     int      `json:"logical_dp_groups"`
	// UnusedDPGroups are groups no flow refers to.
	UnusedDPGroups int `json:"unused_logical_dp_groups"`
	// SBBytes is the Southbound file after compaction, at the end.
	SBBytes int64 `json:"sb_bytes"`
	// PeakRSS and CPU are the northd process's at the end; DBPeakRSS and
	// DBCPU its two database servers' together. ColdStartPeakRSS is the
	// northd's peak when its first Southbound is complete, RSS what it
	// holds at the end (after every change).
	ColdStartPeakRSS int64                     `json:"cold_start_peak_rss_bytes"`
	RSS              int64                     `json:"rss_bytes"`
	PeakRSS          int64                     `json:"peak_rss_bytes"`
	CPU              Duration                  `json:"cpu_ms"`
	DBPeakRSS        int64                     `json:"db_peak_rss_bytes"`
	DBCPU            Duration                  `json:"db_cpu_ms"`
	Engine           map[string]map[string]int `json:"engine_stats"`

	recomputes, recomputeCPU, recomputeEngine []Duration
}

// Latency is the time of one kind of change from ovn-nbctl's commit to the
// Southbound (ovn-nbctl --wait=sb through a persistent ovn-nbctl daemon),
// and, for govn northd, from the Northbound update's arrival to the
// Southbound commit's reply inside northd.
type Latency struct {
	P50       Duration `json:"p50_ms"`
	P90       Duration `json:"p90_ms"`
	InsideP50 Duration `json:"inside_p50_ms,omitempty"`
	InsideP90 Duration `json:"inside_p90_ms,omitempty"`
	// CPUP50 and CPUP90 are the northd's CPU time per change, until it
	// is idle again: what the change cost it, whatever else the machine
	// runs.
	CPUP50     Duration `json:"cpu_p50_ms"`
	CPUP90     Duration `json:"cpu_p90_ms"`
	Recomputes int      `json:"recomputes"`

	samples, inside, cpu []Duration
}

func (l *Latency) finish() {
	l.P50, l.P90 = percentile(l.samples, 50), percentile(l.samples, 90)
	l.InsideP50, l.InsideP90 = percentile(l.inside, 50), percentile(l.inside, 90)
	l.CPUP50, l.CPUP90 = percentile(l.cpu, 50), percentile(l.cpu, 90)
}

// WriteTable prints the report as a table, each subject against ovn-northd
// with the ratio (without ovn-northd in the run, without ratios).
func (r *Report) WriteTable(w io.Writer) error {
	var ovn *SubjectReport
	for _, s := range r.Subjects {
		if s.Name == SubjectOVN {
			ovn = s
		}
	}
	fmt.Fprintf(w, "govn bench northd: %d nodes, %d pods a node, %d services, %d namespaces; %d Northbound rows; %d changes of each kind\n",
		r.Nodes, r.Shape.PodsPerNode, r.Shape.Services, r.Shape.Namespaces, r.NBRows, r.Changes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "\t"
	for _, s := range r.Subjects {
		head += s.Northd + " on " + s.DB + "\t"
		if ovn != nil && s != ovn {
			head += "ratio\t"
		}
	}
	fmt.Fprintln(tw, head)
	row := func(name string, get func(*SubjectReport) float64, format func(float64) string) {
		line := name + "\t"
		for _, s := range r.Subjects {
			v := get(s)
			line += format(v) + "\t"
			if ovn != nil && s != ovn {
				if ov := get(ovn); ov > 0 && v > 0 {
					line += fmt.Sprintf("%.3fx\t", v/ov)
				} else {
					line += "-\t"
				}
			}
		}
		fmt.Fprintln(tw, line)
	}
	ms := func(v float64) string {
		switch {
		case v == 0:
			return "-"
		case v >= 1000:
			return fmt.Sprintf("%.2f s", v/1000)
		case v >= 100:
			return fmt.Sprintf("%.0f ms", v)
		}
		return fmt.Sprintf("%.3g ms", v)
	}
	count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	mib := func(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
	dms := func(d Duration) float64 { return float64(d) / 1e6 }
	row("cold start", func(s *SubjectReport) float64 { return dms(s.ColdStart) }, ms)
	row("cold start CPU", func(s *SubjectReport) float64 { return dms(s.ColdStartCPU) }, ms)
	row("full recompute", func(s *SubjectReport) float64 { return dms(s.Recompute) }, ms)
	row("full recompute CPU", func(s *SubjectReport) float64 { return dms(s.RecomputeCPU) }, ms)
	row("  engine alone (govn)", func(s *SubjectReport) float64 { return dms(s.RecomputeEngine) }, ms)
	for _, k := range ChangeKinds {
		if r.Subjects[0].Changes[k] == nil {
			continue
		}
		row(k+" p50", func(s *SubjectReport) float64 { return dms(s.Changes[k].P50) }, ms)
		row(k+" p90", func(s *SubjectReport) float64 { return dms(s.Changes[k].P90) }, ms)
		row("  inside p50 (govn)", func(s *SubjectReport) float64 { return dms(s.Changes[k].InsideP50) }, ms)
		row("  inside p90 (govn)", func(s *SubjectReport) float64 { return dms(s.Changes[k].InsideP90) }, ms)
		row("  northd CPU p50", func(s *SubjectReport) float64 { return dms(s.Changes[k].CPUP50) }, ms)
		row("  northd CPU p90", func(s *SubjectReport) float64 { return dms(s.Changes[k].CPUP90) }, ms)
		row("  recomputes", func(s *SubjectReport) float64 { return float64(s.Changes[k].Recomputes) }, count)
	}
	row("Logical_Flow rows", func(s *SubjectReport) float64 { return float64(s.LogicalFlows) }, count)
	row("Logical_DP_Group rows", func(s *SubjectReport) float64 { return float64(s.DPGroups) }, count)
	row("  of them unused", func(s *SubjectReport) float64 { return float64(s.UnusedDPGroups) }, count)
	row("SB file compacted", func(s *SubjectReport) float64 { return float64(s.SBBytes) }, mib)
	row("northd peak RSS", func(s *SubjectReport) float64 { return float64(s.PeakRSS) }, mib)
	row("  peak at cold start", func(s *SubjectReport) float64 { return float64(s.ColdStartPeakRSS) }, mib)
	row("  RSS at the end", func(s *SubjectReport) float64 { return float64(s.RSS) }, mib)
	row("northd CPU", func(s *SubjectReport) float64 { return dms(s.CPU) }, ms)
	row("NB+SB servers peak RSS", func(s *SubjectReport) float64 { return float64(s.DBPeakRSS) }, mib)
	row("NB+SB servers CPU", func(s *SubjectReport) float64 { return dms(s.DBCPU) }, ms)
	row("NB build transaction", func(s *SubjectReport) float64 { return dms(s.BuildNB) }, ms)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range r.Subjects {
		fell := "none"
		if len(s.FellBack) > 0 {
			fell = strings.Join(s.FellBack, ", ")
		}
		fmt.Fprintf(w, "%s on %s: changes that fell back to a full recompute: %s\n", s.Northd, s.DB, fell)
	}
	return nil
}
