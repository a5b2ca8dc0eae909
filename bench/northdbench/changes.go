package northdbench

import (
	"fmt"
	"strings"

	"github.com/govn/govn/ovsdb"
)

// A change kind is one thing a Kubernetes cluster does to the Northbound,
// made as ovn-nbctl commands (one invocation, one transaction).
const (
	PodAdd     = "pod-add"
	PodDelete  = "pod-delete"
	BackendAdd = "lb-backend-add"
	PolicyAdd  = "netpol-add"
	NodeAdd    = "node-add"
	NodeDelete = "node-delete"
)

// ChangeKinds are the kinds in the order the bench makes them: pods added
// and deleted again, backends and policies added, nodes added and
// deleted again.
var ChangeKinds = []string{PodAdd, PodDelete, BackendAdd, PolicyAdd, NodeAdd, NodeDelete}

// changeRefs are the UUIDs of the rows that changes refer to.
type changeRefs struct {
	lbGroup string
	lbs     []string // by service number
}

// changer makes the ovn-nbctl arguments of the i-th change of a kind.
type changer struct {
	s     Shape
	refs  changeRefs
	added map[int]int    // backends added per service
	pods  map[int]string // UUIDs of the ports pod-add i created
}

func newChanger(s Shape, r changeRefs) *changer {
	return &changer{s: s.withDefaults(), refs: r, added: make(map[int]int), pods: make(map[int]string)}
}

// args returns the ovn-nbctl commands (without options) of change i of
// kind, "--" between commands.
func (c *changer) args(kind string, i int) []string {
	s := c.s
	switch kind {
	case PodAdd, PodDelete:
		k := (i * 7) % s.Nodes
		ns := i % s.Namespaces
		name := fmt.Sprintf("ns%d_newpod-%d-%d", ns, k, i)
		ip := fmt.Sprintf("%s.%d", nodeNet(k), 200+i%50)
		addr := nodeMAC(k, 200+i%50) + " " + ip
		// Generic database commands, not lsp-add/lsp-del: see the
		// package doc ("ovn-nbctl's commands").
		if kind == PodDelete {
			uuid, ok := c.pods[i]
			if !ok {
				panic(fmt.Sprintf("northdbench: pod-delete %d before its pod-add", i))
			}
			return cmds([]string{"remove", "Logical_Switch", nodeSwitch(k), "ports", uuid},
				[]string{"remove", "Address_Set", nsAddressSet(ns), "addresses", quote(ip)})
		}
		return cmds([]string{"--id=@p", "create", "Logical_Switch_Port", "name=" + name,
			"addresses=" + quote(addr), "port_security=" + quote(addr), "options:requested-chassis=" + chassis(k)},
			[]string{"add", "Logical_Switch", nodeSwitch(k), "ports", "@p"},
			[]string{"add", "Address_Set", nsAddressSet(ns), "addresses", quote(ip)})
	case BackendAdd:
		svc := i % s.Services
		c.added[svc]++
		vips := s.serviceVIPs(svc, c.added[svc])
		var vip string
		for v := range vips {
			if strings.HasSuffix(v, ":80") {
				vip = v
			}
		}
		return cmds([]string{"set", "Load_Balancer", c.refs.lbs[svc], fmt.Sprintf("vips:%s=%s", quote(vip), quote(vips[vip]))})
	case PolicyAdd:
		pg, as := fmt.Sprintf("pg_pol%d", i), fmt.Sprintf("as_pol%d", i)
		k, from := (i*3)%s.Nodes, (i*3+1)%s.Nodes
		pgAdd := []string{"pg-add", pg}
		var ips []string
		for p := 0; p < 5; p++ {
			pgAdd = append(pgAdd, s.podOf(k, p).name)
			ips = append(ips, quote(s.podOf(from, p).ip))
		}
		out := [][]string{pgAdd, {"create", "Address_Set", "name=" + as, "addresses=" + strings.Join(ips, ",")}}
		for _, a := range []struct{ dir, prio, match, action string }{
			{"to-lport", "1001", "outport == @" + pg + " && ip4.src == $" + as, "allow-related"},
			{"to-lport", "1000", "outport == @" + pg + " && ip", "drop"},
		} {
			out = append(out, []string{"--type=port-group", "acl-add", pg, a.dir, a.prio, a.match, a.action})
		}
		return cmds(out...)
	case NodeAdd:
		return c.nodeAdd(s.Nodes + i)
	case NodeDelete:
		k := s.Nodes + i
		return cmds([]string{"ls-del", nodeSwitch(k)}, []string{"ls-del", extSwitch(k)}, []string{"lr-del", gwRouter(k)},
			[]string{"lrp-del", "rtos-" + nodeSwitch(k)}, []string{"lsp-del", "jtor-" + gwRouter(k)},
			[]string{"--policy=src-ip", "lr-route-del", clusterRouter, nodeNet(k) + ".0/24"})
	}
	panic("northdbench: unknown change kind " + kind)
}

