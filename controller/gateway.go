package controller

import (
	"sort"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// Gateways (ovn-architecture(7), "Gateway Routers" and "Distributed
// Gateway Ports").
//
// An l3gateway port belongs to the chassis its options:l3gateway-chassis
// names: there it is a patch port between the gateway router and its
// switch, and the chassis claims it; elsewhere it is a remote port,
// reached over the tunnel.
//
// A chassisredirect port belongs to the highest-priority gateway chassis
// of its HA_Chassis_Group (or, without one, of its Gateway_Chassis rows)
// that has a Chassis row and is alive. That chassis claims it, and
// output to it runs the egress pipeline of its distributed port there;
// other chassis send it over the tunnel to the gateway they find alive.
//
// Alive is what BFD over the tunnels says (bfd.go, Input.BFD), as in
// ovn-controller: another chassis is alive when this chassis' session
// with it is up; this chassis counts itself alive when at least one of
// its sessions is up (with every session down it is cut off and claims
// nothing). A group of one chassis needs no BFD: that chassis holds it.
// When no gateway is alive in this chassis' view, traffic goes to the
// chassis that claimed the port, else to the highest-priority other
// chassis. Without BFD (Input.BFD nil) every registered chassis counts
// as alive.

// claimable reports whether this chassis may claim p (and must release
// it when it no longer should hold it).
func claimable(p *sb.PortBinding) bool {
	return isVIF(p) || p.Type == "l3gateway" || p.Type == "chassisredirect"
}

// requestedHere reports whether a VIF may be bound on this chassis: its
// requested-chassis (the column, else the option: a chassis name or
// hostname, the first of a list) is unset or this chassis.
func (tr *translation) requestedHere(p *sb.PortBinding) bool {
	if p.RequestedChassis != nil {
		return *p.RequestedChassis == tr.in.ChassisUUID
	}
	req := p.Options["requested-chassis"]
	if req == "" {
		return true
	}
	req, _, _ = strings.Cut(req, ",")
	req = strings.TrimSpace(req)
	if req == tr.in.Chassis {
		return true
	}
	for _, ch := range tr.in.AllChassis {
		if ch.Name == tr.in.Chassis {
			return ch.Hostname != "" && ch.Hostname == req
		}
	}
	return false
}

// indexGateways decides which gateway ports reside here and makes their
// datapaths local.
func (tr *translation) indexGateways() {
	in := tr.in
	for i := range in.Ports {
		p := &in.Ports[i]
		switch p.Type {
		case "l3gateway":
			if gw := p.Options["l3gateway-chassis"]; gw == "" || gw != in.Chassis {
				continue
			}
		case "chassisredirect":
			if in.ChassisUUID == (ovsdb.UUID{}) || tr.activeGateway(p) != in.ChassisUUID {
				continue
			}
			if dist := tr.byName[p.Options["distributed-port"]]; dist == nil || dist.Datapath != p.Datapath {
				tr.problem("chassisredirect port %s: distributed port %q is not on its datapath", p.LogicalPort, p.Options["distributed-port"])
				continue
			}
		default:
			continue
		}
		tr.resident[p.LogicalPort] = true
		tr.local[p.Datapath] = true
		if in.ChassisUUID != (ovsdb.UUID{}) {
			tr.out.Bind[p.LogicalPort] = p.UUID
		}
	}
}

// gatewayCand is a gateway chassis of a chassisredirect port.
type gatewayCand struct {
	ch   ovsdb.UUID
	prio int64
	name string
}

// gatewayCandidates are p's registered gateway chassis, highest
// priority first (ties by name).
func (tr *translation) gatewayCandidates(p *sb.PortBinding) []gatewayCand {
	var cands []gatewayCand
	if p.HAChassisGroup != nil {
		if g := tr.haGroups[*p.HAChassisGroup]; g != nil {
			for _, id := range g.HAChassis {
				if h := tr.haChassis[id]; h != nil && h.Chassis != nil && tr.chassisName[*h.Chassis] != "" {
					cands = append(cands, gatewayCand{*h.Chassis, h.Priority, tr.chassisName[*h.Chassis]})
				}
			}
		}
	} else {
		for _, id := range p.GatewayChassis {
			if g := tr.gwChassis[id]; g != nil && g.Chassis != nil && tr.chassisName[*g.Chassis] != "" {
				cands = append(cands, gatewayCand{*g.Chassis, g.Priority, tr.chassisName[*g.Chassis]})
			}
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].prio != cands[j].prio {
			return cands[i].prio > cands[j].prio
		}
		return cands[i].name < cands[j].name
	})
	return cands
}

// activeGateway is the chassis that should hold a chassisredirect port
// in this chassis' view (zero if none is alive).
func (tr *translation) activeGateway(p *sb.PortBinding) ovsdb.UUID {
	cands := tr.gatewayCandidates(p)
	switch {
	case len(cands) == 0:
		return ovsdb.UUID{}
	case len(cands) == 1 || tr.in.BFD == nil:
		return cands[0].ch
	}
	for _, c := range cands {
		if c.ch == tr.in.ChassisUUID && c.ch != (ovsdb.UUID{}) {
			if tr.bfdAnyUp() {
				return c.ch
			}
			continue
		}
		if tr.in.BFD[c.name] {
			return c.ch
		}
	}
	return ovsdb.UUID{}
}

// bfdAnyUp reports whether any BFD session of this chassis is up.
func (tr *translation) bfdAnyUp() bool {
	for _, up := range tr.in.BFD {
		if up {
			return true
		}
	}
	return false
}

// isPatch reports whether p joins two datapaths here: a patch port, or an
// l3gateway port on its gateway chassis.
func (tr *translation) isPatch(p *sb.PortBinding) bool {
	return p.Type == "patch" || p.Type == "l3gateway" && tr.resident[p.LogicalPort]
}

// redirectPort writes the rules of a chassisredirect port that resides
// here: output to it is output to its distributed port, whose egress
// pipeline runs here with the router's zones.
func (tr *translation) redirectPort(p *sb.PortBinding, dk int64) {
	dist := tr.byName[p.Options["distributed-port"]]
	if dist == nil {
		return // reported by indexGateways
	}
	tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=set_field:%d->reg15,%sresubmit(,%d)",
		tableLocalOutput, dk, p.TunnelKey, dist.TunnelKey, tr.routerZones(p.Datapath), tableLoopback)
}

// remoteChassis is the chassis a port that is not here lives on: its
// binding, or for a chassisredirect port the gateway chassis alive in
// this chassis' view.
func (tr *translation) remoteChassis(p *sb.PortBinding) (ovsdb.UUID, bool) {
	if p.Type == "chassisredirect" && (tr.in.BFD != nil || p.Chassis == nil) {
		ch := tr.activeGateway(p)
		if ch == (ovsdb.UUID{}) && p.Chassis != nil {
			ch = *p.Chassis // none alive here: where it was claimed
		}
		if ch == (ovsdb.UUID{}) {
			for _, c := range tr.gatewayCandidates(p) {
				if c.ch != tr.in.ChassisUUID {
					ch = c.ch // the highest priority but this cut-off chassis
					break
				}
			}
		}
		return ch, ch != (ovsdb.UUID{}) && ch != tr.in.ChassisUUID
	}
	if p.Chassis != nil {
		return *p.Chassis, *p.Chassis != tr.in.ChassisUUID
	}
	return ovsdb.UUID{}, false
}
