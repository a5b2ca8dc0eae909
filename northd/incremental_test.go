package northd

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/govn/govn/bench/northdbench"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// nbWorld makes random Northbound changes of the kinds a CMS makes, on a
// memDB, remembering the rows' real UUIDs.
type nbWorld struct {
	t    *testing.T
	h    *harness
	rnd  *rand.Rand
	next int
}

func (w *nbWorld) rows(table string) []ovsdb.UUID {
	var ids []ovsdb.UUID
	for id := range w.h.nb.rows[table] {
		ids = append(ids, id)
	}
	sortUUIDs(ids)
	return ids
}

func (w *nbWorld) pick(table string) (ovsdb.UUID, bool) {
	ids := w.rows(table)
	if len(ids) == 0 {
		return ovsdb.UUID{}, false
	}
	return ids[w.rnd.IntN(len(ids))], true
}

func (w *nbWorld) col(table string, id ovsdb.UUID, col string) ovsdb.Datum {
	t := w.h.nb.schema.Tables[table]
	return w.h.nb.rows[table][id].Get(t.Column(col))
}

func (w *nbWorld) addMember(table string, id ovsdb.UUID, col string, member ovsdb.UUID) {
	cur := w.col(table, id, col)
	w.h.nb.Update(table, id, map[string]ovsdb.Datum{col: cur.Union(ovsdb.Set(ovsdb.UUIDAtom(member)))})
}

func (w *nbWorld) dropMember(table string, id ovsdb.UUID, col string) bool {
	cur := w.col(table, id, col)
	if len(cur.Keys) == 0 {
		return false
	}
	victim := cur.Keys[w.rnd.IntN(len(cur.Keys))]
	w.h.nb.Update(table, id, map[string]ovsdb.Datum{col: cur.Difference(ovsdb.Set(victim))})
	return true
}

func (w *nbWorld) name(prefix string) string {
	w.next++
	return fmt.Sprintf("%s%d", prefix, w.next)
}

