package northd

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// lbEndpoint is an address with an optional port (0 for none).
type lbEndpoint struct {
	ip   netip.Addr
	port uint16
}

// String formats e as ct_lb_mark's backends list does: IPv6 with a port in
// brackets.
func (e lbEndpoint) String() string {
	if e.port == 0 {
		return e.ip.String()
	}
	if e.ip.Is6() {
		return fmt.Sprintf("[%s]:%d", e.ip, e.port)
	}
	return fmt.Sprintf("%s:%d", e.ip, e.port)
}

// lbVIP is one VIP of a load balancer and its backends.
type lbVIP struct {
	key      string // as the Northbound writes it
	vip      lbEndpoint
	backends []lbEndpoint
}

// parseEndpoint parses "IP", "IP:PORT" or "[IPv6]:PORT".
func parseEndpoint(s string) (lbEndpoint, error) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return lbEndpoint{}, fmt.Errorf("%q: port 0", s)
		}
		return lbEndpoint{ap.Addr().Unmap(), ap.Port()}, nil
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil || a.Zone() != "" {
		return lbEndpoint{}, fmt.Errorf("%q is not an IP address or IP:port", s)
	}
	return lbEndpoint{ip: a.Unmap()}, nil
}

// parseVIPs parses a load balancer's vips column; bad entries are warned
// about and left out. VIPs come back in key order.
func parseVIPs(g *gen, lb *nb.LoadBalancer) []lbVIP {
	keys := slices.Sorted(maps.Keys(lb.VIPs))
	var out []lbVIP
	for _, k := range keys {
		vip, err := parseEndpoint(k)
		if err != nil {
			g.Warn("bad load balancer VIP; skipping it", "lb", lb.Name, "vip", k, "error", err)
			continue
		}
		v := lbVIP{key: k, vip: vip}
		ok := true
		for _, b := range strings.Split(lb.VIPs[k], ",") {
			if strings.TrimSpace(b) == "" {
				continue
			}
			be, err := parseEndpoint(b)
			if err != nil || be.ip.Is4() != vip.ip.Is4() || (be.port == 0) != (vip.port == 0) {
				g.Warn("bad load balancer backend; skipping the VIP", "lb", lb.Name, "vip", k, "backend", b)
				ok = false
				break
			}
			v.backends = append(v.backends, be)
		}
		if ok {
			out = append(out, v)
		}
	}
	return out
}

// lbProtocol is the protocol of a load balancer's VIPs with a port.
func lbProtocol(lb *nb.LoadBalancer) string {
	if lb.Protocol != nil && *lb.Protocol != "" {
		return *lb.Protocol
	}
	return nb.LoadBalancerProtocolTCP
}

// lbSwitches returns the switches a load balancer is on: those that list
// it (sorted) and the sets of the switches of its groups. on says whether
// there is any; the owner depends on that, not on the groups' members.
func lbSwitches(g *gen, lb ovsdb.UUID) (direct []ovsdb.UUID, sets []*dpSet, on bool) {
	direct = g.Referrers(NB, nb.LogicalSwitchTable, "load_balancer", lb)
	on = len(direct) > 0
	for _, grp := range g.Referrers(NB, nb.LoadBalancerGroupTable, "load_balancer", lb) {
		set := lbGroupSwitches(g, grp)
		sets = append(sets, set)
		if g.NonEmpty(set) {
			on = true
		}
	}
	return direct, sets, on
}

// lbGroupSwitches returns the set of the switches of a load balancer
// group: a switch joining the group is added to the flows of its load
// balancers without generating them again.
func lbGroupSwitches(g *gen, grp ovsdb.UUID) *dpSet {
	return g.DatapathSet("lbgroup-switches/"+grp.String(), func(g *gen) []dpID {
		ids := g.Referrers(NB, nb.LogicalSwitchTable, "load_balancer_group", grp)
		out := make([]dpID, len(ids))
		for i, id := range ids {
			out[i] = g.Datapath(id)
		}
		return out
	})
}

// serviceMonitorKey is the record key of a Service_Monitor row.
func serviceMonitorKey(port string, ip netip.Addr, tp uint16, proto string) string {
	return fmt.Sprintf("%s/%s/%d/%s", port, ip, tp, proto)
}

