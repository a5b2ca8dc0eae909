package northdbench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Shape is the size of the generated cluster.
type Shape struct {
	Nodes int
	// PodsPerNode pods on each node switch (30).
	PodsPerNode int
	// Namespaces the pods are spread over; each has a network policy
	// (10).
	Namespaces int
	// Services are load balancers (default: as many as nodes, at least
	// 10), each with two VIPs and 2 to 10 backends.
	Services int
}

func (s Shape) withDefaults() Shape {
	if s.PodsPerNode <= 0 {
		s.PodsPerNode = 30
	}
	if s.Namespaces <= 0 {
		s.Namespaces = 10
	}
	if s.Services <= 0 {
		s.Services = max(10, s.Nodes)
	}
	return s
}

// The names and addresses of the cluster, as ovn-kubernetes makes them.
const (
	clusterRouter = "ovn_cluster_router"
	joinSwitch    = "join"
	lbGroup       = "clusterLBGroup"
	clusterSubnet = "10.128.0.0/14"
	joinRouterIP  = "100.64.0.1"
	extGatewayIP  = "192.168.0.1"
	physnet       = "physnet"
)

func nodeSwitch(k int) string { return fmt.Sprintf("node%d", k) }
func chassis(k int) string    { return fmt.Sprintf("chassis-node%d", k) }
func gwRouter(k int) string   { return "GR_" + nodeSwitch(k) }
func extSwitch(k int) string  { return "ext_" + nodeSwitch(k) }

// nodeNet is the first three octets of node k's pod subnet, a /24 of
// clusterSubnet.
func nodeNet(k int) string { return fmt.Sprintf("10.%d.%d", 128+k/256, k%256) }

// nodeMAC is the MAC of host octet h in node k's subnet (ovn-kubernetes
// derives MACs from IPs: 0a:58 and the IP).
func nodeMAC(k, h int) string { return fmt.Sprintf("0a:58:0a:%02x:%02x:%02x", 128+k/256, k%256, h) }

// joinIP is node k's gateway router address on the join switch.
func joinIP(k int) string { return fmt.Sprintf("100.64.%d.%d", (k+2)/256, (k+2)%256) }

// extIP is node k's address on the external network.
func extIP(k int) string { return fmt.Sprintf("192.168.%d.%d", (k+2)/256, (k+2)%256) }

func idMAC(prefix byte, k int) string {
	return fmt.Sprintf("0a:%02x:00:00:%02x:%02x", prefix, (k>>8)&0xff, k&0xff)
}

// pod is one pod's port.
type pod struct {
	name, mac, ip string
	ns            int
}

// podOf is pod p (0-based) of node k: host octet p+3 (.1 is the router,
// .2 the management port).
func (s Shape) podOf(k, p int) pod {
	return pod{name: fmt.Sprintf("ns%d_pod-%d-%d", (k*s.PodsPerNode+p)%s.Namespaces, k, p),
		mac: nodeMAC(k, p+3), ip: fmt.Sprintf("%s.%d", nodeNet(k), p+3), ns: (k*s.PodsPerNode + p) % s.Namespaces}
}

func nsAddressSet(ns int) string { return fmt.Sprintf("as_ns%d", ns) }
func nsPortGroup(ns int) string  { return fmt.Sprintf("pg_ns%d", ns) }

// service i's VIPs and backends: VIP 172.30.x.y on ports 80 and 443, 2 to
// 10 backends among the pods.
func (s Shape) serviceVIPs(i int, extra int) map[string]string {
	n := 2 + i%9 + extra
	var backends []string
	for j := 0; j < n; j++ {
		k := (i*7 + j*13) % s.Nodes
		p := s.podOf(k, (i+j)%s.PodsPerNode)
		backends = append(backends, p.ip+":8080")
	}
	vip := fmt.Sprintf("172.30.%d.%d", i/250, i%250+1)
	list := strings.Join(backends, ",")
	https := strings.ReplaceAll(list, ":8080", ":8443")
	return map[string]string{vip + ":80": list, vip + ":443": https}
}

