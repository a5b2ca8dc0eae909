// Package systest holds the datapath's system tests: network namespaces
// stand in for hosts, veth pairs for their NICs, and a govn datapath
// running in the test process switches between them. Real stacks run real
// traffic (ping, a TCP transfer, ab against an HTTP server) through it.
//
// The tests need root and ip(8) and skip without them. Every namespace,
// device and process they make is removed when the test ends, pass or fail.
// Subpackage netns builds the namespaces; subpackage traffic has the tools
// the test binary runs inside them.
package systest
