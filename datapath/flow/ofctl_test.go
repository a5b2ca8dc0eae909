package flow

import (
	"errors"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// ofctlRules are rules in ovs-ofctl's syntax that TestParseRuleAgainstOfctl
// gives both to the real ovs-ofctl and to ParseRule: defaults, fields and
// their aliases, masks, prerequisites, actions, and bad values.
var ofctlRules = []string{
	// Defaults: table 0, priority 32768, cookie 0, no timeouts.
	"actions=drop",
	"in_port=1 actions=output:2",
	"priority=0,in_port=1 actions=drop",
	"priority=65535 actions=drop",
	"priority=32768 actions=drop",
	"table=5,priority=10,cookie=0xabc actions=drop",
	"cookie=0x1234567890abcdef actions=drop",
	"idle_timeout=0,hard_timeout=0 actions=drop",
	"in_port=1 priority=7 table=2 actions=drop",
	// Fields, aliases and masks.
	"dl_src=00:11:22:33:44:55,dl_dst=66:77:88:99:aa:bb actions=drop",
	"eth_src=00:11:22:33:44:55/ff:ff:ff:00:00:00 actions=drop",
	"eth_dst=01:00:00:00:00:00/01:00:00:00:00:00 actions=drop",
	"eth_type=0x0800 actions=drop",
	"dl_type=0x86dd actions=drop",
	"ip,nw_src=10.0.0.0/8,nw_dst=192.168.1.1 actions=drop",
	"ip,nw_src=10.0.0.0/255.0.255.0 actions=drop",
	"ip,ip_dst=10.1.0.0/16 actions=drop",
	"tcp,tp_src=1024,tp_dst=80 actions=drop",
	"tcp,tcp_dst=0x50/0xfff0 actions=drop",
	"udp,udp_src=53 actions=drop",
	"udp,tcp_dst=80 actions=drop",
	"sctp,sctp_dst=5000 actions=drop",
	"tcp6,tp_dst=443 actions=drop",
	"ipv6,nw_proto=6,tp_dst=80 actions=drop",
	"icmp,icmp_type=8,icmp_code=0 actions=drop",
	"ipv6,ipv6_src=fd00::/64,ipv6_dst=fd00::1 actions=drop",
	"icmp6,icmp_type=135,nd_target=fd00::5 actions=drop",
	"icmp6,icmpv6_type=136,nd_target=fd00::5,nd_tll=00:00:00:00:00:01 actions=drop",
	"arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/24,arp_sha=00:00:00:00:00:01 actions=drop",
	"arp,nw_src=10.0.0.1 actions=drop",
	"arp,nw_proto=2 actions=drop",
	"rarp,arp_op=3 actions=drop",
	"ip,nw_tos=0x10,nw_ttl=64,nw_ecn=1 actions=drop",
	"ipv6,nw_ttl=5,ipv6_label=0x5 actions=drop",
	"reg0=0x1,reg15=0xffffffff actions=drop",
	"reg3=0x10/0xf0 actions=drop",
	"xreg1=0x1 actions=drop",
	"xxreg0=0x1000000000000000000000000000002 actions=drop",
	"metadata=0x5 actions=drop",
	"tun_id=0x10,tun_src=1.1.1.1,tun_dst=2.2.2.2 actions=drop",
	"ct_state=+trk+est-new actions=drop",
	"ct_state=+trk,ct_zone=5,ct_mark=0x1/0x1 actions=drop",
	"ct_label=0x1 actions=drop",
	"ip,ct_state=+trk-inv,ct_nw_src=10.0.0.1,ct_nw_proto=6,ct_tp_dst=80 actions=drop",
	"ipv6,ct_state=+trk-inv,ct_ipv6_dst=fd00::1 actions=drop",
	"pkt_mark=0x5 actions=drop",
	"tcp,tcp_flags=0x2/0x12 actions=drop",
	"conj_id=7 actions=drop",
	"recirc_id=0x5 actions=drop",
	"dp_hash=0x5/0xf actions=drop",
	// Prerequisites missing: ovs-ofctl drops the field or refuses the
	// rule; ParseRule refuses it.
	"tp_dst=80 actions=drop",
	"nw_src=10.0.0.1 actions=drop",
	"arp_op=1 actions=drop",
	"ip,tcp_dst=80 actions=drop",
	"ipv6,nw_src=10.0.0.1 actions=drop",
	"icmp6,nd_target=fd00::1 actions=drop",
	"icmp6,icmp_type=135,nd_tll=00:00:00:00:00:01 actions=drop",
	"ip,icmp_type=8 actions=drop",
	"udp,tcp_flags=+syn actions=drop",
	"nw_proto=6 actions=drop",
	"ip,ipv6_label=5 actions=drop",
	"ip,ct_state=+trk,ct_nw_src=10.0.0.1 actions=drop",
	"ct_state=+trk-inv,ct_nw_src=10.0.0.1 actions=drop",
	"ip,ct_state=+trk-inv,ct_tp_dst=80 actions=drop",
	// Bad values.
	"priority=65536 actions=drop",
	"tcp,tp_dst=70000 actions=drop",
	"ip,nw_src=10.0.0.0/33 actions=drop",
	"table=256 actions=drop",
	"in_port=1",
	"nosuch=1 actions=drop",
	// Actions.
	"actions=output:1,output:2",
	"actions=in_port",
	"actions=output:reg15",
	"actions=resubmit(,3)",
	"actions=resubmit(1,3)",
	"table=1 actions=goto_table:4",
	"actions=load:0x1->reg10[3]",
	"actions=load:0x5->reg1",
	"actions=load:0x1->NXM_NX_REG0[1]",
	"actions=set_field:00:00:00:00:00:01->eth_dst",
	"ip actions=set_field:10.0.0.1->nw_dst",
	"ipv6 actions=set_field:fd00::1->ipv6_src",
	"ip actions=load:0xa000001->nw_dst",
	"tcp actions=set_field:80->tp_dst",
	"actions=move:reg0[0..15]->reg1[16..31]",
	"actions=move:eth_src->eth_dst",
	"ip actions=move:nw_src->reg0",
	"ip actions=ct(commit,zone=5)",
	"ipv6 actions=ct(commit)",
	"ip actions=ct(nat)",
	"ip actions=ct(commit,zone=reg13[0..15],table=5,nat(dst=10.0.0.1-10.0.0.3:80-81,random),exec(load:0x1->ct_mark[1]))",
	"ip actions=ct(commit,exec(set_field:0x1->ct_label))",
	"tcp,nw_dst=10.0.0.1 actions=ct(commit,nat(src=10.0.0.2)),output:1",
	"actions=ct_clear",
	"actions=clone(push_vlan:0x8100,output:3)",
	"actions=push_vlan:0x8100,set_field:0x1005->vlan_tci",
	"actions=pop_vlan,output:1",
	"ip actions=dec_ttl",
	"actions=controller(pause,userdata=00.00.00.01)",
	"actions=group:4",
	"actions=conjunction(7,1/2)",
	"actions=check_pkt_larger(1500)->reg9[1]",
	"actions=push:reg0,pop:reg1",
	"actions=exit",
	// Actions ovs-ofctl refuses.
	"actions=set_field:10.0.0.1->nw_dst",
	"actions=load:0x50->tp_dst",
	"actions=move:nw_src->reg0",
	"actions=ct(commit,zone=5)",
	"actions=ct(table=3)",
	"ip actions=set_field:0x1->ct_mark",
	"actions=set_field:5->ct_zone",
	"actions=load:0x1->ct_state",
	"actions=move:reg0->reg1[0..15]",
	"actions=load:0x10000->reg0[0..15]",
	"actions=output:reg99",
	"actions=conjunction(7,3/2)",
	"table=3 actions=goto_table:2",
	"actions=drop,output:1",
	"actions=output:1,drop",
	"actions=frobnicate",
}

// TestParseRuleAgainstOfctl gives each of ofctlRules to the real
// ovs-ofctl parse-flow and to ParseRule. Where ovs-ofctl refuses a rule
// (or only its decoding does, as ovs-vswitchd would), or drops a field
// whose prerequisites are missing ("normalization changed ofp_match"),
// ParseRule must refuse it. Where ovs-ofctl accepts it, ParseRule must
// accept it, and ParseRule's reading of ovs-ofctl's normalized output,
// with every default made explicit, must be the rule ParseRule read from
// the original text: same table, priority, cookie, match and actions.
func TestParseRuleAgainstOfctl(t *testing.T) {
	if _, err := exec.LookPath("ovs-ofctl"); err != nil {
		t.Skip("ovs-ofctl not installed")
	}
	for _, text := range ofctlRules {
		normalized, ok, why := ofctlParse(t, text)
		got, err := ParseRule(text)
		if !ok {
			if err == nil {
				t.Errorf("%q: ovs-ofctl %s; govn accepts it as %s", text, why, got.String())
			}
			continue
		}
		var pe *PrerequisiteError
		if errors.As(err, &pe) && !ofctlNames(normalized, pe.Field) {
			// ovs-ofctl dropped the field without a word.
			continue
		}
		if err != nil {
			t.Errorf("%q: ovs-ofctl accepts it as %q; govn: %v", text, normalized, err)
			continue
		}
		want, err := ParseRule(normalized)
		if err != nil {
			t.Errorf("%q: govn cannot read ovs-ofctl's form %q: %v", text, normalized, err)
			continue
		}
		if got.Table != want.Table || got.Priority != want.Priority || got.Cookie != want.Cookie ||
			got.Match != want.Match || !reflect.DeepEqual(got.Actions, want.Actions) {
			t.Errorf("%q:\n  govn:      %s\n  ovs-ofctl: %s (%s)", text, got.String(), want.String(), normalized)
		}
	}
}

// ofctlNames reports whether the match of a normalized rule names f (or
// one of its aliases).
func ofctlNames(normalized string, f Field) bool {
	match, _, _ := strings.Cut(normalized, " actions=")
	for _, term := range strings.Split(match, ",") {
		name, _, _ := strings.Cut(term, "=")
		if g, ok := FieldByName(name); ok && g == f {
			return true
		}
	}
	return false
}

// ofctlParse runs ovs-ofctl parse-flow on rule (as OpenFlow 1.5, or with
// ovs-ofctl's choice of protocol when 1.5 cannot express it) and returns
// the flow it printed in ParseRule's syntax with every default explicit,
// or ok false and why ovs-ofctl did not take the rule as written.
func ofctlParse(t *testing.T, rule string) (normalized string, ok bool, why string) {
	t.Helper()
	out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "parse-flow", rule).CombinedOutput()
	if err != nil && strings.Contains(string(out), "no usable protocol") {
		out, err = exec.Command("ovs-ofctl", "parse-flow", rule).CombinedOutput()
	}
	text := string(out)
	switch {
	case err != nil:
		return "", false, "refuses it: " + strings.TrimSpace(text)
	case strings.Contains(text, "decode error"):
		return "", false, "cannot decode it (ovs-vswitchd would refuse it)"
	case strings.Contains(text, "normalization changed"):
		return "", false, "drops a field whose prerequisites are missing"
	}
	_, flow, found := strings.Cut(text, "): ADD ")
	if !found {
		t.Fatalf("ovs-ofctl parse-flow %q printed no flow:\n%s", rule, text)
	}
	flow, _, _ = strings.Cut(flow, "\n")
	head, actions, found := strings.Cut(flow, "actions=")
	if !found {
		t.Fatalf("ovs-ofctl parse-flow %q printed no actions: %s", rule, flow)
	}
	// The head is "[table:N ][MATCH][ cookie:C][ idle:N][ hard:N]", where
	// MATCH may start with priority=P; each default is left out.
	terms := map[string]string{"table": "0", "priority": "32768", "cookie": "0"}
	var match []string
	for _, tok := range strings.Fields(head) {
		if name, val, ok := strings.Cut(tok, ":"); ok && !strings.Contains(tok, "=") {
			switch name {
			case "table", "cookie":
				terms[name] = val
			case "idle":
				match = append(match, "idle_timeout="+val)
			case "hard":
				match = append(match, "hard_timeout="+val)
			default:
				t.Fatalf("ovs-ofctl parse-flow %q: unexpected %q in %s", rule, tok, flow)
			}
			continue
		}
		for _, term := range strings.Split(tok, ",") {
			if p, ok := strings.CutPrefix(term, "priority="); ok {
				terms["priority"] = p
				continue
			}
			match = append(match, term)
		}
	}
	explicit := []string{"table=" + terms["table"], "priority=" + terms["priority"], "cookie=" + terms["cookie"]}
	return strings.Join(append(explicit, match...), ",") + " actions=" + actions, true, ""
}
