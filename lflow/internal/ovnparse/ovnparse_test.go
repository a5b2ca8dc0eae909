package ovnparse

import (
	"context"
	"testing"
)

func TestVerdictsFromLog(t *testing.T) {
	ins := []Input{
		{Kind: Match, Text: "ip4"},
		{Kind: Match, Text: "a: parsing expression failed (b"},
		{Kind: Actions, Text: "drop; next;"},
		{Kind: Match, Text: "drop; next;"},
		{Kind: Match, Text: sentinel},
	}
	log := "2026-12-01T20:34:31Z|00001|vlog|INFO|opened log file\n" +
		"2026-12-01T20:34:31Z|00002|ovntrace|WARN|a: parsing expression failed (b: parsing expression failed (Syntax error at `:'.)\n" +
		"2026-12-01T20:34:31Z|00003|ovntrace|WARN|drop; next;: parsing actions failed (Syntax error at `next' expecting end of input.)\n" +
		"2026-12-01T20:34:31Z|00004|ovntrace|WARN|" + sentinel + ": parsing expression failed (Syntax error.)\n" +
		"2026-12-01T20:34:31Z|00005|ovntrace|WARN|microflow does not specify ingress port\n"
	got, err := verdicts(ins, log)
	if err != nil {
		t.Fatal(err)
	}
	want := []Verdict{{OK: true}, {Err: "Syntax error at `:'."}, {Err: "Syntax error at `next' expecting end of input."}, {OK: true}}
	if len(got) != len(want) {
		t.Fatalf("got %d verdicts, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%q: got %+v, want %+v", ins[i].Text, got[i], want[i])
		}
	}
	if _, err := verdicts(ins, "x|ovntrace|WARN|zzz: parsing actions failed (y)\n"); err == nil {
		t.Error("a failure for no input was not reported")
	}
}

// TestCheck runs the real ovn-trace on inputs whose verdicts every OVN
// gives.
func TestCheck(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	ins := []Input{
		{Kind: Match, Text: "ip4 && tcp.dst == 80"},
		{Kind: Match, Text: "ip4.src == $set4"},
		{Kind: Match, Text: "ip4.src == $nope"},
		{Kind: Match, Text: "inport == @pg1"},
		{Kind: Actions, Text: "next;"},
		{Kind: Actions, Text: "nxet;"},
	}
	got, err := Check(context.Background(), t.TempDir(), DefaultEnv(), ins)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range []bool{true, true, false, true, true, false} {
		if got[i].OK != ok || !ok && got[i].Err == "" {
			t.Errorf("%s %q: got %+v, want OK=%v", ins[i].Kind, ins[i].Text, got[i], ok)
		}
	}
}
