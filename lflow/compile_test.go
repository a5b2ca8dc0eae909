package lflow

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/govn/govn/datapath/flow"
)

func testCompiler(t testing.TB) (*Symtab, *Compiler) {
	t.Helper()
	st := testSymtab(t)
	c, err := NewCompiler(st, DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	return st, c
}

func parseCompileCase(t *testing.T, text string) Lflow {
	t.Helper()
	parts := strings.SplitN(text, "|", 3)
	if len(parts) != 3 {
		t.Fatalf("bad case %q", text)
	}
	head := strings.Fields(parts[0])
	if len(head) != 3 {
		t.Fatalf("bad case head %q", parts[0])
	}
	table, err1 := strconv.Atoi(head[1])
	prio, err2 := strconv.Atoi(head[2])
	if err1 != nil || err2 != nil {
		t.Fatalf("bad case head %q", parts[0])
	}
	return Lflow{Pipeline: head[0], Table: table, Priority: prio,
		Match: strings.TrimSpace(parts[1]), Actions: strings.TrimSpace(parts[2])}
}

func TestCompileGolden(t *testing.T) {
	st, c := testCompiler(t)
	env := newTestEnv(t, st)
	var sb strings.Builder
	for _, tc := range readCases(t, "testdata/compile.txt") {
		lf := parseCompileCase(t, tc[1])
		ctx := &Context{Env: env, Datapath: 5, NextConjID: 1, NextGroupID: 1}
		var res Result
		if err := c.Compile(&lf, ctx, &res); err != nil {
			t.Fatalf("%s: %v", tc[0], err)
		}
		fmt.Fprintf(&sb, "## %s: %s\n%d rules, %d groups\n", tc[0], tc[1], len(res.Rules), len(res.Groups))
		for i := range res.Rules {
			r := &res.Rules[i]
			if err := r.Validate(); err != nil {
				t.Errorf("%s: rule %d invalid: %v", tc[0], i, err)
			}
			if i == 8 && len(res.Rules) > 12 {
				fmt.Fprintf(&sb, "... %d more ...\n", len(res.Rules)-10)
				continue
			}
			if i > 8 && i < len(res.Rules)-2 {
				continue
			}
			sb.WriteString(formatRule(r))
			sb.WriteByte('\n')
		}
		for _, g := range res.Groups {
			fmt.Fprintf(&sb, "group %d:", g.ID)
			for _, b := range g.Buckets {
				fmt.Fprintf(&sb, " bucket(weight=%d, %v)", b.Weight, formatActions(b.Actions))
			}
			sb.WriteByte('\n')
		}
		sb.WriteByte('\n')
	}
	checkGolden(t, "compile.golden", sb.String())
}

func TestCompileConjunctionCount(t *testing.T) {
	st, c := testCompiler(t)
	env := newTestEnv(t, st)
	lf := Lflow{Pipeline: "ingress", Table: 8, Priority: 1000, Match: "ip4.src == $as1000 && inport == @pg10", Actions: "next;"}
	ctx := &Context{Env: env, Datapath: 1, NextConjID: 7}
	var res Result
	if err := c.Compile(&lf, ctx, &res); err != nil {
		t.Fatal(err)
	}
	// 1,000 address clauses + 10 port clauses + 1 conj_id rule.
	if len(res.Rules) != 1011 {
		t.Errorf("got %d rules, want 1011", len(res.Rules))
	}
	if ctx.NextConjID != 8 {
		t.Errorf("conjunction ids not advanced: %d", ctx.NextConjID)
	}
}

func TestCompileCorpus(t *testing.T) {
	st, c := testCompiler(t)
	env := newTestEnv(t, st)
	env.autoKeys = true
	unsupported := map[string]int{}
	rules := 0
	for _, fl := range readCorpus(t) {
		lf := Lflow{Pipeline: fl.Pipeline, Table: fl.Table, Priority: fl.Priority, Match: fl.Match, Actions: fl.Actions}
		ctx := &Context{Env: env, Datapath: 1, NextConjID: 1, NextGroupID: 1}
		var res Result
		err := c.Compile(&lf, ctx, &res)
		var ue *UnsupportedError
		if errors.As(err, &ue) {
			unsupported[ue.Action]++
			continue
		}
		if err != nil {
			t.Errorf("line %d: %v\n  match=(%s) action=(%s)", fl.Line, err, fl.Match, fl.Actions)
			continue
		}
		for i := range res.Rules {
			if err := res.Rules[i].Validate(); err != nil {
				t.Errorf("line %d: rule %s: %v", fl.Line, formatRule(&res.Rules[i]), err)
			}
		}
		rules += len(res.Rules)
	}
	t.Logf("%d rules; unsupported actions: %v", rules, unsupported)
}

func TestCompileRouterZone(t *testing.T) {
	st, c := testCompiler(t)
	env := newTestEnv(t, st)
	lf := Lflow{Pipeline: "ingress", Table: 4, Match: "ip", Actions: "ct_next;"}
	for _, tc := range []struct {
		router bool
		want   string
	}{{false, "reg13"}, {true, "reg11"}} {
		var res Result
		if err := c.Compile(&lf, &Context{Env: env, Router: tc.router}, &res); err != nil {
			t.Fatal(err)
		}
		ct, ok := res.Rules[0].Actions[0].(flow.CT)
		if !ok || ct.ZoneField.Field.String() != tc.want {
			t.Errorf("router=%v: got %v, want zone in %s", tc.router, res.Rules[0].Actions, tc.want)
		}
	}
}

// ovn-northd 23.03 sets flags.force_snat_for_lb (or skip_snat_for_lb)
// before ct_lb_mark rather than giving it force_snat: the committed
// connection's ct_mark records the choice either way, which the
// connection's later packets are matched on (ct_mark.force_snat).
func TestCompileLBSNATFlags(t *testing.T) {
	st, c := testCompiler(t)
	env := newTestEnv(t, st)
	for _, tc := range []struct{ actions, want string }{
		{"ct_lb_mark(backends=10.0.0.1:80);", "exec(load:0x1->ct_mark[1])"},
		{"flags.force_snat_for_lb = 1; ct_lb_mark(backends=10.0.0.1:80);", "exec(load:0x1->ct_mark[1],load:0x1->ct_mark[3])"},
		{"ct_lb_mark(backends=10.0.0.1:80; force_snat);", "exec(load:0x1->ct_mark[1],load:0x1->ct_mark[3])"},
		{"flags.skip_snat_for_lb = 1; ct_lb_mark(backends=10.0.0.1:80);", "exec(load:0x1->ct_mark[1],load:0x1->ct_mark[2])"},
		{"flags.force_snat_for_lb = 0; ct_lb_mark(backends=10.0.0.1:80);", "exec(load:0x1->ct_mark[1])"},
	} {
		var res Result
		lf := Lflow{Pipeline: "ingress", Table: 7, Match: "ip4", Actions: tc.actions}
		if err := c.Compile(&lf, &Context{Env: env, Router: true, NextGroupID: 1}, &res); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(res.Groups[0].Buckets[0].Actions); !strings.Contains(got, tc.want) {
			t.Errorf("%s: bucket %s, want %s", tc.actions, got, tc.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	st, c := testCompiler(t)
	env := newTestEnv(t, st)
	tests := []struct {
		lf   Lflow
		want string
	}{
		{Lflow{Pipeline: "ingress", Table: 1, Match: "1", Actions: "icmp4.frag_mtu = 1500;"}, "can only be set inside"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "1", Actions: "outport = \"nowhere\"; output;"}, "unknown logical port \"nowhere\""},
		{Lflow{Pipeline: "sideways", Table: 1, Match: "1", Actions: "next;"}, "unknown pipeline"},
		{Lflow{Pipeline: "egress", Table: 250, Match: "1", Actions: "next;"}, "outside the datapath's tables"},
		{Lflow{Pipeline: "ingress", Table: 1, Priority: 70000, Match: "1", Actions: "next;"}, "priority 70000 out of range"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "ip4.src == $nope", Actions: "next;"}, "unknown address set $nope"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "1", Actions: "set_meter(0);"}, "rate above 0"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "1", Actions: "set_meter(100, 2, 3);"}, "expected ')'"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "1", Actions: "set_meter(99999999999);"}, "out of range"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "1", Actions: "set_meter(rate=5);"}, "expected ')'"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "1", Actions: "set_queue(1);"}, "set_queue is not supported"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "tcp.dst ==", Actions: "next;"}, "match: at offset 10"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "ip4", Actions: "ct_lb_mark(backends=10.0.0.1:99999);"}, "expected a port number"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "ip4", Actions: "ct_dnat(10.0.0.1, 65536);"}, "cannot start at port 0"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "ip4", Actions: "ct_snat(10.0.0.1, 2000-1000);"}, "port range 2000-1000 of ct_snat does not go up"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "ip4", Actions: "ct_dnat(10.0.0.9-10.0.0.1);"}, "expected ')', found \"-\""},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "ip", Actions: "ct_snat(10.0.0.1/24);"}, "takes an IPv4 or IPv6 address"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "ip4", Actions: "ct_dnat(10.0.0.1 10.0.0.2);"}, "expected ')'"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "ip4", Actions: "ct_dnat(80);"}, "takes an IPv4 or IPv6 address"},
		{Lflow{Pipeline: "ingress", Table: 1, Match: "1", Actions: "next"}, "actions: at offset 4"},
	}
	for _, tt := range tests {
		ctx := &Context{Env: env, Datapath: 1}
		var res Result
		err := c.Compile(&tt.lf, ctx, &res)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: got %v, want %q", tt.lf, err, tt.want)
		}
	}
}

// TestCompileAllocs keeps an allocation budget on the hot path: a typical
// ACL-like flow must compile in a bounded number of allocations.
func TestCompileAllocs(t *testing.T) {
	st, c := testCompiler(t)
	env := newTestEnv(t, st)
	lf := Lflow{Pipeline: "ingress", Table: 8, Priority: 1000,
		Match: "ip4 && ip4.dst == 10.0.0.5 && tcp.dst == 80 && ct.new", Actions: "reg0[1] = 1; next;"}
	ctx := &Context{Env: env, Datapath: 1}
	var res Result
	allocs := testing.AllocsPerRun(100, func() {
		res.Rules = res.Rules[:0]
		if err := c.Compile(&lf, ctx, &res); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 20 {
		t.Errorf("compile took %.0f allocations, budget 20", allocs)
	}
	t.Logf("%.0f allocations", allocs)
}
