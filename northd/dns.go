package northd

import (
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// genDNS writes a Northbound DNS row's Southbound DNS row, with the
// datapaths of the switches that list it (none: no row).
func genDNS(g *gen) {
	d, ok := Read[nb.DNS](g, NB, g.ID())
	if !ok {
		return
	}
	var dps []ovsdb.UUID
	for _, ls := range g.Referrers(NB, nb.LogicalSwitchTable, "dns_records", d.UUID) {
		dps = append(dps, g.Ref("Datapath_Binding", ls.String()))
	}
	if len(dps) == 0 {
		return
	}
	g.Record("DNS", d.UUID.String(), map[string]ovsdb.Datum{
		"records":      dMap(d.Records),
		"datapaths":    dUUIDs(dps),
		"external_ids": dMap(map[string]string{"dns_id": d.UUID.String()}),
	})
}

// switchHasDNS says whether one of a switch's DNS rows has records.
func switchHasDNS(g *gen, ls *nb.LogicalSwitch) bool {
	for _, d := range ReadAll[nb.DNS](g, NB, g.Members(NB, nb.LogicalSwitchTable, ls.UUID, "dns_records")) {
		if len(d.Records) > 0 {
			return true
		}
	}
	return false
}

// switchDNSFlows writes the DNS responder of a switch with DNS records:
// queries are answered by ovn-controller (dns_lookup) and sent back, and
// the answers pass the egress ACLs.
func switchDNSFlows(g *gen, sw *logicalSwitch, stateful bool) {
	if !switchHasDNS(g, &sw.nb) {
		return
	}
	dp := sw.dp
	g.Flow(dp, LSInDNSLookup, 100, "udp.dst == 53", "reg0[4] = dns_lookup(); next;")
	for _, ip := range []string{"ip4", "ip6"} {
		g.Flow(dp, LSInDNSResponse, 100, "udp.dst == 53 && reg0[4]",
			"eth.dst <-> eth.src; "+ip+".src <-> "+ip+".dst; udp.dst = udp.src; udp.src = 53; outport = inport; flags.loopback = 1; output;")
	}
	g.Flow(dp, LSOutACL, 34000, "udp.src == 53", aclBypassAction(stateful))
}

// aclBypassAction is what the egress ACL stage does with a reply of
// northd's own responders (DHCP, DNS): commit it where the switch tracks
// connections, so that its reply direction is known.
func aclBypassAction(stateful bool) string {
	if stateful {
		return "ct_commit; next;"
	}
	return "next;"
}
