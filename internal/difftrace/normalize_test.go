package difftrace

import (
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	marks := map[int64]string{raOptsMark: `addr_mode = "slaac", prefix = aef0::/64`}
	for _, tc := range []struct{ name, header, minimal, want string }{
		{"registers dropped, packet kept", "# tcp,reg14=0x1,metadata=0x2,dl_src=0a:00:00:00:00:01",
			"ct_lb {\n    reg0[6] = 0;\n    flags.loopback = 1;\n    eth.dst <-> eth.src;\n    output(\"p1\");\n};",
			"# tcp,dl_src=0a:00:00:00:00:01\nct_lb {\n    eth.dst <-> eth.src;\n    output(\"p1\");\n};"},
		{"register operand becomes REG", "#", "eth.src = xreg0[0..47];\nreg1 <-> reg2;", "#\neth.src = REG;"},
		{"nd_na_router marker", "#", "nd_na {\n    pkt.mark = 4261412864;\n    output(\"p\");\n};", "#\nnd_na_router {\n    output(\"p\");\n};"},
		{"put_nd_ra_opts marker", "#", "    pkt.mark = 4261412865;", "#\n    put_nd_ra_opts(addr_mode = \"slaac\", prefix = aef0::/64);"},
		{"other pkt.mark kept", "#", "pkt.mark = 1234;", "#\npkt.mark = 1234;"},
		{"select id", "#", "select: reg8[16..31] = 2 {", "#\nselect: REG = ID {"},
		{"uuid and generated names", "#", `LOG: ACL name=4f9f9f10-a071-49f0-9808-7af4f8626882, $_rtr_lb_12_ip4`, "#\nLOG: ACL name=UUID, $_rtr_lb_N_ip4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := normalize(traceText{header: tc.header, minimal: tc.minimal}, marks)
			if got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestRewriteActions(t *testing.T) {
	marks := map[string]int64{}
	mark := func(o string) int64 {
		if _, ok := marks[o]; !ok {
			marks[o] = raOptsMark + int64(len(marks))
		}
		return marks[o]
	}
	for _, tc := range []struct{ in, want string }{
		{"nd_na_router { eth.src = 00:00:00:00:ff:01; output; };", "nd_na { pkt.mark = 4261412864; eth.src = 00:00:00:00:ff:01; output; };"},
		{`reg0[5] = put_nd_ra_opts(addr_mode = "slaac", slla = 00:00:00:00:ff:01, prefix = aef0::/64); next;`, "reg0[5] = 1; pkt.mark = 4261412865; next;"},
		{`reg0[5] = put_nd_ra_opts(dnssl = "a(b)", mtu = 1450); next;`, "reg0[5] = 1; pkt.mark = 4261412866; next;"},
		{"next;", "next;"},
		{"x = put_nd_ra_opts(unbalanced", "x = put_nd_ra_opts(unbalanced"},
	} {
		got, changed := rewriteActions(tc.in, mark)
		if got != tc.want || changed != (tc.in != tc.want) {
			t.Errorf("rewriteActions(%q) = %q, %v; want %q", tc.in, got, changed, tc.want)
		}
	}
	if marks[`dnssl = "a(b)", mtu = 1450`] == 0 {
		t.Errorf("options with a quoted parenthesis not recorded: %v", marks)
	}
}

func TestRandomChoices(t *testing.T) {
	c := randomChoices("    ct_lb_mark(backends=10.0.0.11:80,[aef0::1]:80; hash_fields=\"ip_src\");\n    reg8[16..31] = select(1, 2=50);\n")
	if got := strings.Join(c.backends[0], " "); got != "10.0.0.11:80 [aef0::1]:80" {
		t.Errorf("backends %q", got)
	}
	if got := strings.Join(c.selects[0], " "); got != "1 2" {
		t.Errorf("select ids %q", got)
	}
	if !randomChoices("output;").none() {
		t.Error("choices in a trace without any")
	}
}

// FuzzNormalize: the normalizer and the action rewriter take any text
// without panicking, and normalizing is idempotent on its own output's
// trace lines.
func FuzzNormalize(f *testing.F) {
	f.Add("# tcp,reg14=0x1", "nd_na {\n    pkt.mark = 4261412864;\n};", `x = put_nd_ra_opts(a = "(", b); next;`)
	f.Fuzz(func(t *testing.T, header, minimal, actions string) {
		once := normalize(traceText{header: header, minimal: minimal}, map[int64]string{raOptsMark: "o"})
		rewriteActions(actions, func(string) int64 { return raOptsMark })
		h, body, _ := strings.Cut(once, "\n")
		if twice := normalize(traceText{header: h, minimal: body}, nil); twice != once && !strings.Contains(minimal, "pkt.mark") {
			t.Errorf("not idempotent:\n%q\n%q", once, twice)
		}
	})
}