// step makes one random change and commits it; it returns what it did.
func (w *nbWorld) step() string {
	n := w.next + 1
	mac := fmt.Sprintf("50:54:00:%02x:%02x:%02x", n>>16&0xff, n>>8&0xff, n&0xff)
	ip := fmt.Sprintf("10.%d.%d.%d", n>>16&0xff, n>>8&0xff, n&0xff)
	var did string
	if w.rnd.IntN(3) == 0 {
		if did, ok := w.routerStep(n, mac, ip); ok {
			w.h.nbCommit()
			return did
		}
		return w.step()
	}
	switch w.rnd.IntN(18) {
	case 0: // add a switch
		ls := nb.LogicalSwitch{Name: w.name("ls")}
		w.h.nb.Insert(nb.LogicalSwitchTable, ls.Row())
		did = "add switch"
	case 1, 2: // add a port
		ls, ok := w.pick(nb.LogicalSwitchTable)
		if !ok {
			return w.step()
		}
		p := nb.LogicalSwitchPort{Name: w.name("p"), Addresses: []string{mac + " " + ip}}
		if w.rnd.IntN(3) == 0 {
			p.PortSecurity = p.Addresses
		}
		if w.rnd.IntN(5) == 0 {
			p.Addresses = []string{"unknown"}
		}
		id := w.h.nb.Insert(nb.LogicalSwitchPortTable, p.Row())
		w.addMember(nb.LogicalSwitchTable, ls, "ports", id)
		did = "add port"
	case 3: // delete a port
		ls, ok := w.pick(nb.LogicalSwitchTable)
		if !ok || !w.dropMember(nb.LogicalSwitchTable, ls, "ports") {
			return w.step()
		}
		did = "delete port"
	case 4: // change a port's addresses
		p, ok := w.pick(nb.LogicalSwitchPortTable)
		if !ok {
			return w.step()
		}
		w.h.nb.Update(nb.LogicalSwitchPortTable, p, map[string]ovsdb.Datum{"addresses": dStrings([]string{mac + " " + ip})})
		did = "change port"
	case 5: // add an ACL to a switch or a port group
		acl := nb.ACL{Direction: []string{"from-lport", "to-lport"}[w.rnd.IntN(2)],
			Priority: int64(w.rnd.IntN(100)), Match: "ip4.src == " + ip,
			Action: []string{"allow", "allow-related", "allow-stateless", "drop", "reject"}[w.rnd.IntN(5)]}
		if w.rnd.IntN(2) == 0 {
			acl.Options = map[string]string{"apply-after-lb": "true"}
		}
		id := w.h.nb.Insert(nb.ACLTable, acl.Row())
		if pg, ok := w.pick(nb.PortGroupTable); ok && w.rnd.IntN(2) == 0 {
			w.addMember(nb.PortGroupTable, pg, "acls", id)
		} else if ls, ok := w.pick(nb.LogicalSwitchTable); ok {
			w.addMember(nb.LogicalSwitchTable, ls, "acls", id)
		} else {
			w.h.nb.ops = nil
			return w.step()
		}
		did = "add ACL"
	case 6: // delete an ACL
		ls, ok := w.pick(nb.LogicalSwitchTable)
		if !ok || !w.dropMember(nb.LogicalSwitchTable, ls, "acls") {
			return w.step()
		}
		did = "delete ACL"
	case 7: // add a port group
		pg := nb.PortGroup{Name: w.name("pg")}
		w.h.nb.Insert(nb.PortGroupTable, pg.Row())
		did = "add port group"
	case 8: // add a port to a port group
		pg, ok1 := w.pick(nb.PortGroupTable)
		p, ok2 := w.pick(nb.LogicalSwitchPortTable)
		if !ok1 || !ok2 {
			return w.step()
		}
		w.addMember(nb.PortGroupTable, pg, "ports", p)
		did = "add port-group member"
	case 9: // address sets
		if as, ok := w.pick(nb.AddressSetTable); ok && w.rnd.IntN(2) == 0 {
			cur := w.col(nb.AddressSetTable, as, "addresses")
			w.h.nb.Update(nb.AddressSetTable, as, map[string]ovsdb.Datum{"addresses": cur.Union(dStrings([]string{ip}))})
			did = "add address-set member"
		} else {
			w.h.nb.Insert(nb.AddressSetTable, (&nb.AddressSet{Name: w.name("as"), Addresses: []string{ip}}).Row())
			did = "add address set"
		}
	case 10: // add a load balancer to a switch (sometimes through a group)
		ls, ok := w.pick(nb.LogicalSwitchTable)
		if !ok {
			return w.step()
		}
		lb := nb.LoadBalancer{Name: w.name("lb"), VIPs: map[string]string{fmt.Sprintf("30.%d.%d.1:80", n>>8&0xff, n&0xff): ip + ":8080"}}
		id := w.h.nb.Insert(nb.LoadBalancerTable, lb.Row())
		if w.rnd.IntN(3) == 0 {
			grp := w.h.nb.Insert(nb.LoadBalancerGroupTable, (&nb.LoadBalancerGroup{Name: w.name("lbg"), LoadBalancer: []ovsdb.UUID{id}}).Row())
			w.addMember(nb.LogicalSwitchTable, ls, "load_balancer_group", grp)
		} else {
			w.addMember(nb.LogicalSwitchTable, ls, "load_balancer", id)
		}
		did = "add load balancer"
	case 11: // add a backend to a load balancer
		lb, ok := w.pick(nb.LoadBalancerTable)
		if !ok {
			return w.step()
		}
		var m nb.LoadBalancer
		m.LoadRow(w.h.nb.schema.Tables[nb.LoadBalancerTable], w.h.nb.rows[nb.LoadBalancerTable][lb])
		for k, v := range m.VIPs {
			m.VIPs[k] = v + "," + ip + ":8080"
		}
		w.h.nb.Update(nb.LoadBalancerTable, lb, map[string]ovsdb.Datum{"vips": dMap(m.VIPs)})
		did = "add backend"
	case 12: // detach a load balancer
		ls, ok := w.pick(nb.LogicalSwitchTable)
		if !ok || !w.dropMember(nb.LogicalSwitchTable, ls, "load_balancer") {
			return w.step()
		}
		did = "detach load balancer"
	case 13: // delete a switch
		if len(w.rows(nb.LogicalSwitchTable)) < 3 {
			return w.step()
		}
		ls, _ := w.pick(nb.LogicalSwitchTable)
		w.h.nb.Delete(nb.LogicalSwitchTable, ls)
		did = "delete switch"
	case 14: // DHCP options on a port
		p, ok := w.pick(nb.LogicalSwitchPortTable)
		if !ok {
			return w.step()
		}
		if w.rnd.IntN(2) == 0 {
			o := nb.DHCPOptions{CIDR: fmt.Sprintf("10.%d.0.0/8", n>>16&0xff), Options: map[string]string{
				"server_id": "10.0.0.1", "server_mac": "c0:ff:ee:00:00:01", "lease_time": fmt.Sprint(60 + n%100), "router": "10.0.0.1"}}
			id := w.h.nb.Insert(nb.DHCPOptionsTable, o.Row())
			w.h.nb.Update(nb.LogicalSwitchPortTable, p, map[string]ovsdb.Datum{"dhcpv4_options": dUUIDs([]ovsdb.UUID{id})})
		} else {
			o := nb.DHCPOptions{CIDR: "fd00::/64", Options: map[string]string{"server_id": "00:00:00:10:00:01"}}
			id := w.h.nb.Insert(nb.DHCPOptionsTable, o.Row())
			w.h.nb.Update(nb.LogicalSwitchPortTable, p, map[string]ovsdb.Datum{
				"dhcpv6_options": dUUIDs([]ovsdb.UUID{id}),
				"addresses":      dStrings([]string{fmt.Sprintf("%s %s fd00::%x", mac, ip, n)})})
		}
		did = "set DHCP options"
	case 15: // change a port's type or enabled state
		p, ok := w.pick(nb.LogicalSwitchPortTable)
		if !ok {
			return w.step()
		}
		switch typ := []string{"", "localnet", "localport", "virtual", "external", "vtep", "disabled"}[w.rnd.IntN(7)]; typ {
		case "disabled":
			w.h.nb.Update(nb.LogicalSwitchPortTable, p, map[string]ovsdb.Datum{"enabled": dBool(false)})
		case "virtual":
			w.h.nb.Update(nb.LogicalSwitchPortTable, p, map[string]ovsdb.Datum{"type": dString(typ),
				"options": dMap(map[string]string{"virtual-ip": ip, "virtual-parents": "p1,p2"})})
		default:
			w.h.nb.Update(nb.LogicalSwitchPortTable, p, map[string]ovsdb.Datum{"type": dString(typ)})
		}
		did = "change port type"
	case 16: // multicast snooping options
		if p, ok := w.pick(nb.LogicalSwitchPortTable); ok && w.rnd.IntN(2) == 0 {
			opt := []string{"mcast_flood", "mcast_flood_reports"}[w.rnd.IntN(2)]
			w.h.nb.Update(nb.LogicalSwitchPortTable, p, map[string]ovsdb.Datum{"options": dMap(map[string]string{opt: "true"})})
			did = "port mcast option"
			break
		}
		ls, ok := w.pick(nb.LogicalSwitchTable)
		if !ok {
			return w.step()
		}
		oc := map[string]string{"mcast_snoop": fmt.Sprint(w.rnd.IntN(2) == 0), "mcast_querier": fmt.Sprint(w.rnd.IntN(2) == 0),
			"mcast_idle_timeout": fmt.Sprint(10 + w.rnd.IntN(500))}
		if w.rnd.IntN(2) == 0 {
			oc["mcast_flood_unregistered"] = "true"
		}
		w.h.nb.Update(nb.LogicalSwitchTable, ls, map[string]ovsdb.Datum{"other_config": dMap(oc)})
		did = "switch mcast options"
	case 17: // DNS records on a switch
		ls, ok := w.pick(nb.LogicalSwitchTable)
		if !ok {
			return w.step()
		}
		id := w.h.nb.Insert(nb.DNSTable, (&nb.DNS{Records: map[string]string{w.name("vm") + ".ovn.org": ip}}).Row())
		w.addMember(nb.LogicalSwitchTable, ls, "dns_records", id)
		did = "add DNS records"
	}
	w.h.nbCommit()
	return did
}

