// Package packet turns packet bytes into flow keys and back: Extract parses
// an Ethernet frame into a flow.Key without allocating (the hottest code of
// the datapath), DecapGeneve/DecapVXLAN fill the key's tunnel fields from an
// outer header before parsing the inner frame, and the header views
// (Ethernet, IPv4, IPv6, TCP, UDP, ...) read and rewrite headers in place,
// keeping checksums right.
//
// Extract never fails: like OVS, it extracts what it can. A truncated or
// malformed header leaves its fields (and all later ones) zero, with the
// outer fields that were intact still set, so a rule can still match
// eth_type of a runt IPv4 packet. Only the packet words of the key (stages
// L2..L4) are written; the metadata words (in_port, recirc_id, tunnel,
// conntrack) belong to the caller, which is how tunnel metadata survives
// recirculation: a recirculated packet is re-extracted into a key whose
// metadata words are kept.
package packet
