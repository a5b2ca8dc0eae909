package lflow

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/datapath/systest/netns"
)

// inequalityACLs are ACLs with inequalities, added to the features-a
// setup. They are small: the real ovn-controller crosses the single-bit
// tests of every != (16^n terms for n ports), and with 6 addresses
// (ip4.src != {6 addresses}) or 7 ports had installed nothing after a
// minute, where govn needs 66 and 58 rules.
func inequalityACLs() [][]string {
	acl := func(dir, prio, match string) []string {
		return []string{"acl-add", "sw0", dir, prio, match, "allow"}
	}
	return [][]string{
		acl("from-lport", "1201", "ip4 && tcp.dst != 80 && tcp.dst != 443"),
		acl("from-lport", "1202", "!(tcp.dst == {80, 443, 8080})"),
		acl("to-lport", "1203", "ip4.src != {10.0.0.1, 10.0.0.2}"),
		acl("from-lport", "1204", "ip4 && udp.dst != {53, 5353} && ip4.dst != 10.0.0.0/8"),
	}
}

// TestDifferentialInequalities adds inequalityACLs to the reference
// setup: the real ovn-controller accepts them (installs rules), govn
// compiles them, and, per (table, priority, datapath), govn needs no more
// rules than ovn-controller.
func TestDifferentialInequalities(t *testing.T) {
	skipWithoutReference(t)
	ns := netns.New(t) // skips unless root
	acls := inequalityACLs()
	ref := startReference(t, ns, acls)
	st, c := testCompiler(t)
	env := ref.env(t, st)
	mine := map[string]int{}
	ctx := &Context{Env: env, NextConjID: 1, NextGroupID: 1}
	// Northd puts an ACL of priority P in the ACL stages at 1000+P.
	const lo, hi = 2201, 2204
	for _, fl := range ref.lflows {
		dp, ok := ref.dpByName[fl.Datapath]
		if !ok || !ref.localDP[dp] || fl.Priority < lo || fl.Priority > hi || !strings.Contains(fl.Stage, "acl") {
			continue
		}
		env.dp = dp
		ctx.Datapath = ref.dpKey[dp]
		lf := Lflow{Pipeline: fl.Pipeline, Table: fl.Table, Priority: fl.Priority, Match: fl.Match, Actions: fl.Actions}
		table, _ := c.table(fl.Pipeline, fl.Table)
		group := fmt.Sprintf("table=%d priority=%d metadata=%d", table, fl.Priority, ctx.Datapath)
		var res Result
		if err := c.Compile(&lf, ctx, &res); err != nil {
			t.Errorf("line %d: %v", fl.Line, err)
			continue
		}
		mine[group] += len(res.Rules)
	}
	if len(mine) != len(acls) {
		t.Fatalf("%d groups of inequality ACL flows, want %d: the ACLs did not reach the Southbound", len(mine), len(acls))
	}
	// ovn-controller may still be working on the ACLs when the rest of
	// its rules have settled: wait for theirs.
	waitCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for p := lo; p <= hi; p++ {
		for !strings.Contains(ref.flows, fmt.Sprintf("priority=%d,", p)) && waitCtx.Err() == nil {
			time.Sleep(time.Second)
			if out, err := ref.dumpFlows(waitCtx); err == nil {
				ref.flows = out
			}
		}
	}
	real := ref.ruleCounts()
	for g, n := range mine {
		t.Logf("%s: govn %d rules, ovn-controller %d", g, n, real[g])
		if real[g] == 0 {
			t.Errorf("%s: ovn-controller installed no rules", g)
		}
		if n > real[g] {
			t.Errorf("%s: govn needs %d rules, more than ovn-controller's %d", g, n, real[g])
		}
	}
}
