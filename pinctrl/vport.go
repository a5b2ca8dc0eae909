package pinctrl

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/govn/govn/lflow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/sb"
)

// VPort is what pinctrl knows of a virtual port's Port_Binding.
type VPort struct {
	Datapath uint32 // its switch's tunnel key
	Parent   string // virtual_parent ("" if none)
	Here     bool   // bound to this chassis
}

// VPortBinding is what bind_vport learned: the virtual port VPort is
// behind Parent, a port of this chassis.
type VPortBinding struct {
	VPort, Parent string
}

// bindVport runs bind_vport("VPORT", inport).
func (h *handling) bindVport(a *lflow.CallAction) error {
	if len(a.Args) != 2 || len(a.Args[0].Value) != 1 || a.Args[0].Value[0].Kind != lflow.TokString {
		return errors.New("bind_vport: want a port name and a port field")
	}
	vport := a.Args[0].Value[0].Str
	v, ok := h.st.VPorts[vport]
	if !ok || v.Datapath != h.dp.Key {
		return fmt.Errorf("bind_vport: %q is no virtual port of this switch", vport)
	}
	key, err := h.field(a.Args[1].Value)
	if err != nil {
		return fmt.Errorf("bind_vport: %w", err)
	}
	parent, ok := h.dp.PortNames[uint32(key.Lo)]
	if !ok {
		return fmt.Errorf("bind_vport: unknown logical port %d", key.Lo)
	}
	h.out.VPorts = append(h.out.VPorts, VPortBinding{VPort: vport, Parent: parent})
	return nil
}

// recentTTL is how long a virtual port binding or an event just sent
// counts as written, while the Southbound's answer may not be in yet:
// after it, only the Southbound says (a binding another chassis took
// over, an event row the CMS deleted, is written again).
const recentTTL = 3 * time.Second

// learnVPort hands a virtual port's binding to the writer unless the
// Southbound has it already or it was just sent.
func (p *Pinctrl) learnVPort(b VPortBinding, st *State, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v := st.VPorts[b.VPort]; v.Here && v.Parent == b.Parent {
		p.vportStats.Duplicates++
		return
	}
	offerRecent(p.vports, b, b, p.recentVPort, maxRecent, &p.vportStats, now)
}

// offerRecent queues v for its writer on ch unless key was queued within
// recentTTL, and remembers when it was (at most limit keys: past that the
// memory starts again); a full queue drops v. The caller holds p.mu and
// has checked the Southbound already.
func offerRecent[K comparable, T any](ch chan<- T, v T, key K, recent map[K]time.Time, limit int, stats *MACBindingStats, now time.Time) {
	if sent, ok := recent[key]; ok && now.Sub(sent) < recentTTL {
		stats.Duplicates++
		return
	}
	if len(recent) >= limit {
		clear(recent)
	}
	select {
	case ch <- v:
		recent[key] = now
		stats.Learned++
	default:
		stats.QueueDrops++
	}
}

// writeVPorts binds the virtual ports learned to this chassis and their
// parents (Port_Binding chassis and virtual_parent), as many as wait in
// each transaction; the chassis' controller then holds them.
func (p *Pinctrl) writeVPorts(ctx context.Context) {
	writeLearned(ctx, p, "virtual port bindings", p.vports, &p.vportStats, func(b VPortBinding) string { return b.VPort }, p.commitVPorts,
		func(batch map[string]VPortBinding) {
			for _, b := range batch {
				delete(p.recentVPort, b)
			}
		})
}

func (p *Pinctrl) commitVPorts(ctx context.Context, batch map[string]VPortBinding) (int, error) {
	if p.cfg.SB == nil {
		return 0, errors.New("no southbound") // tests without one
	}
	c := p.cfg.SB()
	if c == nil {
		return 0, errors.New("no southbound")
	}
	me, err := p.chassisUUID(c)
	if err != nil {
		return 0, err
	}
	names := make([]string, 0, len(batch))
	for k := range batch {
		names = append(names, k)
	}
	sort.Strings(names)
	n := 0
	_, err = c.Do(ctx, func(t *client.Txn) error {
		n = 0
		byName := map[string]sb.PortBinding{}
		for _, pb := range client.List[sb.PortBinding](c.Cache()) {
			if pb.Type == "virtual" {
				byName[pb.LogicalPort] = pb
			}
		}
		for _, name := range names {
			pb, ok := byName[name]
			if !ok {
				continue // gone meanwhile
			}
			parent := batch[name].Parent
			if pb.Chassis != nil && *pb.Chassis == me && pb.VirtualParent != nil && *pb.VirtualParent == parent {
				continue
			}
			pb.Chassis, pb.VirtualParent = &me, &parent
			t.UpdateModel(&pb, pb.UUID, "chassis", "virtual_parent")
			n++
			p.log.Info("binding virtual port", "lport", name, "parent", parent)
		}
		return nil
	})
	return n, err
}

// chassisUUID returns this chassis' row's UUID.
func (p *Pinctrl) chassisUUID(c *client.Client) (ovsdb.UUID, error) {
	name := ""
	if p.cfg.Chassis != nil {
		name = p.cfg.Chassis()
	}
	for _, ch := range client.List[sb.Chassis](c.Cache()) {
		if name != "" && ch.Name == name {
			return ch.UUID, nil
		}
	}
	return ovsdb.UUID{}, fmt.Errorf("no Chassis row for %q yet", name)
}
