// Package switchd is "govn switch": a daemon that runs govn's userspace
// datapath (package dp) on real ports with flow tables loaded from a file,
// and answers ovs-appctl commands on a control socket (package unixctl) so
// that a network engineer can see what it does.
//
// The control socket's commands follow ovs-appctl's names where OVS has
// one, and print much what OVS prints:
//
//   - dpctl/dump-flows [reasons]: the megaflows, with packets, bytes and
//     idle time; with "reasons", under each megaflow the rule (or action)
//     that made each of its fields be matched.
//   - dpctl/del-flows: empty the megaflow caches (not the flow tables).
//   - dpctl/show, dpif/show: ports with their counters, the cache's
//     hit/miss (upcall) counters and the megaflow count.
//   - dump-tables: per table, the packets that matched a rule or missed,
//     and the slow path's lookups.
//   - ofproto/trace FLOW: the tables a packet with these fields traverses,
//     the rule it matches in each, the megaflow it would get (with the
//     reasons for its mask) and its datapath actions.
//   - dump-flows [TABLE], add-flow RULE, del-flows, replace-flows FILE:
//     the flow tables, in the text form package flow parses, each rule
//     with n_packets and n_bytes as ovs-ofctl dump-flows shows them.
//     Changes are applied atomically and the megaflows revalidated at
//     once. As with ovs-ofctl, add-flow over an existing rule resets its
//     counts (an OpenFlow 1.0 add), and replace-flows deletes, adds and
//     modifies only what differs, so the rules it keeps keep their counts
//     (as ovs-ofctl -O OpenFlow13 replace-flows).
//   - conntrack/dump [zone=N], conntrack/flush [zone=N] (also under
//     OVS's names dpctl/dump-conntrack and dpctl/flush-conntrack).
//   - list-commands, version, exit.
//
// Ports are numbered as OpenFlow ports: 1, 2, ... in the order given, or
// the number chosen with NAME:N; flows' in_port and output use these
// numbers.
package switchd