// routerStep makes one random change to routers, their ports, routes,
// NAT and load balancers; ok is false when its prerequisites are missing
// (nothing was changed).
func (w *nbWorld) routerStep(n int, mac, ip string) (did string, ok bool) {
	net := fmt.Sprintf("172.%d.%d.1/24", 16+n>>8&0xf, n&0xff)
	switch w.rnd.IntN(11) {
	case 0: // add a router: distributed, or a gateway router
		lr := nb.LogicalRouter{Name: w.name("lr")}
		if w.rnd.IntN(2) == 0 {
			lr.Options = map[string]string{"chassis": "hv1"}
			if w.rnd.IntN(2) == 0 {
				lr.Options["lb_force_snat_ip"] = "router_ip"
			}
		}
		w.h.nb.Insert(nb.LogicalRouterTable, lr.Row())
		return "add router", true
	case 1, 2: // add a router port, connected to a switch, sometimes a gateway port
		lr, ok := w.pick(nb.LogicalRouterTable)
		if !ok {
			return "", false
		}
		lrp := nb.LogicalRouterPort{Name: w.name("lrp"), MAC: mac, Networks: []string{net}}
		if w.rnd.IntN(3) == 0 {
			lrp.Networks = append(lrp.Networks, fmt.Sprintf("fd%02x::1/64", n&0xff))
		}
		if w.rnd.IntN(4) == 0 {
			gc := w.h.nb.Insert(nb.GatewayChassisTable, (&nb.GatewayChassis{Name: w.name("gc"), ChassisName: "hv2", Priority: 10}).Row())
			lrp.GatewayChassis = []ovsdb.UUID{gc}
		}
		id := w.h.nb.Insert(nb.LogicalRouterPortTable, lrp.Row())
		w.addMember(nb.LogicalRouterTable, lr, "ports", id)
		if ls, ok := w.pick(nb.LogicalSwitchTable); ok {
			lsp := nb.LogicalSwitchPort{Name: w.name("rp"), Type: "router", Addresses: []string{"router"}, Options: map[string]string{"router-port": lrp.Name}}
			w.addMember(nb.LogicalSwitchTable, ls, "ports", w.h.nb.Insert(nb.LogicalSwitchPortTable, lsp.Row()))
		}
		return "add router port", true
	case 3: // change a router port's networks
		p, ok := w.pick(nb.LogicalRouterPortTable)
		if !ok {
			return "", false
		}
		w.h.nb.Update(nb.LogicalRouterPortTable, p, map[string]ovsdb.Datum{"networks": dStrings([]string{net})})
		return "change router port networks", true
	case 4: // delete a router port
		lr, ok := w.pick(nb.LogicalRouterTable)
		if !ok || !w.dropMember(nb.LogicalRouterTable, lr, "ports") {
			return "", false
		}
		return "delete router port", true
	case 5: // add a static route
		lr, ok := w.pick(nb.LogicalRouterTable)
		if !ok {
			return "", false
		}
		rt := nb.LogicalRouterStaticRoute{IPPrefix: fmt.Sprintf("192.%d.%d.0/24", n>>8&0xff, n&0xff), Nexthop: fmt.Sprintf("172.%d.%d.254", 16+n>>8&0xf, n&0xff)}
		if w.rnd.IntN(4) == 0 {
			rt.Nexthop = "discard"
		}
		w.addMember(nb.LogicalRouterTable, lr, "static_routes", w.h.nb.Insert(nb.LogicalRouterStaticRouteTable, rt.Row()))
		return "add static route", true
	case 6: // delete a static route
		lr, ok := w.pick(nb.LogicalRouterTable)
		if !ok || !w.dropMember(nb.LogicalRouterTable, lr, "static_routes") {
			return "", false
		}
		return "delete static route", true
	case 7: // add a NAT rule
		lr, ok := w.pick(nb.LogicalRouterTable)
		if !ok {
			return "", false
		}
		nat := nb.NAT{Type: []string{"snat", "dnat", "dnat_and_snat"}[w.rnd.IntN(3)], ExternalIP: fmt.Sprintf("172.%d.%d.%d", 16+n>>8&0xf, n&0xff, 10+w.rnd.IntN(100)), LogicalIP: ip}
		if nat.Type == "snat" {
			nat.LogicalIP = fmt.Sprintf("10.%d.%d.0/24", n>>16&0xff, n>>8&0xff)
		}
		w.addMember(nb.LogicalRouterTable, lr, "nat", w.h.nb.Insert(nb.NATTable, nat.Row()))
		return "add NAT", true
	case 8: // delete a NAT rule, or give one another's external address
		if w.rnd.IntN(2) == 0 {
			a, okA := w.pick(nb.NATTable)
			b, okB := w.pick(nb.NATTable)
			if !okA || !okB {
				return "", false
			}
			w.h.nb.Update(nb.NATTable, a, map[string]ovsdb.Datum{"external_ip": w.col(nb.NATTable, b, "external_ip")})
			return "share a NAT external address", true
		}
		lr, ok := w.pick(nb.LogicalRouterTable)
		if !ok || !w.dropMember(nb.LogicalRouterTable, lr, "nat") {
			return "", false
		}
		return "delete NAT", true
	case 9: // put a load balancer (new, or a switch's) on a router
		lr, ok := w.pick(nb.LogicalRouterTable)
		if !ok {
			return "", false
		}
		id, ok := w.pick(nb.LoadBalancerTable)
		if !ok || w.rnd.IntN(2) == 0 {
			lb := nb.LoadBalancer{Name: w.name("rlb"), VIPs: map[string]string{fmt.Sprintf("172.%d.%d.200:80", 16+n>>8&0xf, n&0xff): ip + ":8080"}}
			if w.rnd.IntN(3) == 0 {
				lb.Options = map[string]string{"skip_snat": "true"}
			}
			id = w.h.nb.Insert(nb.LoadBalancerTable, lb.Row())
		}
		w.addMember(nb.LogicalRouterTable, lr, "load_balancer", id)
		return "add router load balancer", true
	case 10: // detach a load balancer from a router
		lr, ok := w.pick(nb.LogicalRouterTable)
		if !ok || !w.dropMember(nb.LogicalRouterTable, lr, "load_balancer") {
			return "", false
		}
		return "detach router load balancer", true
	}
	return "", false
}

