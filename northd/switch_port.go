package northd

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
	"github.com/govn/govn/schema/sb"
)

// Logical switch port types (Logical_Switch_Port.type).
const (
	lspVIF       = ""
	lspRouter    = "router"
	lspLocalnet  = "localnet"
	lspLocalport = "localport"
	lspL2Gateway = "l2gateway"
	lspExternal  = "external"
	lspVirtual   = "virtual"
	lspRemote    = "remote"
	lspVTEP      = "vtep"
)

// lspAddress is one parsed entry of a port's addresses: a MAC and the IP
// addresses that go with it.
type lspAddress struct {
	mac string
	ip4 []netip.Addr
	ip6 []netip.Addr
}

// parseLSPAddress parses "MAC [IP...]"; ok is false for anything else
// ("unknown", "router", "dynamic" or a malformed entry).
func parseLSPAddress(entry string) (lspAddress, bool) {
	f := strings.Fields(entry)
	if len(f) == 0 {
		return lspAddress{}, false
	}
	mac, ok := normalizeMAC(f[0])
	if !ok {
		return lspAddress{}, false
	}
	a := lspAddress{mac: mac}
	for _, w := range f[1:] {
		ip, err := netip.ParseAddr(w)
		if err != nil {
			return lspAddress{}, false
		}
		if ip.Is4() {
			a.ip4 = append(a.ip4, ip)
		} else {
			a.ip6 = append(a.ip6, ip)
		}
	}
	return a, true
}

// normalizeMAC parses an Ethernet address and writes it as OVN does
// (lower case, two digits per byte).
func normalizeMAC(s string) (string, bool) {
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return "", false
	}
	var b strings.Builder
	for i, p := range parts {
		if len(p) == 0 || len(p) > 2 {
			return "", false
		}
		n, err := strconv.ParseUint(p, 16, 8)
		if err != nil {
			return "", false
		}
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x", n)
	}
	return b.String(), true
}

// macBytes returns the six bytes of a normalized MAC.
func macBytes(mac string) [6]byte {
	var b [6]byte
	for i, p := range strings.Split(mac, ":") {
		n, _ := strconv.ParseUint(p, 16, 8)
		b[i] = byte(n)
	}
	return b
}

// switchPortInfo is what a switch port's generator learns about it.
type switchPortInfo struct {
	lsp *nb.LogicalSwitchPort
	sw  *logicalSwitch
	// addrs are the port's static (and dynamic) addresses; for a router
	// port with "router" addresses, its router port's.
	addrs []lspAddress
	// unknown: addresses has "unknown".
	unknown bool
	// peer is the router port a router-type port connects to.
	peer *routerPeer
}

// enabled says whether a port is administratively up.
func lspEnabled(lsp *nb.LogicalSwitchPort) bool { return lsp.Enabled == nil || *lsp.Enabled }

// switchPort generates a logical switch port's Port_Binding and flows.
func switchPort(g *gen, sw *logicalSwitch, lsp *nb.LogicalSwitchPort) {
	p := &switchPortInfo{lsp: lsp, sw: sw}
	if lsp.Type == lspRouter {
		p.peer = readRouterPeer(g, lsp.Options["router-port"])
	}
	for _, e := range lsp.Addresses {
		switch strings.TrimSpace(e) {
		case "unknown":
			p.unknown = true
			continue
		case "router":
			if p.peer != nil {
				p.addrs = append(p.addrs, p.peer.addr)
			}
			continue
		case "dynamic":
			if lsp.DynamicAddresses != nil {
				if a, ok := parseLSPAddress(*lsp.DynamicAddresses); ok {
					p.addrs = append(p.addrs, a)
				}
			}
			continue
		}
		a, ok := parseLSPAddress(e)
		if !ok {
			if f := strings.Fields(e); len(f) > 0 && f[0] != "dynamic" {
				g.Warn("bad address on logical switch port; ignoring it", "port", lsp.Name, "address", e)
			}
			continue
		}
		p.addrs = append(p.addrs, a)
	}
	switchPortBinding(g, p)
	switchPortFlows(g, p)
}

