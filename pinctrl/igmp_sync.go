package pinctrl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/sb"
)

// IGMPStats count IGMP snooping's work.
type IGMPStats struct {
	Reports    uint64 // group changes reported by local ports
	Ignored    uint64 // reports on a switch without snooping enabled
	Groups     int    // groups with members here, at the last sync
	Written    uint64 // IGMP_Group rows inserted, updated or deleted
	WriteFails uint64 // transactions that failed
}

// igmpSnapshot is the membership to mirror into the IGMP_Group rows of
// this chassis.
type igmpSnapshot map[McastGroup][]string

// applyIGMP applies the reports of one packet-in; only the Run goroutine
// calls it.
func (p *Pinctrl) applyIGMP(reports []IGMPReport, st *State, now time.Time) {
	if p.snoop.Configure(st.Mcast) {
		p.igmpDirty = true // a flush before the reports that follow it
	}
	for _, r := range reports {
		cfg, ok := st.Mcast[r.Datapath]
		p.mu.Lock()
		if !ok || !cfg.Enabled {
			p.igmpStats.Ignored++
			p.mu.Unlock()
			continue
		}
		p.igmpStats.Reports++
		p.mu.Unlock()
		if p.snoop.Report(r, cfg, now) {
			p.igmpDirty = true
		}
	}
	p.syncIGMP(now)
}

// igmpResync is how often the rows are checked against the membership
// even without a change: rows someone else deleted (a Southbound
// rebuilt, a port's weak reference gone) come back. A check that finds
// nothing to change writes nothing.
const igmpResync = 30 * time.Second

// tickIGMP expires idle memberships, sends the queries that are due and
// retries a failed sync.
func (p *Pinctrl) tickIGMP(now time.Time) {
	if st := p.currentState(now); st != nil {
		if p.snoop.Configure(st.Mcast) {
			p.igmpDirty = true
		}
		if p.snoop.Expire(now, func(dp uint32) McastConfig { return st.Mcast[dp] }) {
			p.igmpDirty = true
		}
		p.sendQueries(st, now)
	}
	p.mu.Lock()
	if p.igmpFailed {
		p.igmpFailed, p.igmpDirty = false, true
	}
	p.mu.Unlock()
	if now.Sub(p.igmpSynced) >= igmpResync {
		p.igmpDirty = true
	}
	p.syncIGMP(now)
}

// localOutputTable is OVN 23.03's local output table
// (OFTABLE_LOCAL_OUTPUT), as package controller programs it: a packet
// looked up there reaches the ports of its outport on this chassis only,
// never a tunnel.
const localOutputTable = 40

// sendQueries sends a general query on each switch that is the querier
// here, at once and then every query interval. Like ovn-controller's
// (local only), a query goes to the switch's ports on this chassis: every
// chassis with a port on the switch queries its own, so a host hears one
// query an interval however many chassis the switch spans.
func (p *Pinctrl) sendQueries(st *State, now time.Time) {
	if p.queryNext == nil {
		p.queryNext = map[uint32]time.Time{}
	}
	for key, cfg := range st.Mcast {
		sw := st.Datapaths[key]
		flood, ok := uint32(0), false
		if sw != nil {
			flood, ok = sw.Ports["_MC_flood"]
		}
		if !cfg.queries() && !cfg.mldQueries() || !ok {
			delete(p.queryNext, key)
			continue
		}
		if next, ok := p.queryNext[key]; ok && now.Before(next) {
			continue
		}
		p.queryNext[key] = now.Add(max(cfg.QueryInterval, time.Second))
		var k flow.Key
		k.Set(flow.Metadata, uint64(key))
		k.Set(flow.Reg0+15, uint64(flood)) // outport: every port of the switch
		if cfg.queries() {
			err := p.cfg.Switch.Execute(dp.PacketOut{Frame: igmpGeneralQuery(cfg), Key: k, Table: localOutputTable})
			p.countPeriodic("igmp_query", err)
		}
		if cfg.mldQueries() {
			err := p.cfg.Switch.Execute(dp.PacketOut{Frame: mldGeneralQuery(cfg), Key: k, Table: localOutputTable})
			p.countPeriodic("mld_query", err)
		}
	}
	for key := range p.queryNext {
		if _, ok := st.Mcast[key]; !ok {
			delete(p.queryNext, key)
		}
	}
}

// syncIGMP hands the membership to the writer if it changed. The writer
// takes the latest snapshot only: changes made while it writes collapse
// into one transaction.
func (p *Pinctrl) syncIGMP(now time.Time) {
	if !p.igmpDirty {
		return
	}
	p.igmpSynced = now
	snap := igmpSnapshot(p.snoop.Groups())
	select {
	case <-p.igmpSync: // replace a snapshot not yet taken
	default:
	}
	p.igmpSync <- snap // cannot block: only this goroutine sends
	p.igmpDirty = false
}

