package difftest

import "testing"

// vsctlScript is what an OVN chassis's local database sees: bridges, ports
// and interfaces bound to logical ports through external_ids:iface-id.
var vsctlScript = []step{
	cmd("--no-wait", "init"),
	cmd("--no-wait", "set", "Open_vSwitch", ".", "external_ids:system-id=hv1", "external_ids:ovn-remote=unix:/nonexistent",
		"external_ids:ovn-encap-type=geneve", "external_ids:ovn-encap-ip=192.168.0.1"),
	cmd("--no-wait", "add-br", "br-int", "--", "set", "Bridge", "br-int", "datapath_type=netdev", "fail-mode=secure"),
	cmd("--no-wait", "add-br", "br-int"), // exists: an error
	cmd("--no-wait", "--may-exist", "add-br", "br-int"),
	cmd("--no-wait", "add-port", "br-int", "veth1", "--", "set", "Interface", "veth1", "external_ids:iface-id=lsp1"),
	cmd("--no-wait", "add-port", "br-int", "veth2", "--", "set", "Interface", "veth2", "type=internal", "external_ids:iface-id=lsp2"),
	cmd("--no-wait", "add-port", "br-int", "veth1"), // exists: an error
	cmd("--no-wait", "add-br", "br-ex"),
	cmd("--no-wait", "add-port", "br-ex", "eth1", "tag=10"),
	cmd("--no-wait", "set", "Port", "eth1", "trunks=10,20,30"),
	cmd("--no-wait", "set", "Interface", "veth1", "ofport_request=5"),
	lineSet("list-br"),
	lineSet("list-ports", "br-int"),
	lineSet("list-ifaces", "br-int"),
	cmd("port-to-br", "veth1"),
	cmd("iface-to-br", "veth2"),
	cmd("br-exists", "br-nope"),
	cmd("get", "Open_vSwitch", ".", "external_ids:system-id"),
	cmd("get", "Interface", "veth1", "external_ids:iface-id", "ofport_request"),
	listing("--columns=name,external_ids,type", "list", "Interface"),
	listing("--columns=name,tag,trunks", "list", "Port"),
	listing("--columns=name,datapath_type,fail_mode", "list", "Bridge"),
	listing("--columns=name", "find", "Interface", "external_ids:iface-id=lsp1"),
	tree("show"),
	cmd("--no-wait", "remove", "Port", "eth1", "trunks", "20"),
	cmd("--no-wait", "clear", "Interface", "veth1", "ofport_request"),
	cmd("--no-wait", "del-port", "veth2"),
	cmd("--no-wait", "del-br", "br-ex"),
	listing("--columns=name", "list", "Interface"),
	listing("--columns=name", "list", "Port"),
	tree("show"),
}

// TestVsctlSession is TestNbctlSession for ovs-vsctl on the vswitch schema.
func TestVsctlSession(t *testing.T) {
	need(t, "ovs-vsctl", "ovsdb-server", "ovsdb-tool")
	compareSessions(t, "ovs-vsctl", "vswitch", "ovs-vsctl", "--db=", vsctlScript)
}