// switchPortBinding writes the port's Port_Binding.
func switchPortBinding(g *gen, p *switchPortInfo) {
	lsp, sw := p.lsp, p.sw
	key := g.PortKey(sw.nb.UUID, lsp.Name, requestedKey(g, lsp.Options))
	opts := lsp.Options
	typ := lsp.Type
	if lsp.Type == lspRouter {
		typ = "patch"
		opts = map[string]string{}
		if rp, ok := lsp.Options["router-port"]; ok {
			opts["peer"] = rp
		}
		if p.peer != nil && p.peer.chassis != "" {
			typ = "l3gateway"
			opts["l3gateway-chassis"] = p.peer.chassis
		}
	}
	cols := map[string]ovsdb.Datum{
		"logical_port":  dString(lsp.Name),
		"datapath":      dUUID(g.Ref("Datapath_Binding", sw.nb.UUID.String())),
		"tunnel_key":    dInt(int64(key)),
		"type":          dString(typ),
		"options":       dMap(opts),
		"mac":           dStrings(lsp.Addresses),
		"port_security": dStrings(lsp.PortSecurity),
		"external_ids":  dMap(lsp.ExternalIDs),
		"parent_port":   ovsdb.Datum{},
		"tag":           ovsdb.Datum{},
		"nat_addresses": dStrings(natAddresses(g, p)),
	}
	if lsp.ParentName != nil {
		cols["parent_port"] = dStrings([]string{*lsp.ParentName})
	}
	switch {
	case lsp.Tag != nil:
		cols["tag"] = dInt(*lsp.Tag)
	case lsp.TagRequest != nil && *lsp.TagRequest > 0:
		cols["tag"] = dInt(*lsp.TagRequest)
	}
	cols["requested_chassis"] = ovsdb.Datum{}
	if name, ok := lsp.Options["requested-chassis"]; ok && lsp.Type != lspRouter {
		if ch := chassisNamed(g, name); !ch.IsZero() {
			cols["requested_chassis"] = dUUID(ch)
		}
	}
	cols["ha_chassis_group"] = ovsdb.Datum{}
	if lsp.Type == lspExternal && lsp.HAChassisGroup != nil {
		if grp, ok := Read[nb.HAChassisGroup](g, NB, *lsp.HAChassisGroup); ok {
			cols["ha_chassis_group"] = dUUID(g.Ref("HA_Chassis_Group", grp.Name))
		}
	}
	g.Record("Port_Binding", lsp.Name, cols)
}

// chassisNamed returns the Southbound Chassis with the given name, or else
// hostname (zero if none).
func chassisNamed(g *gen, name string) ovsdb.UUID {
	if ids := g.ByName(SB, "Chassis", name); len(ids) > 0 {
		return ids[0]
	}
	for _, id := range g.All(SB, "Chassis") {
		if ch, ok := Read[sb.Chassis](g, SB, id); ok && ch.Hostname == name {
			return id
		}
	}
	return ovsdb.UUID{}
}

