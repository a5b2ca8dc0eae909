// Package pinctrl is the part of govn chassis that answers packets in
// software: the packets OVN's logical flows send to the controller
// (controller() with the action's text as userdata, see package lflow)
// for it to build a reply, a request, or a Southbound row.
//
// # Structure
//
// Engine is the pure core: Handle takes one packet-in (dp.PacketIn: the
// frame, the registers and table where the action ran, the continuation
// of a paused pipeline) and the Southbound State, and returns the
// packet-outs to run (dp.PacketOut) and the MAC bindings learned. It does
// no I/O, so tests drive it with real frames.
//
// Pinctrl runs it: one goroutine takes the datapath's packet-ins (the
// datapath drops them when the queue is full and never waits), rate
// limits them per action kind (a token bucket each, 1000 a second by
// default), and executes the packet-outs; another writes MAC_Binding rows
// in batches. Bindings already in the Southbound, or just sent, are not
// sent again. Every kind has counters (handled, rate-dropped, errors);
// govn chassis shows them with the pinctrl/show command, with the
// datapath's packet-ins sent and dropped (queue full).
// internal/hvtest's TestGovnChassisARPFlood floods a chassis with 10,000
// ARP misses a second for 10 s.
//
// # Actions
//
// Nested actions build a new packet from the one received and run their
// body on it from the pipeline position of the action (the body is
// compiled with lflow in that table's logical pipeline, on the packet's
// datapath, with its registers):
//
//	arp { }             ARP request for ip4.dst from ip4.src
//	nd_ns { }           neighbor solicitation for ip6.dst
//	nd_na { }, nd_na_router { }
//	                    the advertisement answering a solicitation
//	icmp4 { }, icmp4_error { }, icmp6 { }, icmp6_error { }
//	                    ICMP errors quoting the datagram (as much as fits
//	                    576 bytes for IPv4, 1280 for IPv6, as RFC 1812 and
//	                    RFC 4443 say); icmp4.frag_mtu and icmp6.frag_mtu
//	                    fill "fragmentation needed" and "packet too big"
//	tcp_reset { }       the RST that ovn-sb(5)'s pseudocode describes
//	reject { }          a RST for TCP, an ABORT for SCTP, ICMP port
//	                    unreachable otherwise, addresses exchanged
//	sctp_abort { }      an SCTP ABORT (RFC 9260 8.4: an INIT's initiate
//	                    tag with the T bit clear, else the packet's own
//	                    tag with T set)
//
// Actions with a result pause the pipeline; pinctrl rewrites the packet,
// stores 1 in the result (0 if the action does not apply: a DHCPRELEASE,
// a name not in the DNS table) and resumes the pipeline where it paused:
//
//	put_dhcp_opts       DHCPv4 offer, ack, nak (a request for another
//	                    address), inform ack without lease; every option
//	                    type of lflow's table (addresses, integers,
//	                    strings, domain lists per RFC 3397, classless
//	                    routes per RFC 3442; next_server is siaddr,
//	                    bootfile_name_alt the boot file of iPXE clients)
//	put_dhcpv6_opts     Advertise (Reply with rapid commit) and Reply, with
//	                    the address in an IA_NA of the client's IAID
//	dns_lookup          A, AAAA, ANY and PTR answers from the datapath's
//	                    DNS records
//	put_nd_ra_opts      the router advertisement answering a solicitation
//
// put_arp and put_nd learn a MAC binding (logical port, IP, MAC) to write,
// put_fdb an FDB row (switch, MAC, port); each has its own writer.
//
// bind_vport("V", inport): a parent's ARP or ND for a virtual port's IP
// binds the virtual port V to this chassis with the parent as its
// virtual_parent (both columns in one write); the controller then holds
// it (see package controller's virtual.go). trigger_event writes a
// Controller_Event row of this chassis (empty_lb_backends with vip,
// protocol and load_balancer; seq_num one past the highest); an event
// whose row exists is not written again, one whose row the CMS deleted
// is, by the next packet. Bindings and events just sent count as
// written for recentTTL (3 s) while the Southbound catches up.
//
// IGMP and MLD snooping: igmp (ovn-northd's action for both) reads the
// IGMPv1/v2/v3 and MLDv1/v2 reports, IGMPv2 leaves and MLDv1 dones of a
// local port on a switch whose IP_Multicast row is enabled, and Snooping
// keeps each group's member ports (a v3 record joins unless it includes
// no sources; no per-source state, as in ovn-controller; link-local
// groups are flooded, not snooped), ends memberships not reported for
// the switch's idle_timeout (300 s) and refuses groups past its
// table_size (2048). A changed seq_no (ovn-sbctl ip-multicast-flush), or
// snooping turned off, ends all of a switch's memberships. Each change hands the whole membership to a writer, which makes
// this chassis' IGMP_Group rows (one per switch and group, ports the
// members) say it in one transaction; changes made meanwhile collapse
// into the next. Reports go on to the switch's multicast routers
// (_MC_mrouter_flood: ports with mcast_flood_reports, relaying routers).
// A switch whose IP_Multicast row makes it the querier (querier with
// eth_src) and that has a port here sends general queries to its ports
// on this chassis (as ovn-controller's, local only: each chassis queries
// its own) at once and then every query_interval (default idle_timeout/2):
// IGMPv3 from ip4_src if set, MLDv2 (RFC 3810, Hop-by-Hop Router Alert,
// hop limit 1, to ff02::1) from ip6_src if set; without a valid eth_src,
// none. Hosts forced to IGMPv1/v2 or MLDv1 answer these with their own
// version's reports, which snooping takes as it takes any.
// TestMcastSnoopingDifferential runs v1/v2/MLDv1 membership, the flush
// and the querier on ovn-controller and govn chassis alike. Kept apart
// from ovn-controller 23.03 on the wire: its IGMP query has no Router
// Alert option, QRV 0 and a QQIC equal to its max-response code (govn:
// Router Alert, QRV 2, QQIC the interval, per RFC 3376; the test sees
// the option's absence), its MLD query goes to MAC 33:33:00:00:00:00
// (govn: 33:33:00:00:00:01, which ff02::1 maps to).
//
// A query from a local port (another querier's) makes the port a
// multicast router's for MrouterIdle (180 s, Open vSwitch's snooping
// table's) after the last: each switch snooping with a port here has an
// IGMP_Group row "mrouters" of this chassis, from the start and without
// ports until then, as ovn-controller writes it, from which ovn-northd
// sends the switch's reports to those ports too. Like ovn-controller,
// a switch that is the querier goes on querying when it hears another
// (no querier election).
//
// Periodic router advertisements: every router port whose Port_Binding
// has ipv6_ra_send_periodic (ovn-northd copies ipv6_ra_configs there) and
// whose peer switch has a port bound to this chassis advertises at once,
// then every ipv6_ra_min_interval to ipv6_ra_max_interval seconds, spread
// by a hash of the port (not a random number, so runs repeat); the
// advertisement enters the switch's ingress pipeline from the router's
// port there.
//
// Gratuitous ARPs: each nat_addresses entry of a Port_Binding that is
// resident here (its is_chassis_resident port, or the port itself, is
// bound here, or it is an l3gateway port of this chassis) is announced
// on its switch's localnet ports — an ARP request for each address from
// its MAC — at once, then after 1, 2, 4, 8 and 16 s, and again when the
// entry changes.
//
// Service monitors (load-balancer health checks): every Service_Monitor
// row whose logical_port is bound here is probed every interval (options
// interval, timeout, success_count, failure_count; defaults 5 s, 20 s,
// 3, 3): a TCP SYN, or a UDP datagram, from src_mac and src_ip, sent out
// of the switch to the port (its egress pipeline lets the monitor MAC
// by). Replies to the monitor MAC come back by handle_svc_check(inport):
// a SYN-ACK is a success (and is answered with a RST), a RST a failure;
// for UDP an ICMP unreachable is a failure and silence until the timeout
// a success, for TCP silence is a failure. success_count successes in a
// row make the service online, failure_count failures offline; status is
// written only when it differs from the Southbound's ("error" for a row
// that cannot be probed). pinctrl/show counts the monitors by status.
// internal/hvtest's TestGovnChassisServiceMonitor and
// TestServiceMonitorDifferential check it against backends that stop and
// start, and against the real ovn-controller's statuses.
//
// Parsed userdata and compiled nested bodies are cached (bounded), since
// they cost far more than building a packet.
//
// # Agreement with ovn-controller
//
// internal/hvtest's differential tests run govn chassis and the real
// ovn-controller side by side on one Southbound and compare what they
// send field by field: DHCPv4 offers (TestDHCPDifferential), the
// router's time exceeded (TestICMPDifferential), DHCPv6 advertises and
// router advertisements (TestIPv6Differential), DNS answers
// (TestDNSDifferential), a reject ACL's TCP RST, SCTP ABORT and ICMP and ICMPv6 port
// unreachables, a router's ICMPv6 time exceeded and the switch's
// neighbor advertisements (TestPinctrlWireDifferential). Like
// ovn-controller, TCP resets and SCTP aborts go with TTL 63 and DF, and
// the packets nested actions build come from the controller (in_port
// OFPP_CONTROLLER), not from the packet-in's port. Where ovn-controller differs from the RFCs and
// a client still understands it (DF on ICMP errors, router lifetime
// 0xffff, infinite T1/T2, no AA in DNS answers), govn does as it does;
// one difference is kept on purpose: ovn-controller 23.03 writes a
// DHCPv6 domain search list as a single label, govn as DNS names.
//
// BFD (RFC 5880; bfd.go, bfd_session.go): BFDSession is the
// asynchronous-mode state machine on the caller's clock, without I/O.
// TunnelBFD (bfd_tunnel.go) runs one over the Geneve tunnel to each
// chassis the controller names (gateway liveness), in Open vSwitch's
// wire format, so that a govn chassis and a real one see each other up
// (TestBFDMixedGatewayFailover); PortBFD (bfd_port.go) runs the
// Southbound's BFD rows of router ports that reside here, takes the
// peers' packets from handle_bfd_msg and writes the rows' status
// (TestGovnChassisBFDRoute). bfd/show lists both.
package pinctrl
