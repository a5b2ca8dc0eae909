package pinctrl

import (
	"net/netip"
	"testing"

	"github.com/govn/govn/datapath/flow"
)

// BenchmarkHandle: the engine's cost per packet-in of a few kinds (one
// core answers 1/ns-per-op of them a second).
func BenchmarkHandle(b *testing.B) {
	ping := ethFrame(routerMAC, vmMAC, etherIPv4, ipPacket(vmIP, farIP, protoICMP, 1, []byte{8, 0, 0, 0, 0, 1, 0, 1}, 2))
	cases := []struct {
		name, action string
		frame        []byte
	}{
		{"arp", "arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.spa = reg1; arp.tpa = reg0; arp.op = 1; output; };", ping},
		{"icmp4", `icmp4 {eth.dst <-> eth.src; icmp4.type = 11; icmp4.code = 0; ip4.dst = ip4.src; ip4.src = 20.0.0.254 ; ip.ttl = 254; outport = "lr0-sw0"; flags.loopback = 1; output; };`, ping},
		{"put_dhcp_opts", dhcpAction, dhcpFrame(dhcpDiscover, netip.IPv4Unspecified())},
		{"put_arp", "put_arp(inport, arp.spa, arp.sha);", ping},
	}
	e, err := NewEngine()
	if err != nil {
		b.Fatal(err)
	}
	st := testState()
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			pi := packetIn(c.action, c.frame, 1, 28, nil)
			pi.Cont = &flow.Continuation{Table: 28}
			for b.Loop() {
				if _, err := e.Handle(pi, st); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
