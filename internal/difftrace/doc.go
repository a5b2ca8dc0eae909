// Package difftrace is the differential trace harness of govn northd: one
// Northbound, two Southbounds — one written by the real ovn-northd, one by
// the northd under test, each behind its own ovsdb-server — and the real
// ovn-trace run on both for a battery of packets. Every trace must give the
// same outputs and the same packet-field changes (ovn-trace --minimal),
// after the normalization described in normalize.go.
//
// # Use
//
//	r := difftrace.Run(t, difftrace.Options{
//		Script:    "testdata/sw-acl.sh",             // an ovn-nbctl script
//		UnderTest: refovn.Command(govnBin, "northd"), // Reference: ovn-northd
//	})
//	// r.Mismatches, r.Skipped, r.Missed (stages no trace reached)
//
// Run starts both sides with package refovn, registers the chassis the
// script names on a "# chassis:" line, runs the script on each
// Northbound, waits for each northd (ovn-nbctl --wait=sb sync), stops the
// northds, prepares each Southbound for ovn-trace (normalize.go: the
// nd_na_router and put_nd_ra_opts abort) and traces.
//
// # The battery
//
// The packets are generated from the Northbound's contents (packets.go),
// never listed by hand, so a new topology needs only its script. From
// every switch port that can send (VIFs, localport, localnet, external,
// virtual): TCP, UDP and ICMP to every other port's IPv4 and IPv6
// addresses; to an unknown MAC; broadcast; IPv4 and IPv6 multicast, IGMP
// and MLD; ARP requests and neighbor solicitations for every address the
// Northbound names (ports, router ports, NAT, VIPs, a free one); router
// solicitations; DHCPv4 and DHCPv6; DNS queries; every load-balancer VIP
// and port (a backend calling its own VIP is the hairpin case) and the
// backends' replies; packets port security must drop; every port number
// and address the ACLs compare with, and the values just outside their
// ranges. Through each router port on the switch: the router's own
// addresses, every address beyond (other switches, NAT, static routes
// and their next hops, policy addresses, one nothing routes), each with
// TTL 64 and from the first source with TTL 1, the router's VIPs and
// distributed NAT MACs. IP packets are traced with --ct=new and --ct=est,
// replies with est,rpl and est,rpl,dnat.
//
// # Speed
//
// ovn-trace runs as a daemon per conntrack state per side (tracer.go), a
// few traces in flight per side; only traces with a random choice
// (load-balancer backend, ECMP member) are repeated as one-shot processes.
// Real against real, the fifteen topologies of testdata take about two
// minutes on two cores.
package difftrace
