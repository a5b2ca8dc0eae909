package trace

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/controller"
	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/switchd"
	"github.com/govn/govn/unixctl"
)

// fakeChassis serves, on a control socket, what a running govn chassis
// answers about hv1 with its own interface numbers and zones: dump-flows,
// ct-zone-list and ofproto/trace over its rules (through the datapath's
// Trace, as the chassis's switch does). tamper, if set, edits the rules
// first.
func fakeChassis(t *testing.T, ix *index, tamper func([]flow.Rule) []flow.Rule) string {
	t.Helper()
	in, _, _ := ix.chassisInput("hv1", "")
	in.VIFs = map[string]uint32{"vm1": 7, "web1": 5}
	in.TunnelPort = 9
	in.Zones = map[string]uint16{"vm1": 11, "web1": 12}
	zones := "vm1 11\nweb1 12\n"
	for i, d := range ix.s.Datapaths {
		if _, ok := d.ExternalIDs["logical-router"]; ok {
			in.Zones["dnat:"+d.UUID.String()] = uint16(20 + 2*i)
			in.Zones["snat:"+d.UUID.String()] = uint16(21 + 2*i)
			zones += fmt.Sprintf("%s_dnat %d\n%s_snat %d\n", d.UUID, 20+2*i, d.UUID, 21+2*i)
		}
	}
	tr, err := controller.NewTranslator()
	if err != nil {
		t.Fatal(err)
	}
	out := tr.Translate(in)
	rules := out.Rules
	if tamper != nil {
		rules = tamper(append([]flow.Rule(nil), rules...))
	}
	pipe := dp.NewPipeline()
	var b flow.Bundle
	for _, g := range out.Groups {
		b.AddGroup(g)
	}
	for _, r := range rules {
		b.Add(r)
	}
	if _, err := pipe.Apply(b); err != nil {
		t.Fatal(err)
	}
	d, err := dp.New(dp.Config{Flows: pipe})
	if err != nil {
		t.Fatal(err)
	}
	cmds := map[string]unixctl.Command{
		"dump-flows": func(args []string) (string, error) {
			var s strings.Builder
			for _, r := range pipe.Tables().Dump(0) {
				s.WriteString(r.DumpString() + "\n")
			}
			return s.String(), nil
		},
		"ct-zone-list": func([]string) (string, error) { return zones, nil },
		"ofproto/trace": func(args []string) (string, error) {
			k, err := switchd.ParseFlowSpec(strings.Join(args, ","))
			if err != nil {
				return "", err
			}
			r := d.Trace(k)
			return r.FormatTrace(), nil
		},
	}
	sock := filepath.Join(t.TempDir(), "chassis.ctl")
	l, err := unixctl.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = unixctl.Serve(ctx, l, cmds) }()
	t.Cleanup(func() { cancel(); <-done })
	return sock
}

// TestLiveChassis traces with a chassis's control socket: the model takes
// the chassis's interface numbers and zones and agrees with its
// ofproto/trace; a chassis whose rules differ (a missing logical flow's
// rule) is reported as disagreeing, with the rule where they part.
func TestLiveChassis(t *testing.T) {
	nbEP, sbEP := sandboxDBs(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, n, err := Load(ctx, sbEP, nbEP)
	if err != nil {
		t.Fatal(err)
	}
	ix := newIndex(s, n)
	mf := goldenCases[2].microflow // routed, vm1 to web1, both on hv1
	sock := fakeChassis(t, ix, nil)
	r, err := Run(ctx, s, n, Options{Datapath: "ls1", Microflow: mf, ChassisSocket: sock})
	if err != nil {
		t.Fatal(err)
	}
	h := r.Hops[0]
	if h.Ports[0] != (PortNumber{"web1", 5}) || h.Ports[1] != (PortNumber{"vm1", 7}) {
		t.Errorf("ports %v, want the chassis's web1=5, vm1=7", h.Ports)
	}
	if h.Live == nil || !h.Live.Agrees || h.Live.Rules < 5 {
		t.Fatalf("live check %+v, want agreement over the whole pipeline", h.Live)
	}
	if len(h.Outputs) != 1 || h.Outputs[0].Port != 5 {
		t.Errorf("outputs %+v, want one to web1 (5)", h.Outputs)
	}

	// The chassis lacks ls_in_pre_lb's rule for IP (ingress table 5,
	// priority 100), which the first pass runs (the chassis's
	// ofproto/trace stops at the first recirculation).
	bad := fakeChassis(t, ix, func(rs []flow.Rule) []flow.Rule {
		out := rs[:0]
		for _, r := range rs {
			if r.Table == 13 && r.Priority == 100 {
				continue
			}
			out = append(out, r)
		}
		return out
	})
	r, err = Run(ctx, s, n, Options{Datapath: "ls1", Microflow: mf, ChassisSocket: bad})
	if err != nil {
		t.Fatal(err)
	}
	l := r.Hops[0].Live
	if l == nil || l.Agrees || len(l.Differences) == 0 || !strings.Contains(l.Differences[0], "table=13") {
		t.Fatalf("live check %+v, want a disagreement at table 13", l)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "DISAGREES") {
		t.Errorf("the text does not say the chassis disagrees:\n%s", text.String())
	}

	// A port with no interface there is refused clearly.
	_, err = Run(ctx, s, n, Options{Datapath: "ls1", Microflow: goldenCases[1].microflow, ChassisSocket: sock})
	if err == nil || !strings.Contains(err.Error(), "no interface on the chassis") {
		t.Errorf("vm2 on hv1's socket: %v", err)
	}
}
