package difftest

import "testing"

// sbctlScript exercises ovn-sbctl's chassis, binding and database commands.
var sbctlScript = []step{
	cmd("init"),
	cmd("chassis-add", "ch1", "geneve", "192.168.0.1"),
	cmd("chassis-add", "ch2", "geneve,vxlan", "192.168.0.2"),
	cmd("chassis-add", "ch1", "geneve", "192.168.0.9"), // duplicate: an error
	cmd("--may-exist", "chassis-add", "ch1", "geneve", "192.168.0.1"),
	cmd("chassis-add", "ch3", "nosuchencap", "192.168.0.3"),
	cmd("set", "Chassis", "ch1", "hostname=host1", "external_ids:rack=r1", "other_config:ovn-bridge-mappings=phys:br-ex"),
	cmd("add", "Chassis", "ch2", "external_ids", "rack=r2"),
	cmd("get", "Chassis", "ch1", "hostname", "external_ids:rack"),
	cmd("create", "Datapath_Binding", "tunnel_key=1", "external_ids:name=sw0"),
	cmd("create", "Port_Binding", "logical_port=lp1", "tunnel_key=1", "datapath={last}", "mac=\"00:00:00:00:00:01 10.0.0.1\""),
	bareUUIDs("find", "Datapath_Binding", "tunnel_key=1"),
	cmd("create", "Port_Binding", "logical_port=lp2", "tunnel_key=2", "datapath={last}", "type=localnet"),
	bareUUIDs("find", "Datapath_Binding", "tunnel_key=1"),
	cmd("create", "Port_Binding", "logical_port=lp1", "tunnel_key=3", "datapath={last}"), // duplicate logical_port
	cmd("create", "Datapath_Binding", "tunnel_key=1"),                                    // duplicate tunnel_key
	cmd("create", "Datapath_Binding", "tunnel_key=0"),                                    // out of range
	cmd("lsp-bind", "lp1", "ch1"),
	cmd("lsp-bind", "lp1", "ch2"), // already bound: an error
	cmd("lsp-bind", "nosuch", "ch2"),
	cmd("create", "Address_Set", "name=as1", `addresses="10.0.0.1","10.0.0.2"`),
	cmd("create", "Port_Group", "name=pg1", `ports="lp1","lp2"`),
	cmd("create", "MAC_Binding", "logical_port=lp2", "ip=10.0.0.5", "mac=\"0a:00:00:00:00:05\"", "datapath=[]"),
	cmd("create", "Meter", "name=m1", "unit=pktps"),
	cmd("create", "Meter", "name=m2", "unit=furlongs"), // not in the enum
	tree("show"),
	listing("list", "Chassis"),
	listing("list", "Encap"),
	listing("list", "Port_Binding"),
	listing("list", "Datapath_Binding"),
	listing("list", "SB_Global"),
	listing("list", "Address_Set"),
	listing("find", "Encap", "type=vxlan"),
	listing("find", "Port_Binding", "chassis!=[]"),
	lineSet("--bare", "--columns=logical_port", "find", "Port_Binding", "type=localnet"),
	cmd("lflow-list"),
	cmd("lsp-unbind", "lp1"),
	cmd("remove", "Chassis", "ch1", "external_ids", "rack"),
	cmd("clear", "Chassis", "ch1", "other_config"),
	cmd("chassis-del", "ch2"),
	cmd("--if-exists", "chassis-del", "ch2"),
	cmd("chassis-del", "ch2"),
	cmd("destroy", "Address_Set", "as1"),
	listing("list", "Encap"), // ch2's encaps went with it
	tree("show"),
}

// TestSbctlSession is TestNbctlSession for ovn-sbctl.
func TestSbctlSession(t *testing.T) {
	need(t, "ovn-sbctl", "ovsdb-server", "ovsdb-tool")
	compareSessions(t, "ovn-sbctl", "sb", "ovn-sbctl", "--db=", sbctlScript)
}

