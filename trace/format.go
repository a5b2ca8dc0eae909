package trace

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes r as `govn trace` prints it: the packet, then three
// sections joined by the logical flows: the logical pipelines the packet
// ran, the datapath rules with the logical flow (and Northbound row)
// behind each, and the megaflows with the logical flow behind each field.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Microflow: %s\n", r.Microflow)
	fmt.Fprintf(&b, "Packet:    %s", r.Packet)
	if len(r.Defaults) > 0 {
		fmt.Fprintf(&b, " (defaults: %s)", strings.Join(r.Defaults, ", "))
	}
	fmt.Fprintf(&b, "\nChassis:   %s, as its controller compiles the Southbound; interfaces:", r.Chassis)
	for _, p := range r.Ports {
		fmt.Fprintf(&b, " %d=%s", p.Number, p.Name)
	}
	b.WriteString("\n")
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "Skipped:   %s\n", p)
	}

	b.WriteString("\n== Logical pipelines ==\n")
	var at string
	for i, f := range r.Logical {
		if h := fmt.Sprintf("%s(dp=%q)", f.Pipeline, f.Datapath); h != at {
			at = h
			fmt.Fprintf(&b, "%s\n", h)
		}
		stage := f.Stage
		if stage == "" {
			stage = "table"
		}
		fmt.Fprintf(&b, "  %d. %s %d, priority %d: %s\n", i+1, stage, f.Table, f.Priority, f.Match)
		fmt.Fprintf(&b, "       %s\n", f.Actions)
		if f.Owner != nil {
			fmt.Fprintf(&b, "       from %s [%s]\n", f.Owner, f.How)
		}
		fmt.Fprintf(&b, "       lflow %s\n", f.UUID)
	}

	b.WriteString("\n== Datapath ==\n")
	for i, p := range r.Passes {
		fmt.Fprintf(&b, "pass %d: recirc_id=0x%x", i+1, p.RecircID)
		if p.CTState != "" {
			fmt.Fprintf(&b, ", ct_state=%s", p.CTState)
		}
		b.WriteString("\n")
		for _, s := range p.Steps {
			// Flat, not indented by depth: a pipeline of tail
			// resubmits would drift off the screen.
			ind := "    "
			switch {
			case s.Note != "":
				fmt.Fprintf(&b, "%s%d. %s\n", ind, s.Table, s.Note)
			case s.Rule == "":
				fmt.Fprintf(&b, "%s%d. no match\n", ind, s.Table)
			default:
				fmt.Fprintf(&b, "%s%d. %s\n", ind, s.Table, s.Rule)
			}
			if s.Source != nil && s.Note == "" {
				fmt.Fprintf(&b, "%s   > %s\n", ind, s.Source)
			}
		}
		fmt.Fprintf(&b, "    datapath actions: %s\n", p.Actions)
		if p.Error != "" {
			fmt.Fprintf(&b, "    error: %s\n", p.Error)
		}
	}

	b.WriteString("\n== Megaflows ==\n")
	for _, m := range r.Megaflows {
		fmt.Fprintf(&b, "%d. %s actions:%s\n", m.Pass, m.Match, m.Actions)
		for _, f := range m.Fields {
			if f.Source == nil {
				fmt.Fprintf(&b, "    %s=%s: %s\n", f.Field, f.Value, f.Cause)
				continue
			}
			fmt.Fprintf(&b, "    %s=%s: table %d %s > %s\n", f.Field, f.Value, f.Table, f.Cause, f.Source)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