// TestIncrementalEqualsFullCompute makes 200 random Northbound changes,
// processing each incrementally, and checks that a fresh northd's full
// compute over the result finds nothing to change in the Southbound; and
// that no change needed a full recompute.
func TestIncrementalEqualsFullCompute(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			h := newHarness(t)
			w := &nbWorld{t: t, h: h, rnd: rand.New(rand.NewPCG(seed, 42))}
			h.nb.Insert(nb.NBGlobalTable, (&nb.NBGlobal{Options: map[string]string{"svc_monitor_mac": "0a:58:0a:00:00:fe"}}).Row())
			h.nbCommit()
			h.s.Recompute()
			h.sync()
			steps := map[string]int{}
			for i := 0; i < 200; i++ {
				did := w.step()
				steps[did]++
				h.sync()
				if i%50 == 49 || i == 199 {
					if n := freshWrites(t, h); n != 0 {
						t.Fatalf("after %d changes (last: %s), a fresh full compute changes %d Southbound rows", i+1, did, n)
					}
				}
			}
			if r := h.s.Stats().Recomputes; r != 1 {
				t.Errorf("%d full recomputes, want only the first", r)
			}
			t.Logf("%d flows, %d port bindings; changes made: %v", h.sb.count("Logical_Flow"), h.sb.count("Port_Binding"), steps)
		})
	}
	// govn bench northd's changes on its cluster, node adds and deletes
	// (a switch and a gateway router joining and leaving the load
	// balancer group) among them.
	t.Run("k8s", func(t *testing.T) {
		h := k8sClusterOf(t, northdbench.Shape{Nodes: 3, Services: 12})
		w := &nbWorld{t: t, h: h}
		for i := 0; i < 2; i++ {
			for _, c := range k8sChanges {
				c.do(h, w, i)
				bumpNBCfg(h, w)
				h.nbCommit()
				h.sync()
				if n := freshWrites(t, h); n != 0 {
					t.Fatalf("after %s #%d, a fresh full compute changes %d Southbound rows", c.kind, i, n)
				}
			}
		}
		if r := h.s.Stats().Recomputes; r != 1 {
			t.Errorf("%d full recomputes, want only the first", r)
		}
	})
}

