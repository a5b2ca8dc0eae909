// Package xlate translates a packet through the flow tables: starting at
// table 0 (or where a recirculation resumes), it follows resubmits, gotos,
// groups and conjunctions, applies loads and moves to a working copy of the
// key, and produces a megaflow: the original key masked by every bit the
// pipeline examined, and the datapath actions to run for every packet that
// matches it.
//
// # Wildcards
//
// Every table lookup ORs the bits it examined into the megaflow mask (see
// package classifier). Actions that read packet fields un-wildcard them too:
// a move from tcp_dst into a register makes the megaflow match tcp_dst
// exactly, a 5-tuple select group the 5-tuple, dec_ttl the TTL. Registers,
// metadata and conj_id are pipeline-only: they are never in a datapath key,
// since their values follow from the examined packet bits; their mask bits
// are dropped. in_port and recirc_id are always matched exactly.
//
// For observability each newly examined field is recorded with its cause:
// the rule a table lookup matched, the higher-priority rule it had to rule
// out (a lookup examines fields for rules that do not match, too: that is
// usually the surprising part), or the action that read the field. So a
// megaflow dump answers "why does this megaflow match tcp_src?" with, say,
// "table 1 ruled out priority=120,tcp,nw_dst=10.0.0.100,tp_dst=80".
//
// # Recirculation
//
// ct(table=N) cannot be translated ahead of time: what table N sees depends
// on conntrack. The translator emits ct(...) and recirc(id), where id names
// a frozen state (table N and the pipeline-only words: metadata and
// registers). Translation then continues with the actions after ct on the
// original packet, as OVS does ("recirculate and fork"). When the datapath
// re-injects the packet with recirc_id=id and its conntrack fields filled,
// a megaflow miss translates it from the frozen state. A select group with
// the SelectHash method works the same way: hash(l4) and recirc, then the
// bucket is chosen from dp_hash's low bits after recirculation. Frozen
// states are deduplicated, so equal states share an id.
//
// The push/pop stack (flow.Push, flow.Pop) belongs to one translation: a
// push reads its source as a move does (a packet field's bits become part
// of the megaflow), a pop writes like a load and reads nothing. The stack
// is part of a frozen state, so it survives recirculation, and a clone's
// changes to it are undone at the end of the clone.
//
// # Controller actions
//
// controller() becomes userspace() with the table and the working key's
// metadata and registers, which the controller needs and no datapath key
// holds. A paused controller() ends the translation and records its
// continuation: the rest of its action list, then the rest of each list
// that resubmitted to it as the translation unwinds (only up to an
// enclosing clone, which a pause ends). TranslateFrom runs a packet the
// controller injects from a continuation, from actions it gives, or from
// a table lookup, with registers it gives; that result is for the one
// packet and is never a megaflow.
//
// # check_pkt_larger
//
// OVS evaluates check_pkt_larger in the datapath (check_pkt_len with an
// action list for each outcome). govn instead puts the frame's length in
// the key (pkt_len, filled by packet.Extract, which the datapath re-runs
// after it pushes or pops a VLAN or NATs) and decides at translation
// time: the megaflow matches pkt_len's bits from the most significant
// down to the first bit in which the length and the threshold differ, so
// every packet the megaflow covers compares the same way, and one
// threshold costs at most one megaflow per bit of the length (13 for
// 1500 over lengths 0..3000) rather than one per length. This needs no
// conditional datapath action and keeps the fast path a plain list. A VLAN
// pushed or popped earlier in the same translation adjusts the length.
// Limitation: a segmentation-offloaded (GSO) frame counts with its whole
// length, where OVS's kernel datapath counts one segment.
//
// # learn
//
// A learn action builds a rule from the working key (reading, and so
// un-wildcarding, the packet fields it copies) and returns it in
// Result.Learned; the translation itself does not change the tables.
// The megaflow cache installs learned rules when it installs the
// megaflow (Learned.Install; classifier.Tables.Learn leaves an identical
// rule alone, so re-learning does not invalidate megaflows), refreshes
// them from its expiry run while the megaflow is hit, and has the
// translator remove rules past their idle or hard timeout
// (ExpireLearned). Revalidation's re-translations therefore do not renew
// a rule, and a rule learned in a translation is not visible to later
// lookups of the same translation (OVS installs it at once).
//
// Frozen states are reference counted by the megaflows that recirculate
// into them: Result.Recircs names them, and the megaflow cache holds them
// from Insert until it deletes the megaflow. A state that nothing holds is
// freed once unused (not frozen, resumed or released) for a grace period
// (DefaultRecircGrace), which covers a result waiting to be installed and
// packets already recirculated towards it. The check runs when a new state
// is allocated, at most once a grace period. Ids are not reused until the
// 32-bit space wraps, so a megaflow matching a freed id simply idles out.
package xlate
