// Package datapath is the root of govn's forwarding plane: a userspace
// switch that sees ports, flow tables, fields, masks and actions, and nothing
// of OVN. It holds no code; the packages below it do one thing each.
//
//	flow        the vocabulary: Key (the parsed packet), Field, Mask, Match,
//	            Actions, Rules, Bundles, and the datapath actions (DPAction)
//	packet      bytes → Key (allocation free), tunnel decapsulation
//	classifier  flow tables: tuple-space search with wildcard tracking,
//	            staged lookup, prefix tries, conjunctions; Tables takes bundles
//	xlate       the slow path: a Key walked through the tables → megaflow
//	            (key, mask, datapath actions), with reasons and a trace
//	megaflow    the fast path's cache: ranked subtables, exact-match cache,
//	            revalidation on table changes, idle expiry, dumps
//	conntrack   connection tracking, NAT and load balancing by zone
//	port, dp    ports, the receive/execute loop that ties it together
//
// # The life of a packet
//
// A receive goroutine reads a batch of frames from a port. Each frame is
// parsed by packet.Extract into a flow.Key (in_port and the other metadata
// words set by the port). The key is looked up in the exact-match cache, then
// in the megaflow cache. A hit gives a list of datapath actions to run: set
// fields, push/pop VLAN, ct, recirc, output. A miss is an upcall: the
// translator looks the key up in table 0 and follows the rules' actions
// through the tables, recording in a mask every bit of the key that any
// lookup or action examined. The result, the key masked by that mask and the
// actions, is installed as a megaflow, so every later packet that agrees on
// the examined bits (the next TCP connection from a new source port, say)
// is a hit.
//
// The whole design serves one number: how few bits a megaflow has to match.
// Each bit examined without need multiplies megaflows and upcalls. That is
// why the classifier stages its lookups and tracks prefixes, why actions
// that read a packet field un-wildcard it (and why pipelines should load
// constants rather than move packet fields), and why registers never appear
// in a megaflow: they are functions of the bits that were examined.
//
// # Changes
//
// The controller programs the tables with atomic bundles (flow.Bundle);
// each bumps a generation. A megaflow remembers the generation it was
// translated at; the cache treats older megaflows as misses until it has
// revalidated them (re-translated and kept only if nothing changed), so no
// stale megaflow is used after a change.
//
// # Counting
//
// A hit counts only its megaflow. Rules and tables count packets after
// the fact: each translation lists the counters of the rules it ran and
// the tables it missed (xlate.Result.Counters), the megaflow keeps that
// list, and the megaflow's packets since the last push are credited to it
// on the sweeps that already run (expiry, revalidation, removal) and on
// dumps (dp.Datapath.PushStats). Rules read them in flow.Rule.Stats,
// tables in classifier.Tables.TableStats. A modified rule keeps its
// counts; a rule added in place of another starts from zero, as with an
// OpenFlow 1.0 add in Open vSwitch.
package datapath
