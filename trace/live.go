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
	// Agrees says the chassis ran the same rules, in the same order, to
	// the same megaflow; Differences says where not.
	Agrees      bool     `json:"agrees"`
	Rules       int      `json:"rules"`
	Differences []string `json:"differences,omitempty"`
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
	if want := strings.TrimSuffix(mf.Match, " (not installed)"); megaflow != want {
		c.Differences = append(c.Differences, fmt.Sprintf("megaflow: the model's %q, the chassis's %q", want, megaflow))
	}
	c.Agrees = len(c.Differences) == 0
	return c
}
