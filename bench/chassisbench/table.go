package chassisbench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the report for a terminal: govn and OVN side by side.
func (r *Report) WriteTable(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "port-up latency: add-port with iface-id → first echo reply (ping every %.0f ms), across two hypervisors\n", r.Interval)
	if r.Flood > 0 {
		fmt.Fprintf(w, "under a flood of %d ARP misses a second on the ports' hypervisor (flow limit %d)\n", r.Flood, FloodFlowLimit)
	}
	o := r.OVN
	if o != nil {
		fmt.Fprintf(w, "\t%s\t%s\tgovn/OVN\t\n", r.Govn.Chassis, o.Chassis)
	} else {
		fmt.Fprintf(w, "\t%s\t\n", r.Govn.Chassis)
	}
	row := func(name string, g, ov float64, ratio bool) {
		if o == nil {
			fmt.Fprintf(w, "%s\t%.1f ms\t\n", name, g)
			return
		}
		q := ""
		if ratio && ov > 0 {
			q = fmt.Sprintf("%.2f", g/ov)
		}
		fmt.Fprintf(w, "%s\t%.1f ms\t%.1f ms\t%s\t\n", name, g, ov, q)
	}
	var ov Figures
	if o != nil {
		ov = *o
	}
	row("p50", r.Govn.P50Ms, ov.P50Ms, true)
	row("p90", r.Govn.P90Ms, ov.P90Ms, true)
	row("min", r.Govn.MinMs, ov.MinMs, false)
	row("max", r.Govn.MaxMs, ov.MaxMs, false)
	row("  add-port returned (p50)", r.Govn.AddPortP50Ms, ov.AddPortP50Ms, false)
	if o != nil {
		fmt.Fprintf(w, "ports up (failed)\t%d (%d)\t%d (%d)\t\t\n", r.Govn.Ports, r.Govn.Failed, o.Ports, o.Failed)
	} else {
		fmt.Fprintf(w, "ports up (failed)\t%d (%d)\t\n", r.Govn.Ports, r.Govn.Failed)
	}
	met := "MISSED"
	if r.GoalMet {
		met = "met"
	}
	fmt.Fprintf(w, "goal: govn p50 ≤ %.0f ms\t%s\t\n", r.GoalP50, met)
	if o == nil {
		fmt.Fprintf(w, "OVN side\tskipped: %s\t\n", r.OVNSkipped)
	}
	w.Flush()
}
