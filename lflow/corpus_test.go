package lflow

import (
	"os"
	"testing"
)

// readCorpus reads the reference lflow-list (a copy of
// shared/reference/lflows-a.txt, made by the real ovn-northd 23.03).
func readCorpus(t testing.TB) []ListedFlow {
	t.Helper()
	f, err := os.Open("../testdata/reference/lflows-a.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flows, errs, err := ReadListing(f)
	if err != nil || len(errs) > 0 {
		t.Fatalf("reading corpus: %v %v", err, errs)
	}
	return flows
}

func TestCorpusMatches(t *testing.T) {
	st := testSymtab(t)
	env := newTestEnv(t, st)
	flows := readCorpus(t)
	if len(flows) != 687 {
		t.Fatalf("corpus has %d flows, want 687", len(flows))
	}
	for _, fl := range flows {
		e, err := st.ParseExpr(fl.Match)
		if err != nil {
			t.Errorf("line %d: match %q: %v", fl.Line, fl.Match, err)
			continue
		}
		printed := ExprString(e)
		e2, err := st.ParseExpr(printed)
		if err != nil {
			t.Errorf("line %d: reparsing %q: %v", fl.Line, printed, err)
			continue
		}
		if again := ExprString(e2); again != printed {
			t.Errorf("line %d: unstable print: %q then %q", fl.Line, printed, again)
		}
		n1, err := st.Normalize(e, env)
		if err != nil {
			t.Errorf("line %d: normalizing %q: %v", fl.Line, fl.Match, err)
			continue
		}
		n2, err := st.Normalize(e2, env)
		if err != nil || n1.String() != n2.String() {
			t.Errorf("line %d: reparsed match normalizes differently: %v", fl.Line, err)
		}
	}
}
