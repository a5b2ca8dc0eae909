// Package hvtest builds OVN deployments in network namespaces for system
// tests: a central namespace with the Northbound and Southbound databases
// and a northd, an underlay (a Linux bridge, MTU 9000) joining N hypervisor
// namespaces that each run a chassis (by default the real ovs-vswitchd with
// its userspace datapath and the real ovn-controller), and VMs as namespaces
// whose veth ends sit on their hypervisor's br-int, bound to a logical
// switch port through external_ids:iface-id.
//
// The northd and the chassis are pluggable, so that the same test runs
// against the real OVN and against govn: a [Northd] starts any northd on the
// cluster's databases, a [Chassis] any switch-and-controller in one
// hypervisor namespace, configured as OVN users configure a hypervisor, with
// ovs-vsctl on its local database.
//
// Every process runs inside a namespace the cluster made, and everything is
// removed when the test ends, pass or fail. Names carry a per-run prefix
// (hvt<pid>-) so that [New] can sweep what a killed earlier run left behind.
//
// The VM helpers (HTTP server, HTTP client, DHCPv4 client) re-execute the
// test binary inside the VM's namespace: a test package that uses them must
// call [RunToolIfAsked] first thing in its TestMain. Ping uses ping(8) from
// iputils-ping.
//
// With Options.Physnet set, a provider network joins the hypervisors too
// (br-ex and ovn-bridge-mappings), for localnet ports, and
// [Cluster.AddExternal] puts hosts on it. [VM.MoveTo] moves a VM to another
// hypervisor, as a migration does. [Cluster.NewVM] and [VM.Plug] are
// [Cluster.AddVM] in two steps, for timing the plug-in alone.
//
// The first packet to a new tunnel neighbour is lost while OVS resolves it,
// so tests wait for connectivity ([VM.WaitPing]) before they count
// anything.
//
// A typical test:
//
//	c := hvtest.New(t, hvtest.Options{})          // hv1, hv2; real OVN
//	c.NBCtl(t, "ls-add", "ls0")
//	c.NBCtl(t, "lsp-add", "ls0", "vm1", "--", "lsp-set-addresses", "vm1", "0a:00:00:00:00:01 10.0.0.11")
//	vm1 := c.AddVM(t, c.Hypervisor(1), hvtest.VMSpec{Name: "vm1", LSP: "vm1",
//		MAC: "0a:00:00:00:00:01", Addr: "10.0.0.11/24"})
//	... vm2 likewise on c.Hypervisor(2) ...
//	c.WaitPortUp(t, "vm1")
//	if err := vm1.WaitPing(vm2.IP(), 20*time.Second); err != nil { ... }
//	if err := vm1.Ping(vm2.IP(), 5); err != nil { ... }
package hvtest
