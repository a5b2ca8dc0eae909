package conntrack_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/govn/govn/datapath/conntrack"
)

// udp4 builds a minimal IPv4 UDP packet (checksums left zero).
func udp4(src, dst string, sport, dport uint16) []byte {
	p := make([]byte, 28)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], 28)
	p[9] = 17
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	binary.BigEndian.PutUint16(p[20:], sport)
	binary.BigEndian.PutUint16(p[22:], dport)
	binary.BigEndian.PutUint16(p[24:], 8)
	return p
}

// A load balancer: the first packet of a connection is committed with a
// backend choice and DNATed; the reply is translated back with a bare nat.
func Example() {
	tr := conntrack.New(conntrack.Config{})
	defer tr.Close()
	start := time.Now()
	lb := &conntrack.LB{Backends: []conntrack.Backend{{Addr: netip.MustParseAddr("10.0.0.10"), Port: 8080}}}

	req := udp4("192.168.1.5", "172.16.0.1", 40000, 80)
	res := tr.Process(req, 0, conntrack.Params{Zone: 7, Commit: true, LB: lb}, time.Since(start))
	fmt.Println(res.State, "to backend", res.Backend, "orig", res.Orig)

	reply := udp4("10.0.0.10", "192.168.1.5", 8080, 40000)
	res = tr.Process(reply, 0, conntrack.Params{Zone: 7, NAT: &conntrack.NAT{}}, time.Since(start))
	fmt.Println(res.State, "reply now from", netip.AddrFrom4([4]byte(reply[12:16])), binary.BigEndian.Uint16(reply[20:]))

	tr.Dump(7, func(e conntrack.Entry) bool {
		fmt.Println(e)
		return true
	})
	tr.Flush(7)
	// Output:
	// +new+trk+dnat to backend 0 orig udp,src=192.168.1.5,dst=172.16.0.1,sport=40000,dport=80
	// +est+rpl+trk+snat reply now from 172.16.0.1 80
	// udp,orig=(src=192.168.1.5,dst=172.16.0.1,sport=40000,dport=80),reply=(src=10.0.0.10,dst=192.168.1.5,sport=8080,dport=40000),zone=7,protoinfo=(state=MULTIPLE)
}
