// Package schema holds govn's own OVSDB schemas, embedded in the binary:
// "nb" (OVN_Northbound), "sb" (OVN_Southbound) and "vswitch"
// (Open_vSwitch). They keep OVN 23.03's and OVS 3.1's names, types,
// constraints, indexes and versions, so OVN's tools and daemons accept a
// govn database built from them, but they are written in govn's canonical
// layout (see Format): keys sorted, one column per line, no checksum.
//
// The files live next to the typed models generated from them
// (schema/nb, schema/sb, schema/vswitch); this package only serves the
// bytes. "govn db create FILE nb" uses Lookup.
package schema
