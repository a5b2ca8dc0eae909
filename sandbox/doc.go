// Package sandbox is `govn sandbox`: a whole OVN deployment run by govn on
// one machine, in network namespaces, with a demo topology and checks that
// it works.
//
// [Start] makes a central namespace running govn db (Northbound and
// Southbound) and govn northd, an underlay bridge, and hypervisor
// namespaces hv1, hv2, ... each running govn chassis with its encap
// address on the underlay; it then builds the demo (see [demo]): VMs as
// namespaces plugged into br-int of their hypervisor, logical switches, a
// router, a load balancer whose backends serve HTTP, an ACL, a VM that
// gets its address by DHCP. [Sandbox.Check]
// runs the demo's checks (pings within a switch and across hypervisors,
// routed pings, the VIP reaching every backend, what the ACL blocks), and
// [Sandbox.Describe] prints what was built and the real OVN and OVS
// command lines that reach and inspect it. [Sandbox.Close] removes every
// namespace, process and file the sandbox made, which Start also does
// when it fails.
//
// Everything is named from fixed roots, Prefix for namespaces and Dir for
// files, so that one machine has one sandbox: Start refuses while the
// namespaces or the directory of another are there, and [Clean] removes
// what a killed sandbox left behind. The orchestration primitives are
// package internal/lab's, shared with the system tests.
package sandbox