// freshWrites starts a new State on h's databases, runs a full compute and
// returns how many operations it would write.
func freshWrites(t *testing.T, h *harness) int {
	fresh := New(h.nb.schema, h.sb.schema, Options{})
	fresh.Apply(h.nb.diff(nil))
	fresh.Apply(h.sb.diff(nil))
	fresh.Recompute()
	rec := newMemDB(t, SB, "sb")
	n := fresh.WriteSB(rec)
	for i, op := range rec.ops {
		if i < 10 {
			t.Logf("fresh compute would %s %s %v", op.kind, op.table, op.row)
		}
	}
	return n
}

// TestIncrementalGroupVIPs changes the VIPs of the load balancers of the
// group every node's switch and gateway router share (a VIP added to a
// service, a service added, both taken back): the routers' load balancer
// addresses are one memo per group, so each change must still reach the
// flows of every gateway router's peers (the external switch answers ARP
// for a VIP on its network), as a fresh full compute has them.
func TestIncrementalGroupVIPs(t *testing.T) {
	const nodes = 3
	h := k8sClusterOf(t, northdbench.Shape{Nodes: nodes, Services: 12})
	w := &nbWorld{t: t, h: h}
	// arpFlows counts the flows of the gateway routers' external switches
	// that send ARP requests for vip to the router.
	arpFlows := func(vip string) int {
		t := h.sb.schema.Tables["Logical_Flow"]
		match, actions := t.Column("match"), t.Column("actions")
		n := 0
		for _, r := range h.sb.rows["Logical_Flow"] {
			if r.Get(match).Keys[0].Str() == "flags[1] == 0 && arp.op == 1 && arp.tpa == "+vip &&
				strings.Contains(r.Get(actions).Keys[0].Str(), `outport = "etor-GR_`) {
				n++
			}
		}
		return n
	}
	check := func(step, vip string, want int) {
		t.Helper()
		bumpNBCfg(h, w)
		h.nbCommit()
		h.sync()
		if n := freshWrites(t, h); n != 0 {
			t.Fatalf("after %s, a fresh full compute changes %d Southbound rows", step, n)
		}
		if got := arpFlows(vip); got != want {
			t.Errorf("after %s, %d external switches answer ARP for %s, want %d", step, got, vip, want)
		}
	}
	lb := h.byName(nb.LoadBalancerTable, "Service_default/svc3_TCP_cluster")
	vips := w.col(nb.LoadBalancerTable, lb, "vips")
	h.nb.Update(nb.LoadBalancerTable, lb, map[string]ovsdb.Datum{"vips": vips.Union(dMap(map[string]string{"192.168.250.7:80": "10.128.2.9:8080"}))})
	check("a VIP added to a service", "192.168.250.7", nodes)
	h.nb.Update(nb.LoadBalancerTable, lb, map[string]ovsdb.Datum{"vips": vips})
	check("the VIP taken back", "192.168.250.7", 0)

	grp := h.byName(nb.LoadBalancerGroupTable, "clusterLBGroup")
	svc := h.nb.Insert(nb.LoadBalancerTable, (&nb.LoadBalancer{Name: "Service_default/new_TCP_cluster",
		Protocol: ptr("tcp"), VIPs: map[string]string{"192.168.251.8:443": "10.128.2.10:8443"}}).Row())
	w.addMember(nb.LoadBalancerGroupTable, grp, "load_balancer", svc)
	check("a service added", "192.168.251.8", nodes)
	members := w.col(nb.LoadBalancerGroupTable, grp, "load_balancer")
	svc = h.byName(nb.LoadBalancerTable, "Service_default/new_TCP_cluster")
	h.nb.Update(nb.LoadBalancerGroupTable, grp, map[string]ovsdb.Datum{"load_balancer": members.Difference(ovsdb.Set(ovsdb.UUIDAtom(svc)))})
	check("the service taken out of the group", "192.168.251.8", 0)
}
