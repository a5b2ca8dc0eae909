package lflow

import (
	"errors"
	"testing"
)

// addCorpusSeeds seeds a fuzz target with the reference corpus.
func addCorpusSeeds(f *testing.F, pick func(ListedFlow) string) {
	for _, fl := range readCorpus(f) {
		f.Add(pick(fl))
	}
}

func FuzzLexer(f *testing.F) {
	addCorpusSeeds(f, func(fl ListedFlow) string { return fl.Match + " " + fl.Actions })
	f.Fuzz(func(t *testing.T, s string) {
		l := NewLexer(s)
		last := -1
		for i := 0; ; i++ {
			tok := l.Next()
			if tok.Kind == TokEOF {
				break
			}
			if tok.Pos <= last || tok.Pos > len(s) {
				t.Fatalf("token %d at %d does not advance (last %d)", i, tok.Pos, last)
			}
			last = tok.Pos
		}
		var se *SyntaxError
		if err := l.Err(); err != nil && (!errors.As(err, &se) || se.Msg == "" || se.Pos < 0 || se.Pos > len(s)) {
			t.Fatalf("bad error %v", err)
		}
	})
}

func FuzzParseExpr(f *testing.F) {
	addCorpusSeeds(f, func(fl ListedFlow) string { return fl.Match })
	st := testSymtab(f)
	env := newTestEnv(f, st)
	f.Fuzz(func(t *testing.T, s string) {
		e, err := st.ParseExpr(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		printed := ExprString(e)
		e2, err := st.ParseExpr(printed)
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", s, printed, err)
		}
		if p2 := ExprString(e2); p2 != printed {
			t.Fatalf("unstable print: %q then %q", printed, p2)
		}
		// Normalization must not panic; "too complex" is a fine answer.
		_, _ = st.Normalize(e, env)
	})
}

func FuzzParseActions(f *testing.F) {
	addCorpusSeeds(f, func(fl ListedFlow) string { return fl.Actions })
	st := testSymtab(f)
	f.Fuzz(func(t *testing.T, s string) {
		acts, err := st.ParseActions(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		printed := ActionsString(acts)
		again, err := st.ParseActions(printed)
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", s, printed, err)
		}
		if p2 := ActionsString(again); p2 != printed {
			t.Fatalf("unstable print: %q then %q", printed, p2)
		}
	})
}