func genLoadBalancer(g *gen) {
	lb, ok := Read[nb.LoadBalancer](g, NB, g.ID())
	if !ok {
		return
	}
	vips := parseVIPs(g, &lb)
	proto := lbProtocol(&lb)
	direct, groupSets, onSwitch := lbSwitches(g, lb.UUID)
	svcMAC := nbOptions(g)["svc_monitor_mac"]

	// The Southbound row, for the chassis (hairpin, affinity and
	// health checks are theirs).
	if onSwitch {
		opts := maps.Clone(lb.Options)
		if opts == nil {
			opts = map[string]string{}
		}
		opts["hairpin_orig_tuple"] = "true"
		cols := map[string]ovsdb.Datum{
			"name":         dString(lb.Name),
			"vips":         dMap(lb.VIPs),
			"options":      dMap(opts),
			"external_ids": dMap(map[string]string{"lb_id": lb.UUID.String()}),
		}
		if lb.Protocol != nil {
			cols["protocol"] = dString(*lb.Protocol)
		} else {
			cols["protocol"] = dString(proto)
		}
		var dps []ovsdb.UUID
		for _, ls := range direct {
			dps = append(dps, g.Ref("Datapath_Binding", ls.String()))
		}
		g.RecordWithChildren("Load_Balancer", lb.UUID.String(), cols, map[string]childRows{
			"datapath_group": {table: "Logical_DP_Group", rows: []map[string]ovsdb.Datum{{"datapaths": dUUIDs(dps)}}, dpSets: groupSets},
		})
	}

	// Health checks: a Service_Monitor per checked backend, and only
	// backends that are not known to be down in the flows.
	checked := lbHealthChecks(g, &lb)
	type monitor struct {
		port string
		src  netip.Addr
	}
	down := map[lbEndpoint]bool{}
	srcIPs := map[string]map[netip.Addr]bool{} // switch port -> source IPs to answer ARP for
	for i := range vips {
		v := &vips[i]
		hc, ok := checked[v.key]
		if !ok {
			continue
		}
		for _, be := range v.backends {
			m, ok := lb.IPPortMappings[be.ip.String()]
			if !ok {
				continue
			}
			port, src, ok := strings.Cut(m, ":")
			srcIP, err := netip.ParseAddr(src)
			if !ok || err != nil || be.port == 0 {
				g.Warn("bad ip_port_mappings entry; the backend is not health-checked", "lb", lb.Name, "backend", be.ip.String(), "mapping", m)
				continue
			}
			key := serviceMonitorKey(port, be.ip, be.port, proto)
			g.Record("Service_Monitor", key, map[string]ovsdb.Datum{
				"ip":           dString(be.ip.String()),
				"port":         dInt(int64(be.port)),
				"protocol":     dString(proto),
				"logical_port": dString(port),
				"src_ip":       dString(srcIP.String()),
				"src_mac":      dString(svcMAC),
				"options":      dMap(hc.Options),
			})
			for _, id := range g.ByName(SB, "Service_Monitor", key) {
				if r := g.Row(SB, "Service_Monitor", id); r != nil {
					if st := stringColumn(g.s.sb, "Service_Monitor", r, "status"); st == "offline" || st == "error" {
						down[be] = true
					}
				}
			}
			if srcIPs[port] == nil {
				srcIPs[port] = map[netip.Addr]bool{}
			}
			srcIPs[port][srcIP] = true
		}
	}
	// ARP replies for the monitors' source addresses, on the switches of
	// the monitored ports.
	for port, ips := range srcIPs {
		for _, id := range g.ByName(NB, nb.LogicalSwitchPortTable, port) {
			for _, ls := range g.Referrers(NB, nb.LogicalSwitchTable, "ports", id) {
				for _, ip := range slices.SortedFunc(maps.Keys(ips), netip.Addr.Compare) {
					if !ip.Is4() {
						continue
					}
					g.FlowHint(g.Datapath(ls), LSInARPRsp, 110, fmt.Sprintf("arp.tpa == %s && arp.op == 1", ip),
						fmt.Sprintf("eth.dst = eth.src; eth.src = %s; arp.op = 2; /* ARP reply */ arp.tha = arp.sha; arp.sha = %s; arp.tpa = arp.spa; arp.spa = %s; outport = inport; flags.loopback = 1; output;", svcMAC, svcMAC, ip),
						lb.UUID)
				}
			}
		}
	}

	lbOnRouters(g, &lb, vips, proto, down)
	if !onSwitch {
		return
	}
	ct := ctNamesFor(g.Features())
	// The same flows on every switch: built once.
	tg := dpTarget{sets: groupSets}
	for _, ls := range direct {
		tg.dps = append(tg.dps, g.Datapath(ls))
	}
	for i := range vips {
		lbSwitchFlows(g, tg, &lb, &vips[i], proto, down, ct)
	}
}

