// Package controller is the OVN controller half of govn chassis: from the
// Southbound database and the hypervisor's local configuration it decides
// which logical ports this chassis binds and which datapath rules carry
// their traffic.
//
// The translation is a pure function (Translate) of a snapshot (Input):
// no I/O, so that tests drive it with a fake datapath and check where
// packets go. Package-level I/O (the databases, the datapath's ports) lives
// in Run.
//
// # Incremental processing
//
// Run does not call Translate: it keeps an Engine (engine.go, on package
// incproc), Translate made incremental, and feeds it the Southbound rows
// that changed (the client's OnChange) and the local state. Its nodes,
// named as ovn-controller's where one matches (inc-engine/show-stats):
//
//	SB_*, OVS_interface, ct_zones  inputs: rows by UUID; the chassis,
//	                 interfaces, tunnel, bridges and the tables without a
//	                 node of their own
//	addr_sets, port_groups  parsed per row, changed names tracked
//	runtime_data     Translate's index (local datapaths, resident ports,
//	                 keys, tunnels), rebuilt on a change without compiling;
//	                 tracks the datapaths and ports whose facts changed
//	lflow_output     each logical flow compiled per local datapath and
//	                 cached with what it read (address sets, port groups,
//	                 ports' keys and residency); only those are recompiled
//	pflow_output     physical(), lookups(): recomputed (no parsing, the
//	                 rules are memoized by text), changed texts tracked
//	flow_output      the rules merged as Translate merges them; Commit
//	                 installs the difference (add, modify, delete)
//
// Conjunction and group ids start at a hash of (flow, datapath) in both
// Translate and the Engine, so the two agree rule for rule
// (TestEngineEqualsTranslate; inc-engine/verify on a running chassis).
// The chassis monitors the big Southbound tables by local datapath
// (monitor.go) unless external_ids:ovn-monitor-all=true.
//
// # Table layout
//
// The datapath tables follow OVN 23.03's (ovn-architecture(7), "Architectural
// Physical Life Cycle of a Packet"), so that dumps read as an OVN engineer
// expects:
//
//	0      physical to logical: a local VIF sets the logical datapath
//	       (metadata), the input port (reg14) and its conntrack zone
//	       (reg13) and goes to the ingress pipeline; a packet from a
//	       tunnel takes datapath, input and output port from the Geneve
//	       header and goes to table 40; a frame from a provider network's
//	       bridge enters the localnet port of its VLAN (localnet.go)
//	8-36   logical ingress pipeline (lflow.Compiler)
//	37-38  output stages without rules of their own: on to 39
//	39     remote output: a port bound to another chassis, or a
//	       multicast group's remote members, leave by the tunnel
//	40     local output: the outport's zone; a multicast group runs the
//	       egress pipeline once per local member
//	41     loopback check: a packet never returns to its input port
//	       unless flags.loopback is set; clears reg0-reg9
//	42-63  logical egress pipeline
//	64     flags.loopback lets a packet leave by its input port
//	65     logical to physical: a VIF's port number, or a patch port's
//	       peer, which re-enters the ingress pipeline of the peer's
//	       datapath, or a localnet port's bridge (VLAN tag pushed)
//	66-75  the lookup tables of get_arp, lookup_arp, chk_lb_hairpin,
//	       ct_snat_to_vip, get_fdb, lookup_fdb and port security, from
//	       MAC_Binding, Static_MAC_Binding, Load_Balancer, FDB and
//	       Port_Binding.port_security (lookups.go, portsec.go)
//
// Gateway ports (gateway.go): an l3gateway port is a patch port on its
// gateway chassis and remote elsewhere; a chassisredirect port belongs to
// the highest-priority gateway chassis alive by BFD over the tunnels
// (bfd.go), which claims it and runs its distributed port's egress
// pipeline there; the others send to the one alive in their own view.
//
// # Geneve
//
// As ovn-architecture(7) "Tunnel Encapsulations" says: the VNI is the
// logical datapath's tunnel key and OVN's Geneve option (class 0x0102,
// type 0x80, 32 bits: tun_metadata0 in the datapath) holds the logical
// input port's key in bits 16-30 and the output port's in bits 0-15.
package controller