// Ops is an OVSDB transaction's operations, as JSON values.
type Ops []map[string]any

func set(items ...any) []any { return []any{"set", items} }

func strs(v []string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return set(out...)
}

func omap(m map[string]string) []any {
	var pairs []any
	for _, k := range slices.Sorted(maps.Keys(m)) { // the same text every time
		pairs = append(pairs, []any{k, m[k]})
	}
	return []any{"map", pairs}
}

func named(n string) []any { return []any{"named-uuid", n} }

func refs(names []string) []any {
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = named(n)
	}
	return set(out...)
}

func (o *Ops) insert(table, name string, row map[string]any) {
	op := map[string]any{"op": "insert", "table": table, "row": row}
	if name != "" {
		op["uuid-name"] = name
	}
	*o = append(*o, op)
}

// lsp inserts a switch port under the uuid-name id.
func (o *Ops) lsp(id, name, typ string, addresses []string, options map[string]string, portSecurity []string) {
	row := map[string]any{"name": name, "addresses": strs(addresses)}
	if typ != "" {
		row["type"] = typ
	}
	if options != nil {
		row["options"] = omap(options)
	}
	if portSecurity != nil {
		row["port_security"] = strs(portSecurity)
	}
	o.insert("Logical_Switch_Port", id, row)
}

// Northbound returns the operations that build the whole cluster's
// Northbound in one transaction, on an empty database (NB_Global, if
// there is one, is replaced). NB_Global's nb_cfg is 1, so a northd has
// compiled it when sb_cfg is 1.
func (s Shape) Northbound() Ops {
	s = s.withDefaults()
	o := Ops{{"op": "delete", "table": "NB_Global", "where": []any{}}}
	o.insert("NB_Global", "", map[string]any{"nb_cfg": 1, "options": omap(map[string]string{
		"mac_prefix": "0a:58:0a", "svc_monitor_mac": "0a:58:0a:ff:ff:fe", "max_tunid": "16711680"})})

	var lbs []string
	for i := 0; i < s.Services; i++ {
		id := fmt.Sprintf("lb%d", i)
		o.insert("Load_Balancer", id, map[string]any{"name": fmt.Sprintf("Service_default/svc%d_TCP_cluster", i),
			"protocol": "tcp", "vips": omap(s.serviceVIPs(i, 0)),
			"options": omap(map[string]string{"event": "false", "reject": "true", "skip_snat": "false", "hairpin_snat_ip": "169.254.169.5 fd69::5"})})
		lbs = append(lbs, id)
	}
	o.insert("Load_Balancer_Group", "lbg", map[string]any{"name": lbGroup, "load_balancer": refs(lbs)})

	var crPorts, crRoutes, joinPorts []string
	o.insert("Logical_Router_Port", "rtoj_cr", map[string]any{"name": "rtoj-" + clusterRouter, "mac": idMAC(0xfe, 0),
		"networks": strs([]string{joinRouterIP + "/16"})})
	crPorts = append(crPorts, "rtoj_cr")
	o.lsp("jtor_cr", "jtor-"+clusterRouter, "router", []string{"router"}, map[string]string{"router-port": "rtoj-" + clusterRouter}, nil)
	joinPorts = append(joinPorts, "jtor_cr")

	nsPods := make([][]string, s.Namespaces)
	nsIPs := make([][]string, s.Namespaces)
	for k := 0; k < s.Nodes; k++ {
		var ports []string
		for p := 0; p < s.PodsPerNode; p++ {
			pd := s.podOf(k, p)
			id := fmt.Sprintf("pod_%d_%d", k, p)
			addr := pd.mac + " " + pd.ip
			o.lsp(id, pd.name, "", []string{addr}, map[string]string{"requested-chassis": chassis(k)}, []string{addr})
			ports = append(ports, id)
			nsPods[pd.ns] = append(nsPods[pd.ns], id)
			nsIPs[pd.ns] = append(nsIPs[pd.ns], pd.ip)
		}
		node := s.nodeRows(&o, k, named("lbg"))
		ports = append(ports, node.switchPorts...)
		o.insert("Logical_Switch", "", map[string]any{"name": nodeSwitch(k), "ports": refs(ports),
			"load_balancer_group": set(named("lbg")),
			"other_config":        omap(map[string]string{"subnet": nodeNet(k) + ".0/24", "exclude_ips": nodeNet(k) + ".2"})})
		crPorts = append(crPorts, node.crPort)
		crRoutes = append(crRoutes, node.crRoute)
		joinPorts = append(joinPorts, node.joinPort)
	}
	o.insert("Logical_Switch", "", map[string]any{"name": joinSwitch, "ports": refs(joinPorts)})
	o.insert("Logical_Router", "", map[string]any{"name": clusterRouter, "ports": refs(crPorts),
		"static_routes": refs(crRoutes), "options": omap(map[string]string{"mcast_relay": "false"})})

	for ns := 0; ns < s.Namespaces; ns++ {
		o.insert("Address_Set", "", map[string]any{"name": nsAddressSet(ns), "addresses": strs(nsIPs[ns])})
		acls := s.policyACLs(&o, fmt.Sprintf("ns%d", ns), nsPortGroup(ns), nsAddressSet(ns))
		o.insert("Port_Group", "", map[string]any{"name": nsPortGroup(ns), "ports": refs(nsPods[ns]), "acls": refs(acls)})
	}
	return o
}

