package flow

import (
	"strings"
	"testing"
)

func TestLearnRoundTrip(t *testing.T) {
	for _, s := range []string{
		"learn(table=78,priority=100,idle_timeout=30,match:0x800->eth_type,match:nw_src->nw_src,match:reg0->nw_dst,load:0xa000002->reg4,load:tp_dst->reg8[0..15],load:0x1->reg10[14])",
		"learn(table=5,priority=0,hard_timeout=7,cookie=0x9,match:metadata->metadata)",
		"push:reg0,pop:reg1[0..7],check_pkt_larger(1500)->reg9[1]",
	} {
		as, err := ParseActions(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if err := ValidateActions(0, as); err != nil {
			t.Errorf("%s: %v", s, err)
		}
		if got := ActionsString(as); got != s {
			t.Errorf("printed as\n%s\nwant\n%s", got, s)
		}
	}
	for _, tt := range []struct{ s, err string }{
		{"learn(table=255,priority=1)", "out of range"},
		{"learn(table=5,match:nw_src->reg0[0..7])", "widths differ"},
		{"learn(table=5,load:0x1->eth_type)", "read-only"},
		{"learn(table=5,load:0x1ff->reg0[0..7])", "does not fit"},
		{"learn(table=5,nosuch)", "expected match"},
		{"learn(table=x)", "table"},
	} {
		as, err := ParseActions(tt.s)
		if err == nil {
			err = ValidateActions(0, as)
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: error %v, want one saying %q", tt.s, err, tt.err)
		}
	}
}

func TestLearnRule(t *testing.T) {
	as, err := ParseActions("learn(table=5,priority=9,match:0x800->eth_type,match:nw_src->nw_src,load:reg0[0..15]->reg8[0..15])")
	if err != nil {
		t.Fatal(err)
	}
	r := as[0].(Learn).Rule([]U128{{Lo: 0x800}, {Lo: 0x0a000001}, {Lo: 80}})
	if got, want := r.String(), "cookie=0x0, table=5, priority=9,eth_type=0x800,nw_src=10.0.0.1, actions=load:0x50->reg8[0..15]"; got != want {
		t.Errorf("rule %s, want %s", got, want)
	}
}
