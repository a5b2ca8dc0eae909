// Package lab builds virtual networks out of Linux network namespaces and
// the daemons that run in them: namespaces, veth links, processes started
// inside a namespace and stopped again, waits for sockets and conditions,
// the hypervisor plumbing OVN needs (an underlay link, br-phy and br-int
// configured through ovs-vsctl), and small tools run inside a namespace (an
// HTTP server and client, a DHCPv4 client, ping).
//
// Every function returns an error instead of failing a test, so the same
// code serves the system tests (internal/hvtest, which turns errors into
// test failures) and `govn sandbox`, a command. What a function makes is
// undone by the caller: functions that create something register its
// removal with a [Cleaner] — testing.TB is one, so a test's resources go
// when the test ends, and [Stack] is one for commands, which undo all of it
// with [Stack.Close] on exit, interrupt or failure.
//
// lab needs root and iproute2 (ip), ethtool and, for ping, iputils-ping.
package lab
