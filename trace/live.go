package trace

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/unixctl"
)

// live is what a running govn chassis's control socket says about its
// datapath: the port number of each local logical port's interface, its
// tunnel port and its conntrack zones.
type live struct {
	socket string
	ports  map[string]uint32
	tunnel uint32
	zones  map[string]uint16
}

var (
	vifRule    = regexp.MustCompile(`table=0,.* priority=100,in_port=(\d+) actions=load:0x([0-9a-f]+)->reg13,load:0x([0-9a-f]+)->metadata,load:0x([0-9a-f]+)->reg14,`)
	tunnelRule = regexp.MustCompile(`table=0,.* priority=100,in_port=(\d+),tun_id=`)
)

// readLive reads socket's dump-flows of table 0 (which interface enters
// which logical port) and ct-zone-list.
func (ix *index) readLive(ctx context.Context, socket string) (*live, error) {
	dump, err := unixctl.Call(ctx, socket, "dump-flows", "0")
	if err != nil {
		return nil, fmt.Errorf("trace: the chassis at %s: %w", socket, err)
	}
	l := &live{socket: socket, ports: map[string]uint32{}, zones: map[string]uint16{}}
	for _, line := range strings.Split(dump, "\n") {
		if m := tunnelRule.FindStringSubmatch(line); m != nil {
			n, _ := strconv.ParseUint(m[1], 10, 32)
			l.tunnel = uint32(n)
			continue
		}
		m := vifRule.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		no, _ := strconv.ParseUint(m[1], 10, 32)
		dk, _ := strconv.ParseInt(m[3], 16, 64)
		pk, _ := strconv.ParseInt(m[4], 16, 64)
		if name := ix.portByKey[[2]int64{dk, pk}]; name != "" {
			l.ports[name] = uint32(no)
		}
	}
	zl, err := unixctl.Call(ctx, socket, "ct-zone-list")
	if err != nil {
		return nil, fmt.Errorf("trace: the chassis at %s: %w", socket, err)
	}
	for _, line := range strings.Split(zl, "\n") {
		name, z, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(z, 10, 16)
		if err != nil {
			continue
		}
		if dp, ok := strings.CutSuffix(name, "_dnat"); ok {
			name = "dnat:" + dp
		} else if dp, ok := strings.CutSuffix(name, "_snat"); ok {
			name = "snat:" + dp
		}
		l.zones[name] = uint16(v)
	}
	return l, nil
}

// LiveCheck compares the model's first translation with the running
// chassis's own ofproto/trace of the same packet: the rules it ran and
// the megaflow it would install.
type LiveCheck struct {
	Socket string `json:"socket"`
	Flow   string `json:"flow"`
	// Agrees says the chassis ran the same rules in the same order;
	// Differences says where not.
	Agrees      bool     `json:"agrees"`
	Rules       int      `json:"rules"`
	Differences []string `json:"differences,omitempty"`
	// Megaflow is the chassis's megaflow, and MegaflowFields the fields
	// on which it differs from the model's (none: the same). With the
	// same rules a megaflow can still differ where the classifier's
	// order of subtables of equal priority, which follows the order the
	// rules were installed in, decides what a lookup examined.
	Megaflow       string   `json:"megaflow"`
	MegaflowFields []string `json:"megaflow_fields,omitempty"`
}

var (
	traceRule     = regexp.MustCompile(`^\s*\d+\. (cookie=.*)$`)
	traceMegaflow = regexp.MustCompile(`^Megaflow: (.*) actions:`)
)

// check runs the chassis's ofproto/trace for frame entering at inNo and
// compares it with the model's pass p.
func (l *live) check(ctx context.Context, frame []byte, inNo uint32, p *Pass, mf *Megaflow) *LiveCheck {
	var k flow.Key
	packet.Extract(frame, &k)
	k.Set(flow.InPort, uint64(inNo))
	spec := keyString(&k)
	c := &LiveCheck{Socket: l.socket, Flow: spec}
	out, err := unixctl.Call(ctx, l.socket, "ofproto/trace", spec)
	if err != nil {
		c.Differences = append(c.Differences, fmt.Sprintf("ofproto/trace: %v", err))
		return c
	}
	var theirs []string
	megaflow := ""
	for _, line := range strings.Split(out, "\n") {
		if m := traceRule.FindStringSubmatch(line); m != nil {
			theirs = append(theirs, m[1])
		} else if m := traceMegaflow.FindStringSubmatch(line); m != nil {
			megaflow = m[1]
		}
	}
	var ours []string
	for _, s := range p.Steps {
		if s.Rule != "" && s.Note == "" {
			ours = append(ours, s.Rule)
		}
	}
	c.Rules = len(theirs)
	for i := 0; i < len(ours) || i < len(theirs); i++ {
		var o, t string
		if i < len(ours) {
			o = ours[i]
		}
		if i < len(theirs) {
			t = theirs[i]
		}
		if o != t {
			c.Differences = append(c.Differences, fmt.Sprintf("rule %d: the model ran %q, the chassis %q", i+1, o, t))
			break
		}
	}
	c.Agrees = len(c.Differences) == 0
	c.Megaflow = megaflow
	c.MegaflowFields = matchDiff(strings.TrimSuffix(mf.Match, " (not installed)"), megaflow)
	return c
}

// matchDiff lists the fields on which two megaflows (in Match.String's
// form) differ, each as "field: model / chassis".
func matchDiff(a, b string) []string {
	if a == b {
		return nil
	}
	ma, errA := flow.ParseMatch(a)
	mb, errB := flow.ParseMatch(b)
	if errA != nil || errB != nil {
		return []string{fmt.Sprintf("the model's %q, the chassis's %q", a, b)}
	}
	var out []string
	for f := flow.Field(1); f.Valid(); f++ {
		maskA, maskB := ma.Mask.Get(f), mb.Mask.Get(f)
		if maskA == maskB && ma.Key.GetU128(f).And(maskA) == mb.Key.GetU128(f).And(maskB) {
			continue
		}
		show := func(m *flow.Match, mask flow.U128) string {
			if mask.IsZero() {
				return "not matched"
			}
			return flow.FormatValue(f, m.Key.GetU128(f).And(mask), mask)
		}
		out = append(out, fmt.Sprintf("%s: %s / %s", f, show(&ma, maskA), show(&mb, maskB)))
	}
	return out
}
