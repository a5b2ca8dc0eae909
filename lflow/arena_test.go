package lflow

import (
	"testing"
)

// A Result reused across Compile calls recycles the parsed trees and the
// scratch matches of earlier flows. Rules already emitted must not share
// that memory: compiling the whole corpus into one Result, never
// truncated, gives exactly the rules of compiling each flow into a fresh
// Result.
func TestCompileReusedResult(t *testing.T) {
	st, c := testCompiler(t)
	env := newTestEnv(t, st)
	env.autoKeys = true
	flows := readCorpus(t)
	// Twice over, so that the second pass runs on recycled memory.
	flows = append(flows, flows...)
	ctxShared := &Context{Env: env, Datapath: 1, NextConjID: 1, NextGroupID: 1}
	var shared Result
	var want []string
	ctxFresh := &Context{Env: env, Datapath: 1, NextConjID: 1, NextGroupID: 1}
	for _, fl := range flows {
		lf := Lflow{Pipeline: fl.Pipeline, Table: fl.Table, Priority: fl.Priority, Match: fl.Match, Actions: fl.Actions}
		var fresh Result
		errFresh := c.Compile(&lf, ctxFresh, &fresh)
		errShared := c.Compile(&lf, ctxShared, &shared)
		if (errFresh == nil) != (errShared == nil) {
			t.Fatalf("line %d: fresh Result gave %v, reused one %v", fl.Line, errFresh, errShared)
		}
		for i := range fresh.Rules {
			want = append(want, fresh.Rules[i].String())
		}
	}
	if len(shared.Rules) != len(want) {
		t.Fatalf("reused Result holds %d rules, fresh ones made %d", len(shared.Rules), len(want))
	}
	for i := range shared.Rules {
		if got := shared.Rules[i].String(); got != want[i] {
			t.Fatalf("rule %d changed after later compilations:\n got %s\nwant %s", i, got, want[i])
		}
	}
}
