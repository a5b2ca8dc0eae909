package northd

import (
	"strconv"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// The kinds of owners. Owners are generated in this order (then by UUID),
// so the datapaths' tunnel keys are handed out before their ports'.
const (
	kindGlobal ownerKind = iota
	kindSwitch
	kindSwitchPort
	kindACL
	kindPortGroup
	kindAddressSet
	kindLoadBalancer
	kindQoS
	kindDNS
	kindMeter
	kindHAChassisGroup
	kindRouter
	kindRouterPort
	kindStaticMACBinding
	kindBFD
	kindIGMP
	kindNAT
	kindRouterNAT
	kindRouterRoutes
	kindStaticRoute
	kindStatic

	// kindMemo owners compute memos (memo.go); they are not in ownerKinds
	// and produce no output.
	kindMemo ownerKind = 255
)

// ownerKinds lists every kind of owner with its generator.
func ownerKinds() []ownerKindInfo {
	return []ownerKindInfo{
		kindGlobal:           {"global", "", genGlobal},
		kindSwitch:           {"switch", nb.LogicalSwitchTable, genSwitch},
		kindSwitchPort:       {"switch-port", nb.LogicalSwitchPortTable, genSwitchPort},
		kindACL:              {"acl", nb.ACLTable, genACL},
		kindPortGroup:        {"port-group", nb.PortGroupTable, genPortGroup},
		kindAddressSet:       {"address-set", nb.AddressSetTable, genAddressSet},
		kindLoadBalancer:     {"load-balancer", nb.LoadBalancerTable, genLoadBalancer},
		kindQoS:              {"qos", nb.QoSTable, genQoS},
		kindDNS:              {"dns", nb.DNSTable, genDNS},
		kindMeter:            {"meter", nb.MeterTable, genMeter},
		kindHAChassisGroup:   {"ha-chassis-group", nb.HAChassisGroupTable, genHAChassisGroup},
		kindRouter:           {"router", nb.LogicalRouterTable, genRouter},
		kindRouterPort:       {"router-port", nb.LogicalRouterPortTable, genRouterPort},
		kindStaticMACBinding: {"static-mac-binding", nb.StaticMACBindingTable, genStaticMACBinding},
		kindBFD:              {"bfd", nb.BFDTable, genBFD},
		kindIGMP:             {"igmp-groups", "", genIGMP},
		kindNAT:              {"nat", nb.NATTable, genNAT},
		kindRouterNAT:        {"router-nat", nb.LogicalRouterTable, genRouterNAT},
		kindRouterRoutes:     {"router-routes", nb.LogicalRouterTable, genRouterRoutes},
		kindStaticRoute:      {"static-route", nb.LogicalRouterStaticRouteTable, genStaticRoute},
		kindStatic:           {"static", "", genStatic},
	}
}

// requestedKey parses options:requested-tnl-key (0 when absent or bad).
func requestedKey(g *gen, opts map[string]string) uint32 {
	s, ok := opts["requested-tnl-key"]
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 0 {
		g.Warn("bad requested-tnl-key", "value", s)
		return 0
	}
	return uint32(n)
}

// logicalSwitch is what the switch's generators share about one switch.
type logicalSwitch struct {
	nb  nb.LogicalSwitch
	dp  dpID
	key uint32
}

// switchOf returns the switch a port belongs to. A port listed by no switch
// or by several is warned about and skipped, as ovn-northd skips it.
func switchOf(g *gen, port ovsdb.UUID, name string) (*logicalSwitch, bool) {
	ids := g.Referrers(NB, nb.LogicalSwitchTable, "ports", port)
	if len(ids) != 1 {
		if len(ids) > 1 {
			g.Warn("logical switch port is on several switches; skipping it", "port", name)
		}
		return nil, false
	}
	ls, ok := Read[nb.LogicalSwitch](g, NB, ids[0])
	if !ok {
		return nil, false
	}
	return &logicalSwitch{nb: ls, dp: g.Datapath(ls.UUID)}, true
}

func genSwitch(g *gen) {
	ls, ok := Read[nb.LogicalSwitch](g, NB, g.ID())
	if !ok {
		return
	}
	sw := &logicalSwitch{nb: ls, dp: g.Datapath(ls.UUID)}
	sw.key = g.DatapathKey(ls.UUID, requestedKey(g, ls.OtherConfig))
	ext := map[string]string{"logical-switch": ls.UUID.String(), "name": ls.Name}
	if n, ok := ls.ExternalIDs["neutron:network_name"]; ok {
		ext["name2"] = n
	}
	g.Record("Datapath_Binding", ls.UUID.String(), map[string]ovsdb.Datum{
		"tunnel_key":   dInt(int64(sw.key)),
		"external_ids": dMap(ext),
	})
	switchPipeline(g, sw)
	switchMulticast(g, sw)
}

func genSwitchPort(g *gen) {
	lsp, ok := Read[nb.LogicalSwitchPort](g, NB, g.ID())
	if !ok {
		return
	}
	// Port names are unique in OVN: of two ports with one name, the one
	// with the smaller UUID is used, the other warned about.
	if same := g.ByName(NB, nb.LogicalSwitchPortTable, lsp.Name); len(same) > 1 && same[0] != lsp.UUID {
		g.Warn("duplicate logical switch port name; skipping this port", "port", lsp.Name)
		return
	}
	sw, ok := switchOf(g, lsp.UUID, lsp.Name)
	if !ok {
		return
	}
	switchPort(g, sw, &lsp)
	switchPortRouterFlows(g, sw, &lsp)
}
