// Package flow defines the vocabulary of govn's datapath: the flow Key every
// packet is parsed into, the Field names that address bits of it, Masks and
// Matches over it, the Actions of flow-table rules, the Rules and Bundles the
// controller programs tables with, and the DPActions a megaflow executes.
//
// # The key
//
// A Key is a fixed array of 64-bit words (see the layout in key.go). Fields
// never straddle a word except the 128-bit ones, which take two whole words.
// This shape makes the three hot operations on keys trivial loops over words:
// masking (k & m), hashing the masked words, and comparing. A Key is a
// comparable value; its zero value is "no packet": every field zero.
//
// Words are grouped by lookup stage (metadata, L2, L3, L4); each stage is a
// contiguous range of words, so the classifier can hash a prefix of the key
// stage by stage (staged lookup).
//
// Some words are pipeline-only: OpenFlow metadata, the registers and conj_id
// never exist in a packet. They are zero when a packet enters the pipeline,
// are filled only by actions, and are dropped from megaflow masks
// (PipelineOnlyMask), since any register value is a function of the packet
// bits the pipeline examined.
//
// pkt_len, the frame's length, is a key field that no OpenFlow match names:
// it exists so check_pkt_larger can be decided by translation, with the
// megaflow matching just the bits of the length that decide it.
//
// # Actions beyond OpenFlow 1.x
//
// Push and Pop work a per-translation stack (OVS's push:/pop:),
// CheckPktLarger compares pkt_len with a threshold, and Learn adds rules to
// a table from the packet's fields (OVS's learn).
//
// # Values
//
// Field values are unsigned integers in network order: the first byte of an
// address is the most significant. IPv4 addresses are 32-bit values,
// Ethernet addresses 48-bit values, IPv6 addresses and 128-bit registers are
// U128 values. Subfields (reg0[8..15]) are FieldRanges.
package flow