// writeIGMP mirrors each snapshot into the Southbound.
func (p *Pinctrl) writeIGMP(ctx context.Context) {
	for {
		var snap igmpSnapshot
		select {
		case <-ctx.Done():
			return
		case snap = <-p.igmpSync:
		}
		n, err := p.commitIGMP(ctx, snap)
		p.mu.Lock()
		if err != nil {
			p.igmpStats.WriteFails++
			p.igmpFailed = true
		} else {
			p.igmpStats.Written += uint64(n)
			p.igmpStats.Groups = 0
			for g := range snap {
				if g.Group.IsValid() { // not a switch's multicast routers
					p.igmpStats.Groups++
				}
			}
		}
		p.mu.Unlock()
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.Is(err, errNotYet): // at start: retried every second
			p.log.Debug("pinctrl: writing IGMP groups", "err", err)
		default:
			p.log.Warn("pinctrl: writing IGMP groups", "err", err)
		}
	}
}

// errNotYet: the Southbound cannot take this chassis' rows yet.
var errNotYet = errors.New("not yet")

// igmpRowKey names an IGMP_Group row of this chassis.
type igmpRowKey struct {
	datapath ovsdb.UUID
	address  string
}

// commitIGMP makes this chassis' IGMP_Group rows say snap: one row per
// group with members, their Port_Bindings as ports; rows of groups
// without members go. It returns how many rows it changed.
func (p *Pinctrl) commitIGMP(ctx context.Context, snap igmpSnapshot) (int, error) {
	if p.cfg.SB == nil {
		return 0, fmt.Errorf("%w: no southbound", errNotYet) // tests without one
	}
	c := p.cfg.SB()
	if c == nil {
		return 0, fmt.Errorf("%w: no southbound", errNotYet)
	}
	name := ""
	if p.cfg.Chassis != nil {
		name = p.cfg.Chassis()
	}
	n := 0
	_, err := c.Do(ctx, func(t *client.Txn) error {
		n = 0
		want, me, err := igmpRows(c.Cache(), name, snap)
		if err != nil {
			return err
		}
		for _, g := range client.List[sb.IGMPGroup](c.Cache()) {
			if g.Chassis == nil || *g.Chassis != me || g.Datapath == nil {
				continue
			}
			k := igmpRowKey{*g.Datapath, g.Address}
			row, ok := want[k]
			switch {
			case !ok:
				t.Delete(sb.IGMPGroupTable, g.UUID)
			case slices.Equal(sortedUUIDs(g.Ports), row.Ports):
				delete(want, k)
				continue
			default:
				t.UpdateModel(&row, g.UUID, "ports")
				delete(want, k)
			}
			n++
		}
		for _, row := range want {
			t.InsertModel(&row)
			n++
		}
		if n == 0 {
			return errUnchanged // nothing to commit
		}
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return 0, nil
	}
	return n, err
}

var errUnchanged = errors.New("unchanged")

// igmpRows are the IGMP_Group rows snap asks for, and the chassis' UUID.
func igmpRows(c *client.Cache, chassis string, snap igmpSnapshot) (map[igmpRowKey]sb.IGMPGroup, ovsdb.UUID, error) {
	var me ovsdb.UUID
	for _, ch := range client.List[sb.Chassis](c) {
		if ch.Name == chassis && chassis != "" {
			me = ch.UUID
		}
	}
	if me == (ovsdb.UUID{}) {
		return nil, me, fmt.Errorf("%w: this chassis has no Chassis row", errNotYet)
	}
	dps := map[uint32]ovsdb.UUID{}
	for _, d := range client.List[sb.DatapathBinding](c) {
		dps[uint32(d.TunnelKey)] = d.UUID
	}
	ports := map[ovsdb.UUID]map[string]ovsdb.UUID{}
	for _, pb := range client.List[sb.PortBinding](c) {
		if ports[pb.Datapath] == nil {
			ports[pb.Datapath] = map[string]ovsdb.UUID{}
		}
		ports[pb.Datapath][pb.LogicalPort] = pb.UUID
	}
	want := map[igmpRowKey]sb.IGMPGroup{}
	for g, members := range snap {
		dp, ok := dps[g.Datapath]
		if !ok {
			continue // the switch went away
		}
		uuids := []ovsdb.UUID{}
		for _, m := range members {
			if u, ok := ports[dp][m]; ok {
				uuids = append(uuids, u)
			}
		}
		addr := mroutersAddress // kept without ports
		if g.Group.IsValid() {
			addr = g.Group.String()
			if len(uuids) == 0 {
				continue
			}
		}
		d, ch := dp, me
		want[igmpRowKey{dp, addr}] = sb.IGMPGroup{Address: addr, Datapath: &d, Chassis: &ch, Ports: sortedUUIDs(uuids)}
	}
	return want, me, nil
}

func sortedUUIDs(u []ovsdb.UUID) []ovsdb.UUID {
	s := slices.Clone(u)
	slices.SortFunc(s, ovsdb.UUID.Compare)
	return s
}
