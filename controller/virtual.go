package controller

import "github.com/govn/govn/schema/sb"

// Virtual ports (Logical_Switch_Port type virtual, options virtual-ip
// and virtual-parents): an address that one of several parent ports
// answers for at a time. The parent that announces it (an ARP or ND for
// the virtual IP, which ovn-northd sends to bind_vport) has pinctrl bind
// the virtual port to this chassis, with the parent as its
// virtual_parent. While both hold (the Port_Binding's chassis is this
// one, or none, and its virtual_parent is a port resident here, on the
// same switch), the virtual port is resident here too, and bound here
// (a binding someone cleared is claimed again, as ovn-controller claims
// it): traffic to it leaves
// by the parent's interface, in its own conntrack zone; traffic from the
// parent's interface stays the parent's. Otherwise a virtual port bound
// here is released as ovn-controller releases one: its chassis and its
// virtual_parent are both cleared (see release), so that no stale parent
// is left to make it resident anywhere.

// release clears what binding p to this chassis wrote: its chassis (up
// false), and for a virtual port the virtual_parent that bind_vport set.
// It returns the columns to write.
func release(p *sb.PortBinding) []string {
	no := false
	p.Chassis, p.Up = nil, &no
	if p.VirtualParent == nil {
		return []string{"chassis", "up"}
	}
	p.VirtualParent = nil
	return []string{"chassis", "up", "virtual_parent"}
}

// indexVirtualPorts makes resident the virtual ports bound here behind
// a resident parent.
func (tr *translation) indexVirtualPorts() {
	for i := range tr.in.Ports {
		p := &tr.in.Ports[i]
		if p.Type != "virtual" || tr.resident[p.LogicalPort] || p.VirtualParent == nil ||
			p.Chassis != nil && *p.Chassis != tr.in.ChassisUUID {
			continue
		}
		parent := tr.byName[*p.VirtualParent]
		if parent == nil || parent.Datapath != p.Datapath || !tr.resident[parent.LogicalPort] || parent.Type == "virtual" {
			continue
		}
		if _, ok := tr.in.VIFs[parent.LogicalPort]; !ok {
			continue
		}
		tr.resident[p.LogicalPort] = true
		tr.local[p.Datapath] = true
		tr.out.Bind[p.LogicalPort] = p.UUID
	}
}

// isVirtualHere reports whether p is a virtual port resident through its
// parent (not bound by an interface of its own).
func (tr *translation) isVirtualHere(p *sb.PortBinding) bool {
	if p.Type != "virtual" || p.VirtualParent == nil {
		return false
	}
	_, own := tr.in.VIFs[p.LogicalPort]
	_, parent := tr.in.VIFs[*p.VirtualParent]
	return !own && parent
}

// virtualRules delivers a resident virtual port's traffic out of its
// parent's interface ofport (vifRules without the input side).
func (tr *translation) virtualRules(p *sb.PortBinding, dk int64, ofport uint32) {
	pk := p.TunnelKey
	tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=set_field:%d->reg13,resubmit(,%d)",
		tableLocalOutput, dk, pk, tr.zone(p.LogicalPort), tableLoopback)
	tr.rule("table=%d,priority=100,metadata=%d,reg10=0/0x1,reg14=%d,reg15=%d actions=drop",
		tableLoopback, dk, pk, pk)
	tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=output:%d",
		tableLogToPhys, dk, pk, ofport)
}
