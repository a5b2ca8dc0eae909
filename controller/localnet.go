package controller

import (
	"fmt"
	"sort"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// Provider networks (ovn-architecture(7), "Logical Networks" and
// ovn-controller(8), external_ids:ovn-bridge-mappings).
//
// ovn-controller joins br-int to each mapped bridge with a pair of patch
// ports. govn chassis is the switch too, so the patch is implicit: a frame
// a localnet port outputs leaves by every port of the mapped bridge, and a
// frame arriving on a port of the bridge, besides going out of the
// bridge's other ports as on any other bridge, enters the ingress pipeline
// of the localnet port whose VLAN it carries (untagged: the localnet ports
// without a tag).
//
// A switch with a localnet port on a plugged network reaches its ports on
// other chassis through the provider network, never the tunnel: output to
// such a port is output to the localnet port.

// ParseBridgeMappings reads ovn-bridge-mappings, "physnet:bridge,...", into
// a map from provider network to bridge name.
func ParseBridgeMappings(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		net, br, ok := strings.Cut(item, ":")
		net, br = strings.TrimSpace(net), strings.TrimSpace(br)
		if !ok || net == "" || br == "" {
			return m, fmt.Errorf("ovn-bridge-mappings: %q is not physnet:bridge", item)
		}
		if old, dup := m[net]; dup && old != br {
			return m, fmt.Errorf("ovn-bridge-mappings: network %s mapped to both %s and %s", net, old, br)
		}
		m[net] = br
	}
	return m, nil
}

// plugged reports whether p is a localnet port whose network is mapped
// to a bridge here.
func (tr *translation) plugged(p *sb.PortBinding) bool {
	return p.Type == "localnet" && len(tr.in.Physnets[p.Options["network_name"]]) > 0
}

// isLocalnet reports whether p is its datapath's plugged localnet port.
func (tr *translation) isLocalnet(p *sb.PortBinding) bool {
	ln := tr.localnet[p.Datapath]
	return ln != nil && ln.UUID == p.UUID
}

// indexLocalnets finds each datapath's plugged localnet port.
func (tr *translation) indexLocalnets() {
	for i := range tr.in.Ports {
		p := &tr.in.Ports[i]
		if p.Type != "localnet" {
			continue
		}
		if p.Options["network_name"] == "" {
			tr.problem("localnet port %s: no options:network_name", p.LogicalPort)
			continue
		}
		if !tr.plugged(p) {
			continue
		}
		if p.Tag != nil && (*p.Tag < 1 || *p.Tag > 4095) {
			tr.problem("localnet port %s: VLAN tag %d is out of range", p.LogicalPort, *p.Tag)
			continue
		}
		if old := tr.localnet[p.Datapath]; old != nil {
			if old.LogicalPort < p.LogicalPort {
				tr.problem("datapath %s: localnet ports %s and %s both plugged; using %s", p.Datapath, old.LogicalPort, p.LogicalPort, old.LogicalPort)
				continue
			}
			tr.problem("datapath %s: localnet ports %s and %s both plugged; using %s", p.Datapath, p.LogicalPort, old.LogicalPort, p.LogicalPort)
		}
		tr.localnet[p.Datapath] = p
	}
}

// localnetPort writes the rules of a plugged localnet port on a local
// datapath: output to it leaves by the mapped bridge's ports (with its
// VLAN tag pushed), never back to where it came from.
func (tr *translation) localnetPort(p *sb.PortBinding, dk int64) {
	if !tr.isLocalnet(p) {
		return
	}
	pk := p.TunnelKey
	tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=set_field:%d->reg13,resubmit(,%d)",
		tableLocalOutput, dk, pk, tr.zone(p.LogicalPort), tableLoopback)
	tr.rule("table=%d,priority=100,metadata=%d,reg10=0/0x1,reg14=%d,reg15=%d actions=drop",
		tableLoopback, dk, pk, pk)
	var acts strings.Builder
	if p.Tag != nil {
		fmt.Fprintf(&acts, "push_vlan:0x8100,set_field:0x%x->vlan_tci,", 0x1000|*p.Tag)
	}
	for i, no := range tr.in.Physnets[p.Options["network_name"]] {
		if i > 0 {
			acts.WriteByte(',')
		}
		fmt.Fprintf(&acts, "output:%d", no)
	}
	tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=%s", tableLogToPhys, dk, pk, acts.String())
}

// viaLocalnet sends output to p, a port not here on a datapath with a
// plugged localnet port, out of the localnet port. It reports whether
// it did.
func (tr *translation) viaLocalnet(p *sb.PortBinding, dk int64) bool {
	ln := tr.localnet[p.Datapath]
	if ln == nil || !isVIF(p) || tr.resident[p.LogicalPort] {
		return false
	}
	tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=set_field:%d->reg15,resubmit(,%d)",
		tableLocalOutput, dk, p.TunnelKey, ln.TunnelKey, tableLocalOutput)
	return true
}

