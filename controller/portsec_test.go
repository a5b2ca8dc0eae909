package controller

import "testing"

func TestTranslatePortSecurityIn(t *testing.T) {
	in := lookupSwitch("1", "reg0[15] = check_in_port_sec(); next;", "reg0[15] == 0")
	in.Ports[0].PortSecurity = []string{"0a:00:00:00:00:01 10.0.0.11 fd00::11"}
	const from = "in_port=1,dl_src=0a:00:00:00:00:01,dl_dst=0a:00:00:00:00:02,"
	checkPackets(t, in, []packetCase{
		{"its MAC and address", from + "ip,nw_src=10.0.0.11,nw_dst=10.0.0.12", "2"},
		{"another address", from + "ip,nw_src=10.0.0.99,nw_dst=10.0.0.12", "drop"},
		{"another MAC", "in_port=1,dl_src=0a:00:00:00:00:09,dl_dst=0a:00:00:00:00:02,ip,nw_src=10.0.0.11", "drop"},
		{"DHCP discovery", from + "udp,nw_src=0.0.0.0,nw_dst=255.255.255.255,tp_src=68,tp_dst=67", "2"},
		{"ARP as itself", from + "arp,arp_sha=0a:00:00:00:00:01,arp_spa=10.0.0.11", "2"},
		{"ARP as another address", from + "arp,arp_sha=0a:00:00:00:00:01,arp_spa=10.0.0.99", "drop"},
		{"ARP as another MAC", from + "arp,arp_sha=0a:00:00:00:00:09,arp_spa=10.0.0.11", "drop"},
		{"IPv6 from its address", from + "ipv6,ipv6_src=fd00::11,ipv6_dst=fd00::12", "2"},
		{"IPv6 from its link-local address", from + "ipv6,ipv6_src=fe80::800:ff:fe00:1,ipv6_dst=fd00::12", "2"},
		{"IPv6 from another address", from + "ipv6,ipv6_src=fd00::99,ipv6_dst=fd00::12", "drop"},
		{"NA for its address", from + "icmp6,ipv6_src=fd00::11,nw_ttl=255,icmp=136/0,nd_target=fd00::11,nd_tll=0a:00:00:00:00:01", "2"},
		{"NA for another address", from + "icmp6,ipv6_src=fd00::11,nw_ttl=255,icmp=136/0,nd_target=fd00::99,nd_tll=0a:00:00:00:00:01", "drop"},
		{"a port without port security", "in_port=2,dl_src=0a:00:00:00:00:77,dl_dst=0a:00:00:00:00:01,ip,nw_src=1.2.3.4", "drop"}, // loopback to vm2
	})
	// A MAC alone: anything from it, ARP with it as sender.
	in = lookupSwitch("1", "reg0[15] = check_in_port_sec(); next;", "reg0[15] == 0")
	in.Ports[0].PortSecurity = []string{"0a:00:00:00:00:01"}
	checkPackets(t, in, []packetCase{
		{"any address from its MAC", from + "ip,nw_src=10.9.9.9", "2"},
		{"ARP with its MAC", from + "arp,arp_sha=0a:00:00:00:00:01,arp_spa=10.9.9.9", "2"},
		{"ARP with another MAC", from + "arp,arp_sha=0a:00:00:00:00:09,arp_spa=10.9.9.9", "drop"},
		{"another MAC", "in_port=1,dl_src=0a:00:00:00:00:09,ip", "drop"},
	})
}

func TestTranslatePortSecurityOut(t *testing.T) {
	in := lookupSwitch("1", "next;", "1")
	ls := in.Datapaths[0].UUID
	var fs flowSet
	fs.add(ls, "ingress", 0, 100, "1", `outport = "vm1"; output;`)
	fs.add(ls, "egress", 0, 100, "1", "reg0[15] = check_out_port_sec(); next;")
	fs.add(ls, "egress", 1, 100, "reg0[15] == 0", "output;")
	in.Flows = fs
	in.Ports[0].PortSecurity = []string{"0a:00:00:00:00:01 10.0.0.11/24"}
	const to = "in_port=2,dl_src=0a:00:00:00:00:02,dl_dst=0a:00:00:00:00:01,"
	checkPackets(t, in, []packetCase{
		{"to its address", to + "ip,nw_dst=10.0.0.11", "1"},
		{"to its subnet's broadcast", to + "ip,nw_dst=10.0.0.255", "1"},
		{"to multicast", to + "ip,nw_dst=224.0.0.5", "1"},
		{"to another address", to + "ip,nw_dst=10.0.0.12", "drop"},
		{"ARP to its MAC", to + "arp", "1"},
		{"IPv6 (no IPv6 address given)", to + "ipv6,ipv6_dst=fd00::11", "drop"},
		{"to another MAC", "in_port=2,dl_dst=0a:00:00:00:00:09,ip,nw_dst=10.0.0.11", "drop"},
	})
}

func TestParsePortSec(t *testing.T) {
	for _, tc := range []struct {
		in  string
		err bool
	}{
		{"0a:00:00:00:00:01", false},
		{"0a:00:00:00:00:01 10.0.0.1 10.0.1.0/24 fd00::1 fd00:1::/64", false},
		{"", true},
		{"zz:00:00:00:00:01", true},
		{"0a:00:00:00:00:01 10.0.0.300", true},
		{"0a:00:00:00:00:01 10.0.0.0/33", true},
	} {
		if _, err := parsePortSec(tc.in); (err != nil) != tc.err {
			t.Errorf("%q: err %v, want error %v", tc.in, err, tc.err)
		}
	}
	in := lookupSwitch("1", "next;", "1")
	in.Ports[0].PortSecurity = []string{"bad"}
	tr, _ := NewTranslator()
	if out := tr.Translate(in); len(out.Problems) != 1 {
		t.Errorf("problems %q, want the bad port_security", out.Problems)
	}
}
