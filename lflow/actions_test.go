package lflow

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseActionsPrint(t *testing.T) {
	st := testSymtab(t)
	tests := []struct{ in, want string }{
		{"", ""},
		{"drop;", "drop;"},
		{"next;", "next;"},
		{"next(3);", "next(3);"},
		{"next(pipeline=egress,table=5);", "next(pipeline=egress, table=5);"},
		{"outport = \"p1\"; output;", "outport = \"p1\"; output;"},
		{"xreg0[0..47] = 00:00:20:20:12:20; next;", "xreg0[0..47] = 00:00:20:20:12:20; next;"},
		{"eth.dst <-> eth.src; ip.ttl--; /* c */ next;", "eth.dst <-> eth.src; ip.ttl--; next;"},
		{"reg1 = reg2; reg0[3] = 1/1;", "reg1 = reg2; reg0[3] = 1/1;"},
		{"ct_commit { ct_mark.blocked = 1; ct_label = 0x10/0xf0; };", "ct_commit { ct_mark.blocked = 1; ct_label = 0x10/0xf0; };"},
		{"ct_commit { };", "ct_commit { };"},
		{"ct_lb_mark(backends=10.0.0.11:80,10.0.0.12:80; hash_fields=\"ip_dst,ip_src\"; force_snat);",
			"ct_lb_mark(backends = 10.0.0.11:80, 10.0.0.12:80; hash_fields = \"ip_dst,ip_src\"; force_snat);"},
		{"ct_lb_mark(backends=[aef0::11]:80);", "ct_lb_mark(backends = [aef0::11]:80);"},
		{"ct_dnat(10.0.0.1, 1000-2000);", "ct_dnat(10.0.0.1, 1000-2000);"},
		{"ct_snat(10.0.0.1,70000-80000);", "ct_snat(10.0.0.1, 4464-14464);"},
		{"ct_commit(ct_mark=0x100000001, ct_label=5/5);", "ct_commit { ct_mark = 0x1; ct_label = 5/5; };"},
		{"reg0[0] = put_dhcpv6_opts(dns_server = {ae70::1,ae70::2});", "reg0[0] = put_dhcpv6_opts(dns_server = {ae70::1,ae70::2});"},
		{"ct_lb(backends=10.0.0.1; hash_fields=\"ip_src\" x;", "ct_lb(backends = 10.0.0.1; hash_fields = \"ip_src\");"},
		{"ct_lb(backends=; skip_snat);", "ct_lb(backends = ; skip_snat);"},
		{"ct_lb(backends=);", "ct_lb();"},
		{"set_meter(100, x);", "set_meter(100);"},
		{"sample(probability=10, obs_domain=x, obs_point=$cookie);", "sample(probability = 10, obs_point = $cookie);"},
		{"fwd_group(liveness=true, childports=);", "fwd_group(liveness = true, childports = );"},
		// OVN takes a '(' without childports and no ')' (the fuzzer found
		// it); it prints as the empty childports=, which parses again.
		{"fwd_group(;", "fwd_group(childports = );"},
		{"ct_commit(ct_mark=::);", "ct_commit { ct_mark = 0x0; };"},
		{"fwd_group(liveness=false,;", "fwd_group(liveness = false, childports = );"},
		{"next(pipeline=egress);", "next(pipeline=egress);"},
		{"handle_bfd_msg();", "handle_bfd_msg();"},
		{"reg0[3] = put_dhcp_opts(offerip = 10.0.0.11, router = 10.0.0.1, netmask = 255.255.255.0);",
			"reg0[3] = put_dhcp_opts(offerip = 10.0.0.11, router = 10.0.0.1, netmask = 255.255.255.0);"},
		{"reg0[4] = dns_lookup(); next;", "reg0[4] = dns_lookup(); next;"},
		{"reg8[16..31] = select(1=50, 2=50);", "reg8[16..31] = select(1 = 50, 2 = 50);"},
		{"outport = get_fdb(eth.dst);", "outport = get_fdb(eth.dst);"},
		{"log(name=\"x\", severity=warning, verdict=reject);", "log(name = \"x\", severity = warning, verdict = reject);"},
		{"arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.op = 1; output; };", "arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.op = 1; output; };"},
		{"trigger_event(event = \"empty_lb_backends\", vip = \"10.0.0.1:80\", protocol = \"tcp\", load_balancer = \"9a3b2d1c-0000-4000-8000-000000000001\");",
			"trigger_event(event = \"empty_lb_backends\", vip = \"10.0.0.1:80\", protocol = \"tcp\", load_balancer = \"9a3b2d1c-0000-4000-8000-000000000001\");"},
		{"ct_snat_to_vip;", "ct_snat_to_vip;"},
		{"reg9[2] = lookup_arp(inport, arp.spa, arp.sha);", "reg9[2] = lookup_arp(inport, arp.spa, arp.sha);"},
		{"clone { clone { output; }; };", "clone { clone { output; }; };"},
		{"icmp4_error { icmp4.frag_mtu = 1442; output; };", "icmp4_error { icmp4.frag_mtu = 1442; output; };"},
	}
	for _, tt := range tests {
		acts, err := st.ParseActions(tt.in)
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		got := ActionsString(acts)
		if got != tt.want {
			t.Errorf("%q: printed %q, want %q", tt.in, got, tt.want)
			continue
		}
		again, err := st.ParseActions(got)
		if err != nil || ActionsString(again) != got {
			t.Errorf("%q: reprint unstable: %v", got, err)
		}
	}
}