// localPort writes the rules of a localport here: a VIF on every chassis
// that has its interface, whose traffic never leaves the chassis (no
// tunnel, no localnet port).
func (tr *translation) localPort(p *sb.PortBinding, dk int64) {
	ofport, ok := tr.in.VIFs[p.LogicalPort]
	if !ok {
		return
	}
	pk := p.TunnelKey
	tr.vifRules(p, dk, ofport)
	tr.rule("table=%d,priority=150,metadata=%d,reg14=%d actions=resubmit(,%d)", tableRemoteOutput, dk, pk, tableLocalOutput)
	if ln := tr.localnet[p.Datapath]; ln != nil {
		tr.rule("table=%d,priority=150,metadata=%d,reg14=%d,reg15=%d actions=drop", tableLogToPhys, dk, pk, ln.TunnelKey)
	}
}

// vifRules are a local interface's: in from its port, out to it.
func (tr *translation) vifRules(p *sb.PortBinding, dk int64, ofport uint32) {
	pk := p.TunnelKey
	z := tr.zone(p.LogicalPort)
	tr.rule("table=%d,priority=100,in_port=%d actions=set_field:%d->reg13,set_field:%d->metadata,set_field:%d->reg14,resubmit(,%d)",
		tablePhysToLog, ofport, z, dk, pk, tableIngress)
	tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=set_field:%d->reg13,resubmit(,%d)",
		tableLocalOutput, dk, pk, z, tableLoopback)
	tr.rule("table=%d,priority=100,metadata=%d,reg10=0/0x1,reg14=%d,reg15=%d actions=drop",
		tableLoopback, dk, pk, pk)
	tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=output:%d",
		tableLogToPhys, dk, pk, ofport)
}

// physnetBridges writes table 0 for the ports of the mapped bridges:
// out of the bridge's other ports, and into the localnet ports of the
// local datapaths on the bridge's networks, by VLAN.
func (tr *translation) physnetBridges() {
	type entry struct {
		vlan int64 // 0: untagged
		acts string
	}
	type bridge struct {
		ports   []uint32
		entries []entry
	}
	bridges := map[uint32]*bridge{} // by first port: networks may share a bridge
	nets := make([]string, 0, len(tr.in.Physnets))
	for net := range tr.in.Physnets {
		nets = append(nets, net)
	}
	sort.Strings(nets)
	for _, net := range nets {
		ports := tr.in.Physnets[net]
		if len(ports) == 0 {
			continue
		}
		if bridges[ports[0]] == nil {
			bridges[ports[0]] = &bridge{ports: ports}
		}
	}
	dps := make([]ovsdb.UUID, 0, len(tr.localnet))
	for dp := range tr.localnet {
		dps = append(dps, dp)
	}
	sort.Slice(dps, func(i, j int) bool { return tr.localnet[dps[i]].LogicalPort < tr.localnet[dps[j]].LogicalPort })
	for _, dp := range dps {
		d := tr.dps[dp]
		if d == nil || !tr.local[dp] {
			continue
		}
		ln := tr.localnet[dp]
		b := bridges[tr.in.Physnets[ln.Options["network_name"]][0]]
		e := entry{}
		var acts strings.Builder
		acts.WriteString("clone(")
		if ln.Tag != nil {
			e.vlan = *ln.Tag
			acts.WriteString("pop_vlan,")
		}
		fmt.Fprintf(&acts, "set_field:%d->reg13,set_field:%d->metadata,set_field:%d->reg14,resubmit(,%d))",
			tr.zone(ln.LogicalPort), d.TunnelKey, ln.TunnelKey, tableIngress)
		e.acts = acts.String()
		b.entries = append(b.entries, e)
	}
	firsts := make([]uint32, 0, len(bridges))
	for first := range bridges {
		firsts = append(firsts, first)
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	for _, first := range firsts {
		b := bridges[first]
		byVLAN := map[int64][]string{}
		var vlans []int64
		for _, e := range b.entries {
			if byVLAN[e.vlan] == nil {
				vlans = append(vlans, e.vlan)
			}
			byVLAN[e.vlan] = append(byVLAN[e.vlan], e.acts)
		}
		sort.Slice(vlans, func(i, j int) bool { return vlans[i] < vlans[j] })
		for _, from := range b.ports {
			var hub []string
			for _, to := range b.ports {
				if to != from {
					hub = append(hub, fmt.Sprintf("output:%d", to))
				}
			}
			acts := func(extra []string) string {
				all := append(append([]string(nil), hub...), extra...)
				if len(all) == 0 {
					return "drop"
				}
				return strings.Join(all, ",")
			}
			tr.rule("table=%d,priority=100,in_port=%d actions=%s", tablePhysToLog, from, acts(nil))
			for _, v := range vlans {
				if v == 0 {
					tr.rule("table=%d,priority=110,in_port=%d,vlan_tci=0/0x1000 actions=%s", tablePhysToLog, from, acts(byVLAN[v]))
				} else {
					tr.rule("table=%d,priority=150,in_port=%d,vlan_tci=0x%x/0x1fff actions=%s", tablePhysToLog, from, 0x1000|v, acts(byVLAN[v]))
				}
			}
		}
	}
}
