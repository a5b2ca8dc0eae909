package packet_test

import (
	"encoding/hex"
	"fmt"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
)

func ExampleExtract() {
	// An Ethernet/IPv4/TCP SYN from 10.0.0.1:1234 to 10.0.0.2:80.
	frame, _ := hex.DecodeString("02000000000b02000000000a0800" +
		"450000280000000040060000" + "0a0000010a000002" +
		"04d200500000000000000000" + "50020000" + "00000000")
	var k flow.Key
	k.Set(flow.InPort, 1) // metadata is the caller's
	off := packet.Extract(frame, &k)
	fmt.Println(k.String())
	fmt.Println("L3 at", off.L3, "L4 at", off.L4)
	// Output:
	// in_port=1,eth_src=02:00:00:00:00:0a,eth_type=0x800,eth_dst=02:00:00:00:00:0b,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_proto=6,nw_ttl=64,tp_src=1234,tp_dst=80,tcp_flags=0x2,pkt_len=54
	// L3 at 14 L4 at 34
}
