package trace

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes r as `govn trace` prints it: the packet, then three
// sections joined by the logical flows: the logical pipelines the packet
// ran, the datapath rules of each chassis it crossed with the logical
// flow (and Northbound row) behind each, and the megaflows with the
// logical flow behind each field.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Microflow: %s\n", r.Microflow)
	fmt.Fprintf(&b, "Packet:    %s", r.Packet)
	if len(r.Defaults) > 0 {
		fmt.Fprintf(&b, " (defaults: %s)", strings.Join(r.Defaults, ", "))
	}
	b.WriteString("\n")
	for _, h := range r.Hops {
		fmt.Fprintf(&b, "Chassis:   %s, its datapath as its controller compiles the Southbound; interfaces:", h.Chassis)
		for _, p := range h.Ports {
			fmt.Fprintf(&b, " %d=%s", p.Number, p.Name)
		}
		b.WriteString("\n")
		for _, p := range h.Problems {
			fmt.Fprintf(&b, "  skipped: %s\n", p)
		}
	}

	b.WriteString("\n== Logical pipelines ==\n")
	var at string
	for i, f := range r.Logical {
		if h := fmt.Sprintf("%s(dp=%q) on %s", f.Pipeline, f.Datapath, f.Chassis); h != at {
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
	for _, h := range r.Hops {
		fmt.Fprintf(&b, "-- chassis %s, in by %s --\n", h.Chassis, h.From)
		for i, p := range h.Passes {
			fmt.Fprintf(&b, "pass %d: recirc_id=0x%x", i+1, p.RecircID)
			if p.CTState != "" {
				fmt.Fprintf(&b, ", ct_state=%s", p.CTState)
			}
			b.WriteString("\n")
			for _, s := range p.Steps {
				// Flat, not indented by depth: a pipeline of tail
				// resubmits would drift off the screen.
				switch {
				case s.Note != "":
					fmt.Fprintf(&b, "    %d. %s\n", s.Table, s.Note)
				case s.Rule == "":
					fmt.Fprintf(&b, "    %d. no match\n", s.Table)
				default:
					fmt.Fprintf(&b, "    %d. %s\n", s.Table, s.Rule)
				}
				if s.Source != nil && s.Note == "" {
					fmt.Fprintf(&b, "       > %s\n", s.Source)
				}
			}
			fmt.Fprintf(&b, "    datapath actions: %s\n", p.Actions)
			if p.Error != "" {
				fmt.Fprintf(&b, "    error: %s\n", p.Error)
			}
		}
		if l := h.Live; l != nil {
			if l.Agrees {
				fmt.Fprintf(&b, "the running chassis (%s) agrees: its ofproto/trace %s ran the same %d rules\n", l.Socket, l.Flow, l.Rules)
				if len(l.MegaflowFields) == 0 {
					b.WriteString("    to the same megaflow\n")
				} else {
					fmt.Fprintf(&b, "    to a megaflow that differs (model / chassis) in %s: which of two subtables of equal priority a lookup examines follows the order the rules were installed in\n",
						strings.Join(l.MegaflowFields, "; "))
				}
			} else {
				fmt.Fprintf(&b, "the running chassis (%s) DISAGREES, ofproto/trace %s:\n", l.Socket, l.Flow)
				for _, d := range l.Differences {
					fmt.Fprintf(&b, "    %s\n", d)
				}
			}
		}
		if len(h.Outputs) == 0 {
			b.WriteString("out: nothing (dropped, or to the controller)\n")
		}
		for _, o := range h.Outputs {
			fmt.Fprintf(&b, "out %d (%s): %s\n", o.Port, o.Name, o.Packet)
			if o.Tunnel != "" {
				fmt.Fprintf(&b, "    %s\n", o.Tunnel)
			}
		}
	}

	b.WriteString("\n== Megaflows ==\n")
	for _, h := range r.Hops {
		fmt.Fprintf(&b, "-- chassis %s --\n", h.Chassis)
		for _, m := range h.Megaflows {
			fmt.Fprintf(&b, "%d. %s actions:%s\n", m.Pass, m.Match, m.Actions)
			for _, f := range m.Fields {
				if f.Source == nil {
					fmt.Fprintf(&b, "    %s=%s: %s\n", f.Field, f.Value, f.Cause)
					continue
				}
				fmt.Fprintf(&b, "    %s=%s: table %d %s > %s\n", f.Field, f.Value, f.Table, f.Cause, f.Source)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