func TestParseActionsErrors(t *testing.T) {
	st := testSymtab(t)
	tests := []struct{ in, want string }{
		{"next", "expected ';' after action"},
		{"drop; next;", "drop; must be the only action"},
		{"next; drop;", "drop; must be the only action"},
		{"frobnicate;", "unknown action \"frobnicate\""},
		{"eth.type = 0x800;", "field eth.type is read-only"},
		{"ct_mark = 1;", "can only be set inside ct_commit"},
		{"ct_commit { reg0 = 1; };", "cannot be set inside ct_commit"},
		{"tcp.dst = 70000;", "needs 17 bits, more than 16-bit tcp.dst has"},
		{"outport = 5;", "outport takes a quoted port name"},
		{"reg0 = \"x\";", "cannot assign a string"},
		{"reg0 = eth.src;", "reg0 is 32 bits but eth.src is 48 bits"},
		{"outport = eth.src;", "cannot mix string field"},
		{"reg0 = frob();", "unknown field frob"},
		{"reg0 = check_pkt_larger(1500);", "reg0 is 32 bits (reg0[0..31]) where a 1-bit field is needed"},
		{"reg0[0] = chk_lb_hairpin(1);", "chk_lb_hairpin takes no arguments"},
		{"put_fdb(inport, ip4.src);", "ip4.src is 32 bits (ip4.src[0..31]) where a 48-bit field is needed"},
		{"put_fdb(reg0, eth.src);", "32-bit field reg0 is used where a string field (a port) is needed"},
		{"reg0 = put_arp(inport, arp.spa, arp.sha);", "unknown field put_arp"},
		{"lookup_arp(inport, arp.spa, arp.sha);", "unknown action \"lookup_arp\""},
		{"ct_commit { next; ", "expected an action, found end of input"},
		{"clone;", "clone needs nested actions"},
		{"put_arp;", "expected '(', found \";\""},
		{"output(1);", "expected ';' after action, found \"(\""},
		{"next(pipeline=sideways, table=1);", "pipeline must be ingress or egress"},
		{"next(29);", "only tables 0 to 28"},
		{"ct_dnat(10.0.0.1, 0-10);", "cannot start at port 0"},
		{"ct_dnat(10.0.0.1-10.0.0.9);", "expected ')', found \"-\""},
		{"reg0[0..15] = select(1);", "at least 2 members"},
		{"reg0[0..14] = select(1, 2);", "16 bits or more"},
		{"set_queue(61441);", "queue numbers go from 0 to 61440"},
		{"log(verdict=pass);", "verdict must be allow, drop or reject"},
		{"sample(probability=0);", "probability above 0"},
		{"reg0[0] = put_dhcp_opts(router = 10.0.0.1);", "needs the offerip option"},
		{"reg0[0] = put_dhcp_opts(offerip = 10.0.0.4, frob = 1);", "unknown DHCPv4 option \"frob\""},
		{"reg0[0] = put_dhcp_opts(offerip = 10.0.0.4, hostname = 1);", "option hostname takes a quoted string"},
		{"reg0[0] = put_nd_ra_opts(addr_mode = \"slaac\", prefix = aef0::/64);", "needs the slla option"},
		{"trigger_event(event = \"empty_lb_backends\", protocol = \"icmp\");", "not tcp, udp or sctp"},
		{"reg0[1]--;", "expected '=' or '<->' after reg0"},
		{"reg0--;", "unknown action \"reg0\""},
		{"put_arp(inport, ;", "expected a field name"},
		{"put_arp(inport", "expected ',', found end of input"},
		{"tcp = 1;", "predicate tcp used where a field is needed"},
		{"ip4 { };", "unknown action \"ip4\""},
		{"1;", "expected an action"},
		{strings.Repeat("clone { ", 32), "nested more than 31 deep"},
	}
	for _, tt := range tests {
		_, err := st.ParseActions(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got error %v, want %q", tt.in, err, tt.want)
		}
	}
}

