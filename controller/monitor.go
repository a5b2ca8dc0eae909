package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/sb"
)

// Conditional monitoring, as ovn-controller does it (ovn-controller(8),
// external_ids:ovn-monitor-all): of the big Southbound tables the chassis
// receives only the rows of its local datapaths, plus the port bindings
// that make datapaths local (its interfaces' logical ports, ports bound
// to it, every patch and chassisredirect port, the l3gateway ports
// assigned to it). The conditions grow as datapaths become local: a
// local switch's patch port makes the router at its peer local, whose
// rows then arrive. The other tables are small and monitored whole.

// conditionalTables are the tables monitored by condition.
var conditionalTables = []string{sb.PortBindingTable, sb.LogicalFlowTable, sb.MulticastGroupTable, sb.MACBindingTable}

// monitorConditions returns each conditional table's monitor
// conditions (OVSDB ORs a table's clauses): nil, all rows, when
// monitorAll.
func monitorConditions(system string, chUUID ovsdb.UUID, ifaceIDs []string, localDPs, localGroups []ovsdb.UUID, monitorAll bool) map[string][]client.Condition {
	conds := map[string][]client.Condition{}
	if monitorAll {
		for _, t := range conditionalTables {
			conds[t] = nil
		}
		return conds
	}
	str := func(s string) ovsdb.Datum { return ovsdb.Scalar(ovsdb.String(s)) }
	ref := func(id ovsdb.UUID) ovsdb.Datum { return ovsdb.Scalar(ovsdb.UUIDAtom(id)) }
	pb := []client.Condition{
		client.Equal("type", str("patch")),
		client.Equal("type", str("chassisredirect")),
	}
	if system != "" {
		pb = append(pb, client.Condition{Column: "options", Function: "includes",
			Value: ovsdb.Map([]ovsdb.Atom{ovsdb.String("l3gateway-chassis")}, []ovsdb.Atom{ovsdb.String(system)})})
	}
	if !chUUID.IsZero() {
		pb = append(pb, client.Equal("chassis", ref(chUUID)))
	}
	for _, id := range ifaceIDs {
		pb = append(pb, client.Equal("logical_port", str(id)))
	}
	var lf, mc, mac []client.Condition
	for _, dp := range localDPs {
		pb = append(pb, client.Equal("datapath", ref(dp)))
		lf = append(lf, client.Equal("logical_datapath", ref(dp)))
		mc = append(mc, client.Equal("datapath", ref(dp)))
		mac = append(mac, client.Equal("datapath", ref(dp)))
	}
	for _, g := range localGroups {
		lf = append(lf, client.Equal("logical_dp_group", ref(g)))
	}
	conds[sb.PortBindingTable] = pb
	conds[sb.LogicalFlowTable] = lf
	conds[sb.MulticastGroupTable] = mc
	conds[sb.MACBindingTable] = mac
	for t, c := range conds {
		if len(c) == 0 {
			// An empty condition would match every row.
			conds[t] = []client.Condition{client.Constant(false)}
		}
	}
	return conds
}

// condKey is a comparable form of a table's conditions.
func condKey(cs []client.Condition) string {
	if cs == nil {
		return "all"
	}
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s %s %v;", c.Column, c.Function, c.Value)
	}
	return b.String()
}

// sbChanges collects, from the Southbound client's reader goroutine, the
// rows that changed since the loop last looked, and wakes the loop.
type sbChanges struct {
	mu     sync.Mutex
	rows   map[string]map[ovsdb.UUID]bool
	resync bool
	since  time.Time // when the oldest change not yet taken arrived
	wake   chan struct{}
}

func newSBChanges() *sbChanges {
	return &sbChanges{rows: map[string]map[ovsdb.UUID]bool{}, resync: true, wake: make(chan struct{}, 1)}
}

// onChange is the client's Options.OnChange.
func (s *sbChanges) onChange(cs client.ChangeSet) {
	s.mu.Lock()
	if s.since.IsZero() && (cs.Resync || len(cs.Events) > 0) {
		s.since = time.Now()
	}
	if cs.Resync {
		s.resync = true
	}
	for i := range cs.Events {
		ev := &cs.Events[i]
		m := s.rows[ev.Table]
		if m == nil {
			m = map[ovsdb.UUID]bool{}
			s.rows[ev.Table] = m
		}
		m[ev.UUID()] = true
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns and forgets the changes: the changed rows by table, or
// resync when the engine must compare every row (the first contents, a
// reconnection that could not resume), and when the oldest arrived.
func (s *sbChanges) take() (rows map[string]map[ovsdb.UUID]bool, resync bool, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, resync, since = s.rows, s.resync, s.since
	s.rows, s.resync, s.since = map[string]map[ovsdb.UUID]bool{}, false, time.Time{}
	return rows, resync, since
}

// feed gives the engine the Southbound changes collected since the last
// feed and returns when the oldest of them arrived (zero if none did).
func (e *Engine) feed(cache *client.Cache, changes *sbChanges) time.Time {
	rows, resync, since := changes.take()
	if resync {
		e.Resync(cache)
		return since
	}
	for table, ids := range rows {
		for id := range ids {
			e.UpdateRow(cache, table, id)
		}
	}
	return since
}

// Resync compares every row of the engine's tables with cache's.
func (e *Engine) Resync(cache *client.Cache) {
	g := e.eng
	e.datapaths.load(g, client.List[sb.DatapathBinding](cache))
	e.ports.load(g, client.List[sb.PortBinding](cache))
	e.multicast.load(g, client.List[sb.MulticastGroup](cache))
	e.chassis.load(g, client.List[sb.Chassis](cache))
	e.encaps.load(g, client.List[sb.Encap](cache))
	e.flows.load(g, client.List[sb.LogicalFlow](cache))
	e.dpGroups.load(g, client.List[sb.LogicalDPGroup](cache))
	e.addrSets.load(g, client.List[sb.AddressSet](cache))
	e.portGroups.load(g, client.List[sb.PortGroup](cache))
}

// LocalDatapaths are the datapaths local after the last Run, and the
// datapath groups that hold one, in UUID order.
func (e *Engine) LocalDatapaths() (dps, groups []ovsdb.UUID) {
	for id := range e.rt.dps {
		dps = append(dps, id)
	}
	slices.SortFunc(dps, ovsdb.UUID.Compare)
	for id, g := range e.dpGroups.rows {
		for _, dp := range g.Datapaths {
			if _, ok := e.rt.dps[dp]; ok {
				groups = append(groups, id)
				break
			}
		}
	}
	slices.SortFunc(groups, ovsdb.UUID.Compare)
	return dps, groups
}

// updateMonitor sends the conditions that differ from those last sent.
// It reports whether it changed any.
func (c *chassis) updateMonitor(ctx context.Context, conds map[string][]client.Condition) (bool, error) {
	changed := false
	for _, t := range conditionalTables {
		key := condKey(conds[t])
		if c.condsSent[t] == key {
			continue
		}
		if err := c.sb.SetConditions(ctx, t, conds[t]); err != nil {
			return changed, fmt.Errorf("monitor conditions: %w", err)
		}
		c.condsSent[t] = key
		changed = true
	}
	return changed, nil
}
