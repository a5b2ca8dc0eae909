package northd

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// genAddressSet copies a Northbound address set to the Southbound.
func genAddressSet(g *gen) {
	as, ok := Read[nb.AddressSet](g, NB, g.ID())
	if !ok {
		return
	}
	g.Record("Address_Set", as.Name, map[string]ovsdb.Datum{
		"name":      dString(as.Name),
		"addresses": dStrings(as.Addresses),
	})
}

// genPortGroup writes a port group's Southbound rows: one Port_Group per
// datapath it has ports on, named "<datapath key>_<name>" as ovn-northd
// 23.03 names them (ovn-controller matches @name per datapath), and the
// address sets <name>_ip4 and <name>_ip6 of its ports' addresses.
func genPortGroup(g *gen) {
	pg, ok := Read[nb.PortGroup](g, NB, g.ID())
	if !ok {
		return
	}
	byDP := map[ovsdb.UUID][]string{}
	var ip4, ip6 []string
	for _, id := range g.Members(NB, nb.PortGroupTable, pg.UUID, "ports") {
		port, ok := Read[nb.LogicalSwitchPort](g, NB, id)
		if !ok {
			continue
		}
		for _, ls := range g.Referrers(NB, nb.LogicalSwitchTable, "ports", id) {
			byDP[ls] = append(byDP[ls], port.Name)
		}
		v4, v6 := portIPs(&port)
		ip4 = append(ip4, v4...)
		ip6 = append(ip6, v6...)
	}
	for ls, ports := range byDP {
		key := g.DatapathKeyOf(ls)
		if key == 0 {
			continue
		}
		name := fmt.Sprintf("%d_%s", key, pg.Name)
		g.Record("Port_Group", name, map[string]ovsdb.Datum{
			"name":  dString(name),
			"ports": dStrings(ports),
		})
	}
	for _, s := range []struct {
		suffix string
		addrs  []string
	}{{"_ip4", ip4}, {"_ip6", ip6}} {
		g.Record("Address_Set", pg.Name+s.suffix, map[string]ovsdb.Datum{
			"name":      dString(pg.Name + s.suffix),
			"addresses": dStrings(s.addrs),
		})
	}
}

// portIPs returns the IPv4 and IPv6 addresses in a port's addresses
// (dynamic ones from dynamic_addresses).
func portIPs(p *nb.LogicalSwitchPort) (ip4, ip6 []string) {
	entries := slices.Clone(p.Addresses)
	if hasAddress(p.Addresses, "dynamic") && p.DynamicAddresses != nil {
		entries = append(entries, *p.DynamicAddresses)
	}
	for _, e := range entries {
		f := strings.Fields(e)
		if len(f) < 2 {
			continue
		}
		for _, w := range f[1:] {
			a, err := netip.ParseAddr(w)
			if err != nil {
				continue
			}
			if a.Is4() {
				ip4 = append(ip4, a.String())
			} else {
				ip6 = append(ip6, a.String())
			}
		}
	}
	return ip4, ip6
}

// genMeter copies a Northbound meter and its bands to the Southbound.
func genMeter(g *gen) {
	m, ok := Read[nb.Meter](g, NB, g.ID())
	if !ok {
		return
	}
	var bands []map[string]ovsdb.Datum
	for _, b := range ReadAll[nb.MeterBand](g, NB, m.Bands) {
		bands = append(bands, map[string]ovsdb.Datum{
			"action":     dString(b.Action),
			"rate":       dInt(b.Rate),
			"burst_size": dInt(b.BurstSize),
		})
	}
	g.RecordWithChildren("Meter", m.Name, map[string]ovsdb.Datum{
		"name": dString(m.Name),
		"unit": dString(m.Unit),
	}, map[string]childRows{"bands": {table: "Meter_Band", rows: bands}})
}

// genQoS writes a QoS rule's marking and metering flows on the switches
// that list it.
func genQoS(g *gen) {
	q, ok := Read[nb.QoS](g, NB, g.ID())
	if !ok {
		return
	}
	if err := g.CheckMatch(q.Match); err != nil {
		g.Warn("QoS match does not parse; skipping the rule", "match", q.Match, "error", err)
		return
	}
	mark, meter := LSInQoSMark, LSInQoSMeter
	if q.Direction == nb.ACLDirectionToLport {
		mark, meter = LSOutQoSMark, LSOutQoSMeter
	}
	for _, ls := range g.Referrers(NB, nb.LogicalSwitchTable, "qos_rules", q.UUID) {
		dp := g.Datapath(ls)
		if dscp, ok := q.Action["dscp"]; ok {
			g.FlowHint(dp, mark, int(q.Priority), q.Match, fmt.Sprintf("ip.dscp = %d; next;", dscp), q.UUID)
		}
		rate, hasRate := q.Bandwidth["rate"]
		if !hasRate {
			continue
		}
		act := fmt.Sprintf("set_meter(%d); next;", rate)
		if burst, ok := q.Bandwidth["burst"]; ok {
			act = fmt.Sprintf("set_meter(%d, %d); next;", rate, burst)
		}
		g.FlowHint(dp, meter, int(q.Priority), q.Match, act, q.UUID)
	}
}