// TestActionsGolden parses every input of testdata/ovnparse/actions.txt
// (the inputs TestDifferentialParser also gives the real OVN) and writes
// the verdict, with the canonical print or the error, to
// testdata/actions.golden (regenerate with -update). An accepted input's
// print must parse back to the same print.
func TestActionsGolden(t *testing.T) {
	st := testSymtab(t)
	var sb strings.Builder
	for _, in := range readActionInputs(t) {
		sb.WriteString(in)
		acts, err := st.ParseActions(in)
		if err != nil {
			fmt.Fprintf(&sb, "\n\trefused: %v\n", err)
			continue
		}
		printed := ActionsString(acts)
		fmt.Fprintf(&sb, "\n\taccepted: %s\n", printed)
		again, err := st.ParseActions(printed)
		if err != nil {
			t.Errorf("%q printed as %q, which does not parse: %v", in, printed, err)
		} else if p2 := ActionsString(again); p2 != printed {
			t.Errorf("%q: unstable print %q then %q", in, printed, p2)
		}
	}
	checkGolden(t, "actions.golden", sb.String())
}

// readActionInputs reads testdata/ovnparse/actions.txt: one input a line,
// without blank lines and # comments.
func readActionInputs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("testdata/ovnparse/actions.txt")
	if err != nil {
		t.Fatal(err)
	}
	var ins []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		ins = append(ins, l)
	}
	return ins
}

// TestOptionsCovered checks that the inputs try every DHCPv4, DHCPv6 and
// router advertisement option, so that a new option cannot go untested.
func TestOptionsCovered(t *testing.T) {
	ins := readActionInputs(t)
	for _, tab := range []struct {
		action string
		opts   []Option
	}{{"put_dhcp_opts", DHCPv4Options()}, {"put_dhcpv6_opts", DHCPv6Options()}, {"put_nd_ra_opts", raOptions[:]}} {
		for _, o := range tab.opts {
			used := slices.ContainsFunc(ins, func(in string) bool {
				_, args, ok := strings.Cut(in, tab.action+"(")
				return ok && (strings.HasPrefix(args, o.Name+" = ") || strings.Contains(args, " "+o.Name+" = "))
			})
			if !used {
				t.Errorf("no input of testdata/ovnparse/actions.txt uses %s option %s", tab.action, o.Name)
			}
		}
	}
}

// TestCorpusActions parses every action of the reference corpus, prints it,
// and checks that re-parsing the print gives the same print.
func TestCorpusActions(t *testing.T) {
	st := testSymtab(t)
	for _, fl := range readCorpus(t) {
		acts, err := st.ParseActions(fl.Actions)
		if err != nil {
			t.Errorf("line %d: %q: %v", fl.Line, fl.Actions, err)
			continue
		}
		printed := ActionsString(acts)
		again, err := st.ParseActions(printed)
		if err != nil {
			t.Errorf("line %d: reparsing %q: %v", fl.Line, printed, err)
			continue
		}
		if p2 := ActionsString(again); p2 != printed {
			t.Errorf("line %d: unstable print %q then %q", fl.Line, printed, p2)
		}
	}
}

// TestActionsCovered checks that testdata/ovnparse/actions.txt, which the
// differential test gives the real OVN too, has for every action of OVN
// 23.03 an input that uses it and is accepted and one that is refused.
func TestActionsCovered(t *testing.T) {
	st := testSymtab(t)
	accepted, refused := map[string]bool{}, map[string]bool{}
	for _, in := range readActionInputs(t) {
		_, err := st.ParseActions(in)
		for _, tok := range strings.FieldsFunc(in, func(r rune) bool {
			return !(r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		}) {
			if err == nil {
				accepted[tok] = true
			} else {
				refused[tok] = true
			}
		}
	}
	for _, name := range []string{
		"next", "output", "drop", "ip.ttl", "push", "pop", "ct_next", "ct_commit", "ct_commit_nat",
		"ct_dnat", "ct_snat", "ct_dnat_in_czone", "ct_snat_in_czone", "ct_lb", "ct_lb_mark", "ct_clear",
		"ct_snat_to_vip", "clone", "arp", "nd_ns", "nd_na", "nd_na_router", "icmp4", "icmp4_error",
		"icmp6", "icmp6_error", "tcp_reset", "sctp_abort", "reject", "igmp", "handle_dhcpv6_reply",
		"handle_bfd_msg", "get_arp", "put_arp", "get_nd", "put_nd", "lookup_arp", "lookup_arp_ip",
		"lookup_nd", "lookup_nd_ip", "put_fdb", "get_fdb", "lookup_fdb", "bind_vport",
		"handle_svc_check", "set_queue", "set_meter", "log", "sample", "trigger_event", "fwd_group",
		"commit_ecmp_nh", "commit_lb_aff", "select", "put_dhcp_opts", "put_dhcpv6_opts",
		"put_nd_ra_opts", "dns_lookup", "check_pkt_larger", "chk_lb_hairpin", "chk_lb_hairpin_reply",
		"check_in_port_sec", "check_out_port_sec", "chk_ecmp_nh_mac", "chk_ecmp_nh", "chk_lb_aff",
	} {
		if !accepted[name] {
			t.Errorf("no accepted input uses %s", name)
		}
		if !refused[name] {
			t.Errorf("no refused input uses %s", name)
		}
	}
}