// policyACLs inserts a network policy's ACLs on port group pg: ingress
// from and egress to the address set as, the rest of ingress dropped.
func (s Shape) policyACLs(o *Ops, id, pg, as string) []string {
	var out []string
	for i, a := range []struct {
		dir, match, action string
		prio               int
	}{
		{"to-lport", "outport == @" + pg + " && ip4.src == $" + as, "allow-related", 1001},
		{"from-lport", "inport == @" + pg + " && ip4.dst == $" + as, "allow-related", 1001},
		{"to-lport", "outport == @" + pg + " && ip", "drop", 1000},
	} {
		name := fmt.Sprintf("acl_%s_%d", id, i)
		o.insert("ACL", name, map[string]any{"direction": a.dir, "priority": a.prio, "match": a.match, "action": a.action,
			"external_ids": omap(map[string]string{"k8s.ovn.org/name": id})})
		out = append(out, name)
	}
	return out
}

// nodeRefs are the rows of a node that others refer to, by uuid-name.
type nodeRefs struct {
	switchPorts []string // the management and router ports of its switch
	crPort      string   // its port on the cluster router
	crRoute     string   // the cluster router's route to its gateway router
	joinPort    string   // its gateway router's port on the join switch
}

// nodeRows inserts node k's rows but its switch: the management port, the
// cluster router's port with its gateway chassis, the gateway router with
// its join and external switches and SNAT.
func (s Shape) nodeRows(o *Ops, k int, lbGroup []any) nodeRefs {
	n := nodeSwitch(k)
	p := func(what string) string { return fmt.Sprintf("%s_%d", what, k) }
	mgmt := nodeMAC(k, 2) + " " + nodeNet(k) + ".2"
	o.lsp(p("mgmt"), "k8s-"+n, "", []string{mgmt}, nil, nil)
	o.lsp(p("stor"), "stor-"+n, "router", []string{"router"}, map[string]string{"router-port": "rtos-" + n}, nil)
	o.insert("Gateway_Chassis", p("gwc"), map[string]any{"name": "rtos-" + n + "-" + chassis(k), "chassis_name": chassis(k), "priority": 1})
	o.insert("Logical_Router_Port", p("rtos"), map[string]any{"name": "rtos-" + n, "mac": nodeMAC(k, 1),
		"networks": strs([]string{nodeNet(k) + ".1/24"}), "gateway_chassis": set(named(p("gwc")))})
	o.insert("Logical_Router_Static_Route", p("crroute"), map[string]any{"ip_prefix": nodeNet(k) + ".0/24", "nexthop": joinIP(k), "policy": "src-ip"})

	gr := gwRouter(k)
	o.insert("Logical_Router_Port", p("rtoj"), map[string]any{"name": "rtoj-" + gr, "mac": idMAC(0x01, k), "networks": strs([]string{joinIP(k) + "/16"})})
	o.insert("Logical_Router_Port", p("rtoe"), map[string]any{"name": "rtoe-" + gr, "mac": idMAC(0x02, k), "networks": strs([]string{extIP(k) + "/16"})})
	o.lsp(p("jtor"), "jtor-"+gr, "router", []string{"router"}, map[string]string{"router-port": "rtoj-" + gr}, nil)
	o.lsp(p("etor"), "etor-"+gr, "router", []string{"router"}, map[string]string{"router-port": "rtoe-" + gr}, nil)
	o.lsp(p("localnet"), "breth0_"+n, "localnet", []string{"unknown"}, map[string]string{"network_name": physnet}, nil)
	o.insert("Logical_Switch", "", map[string]any{"name": extSwitch(k), "ports": refs([]string{p("etor"), p("localnet")})})
	o.insert("NAT", p("snat"), map[string]any{"type": "snat", "external_ip": extIP(k), "logical_ip": clusterSubnet})
	o.insert("Logical_Router_Static_Route", p("grroute1"), map[string]any{"ip_prefix": clusterSubnet, "nexthop": joinRouterIP})
	o.insert("Logical_Router_Static_Route", p("grroute2"), map[string]any{"ip_prefix": "0.0.0.0/0", "nexthop": extGatewayIP, "output_port": "rtoe-" + gr})
	o.insert("Logical_Router", "", map[string]any{"name": gr, "ports": refs([]string{p("rtoj"), p("rtoe")}),
		"nat": set(named(p("snat"))), "static_routes": refs([]string{p("grroute1"), p("grroute2")}),
		"load_balancer_group": set(lbGroup),
		"options": omap(map[string]string{"chassis": chassis(k), "lb_force_snat_ip": "router_ip",
			"snat-ct-zone": "0", "always_learn_from_arp_request": "false", "dynamic_neigh_routers": "true"})})
	return nodeRefs{switchPorts: []string{p("mgmt"), p("stor")}, crPort: p("rtos"), crRoute: p("crroute"), joinPort: p("jtor")}
}