// switchPortFlows writes the port's flows in the switch's stages.
func switchPortFlows(g *gen, p *switchPortInfo) {
	lsp, dp := p.lsp, p.sw.dp
	flow := func(st Stage, prio int, match, actions string) {
		g.FlowHint(dp, st, prio, match, actions, lsp.UUID)
	}
	in := fmt.Sprintf("inport == %q", lsp.Name)
	enabled := lspEnabled(lsp)

	// Port security and admission.
	switch {
	case !enabled:
		flow(LSInCheckPortSec, 100, in, regbitPortSecDrop+" = 1; next;")
	case lsp.Type == lspVTEP:
		flow(LSInCheckPortSec, 70, in, fmt.Sprintf("reg0[14] = 1; next(pipeline=ingress, table=%d);", LSInHairpin.Table()))
	default:
		if q, ok := lsp.Options["qdisc_queue_id"]; ok && (lsp.Type == lspVIF || lsp.Type == lspLocalnet) {
			if n, err := strconv.ParseUint(q, 10, 16); err == nil && n > 0 && n <= 61440 {
				flow(LSInCheckPortSec, 70, in, fmt.Sprintf("set_queue(%d); %s = check_in_port_sec(); next;", n, regbitPortSecDrop))
			} else {
				g.Warn("bad qdisc_queue_id", "port", lsp.Name, "value", q)
			}
		}
	}

	// FDB learning: a VIF with unknown addresses and no port security.
	if lsp.Type == lspVIF && p.unknown && len(lsp.PortSecurity) == 0 {
		flow(LSInLookupFDB, 100, in, "reg0[11] = lookup_fdb(inport, eth.src); next;")
		flow(LSInPutFDB, 100, in+" && reg0[11] == 0", "put_fdb(inport, eth.src); next;")
	}

	arpResponder(g, p, flow, in)
	if lsp.Type == lspVIF || lsp.Type == lspExternal {
		dhcpFlows(g, p, flow)
	}

	// Destination lookup.
	if lsp.Type == lspExternal {
		externalPortFlows(g, p, flow)
		return
	}
	if !enabled {
		for _, a := range p.addrs {
			flow(LSInL2Lkup, 50, "eth.dst == "+a.mac, "drop;")
		}
		flow(LSInL2Unknown, 50, fmt.Sprintf("outport == %q", lsp.Name), "drop;")
		return
	}
	out := fmt.Sprintf("outport = %q; output;", lsp.Name)
	if p.peer != nil {
		routerPortL2(g, p, flow)
		return
	}
	for _, a := range p.addrs {
		flow(LSInL2Lkup, 50, "eth.dst == "+a.mac, out)
	}
}

// arpResponder writes the port's ARP and ND responder flows.
func arpResponder(g *gen, p *switchPortInfo, flow func(Stage, int, string, string), in string) {
	lsp := p.lsp
	switch lsp.Type {
	case lspLocalnet:
		flow(LSInARPRsp, 100, in, "next;")
		return
	case lspVTEP:
		// Traffic from a VTEP gateway skips to the hairpin stage
		// (check_port_sec above), and there on to the destination lookup.
		flow(LSInHairpin, 1000, "reg0[14] == 1", fmt.Sprintf("next(pipeline=ingress, table=%d);", LSInL2Lkup.Table()))
		return
	case lspExternal:
		return
	case lspVirtual:
		virtualPortBind(g, p, flow)
		return
	}
	if p.unknown {
		// A port that may have any address gets no proxy replies.
		return
	}
	na := "nd_na"
	if lsp.Type == lspRouter {
		na = "nd_na_router"
	}
	for _, a := range p.addrs {
		for _, ip := range a.ip4 {
			m := fmt.Sprintf("arp.tpa == %s && arp.op == 1", ip)
			flow(LSInARPRsp, 50, m, fmt.Sprintf("eth.dst = eth.src; eth.src = %s; arp.op = 2; /* ARP reply */ arp.tha = arp.sha; arp.sha = %s; arp.tpa = arp.spa; arp.spa = %s; outport = inport; flags.loopback = 1; output;", a.mac, a.mac, ip))
			flow(LSInARPRsp, 100, m+" && "+in, "next;")
		}
		for _, ip := range a.ip6 {
			m := fmt.Sprintf("nd_ns && ip6.dst == {%s, %s} && nd.target == %s", ip, solicitedNode(ip), ip)
			flow(LSInARPRsp, 50, m, fmt.Sprintf("%s { eth.src = %s; ip6.src = %s; nd.target = %s; nd.tll = %s; outport = inport; flags.loopback = 1; output; };", na, a.mac, ip, ip, a.mac))
			flow(LSInARPRsp, 100, m+" && "+in, "next;")
		}
	}
}

