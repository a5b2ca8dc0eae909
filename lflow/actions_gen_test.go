package lflow

import (
	"fmt"
	"math/rand/v2"

	"github.com/govn/govn/lflow/internal/ovnparse"
)

// generateActions returns actions built from the symbol table for
// TestDifferentialParser: every field assigned a constant, itself, pushed
// and popped, inside and outside ct_commit { }, and every function with a
// result stored into fields of several widths and kinds, so that
// writability, scopes and widths are compared with OVN for each symbol.
func generateActions(st *Symtab) []ovnparse.Input {
	var ins []ovnparse.Input
	add := func(format string, args ...any) {
		ins = append(ins, ovnparse.Input{Kind: ovnparse.Actions, Text: fmt.Sprintf(format, args...), Where: "generated action"})
	}
	for _, s := range st.Symbols() {
		if s.Kind == KindPredicate {
			add("%s = 1;", s.Name)
			add("reg0[0] = %s;", s.Name)
			continue
		}
		v := "0"
		if s.Kind == KindString {
			v = `"p1"`
		}
		add("%s = %s;", s.Name, v)
		add("ct_commit { %s = %s; };", s.Name, v)
		add("%s = %s;", s.Name, s.Name)
		add("%s <-> %s;", s.Name, s.Name)
		add("push(%s); pop(%s);", s.Name, s.Name)
	}
	results := []string{"reg0", "reg0[0]", "reg0[0..15]", "xxreg0[0..31]", "outport", "eth.type", "ct_mark.blocked", "icmp4.frag_mtu"}
	calls := []string{
		"check_pkt_larger(1500)", "chk_lb_hairpin()", "chk_lb_hairpin_reply()", "check_in_port_sec()",
		"check_out_port_sec()", "chk_ecmp_nh_mac()", "chk_ecmp_nh()", "chk_lb_aff()", "dns_lookup()",
		"lookup_arp(inport, arp.spa, arp.sha)", "lookup_arp_ip(inport, arp.spa)", "lookup_nd(inport, nd.target, nd.tll)",
		"lookup_nd_ip(inport, ip6.src)", "get_fdb(eth.dst)", "lookup_fdb(inport, eth.src)", "select(1, 2)",
		"put_dhcp_opts(offerip = 10.0.0.4)", "put_dhcpv6_opts()",
		`put_nd_ra_opts(addr_mode = "dhcpv6_stateful", slla = 00:00:00:00:10:02)`,
	}
	for _, r := range results {
		for _, c := range calls {
			add("%s = %s;", r, c)
		}
	}
	// Arguments of several widths and kinds where a field is expected.
	for _, f := range []string{"inport", "reg0", "reg0[0..15]", "eth.src", "xxreg0", "ip6.dst", "arp.tha", "ct_label"} {
		add("get_arp(outport, %s);", f)
		add("get_nd(outport, %s);", f)
		add("put_arp(%s, arp.spa, arp.sha);", f)
		add("put_nd(inport, %s, eth.src);", f)
		add("put_fdb(inport, %s);", f)
		add("handle_svc_check(%s);", f)
		add(`bind_vport("p1", %s);`, f)
		add("reg0[0] = lookup_fdb(%s, eth.src);", f)
	}
	return ins
}

// mutateActions returns n variants of the given actions, each with one
// token deleted, doubled, replaced by a token from a small pool or swapped
// with the next one (the rest of the text, spacing included, unchanged),
// by a generator seeded with seed: near misses of valid actions, where a
// parser is most likely to accept what it should refuse.
func mutateActions(base []string, seed uint64, n int) []ovnparse.Input {
	pool := []string{",", ";", ")", "(", "=", "{", "}", "[", "]", "-", "/", "..", "1", "0", `"x"`,
		"reg0", "reg0[0]", "inport", "eth.src", "10.0.0.1", "fe80::1", "00:00:00:00:00:01", "65536", "0x10",
		"2147483648"}
	r := rand.New(rand.NewPCG(seed, 0))
	seen := map[string]bool{}
	for _, b := range base {
		seen[b] = true
	}
	var ins []ovnparse.Input
	for tries := 0; len(ins) < n && tries < 20*n; tries++ {
		s := base[r.IntN(len(base))]
		// Token boundaries: each token runs from its start to the next
		// token's start, so that spacing moves with it.
		var starts []int
		l := NewLexer(s)
		for t := l.Next(); t.Kind != TokEOF; t = l.Next() {
			starts = append(starts, t.Pos)
		}
		if l.Err() != nil || len(starts) < 2 {
			continue
		}
		starts = append(starts, len(s))
		i := r.IntN(len(starts) - 1)
		tok := s[starts[i]:starts[i+1]]
		var m string
		switch r.IntN(4) {
		case 0:
			m = s[:starts[i]] + s[starts[i+1]:]
		case 1:
			m = s[:starts[i+1]] + tok + s[starts[i+1]:]
		case 2:
			m = s[:starts[i]] + pool[r.IntN(len(pool))] + " " + s[starts[i+1]:]
		default:
			if i+2 >= len(starts) {
				continue
			}
			m = s[:starts[i]] + s[starts[i+1]:starts[i+2]] + tok + s[starts[i+2]:]
		}
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		ins = append(ins, ovnparse.Input{Kind: ovnparse.Actions, Text: m, Where: fmt.Sprintf("mutated action #%d", len(ins))})
	}
	return ins
}