// NodeAdd returns the operations that add node k to a cluster built by
// Northbound, as ovn-kubernetes adds a node before any pod runs there:
// the node's rows and its switch, its ports added to the cluster router
// and the join switch, the cluster router's route to its gateway router.
// lbGroup is the UUID of the cluster's load balancer group.
func (s Shape) NodeAdd(k int, lbGroup string) Ops {
	s = s.withDefaults()
	var o Ops
	group := []any{"uuid", lbGroup}
	node := s.nodeRows(&o, k, group)
	o.insert("Logical_Switch", "", map[string]any{"name": nodeSwitch(k), "ports": refs(node.switchPorts),
		"load_balancer_group": set(group),
		"other_config":        omap(map[string]string{"subnet": nodeNet(k) + ".0/24", "exclude_ips": nodeNet(k) + ".2"})})
	o.mutateInsert("Logical_Router", clusterRouter, "ports", node.crPort)
	o.mutateInsert("Logical_Router", clusterRouter, "static_routes", node.crRoute)
	o.mutateInsert("Logical_Switch", joinSwitch, "ports", node.joinPort)
	return o
}

// mutateInsert adds the row named ref to column col of the row of table
// named name.
func (o *Ops) mutateInsert(table, name, col, ref string) {
	*o = append(*o, map[string]any{"op": "mutate", "table": table, "where": []any{[]any{"name", "==", name}},
		"mutations": []any{[]any{col, "insert", set(named(ref))}}})
}
