package lflow

import (
	"errors"
	"os"
	"strings"
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
	data, err := os.ReadFile("testdata/ovnparse/actions.txt")
	if err != nil {
		f.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			f.Add(l)
		}
	}
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

// FuzzCompile checks that no match and actions, however odd, make the
// compiler panic.
func FuzzCompile(f *testing.F) {
	for _, fl := range readCorpus(f) {
		f.Add(fl.Match, fl.Actions, uint8(fl.Table))
	}
	// Inequalities, which the corpus lacks.
	for _, m := range []string{
		"ip4 && tcp.dst != 80 && tcp.dst != 443 && tcp.dst != 22 && tcp.dst != 53 && tcp.dst != 8080 && tcp.dst != 8443 && tcp.dst != 3306",
		"!(tcp.dst == {80, 443, 8080}) && reg0[0..15] != 80 && reg0[16..31] != {1, 2}",
		"inport == @pg_web && ip4.src != $as_clients && tcp.dst != {80, 443} && ip6.src != {aef0::1, aef0::2}",
	} {
		f.Add(m, "ct_dnat(10.0.0.1, 1000-2000);", uint8(9))
	}
	st := testSymtab(f)
	env := newTestEnv(f, st)
	env.autoKeys = true
	c, err := NewCompiler(st, DefaultLayout())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, match, actions string, table uint8) {
		lf := Lflow{Pipeline: "ingress", Table: int(table % 40), Priority: 100, Match: match, Actions: actions}
		var res Result
		_ = c.Compile(&lf, &Context{Env: env, Datapath: 1}, &res)
		for i := range res.Rules {
			if err := res.Rules[i].Validate(); err != nil {
				t.Fatalf("%q / %q: invalid rule: %v", match, actions, err)
			}
		}
	})
}