// lbHealthChecks returns the load balancer's health checks by VIP key.
func lbHealthChecks(g *gen, lb *nb.LoadBalancer) map[string]nb.LoadBalancerHealthCheck {
	out := map[string]nb.LoadBalancerHealthCheck{}
	for _, hc := range ReadAll[nb.LoadBalancerHealthCheck](g, NB, lb.HealthCheck) {
		out[hc.VIP] = hc
	}
	return out
}

// lbSwitchFlows writes one VIP's flows on switches dps.
func lbSwitchFlows(g *gen, dps dpTarget, lb *nb.LoadBalancer, v *lbVIP, proto string, down map[lbEndpoint]bool, ct ctNames) {
	ipf, reg, aff := "ip4", "reg1", "reg4"
	if v.vip.ip.Is6() {
		ipf, reg, aff = "ip6", "xxreg1", "xxreg0"
	}
	match := fmt.Sprintf("%s.dst == %s", ipf, v.vip.ip)
	load := fmt.Sprintf("%s = %s; ", reg, v.vip.ip)
	prio := 110
	if v.vip.port != 0 {
		match += fmt.Sprintf(" && %s.dst == %d", proto, v.vip.port)
		load += fmt.Sprintf("reg2[0..15] = %d; ", v.vip.port)
		prio = 120
	}
	id := lb.UUID
	// Pre-stateful: traffic to the VIP (and only that traffic) loads the
	// VIP into registers, as constants, for the hairpin and affinity
	// stages.
	g.FlowHintTo(dps, LSInPreStateful, 120, regbitConntrackNAT+" == 1 && "+match, load+ct.lb+";", id)

	var live []string
	for _, be := range v.backends {
		if !down[be] {
			live = append(live, be.String())
		}
	}
	if len(live) == 0 {
		if lb.Options["reject"] == "true" {
			g.FlowHintTo(dps, LSInLB, prio, "ct.new && "+match,
				fmt.Sprintf("reg0 = 0; reject { outport <-> inport; next(pipeline=egress,table=%d);};", LSOutQoSMark.Table()), id)
		} else {
			g.FlowHintTo(dps, LSInLB, prio, "ct.new && "+match, "drop;", id)
		}
		return
	}
	args := "backends=" + strings.Join(live, ",")
	if h := lbHashFields(lb, proto); h != "" {
		args += "; hash_fields=\"" + h + "\""
	}
	g.FlowHintTo(dps, LSInLB, prio, "ct.new && "+match, regbitConntrackCommit+" = 0; "+ct.lb+"("+args+");", id)

	// Session affinity: remember the backend a client got for the timeout.
	timeout, _ := strconv.Atoi(lb.Options["affinity_timeout"])
	if timeout <= 0 || v.vip.port == 0 {
		return
	}
	vipMatch := fmt.Sprintf("ct.new && %s && %s == %s && reg2[0..15] == %d", ipf, reg, v.vip.ip, v.vip.port)
	g.FlowHintTo(dps, LSInLBAffCheck, 100, vipMatch, regbitLBAffinity+" = chk_lb_aff(); next;", id)
	for _, be := range v.backends {
		if down[be] {
			continue
		}
		g.FlowHintTo(dps, LSInLB, 150,
			fmt.Sprintf("%s == 1 && ct.new && %s && %s == %s && reg8[0..15] == %d", regbitLBAffinity, ipf, aff, be.ip, be.port),
			fmt.Sprintf("%s = 0; %s%s(backends=%s);", regbitConntrackCommit, load, ct.lb, be), id)
		g.FlowHintTo(dps, LSInLBAffLearn, 100,
			fmt.Sprintf("%s == 0 && %s && %s.dst == %s && %s.dst == %d", regbitLBAffinity, vipMatch, ipf, be.ip, proto, be.port),
			fmt.Sprintf("commit_lb_aff(vip = \"%s\", backend = \"%s\", proto = %s, timeout = %d); /* drop */", v.vip, be, proto, timeout), id)
	}
}

// lbHashFields is the hash_fields argument for the load balancer's
// selection_fields, as ovn-northd spells them (tp_src becomes tcp_src for
// a TCP load balancer), sorted.
func lbHashFields(lb *nb.LoadBalancer, proto string) string {
	if len(lb.SelectionFields) == 0 {
		return ""
	}
	var fs []string
	for _, f := range lb.SelectionFields {
		switch f {
		case "tp_src":
			f = proto + "_src"
		case "tp_dst":
			f = proto + "_dst"
		}
		fs = append(fs, f)
	}
	sort.Strings(fs)
	return strings.Join(fs, ",")
}