// virtualPortBind writes, for a virtual port, the flows that bind it to
// the parent that answers for its IP.
func virtualPortBind(g *gen, p *switchPortInfo, flow func(Stage, int, string, string)) {
	lsp := p.lsp
	vip, err := netip.ParseAddr(lsp.Options["virtual-ip"])
	parents := lsp.Options["virtual-parents"]
	if err != nil || parents == "" {
		if lsp.Options["virtual-ip"] != "" || parents != "" {
			g.Warn("virtual port without a valid virtual-ip or virtual-parents", "port", lsp.Name)
		}
		return
	}
	for _, parent := range strings.Split(parents, ",") {
		parent = strings.TrimSpace(parent)
		if parent == "" {
			continue
		}
		var m string
		if vip.Is4() {
			m = fmt.Sprintf("inport == %q && ((arp.op == 1 && arp.spa == %s && arp.tpa == %s) || (arp.op == 2 && arp.spa == %s))", parent, vip, vip, vip)
		} else {
			m = fmt.Sprintf("inport == %q && ((nd_ns && ip6.dst == {%s, %s} && nd.target == %s) ||(nd_na && nd.target == %s))", parent, vip, solicitedNode(vip), vip, vip)
		}
		flow(LSInARPRsp, 100, m, fmt.Sprintf("bind_vport(%q, inport); next;", lsp.Name))
	}
}

// externalPortFlows keeps an external port's ARP and ND requests for the
// switch's routers, and its traffic to their MACs, that reach the switch
// through a localnet port, to the chassis the external port is on (the
// others drop them), so that only one chassis answers.
func externalPortFlows(g *gen, p *switchPortInfo, flow func(Stage, int, string, string)) {
	localnets := switchLocalnets(g, p.sw)
	var routers []lspAddress
	for _, port := range ReadAll[nb.LogicalSwitchPort](g, NB, g.Members(NB, nb.LogicalSwitchTable, p.sw.nb.UUID, "ports")) {
		switch port.Type {
		case lspRouter:
			peer := readRouterPeer(g, port.Options["router-port"])
			if peer == nil {
				continue
			}
			for _, e := range port.Addresses {
				if strings.TrimSpace(e) == "router" {
					routers = append(routers, peer.addr)
				} else if a, ok := parseLSPAddress(e); ok {
					routers = append(routers, a)
				}
			}
		}
	}
	notHere := fmt.Sprintf("!is_chassis_resident(%q)", p.lsp.Name)
	for _, ln := range localnets {
		for _, a := range p.addrs {
			from := fmt.Sprintf("inport == %q && eth.src == %s", ln, a.mac)
			for _, r := range routers {
				for _, ip := range r.ip4 {
					flow(LSInExternalPort, 100, fmt.Sprintf("%s && %s && arp.tpa == %s && arp.op == 1", from, notHere, ip), "drop;")
				}
				for _, ip := range r.ip6 {
					flow(LSInExternalPort, 100, fmt.Sprintf("%s && %s && nd_ns && ip6.dst == {%s, %s} && nd.target == %s", from, notHere, ip, solicitedNode(ip), ip), "drop;")
				}
				flow(LSInExternalPort, 100, fmt.Sprintf("%s && eth.dst == %s && %s", from, r.mac, notHere), "drop;")
			}
		}
	}
}

// switchLocalnets names the switch's localnet ports, through which its
// external ports' traffic arrives.
func switchLocalnets(g *gen, sw *logicalSwitch) []string {
	var names []string
	for _, port := range ReadAll[nb.LogicalSwitchPort](g, NB, g.Members(NB, nb.LogicalSwitchTable, sw.nb.UUID, "ports")) {
		if port.Type == lspLocalnet {
			names = append(names, port.Name)
		}
	}
	return names
}