// clientScript exercises ovsdb-client's commands and, through "transact",
// every RFC 7047 operation, including the error replies.
var clientScript = []step{
	cmd("list-dbs", "{db}"),
	cmd("wait", "{db}", "OVN_Southbound", "connected"),
	cmd("get-schema", "{db}", "OVN_Southbound"),
	cmd("get-schema", "{db}", "_Server"),
	cmd("get-schema", "{db}", "No_Such_DB"),
	cmd("get-schema-version", "{db}", "OVN_Southbound"),
	cmd("list-tables", "{db}", "OVN_Southbound"),
	cmd("list-columns", "{db}", "OVN_Southbound", "Encap"),
	cmd("transact", "{db}", `["OVN_Southbound",
		{"op":"insert","table":"Encap","row":{"type":"geneve","ip":"10.0.0.1","chassis_name":"ch1","options":["map",[["csum","true"]]]},"uuid-name":"e1"},
		{"op":"insert","table":"Chassis","row":{"name":"ch1","hostname":"h1","encaps":["named-uuid","e1"]}}]`),
	monitor(`"delete"`, []string{"--format=json", "monitor", "{db}", "OVN_Southbound", "Chassis", "name,hostname,external_ids"},
		cmd("transact", "{db}", `["OVN_Southbound",{"op":"insert","table":"Encap","row":{"type":"vxlan","ip":"10.0.0.2","chassis_name":"ch2"},"uuid-name":"e"},{"op":"insert","table":"Chassis","row":{"name":"ch2","hostname":"h2","encaps":["named-uuid","e"]}}]`),
		cmd("transact", "{db}", `["OVN_Southbound",{"op":"update","table":"Chassis","where":[["name","==","ch1"]],"row":{"hostname":"h1b"}}]`),
		cmd("transact", "{db}", `["OVN_Southbound",{"op":"mutate","table":"Chassis","where":[["name","==","ch1"]],"mutations":[["external_ids","insert",["map",[["k","v"]]]]]}]`),
		cmd("transact", "{db}", `["OVN_Southbound",{"op":"delete","table":"Chassis","where":[["name","==","ch2"]]}]`),
	),
	monitor("delete", []string{"monitor-cond", "{db}", "OVN_Southbound", `[["hostname","==","h1b"]]`, "Chassis", "name,hostname,nb_cfg"},
		cmd("transact", "{db}", `["OVN_Southbound",{"op":"insert","table":"Encap","row":{"type":"vxlan","ip":"10.0.0.3","chassis_name":"ch3"},"uuid-name":"e"},{"op":"insert","table":"Chassis","row":{"name":"ch3","hostname":"h3","encaps":["named-uuid","e"]}}]`),
		cmd("transact", "{db}", `["OVN_Southbound",{"op":"mutate","table":"Chassis","where":[["name","==","ch1"]],"mutations":[["nb_cfg","+=",5]]}]`),
		cmd("transact", "{db}", `["OVN_Southbound",{"op":"update","table":"Chassis","where":[["name","==","ch3"]],"row":{"hostname":"h1b"}}]`),
		cmd("transact", "{db}", `["OVN_Southbound",{"op":"update","table":"Chassis","where":[["name","==","ch1"]],"row":{"hostname":"h1c"}}]`),
	),
	monitor("delete", []string{"monitor-cond-since", "{db}", "OVN_Southbound", `[["name","==","ch3"]]`, "Chassis", "name,hostname"},
		cmd("transact", "{db}", `["OVN_Southbound",{"op":"update","table":"Chassis","where":[["name","==","ch3"]],"row":{"hostname":"h3b"}}]`),
		cmd("transact", "{db}", `["OVN_Southbound",{"op":"update","table":"Chassis","where":[["name","==","ch1"]],"row":{"hostname":"h1d"}}]`),
		cmd("transact", "{db}", `["OVN_Southbound",{"op":"update","table":"Chassis","where":[["name","==","ch3"]],"row":{"name":"ch3x"}}]`),
	),
	sortedMonitor("{a=b}", []string{"monitor", "{db}", "OVN_Southbound", "ALL"},
		cmd("transact", "{db}", `["OVN_Southbound",{"op":"insert","table":"SB_Global","row":{"options":["map",[["a","b"]]]}}]`),
	),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"select","table":"Chassis","where":[["nb_cfg",">=",5],["name","!=","ch3"]],"columns":["name","nb_cfg","hostname"]}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"select","table":"Encap","where":[["options","includes",["map",[["csum","true"]]]]],"columns":["ip","type"]}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"wait","table":"Chassis","timeout":0,"where":[["name","==","ch1"]],"columns":["hostname"],"until":"==","rows":[{"hostname":"h1b"}]}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"wait","table":"Chassis","timeout":0,"where":[["name","==","ch1"]],"columns":["hostname"],"until":"==","rows":[{"hostname":"zzz"}]}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"wait","table":"Chassis","timeout":0,"where":[["name","==","nobody"]],"columns":["hostname"],"until":"!=","rows":[]}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"comment","comment":"hello"},{"op":"insert","table":"Address_Set","row":{"name":"as1"}}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"insert","table":"Address_Set","row":{"name":"as2"}},{"op":"abort"}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"commit","durable":false},{"op":"insert","table":"Address_Set","row":{"name":"as3"}}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"assert","lock":"mylock"}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"insert","table":"Address_Set","row":{"name":"as1"}}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"insert","table":"No_Such","row":{}}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"insert","table":"Chassis","row":{"name":5}}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"insert","table":"Chassis","row":{"nosuch":"x"}}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"insert","table":"Encap","row":{"type":"carrier-pigeon","ip":"1","chassis_name":"x"}}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"insert","table":"Chassis","row":{"name":"ch9","encaps":["uuid","00000000-0000-0000-0000-000000000001"]}}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"insert","table":"Chassis","row":{"name":"ch9"},"uuid-name":"x"},{"op":"insert","table":"Chassis","row":{"name":"ch10"},"uuid-name":"x"}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"frobnicate","table":"Chassis"}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"update","table":"Chassis","where":[["name","==","ch1"]],"row":{"_uuid":["uuid","00000000-0000-0000-0000-000000000001"]}}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"mutate","table":"Chassis","where":[],"mutations":[["nb_cfg","/=",0]]}]`),
	cmd("transact", "{db}", `["OVN_Southbound",{"op":"delete","table":"Encap","where":[]}]`),
	cmd("transact", "{db}", `["No_Such_DB",{"op":"comment","comment":"x"}]`),
	cmd("transact", "{db}", `["_Server",{"op":"select","table":"Database","where":[["name","==","OVN_Southbound"]],"columns":["name","model","connected","leader"]}]`),
	cmd("transact", "{db}", `["_Server",{"op":"insert","table":"Database","row":{"name":"x"}}]`),
	cmd("query", "{db}", `["OVN_Southbound",{"op":"insert","table":"Address_Set","row":{"name":"q"}}]`),
	cmd("dump", "{db}", "OVN_Southbound", "Chassis", "Encap", "Address_Set"),
	cmd("--format=json", "dump", "{db}", "OVN_Southbound", "Chassis"),
}

// TestClientSession is TestNbctlSession for ovsdb-client and raw
// transactions.
func TestClientSession(t *testing.T) {
	need(t, "ovsdb-client", "ovsdb-server", "ovsdb-tool")
	compareSessions(t, "ovsdb-client", "sb", "ovsdb-client", "", clientScript)
}
