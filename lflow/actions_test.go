package lflow

import (
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
		{"ct_snat(10.0.0.1-10.0.0.9,1000-2000);", "ct_snat(10.0.0.1-10.0.0.9, 1000-2000);"},
		{"reg0[3] = put_dhcp_opts(offerip = 10.0.0.11, router = 10.0.0.1, netmask = 255.255.255.0);",
			"reg0[3] = put_dhcp_opts(offerip = 10.0.0.11, router = 10.0.0.1, netmask = 255.255.255.0);"},
		{"reg0[4] = dns_lookup(); next;", "reg0[4] = dns_lookup(); next;"},
		{"reg8[16..31] = select(1=50, 2=50);", "reg8[16..31] = select(1 = 50, 2 = 50);"},
		{"outport = get_fdb(eth.dst);", "outport = get_fdb(eth.dst);"},
		{"log(name=\"x\", severity=warning, verdict=reject);", "log(name = \"x\", severity = warning, verdict = reject);"},
		{"arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.op = 1; output; };", "arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.op = 1; output; };"},
		{"trigger_event(event = \"empty_lb_backends\", vip = \"10.0.0.1:80\", protocol = \"tcp\", load_balancer = \"u\");",
			"trigger_event(event = \"empty_lb_backends\", vip = \"10.0.0.1:80\", protocol = \"tcp\", load_balancer = \"u\");"},
		{"ct_snat_to_vip; reg0 = ct_snat_to_vip;", "ct_snat_to_vip; reg0 = ct_snat_to_vip;"},
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
		{"frobnicate;", "unknown action or field \"frobnicate\""},
		{"eth.type = 0x800;", "field eth.type is read-only"},
		{"ip.proto = 6;", "read-only"},
		{"tcp.dst = 70000;", "does not fit 16-bit tcp.dst"},
		{"outport = 5;", "outport takes a quoted port name"},
		{"reg0 = \"x\";", "cannot assign a string"},
		{"reg0 = eth.src;", "reg0 is 32 bits but eth.src is 48 bits"},
		{"outport = eth.src;", "cannot mix string field"},
		{"reg0 = frob();", "unknown field or function \"frob\""},
		{"reg0 = put_arp(inport, arp.spa, arp.sha);", "put_arp does not return a value"},
		{"lookup_arp(inport, arp.spa, arp.sha);", "must be used as R = lookup_arp(...)"},
		{"ct_commit { next; ", "expected '}'"},
		{"clone;", "clone needs nested actions"},
		{"put_arp;", "put_arp needs arguments"},
		{"output(1);", "output does not take arguments"},
		{"next(pipeline=sideways, table=1);", "pipeline must be ingress or egress"},
		{"next(pipeline=egress);", "needs a table"},
		{"next(300);", "table number 0..254"},
		{"reg0 = dns_lookup;", "dns_lookup needs arguments"},
		{"reg0[1]--;", "only ip.ttl can be decremented"},
		{"put_arp(inport, ;", "empty argument"},
		{"put_arp(inport", "expected ')' to close arguments"},
		{"tcp = 1;", "predicate tcp cannot be assigned"},
		{"ip4 { };", "predicate ip4 cannot be assigned"},
		{"1;", "expected an action"},
		{strings.Repeat("clone { ", 200), "nested too deeply"},
	}
	for _, tt := range tests {
		_, err := st.ParseActions(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got error %v, want %q", tt.in, err, tt.want)
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