// made notes what change i of kind printed: pod-add's is the UUID of
// the port it created, which its pod-delete removes.
func (c *changer) made(kind string, i int, out string) error {
	if kind != PodAdd {
		return nil
	}
	if _, err := ovsdb.ParseUUID(out); err != nil {
		return fmt.Errorf("pod-add %d: ovn-nbctl printed %q, not the new port's UUID", i, out)
	}
	c.pods[i] = out
	return nil
}

// nodeAdd is a new node k as ovn-kubernetes adds it before any pod runs
// there: its switch with the management port, its cluster router port
// with a gateway chassis, its gateway router with join and external
// switches, SNAT and routes, and the load balancer group.
func (c *changer) nodeAdd(k int) []string {
	n, gr := nodeSwitch(k), gwRouter(k)
	routerPort := func(sw, lsp, lrp string) [][]string {
		return [][]string{{"lsp-add", sw, lsp}, {"lsp-set-type", lsp, "router"}, {"lsp-set-addresses", lsp, "router"},
			{"lsp-set-options", lsp, "router-port=" + lrp}}
	}
	out := [][]string{
		{"ls-add", n},
		{"set", "Logical_Switch", n, "other_config:subnet=" + nodeNet(k) + ".0/24", "other_config:exclude_ips=" + nodeNet(k) + ".2",
			"load_balancer_group=" + c.refs.lbGroup},
		{"lsp-add", n, "k8s-" + n}, {"lsp-set-addresses", "k8s-" + n, nodeMAC(k, 2) + " " + nodeNet(k) + ".2"},
		{"lrp-add", clusterRouter, "rtos-" + n, nodeMAC(k, 1), nodeNet(k) + ".1/24"},
		{"lrp-set-gateway-chassis", "rtos-" + n, chassis(k), "1"},
	}
	out = append(out, routerPort(n, "stor-"+n, "rtos-"+n)...)
	out = append(out,
		[]string{"lr-add", gr},
		[]string{"set", "Logical_Router", gr, "options:chassis=" + chassis(k), "options:lb_force_snat_ip=router_ip",
			"options:snat-ct-zone=0", "options:always_learn_from_arp_request=false", "options:dynamic_neigh_routers=true",
			"load_balancer_group=" + c.refs.lbGroup},
		[]string{"lrp-add", gr, "rtoj-" + gr, idMAC(0x01, k), joinIP(k) + "/16"},
		[]string{"lrp-add", gr, "rtoe-" + gr, idMAC(0x02, k), extIP(k) + "/16"},
		[]string{"ls-add", extSwitch(k)})
	out = append(out, routerPort(joinSwitch, "jtor-"+gr, "rtoj-"+gr)...)
	out = append(out, routerPort(extSwitch(k), "etor-"+gr, "rtoe-"+gr)...)
	out = append(out,
		[]string{"lsp-add", extSwitch(k), "breth0_" + n}, []string{"lsp-set-type", "breth0_" + n, "localnet"},
		[]string{"lsp-set-addresses", "breth0_" + n, "unknown"}, []string{"lsp-set-options", "breth0_" + n, "network_name=" + physnet},
		[]string{"lr-nat-add", gr, "snat", extIP(k), clusterSubnet},
		[]string{"lr-route-add", gr, clusterSubnet, joinRouterIP},
		[]string{"lr-route-add", gr, "0.0.0.0/0", extGatewayIP, "rtoe-" + gr},
		[]string{"--policy=src-ip", "lr-route-add", clusterRouter, nodeNet(k) + ".0/24", joinIP(k)})
	return cmds(out...)
}

// cmds joins commands with "--".
func cmds(cs ...[]string) []string {
	var out []string
	for i, c := range cs {
		if i > 0 {
			out = append(out, "--")
		}
		out = append(out, c...)
	}
	return out
}

// quote is s as a quoted string in ovn-nbctl's database syntax.
func quote(s string) string { return `"` + s + `"` }
