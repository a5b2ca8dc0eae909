// Package trace is `govn trace`: one packet followed through the logical
// pipelines, the chassis's datapath rules and the megaflows they yield,
// joined, so that nobody has to stitch ovn-trace, ofproto/trace and
// ovn-detrace together by hand (and none of those explains a megaflow).
//
// # How
//
// Run compiles a Southbound snapshot (govn northd's or the real
// ovn-northd's) exactly as a govn chassis's controller does
// (controller.Translator.Translate) for one chassis: the VIFs bound to it
// (and the input port) get interfaces 1, 2, ... in name order, a Geneve
// port follows if there are other chassis, conntrack zones are numbered
// in name order. The rules go into an in-memory datapath (datapath/dp
// with channel ports and a real connection tracker), whose slow path is
// wrapped to record every translation with its trace. The packet the
// microflow describes (ParseMicroflow, BuildFrame: the first packet of
// its connection, a TCP SYN or an echo request) is sent in by the input
// port's interface, so it runs through conntrack, NAT, load-balancer
// groups and recirculations as on the chassis. The result has
//
//   - Passes: each translation (the first, and one per recirculation,
//     with the ct_state it started with), each rule it ran and the
//     source of that rule: the logical flow whose UUID's first 32 bits
//     are the rule's cookie (as in OVN), or the chassis's own physical
//     rule (stage, interface, datapath, ports), or a load balancer's
//     hairpin lookup;
//   - Logical: the logical flows those rules came from, in order, each
//     with the Northbound row that made it (its stage-hint, else the
//     port its match or actions name, else its switch or router);
//   - Megaflows: the megaflows the datapath installed, each matched
//     field with the rule that made the megaflow match it (matched, ruled
//     out, or read by an action: xlate.Reason) and that rule's source.
//     A rule "ruled out" is the packet's own datapath's rule of the
//     classifier subtable whose check examined the field, when it has one;
//     otherwise it can be another logical datapath's: the classifier's
//     first stage covers metadata and the conntrack fields together, so a
//     switch's ct_state rules can make a megaflow of another switch match
//     ct_state, and the trace says so.
//
// A frame the chassis sends into its Geneve port is followed to the
// chassis whose encap address the tunnel header names, modelled the same
// way and entered by its tunnel port with that header (tun_id, OVN's
// port-key option), at most four chassis in all; each is a Hop with its
// passes, megaflows and outputs (the packet's headers after every
// rewrite: the backend a load balancer chose, the TTL a router
// decremented).
//
// The logical section is read off the datapaths' paths, not interpreted
// separately: it is what the chassis really ran. Actions the controller
// carries out (DHCP, ARP replies) end at the controller() action; a
// localnet port's provider network is not modelled (no bridge mappings),
// and each chassis gets a connection tracker of its own, empty: the
// packet is the first of its connection.
// Group ids are renumbered and rules installed in an order of their
// contents (canonical), so a trace does not depend on the Southbound's
// UUIDs; otherwise the model is the chassis's datapath.
package trace
