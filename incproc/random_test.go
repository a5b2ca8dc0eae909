package incproc_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestRandomSequences drives random graphs through random sequences of
// changes, cancels (by handlers, by Computes, by recompute not being
// allowed, by the context), errors and forced recomputes, and checks
// after every completed run that every node equals a fresh compute and
// that every output node's committed changes equal its data. The seeds are
// fixed; a failure prints the transcript that reproduces it.
func TestRandomSequences(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			randomSequence(t, seed, 300)
		})
	}
}

func randomSequence(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0x1ac))
	h := newHarness()
	var script []string
	do := func(line string) []string {
		script = append(script, line)
		return h.do(t, line)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s\ntranscript:\n%s", seed, fmt.Sprintf(format, args...), strings.Join(script, "\n"))
	}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }

	var inputs, derived, all []string
	for i := range 2 + rng.IntN(3) {
		name := fmt.Sprintf("in%d", i)
		do("add-input " + name)
		inputs = append(inputs, name)
		all = append(all, name)
	}
	type edge struct{ node, input string }
	var edges []edge
	for i := range 4 + rng.IntN(6) {
		name := fmt.Sprintf("n%d", i)
		line := "add-node " + name
		seen := map[string]bool{}
		for range 1 + rng.IntN(3) {
			in := pick(all)
			if seen[in] {
				continue
			}
			seen[in] = true
			mode := pick([]string{"ok", "ok", "ok", "none", "unhandled"})
			line += " " + in + ":" + mode
			if mode != "none" {
				edges = append(edges, edge{name, in})
			}
		}
		do(line)
		derived = append(derived, name)
		all = append(all, name)
	}
	if got := do("run"); !strings.HasPrefix(got[len(got)-1], "done:") {
		fail("first run: %v", got)
	}

	for range steps {
		switch x := rng.IntN(100); {
		case x < 45:
			leaf := pick(inputs)
			line := "feed " + leaf
			for range 1 + rng.IntN(3) {
				k := fmt.Sprintf("k%d", rng.IntN(6))
				if rng.IntN(4) == 0 {
					line += " " + k + "=-"
				} else {
					line += fmt.Sprintf(" %s=%d", k, rng.IntN(5))
				}
			}
			do(line)
		case x < 55 && len(edges) > 0:
			e := edges[rng.IntN(len(edges))]
			do(fmt.Sprintf("set-handler %s %s %s", e.node, e.input,
				pick([]string{"ok", "ok", "ok", "unhandled", "cancel", "error"})))
		case x < 60:
			do(fmt.Sprintf("set-compute %s %s", pick(derived), pick([]string{"ok", "ok", "ok", "cancel", "error"})))
		case x < 62:
			do("force-recompute")
		default:
			line := "run"
			switch rng.IntN(10) {
			case 0, 1:
				line += " no-recompute"
			case 2:
				line += " stop-after=" + pick(derived)
			case 3:
				line += " recompute"
			}
			got := do(line)
			if strings.HasPrefix(got[len(got)-1], "done:") {
				if got := do("check"); len(got) != 1 || got[0] != "ok" {
					fail("after a completed run: %s", strings.Join(got, "\n"))
				}
			}
		}
	}
	// Let every node succeed; the next run must complete and catch up.
	for _, e := range edges {
		do(fmt.Sprintf("set-handler %s %s ok", e.node, e.input))
	}
	for _, n := range derived {
		do("set-compute " + n + " ok")
	}
	if got := do("run"); !strings.HasPrefix(got[len(got)-1], "done:") {
		fail("final run: %v", got)
	}
	if got := do("check"); len(got) != 1 || got[0] != "ok" {
		fail("final check: %s", strings.Join(got, "\n"))
	}
	if got := do("needs-run"); got[0] != "false" {
		fail("needs-run after a completed run: %v", got)
	}
}

// FuzzSequences explores more seeds (and lengths) of TestRandomSequences.
func FuzzSequences(f *testing.F) {
	f.Add(uint64(0), uint16(100))
	f.Fuzz(func(t *testing.T, seed uint64, steps uint16) {
		randomSequence(t, seed, int(steps%500))
	})
}
