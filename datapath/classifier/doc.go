// Package classifier finds the highest-priority rule that matches a flow key
// and, as it goes, records which bits of the key it had to look at. That
// record (the "wildcards", a flow.Mask of examined bits) is what makes the
// datapath's megaflow cache work: a megaflow installed for one packet may be
// reused for every other packet that agrees on the examined bits, so the
// fewer bits the lookup examines, the fewer megaflows and upcalls.
//
// # Tuple-space search
//
// Rules are grouped into subtables by mask: all rules matching exactly
// the same bits share one hash table keyed by their masked key. A lookup
// probes each subtable with the packet's key under that subtable's mask. A
// probe of a subtable examines its whole mask, so a naive lookup would
// un-wildcard the union of every mask in the table. Three ideas keep the
// examined bits close to what the decision really depended on:
//
// Priority ordering. Subtables are sorted by the highest priority of any
// rule they hold; once a match is found, subtables that cannot beat it are
// not probed at all and contribute nothing to the wildcards.
//
// Staged lookup. A subtable's mask is split by stage (metadata, L2, L3, L4:
// contiguous word ranges of the key). For every stage but the last, the
// subtable keeps the set of hashes of its rules' keys up to the end of that
// stage. The probe hashes stage by stage and stops at the first stage whose
// partial hash no rule has, un-wildcarding only the stages it hashed. So a
// packet that fails a rule on its IP address leaves the rule's TCP port
// wildcarded.
//
// Prefix tracking. For nw_dst, nw_src, ipv6_dst and ipv6_src the classifier
// keeps a binary trie of every rule's prefix (rules whose mask on the field
// is a CIDR prefix). When a probe of a subtable whose mask has a prefix of
// length p on such a field reaches the L3 stage, the lookup asks the trie
// whether any rule's length-p prefix matches the packet's address. If none
// does the subtable is skipped, and only the address bits the trie walk read
// are un-wildcarded: up to the point where the packet's address left the
// trie. Host bits beyond the longest relevant prefix stay wildcarded. The
// trie is not used when its walk read more bits than p (probing would cost
// fewer), unless those bits are already un-wildcarded.
//
// Port tracking. A subtable whose last stage matches only tp_src/tp_dst
// keeps a trie of its rules' ports. When the final probe misses, only the
// leading port bits that tell the packet's ports apart from every rule's are
// un-wildcarded, so a rule for port 80 costs a port-81 packet 15 bits, not
// 16, and a port-1000 packet a handful.
//
// These are the ideas of Open vSwitch's classifier; the differential tests
// in package xlate check govn's megaflows against ovs-vswitchd's.
//
// # Conjunctive matches
//
// A Table keeps ordinary rules and conjunction clauses (rules whose actions
// are conjunction(id, k/n)) in one classifier, and rules matching conj_id in
// another. A lookup treats clauses as soft matches: they are collected but
// do not end the priority-ordered search. When the clauses of one
// conjunction all match at a priority above the best ordinary rule, the
// lookup continues with conj_id set to its id in the conj_id rules. Clauses
// from two sets of fields thus cost n+m rules rather than n*m.
//
// # Tables
//
// Tables holds the 255 tables and the groups of a bridge. It is the
// flow.Programmer the controller programs: bundles apply atomically under a
// write lock (a failing operation undoes the ones before it), each change
// bumps a generation number, and translation reads under the read lock
// (BeginRead/EndRead) so it sees one generation from start to end. Tables
// remembers which generation last changed each table, so revalidation can
// skip megaflows that looked only at unchanged tables (ChangedSince).
package classifier
