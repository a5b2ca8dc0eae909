// Package conntrack is govn's connection tracker: the state behind the
// datapath's ct() action, on which OVN's ACLs, load balancers and NAT rest.
//
// It works on raw IP packets and knows nothing of ports, flows or OpenFlow.
// The caller hands it one packet at a time with the offset of the IPv4 or
// IPv6 header; the tracker parses what it needs (addresses, TCP sequence
// numbers, windows and flags, ICMP error payloads), finds or creates the
// connection in the packet's zone, and returns the ct_state bits and the
// connection's metadata (zone, mark, label, original-direction tuple). When
// NAT is asked for, the tracker rewrites the packet's addresses and ports in
// place and fixes the IP, TCP, UDP and ICMP checksums, so the caller only
// re-parses the packet afterwards.
//
// # The caller's contract
//
//   - Create one Tracker with New and stop it with Close. All methods are safe
//     for concurrent use by any number of goroutines.
//   - ProcessBatch(pkts, l3offs, params, now, results) is Process for a batch
//     of packets sharing one ct() action: same results, same packets, same
//     state as Process on each in order (packets of one connection keep
//     their order), but the cache misses of the batch overlap (see Design).
//   - Process(pkt, l3off, params, now): pkt[l3off:] must start with an IPv4 or
//     IPv6 header; bytes after the IP total/payload length (Ethernet padding)
//     are ignored. The packet may be modified in place (NAT) but never grows
//     or shrinks. Process never keeps pkt after it returns and never panics on
//     malformed input: such packets come back with State Tracked|Invalid and a
//     Reason saying why.
//   - Time is the caller's: now is a monotonic duration on any base the
//     caller chooses (time.Since(start) will do), and must not go backwards
//     between calls on the same Tracker. Process and Expire never read a
//     clock (only the reclaimer times its own work, for Stats).
//     Entries expire only when the caller calls Expire(now); call it a few
//     times a second from a control goroutine. Expire does bounded work per
//     call and may be called concurrently with Process.
//   - Fragments must be reassembled before Process, per zone, as OVS does
//     (package ipfrag does it); Process marks a fragment invalid with
//     ReasonFragment.
//   - A Result with State Invalid must not be forwarded with NAT expectations:
//     when a commit could not be done (zone limit, no free NAT port) the state
//     is Tracked|Invalid and Reason names the cause.
//   - Checksums are not verified (a veth with transmit offload leaves TCP/UDP
//     checksums partial, and tracking must not depend on it). NAT updates
//     checksums incrementally, which is correct for full checksums; for a
//     partial (offloaded) checksum set Params.PartialChecksum so the tracker
//     updates only the pseudo-header part.
//
// # ct_state
//
// State carries OVS's bits (ovs-fields(7)): Tracked is always set. An
// uncommitted connection is New and nothing is stored for it. A committed
// connection stays New in the original direction until a reply has been
// seen (for TCP: until the responder's SYN-ACK), then Established; packets
// in the reply direction are Established|Reply. ICMP errors about a tracked
// connection are Related (with Reply when they travel in its reply
// direction). SNAT and DNAT report a translation applied to this packet; on
// the reply direction the reverse of a source translation is reported as
// DNAT and vice versa, as OVS does.
//
// # Design
//
// Every zone owns its own table: a chunked slab of fixed-size entries
// without pointers (so the garbage collector never scans them), an index
// from a 64-bit keyed hash of each direction's tuple to the entry, and its
// own hierarchical timer wheel. The Tracker holds one atomic pointer per zone
// (65,536 of them). Consequences:
//
//   - An entry is three cache lines, laid out so that a UDP hit reads lines
//     0 and 1 only. The index is open addressing over one-line buckets of
//     seven (32-bit tag, entry) slots, in segments that split as the zone
//     grows (so growing never rehashes a whole zone): a hit costs one
//     bucket line and the entry, and a tag mismatch never reads an entry. With tables larger
//     than the caches those are two misses per packet, one after the
//     other; ProcessBatch first reads every packet's bucket, then every
//     candidate entry, so that the CPU overlaps the misses of up to
//     MaxBatch packets, and only then runs the packets one by one through
//     the ordinary path, which finds everything in cache (about 2.5 times
//     the single-packet rate over 500,000 connections).
//   - Lookups of established connections take only their zone's read lock
//     and the entry's own mutex; there is no global lock on the packet path.
//   - Flushing a zone swaps its pointer to nil: from that instant lookups see
//     an empty zone, and Flush returns. The detached table is handed to a
//     reclaimer goroutine that marks it dead (so a lookup that raced with the
//     swap retries on the new table) and returns its slab chunks to a pool in
//     bounded slices. Flush's cost does not depend on the number of entries
//     in the zone or in other zones.
//   - Timeouts: each entry stores its expiry; an established packet only
//     moves that expiry forward. The wheel finds entries by their scheduled
//     slot and re-files those whose expiry moved (lazy rescheduling), so no
//     code ever sweeps a whole table. The Tracker keeps, per zone and per
//     group of 64 zones, the earliest tick at which a wheel has a non-empty
//     slot to visit, so Expire skips zones with nothing due without even
//     reading them, and a wheel skipped for hours jumps over its empty
//     ticks.
//
// The transcripts in testdata/ (run by TestScripts, rewritten with
// "go test -run TestScripts -args -update") show the state machine at work,
// packet by packet: the TIME_WAIT port-reuse case, SNAT exhaustion, hairpin
// NAT, ICMPv6 errors.
//
// TCP tracking follows the window-tracking rules of van Rooij ("Real
// stateful TCP packet filtering in IP Filter"): each direction remembers the
// highest sequence it sent, the highest sequence the peer allows it to send
// and the largest window it advertised; a segment must fall inside those
// bounds, else it is invalid. A SYN on a connection that has closed (or is in
// TIME_WAIT) starts a new connection. In SYN_SENT, an ACK from the responder
// that does not acknowledge the SYN is the responder's challenge ACK for an
// older incarnation of the connection: it passes (Established|Reply) and is
// remembered, and the originator's RST answering it passes too without
// tearing down the new connection, so the client's retransmitted SYN gets
// through. (OVS 3.1 dropped these and the connection hung.)
package conntrack
