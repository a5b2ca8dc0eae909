package northd

import (
	"log/slog"

	"github.com/govn/govn/ovsdb"
)

// gen is what a generator function writes its output to and reads its
// input from. Every read goes through gen, which records it as a
// dependency of the owner being generated: when what was read changes, the
// owner is generated again. A generator never reads State directly.
type gen struct {
	s *State
	o *owner
	// x is the log of a speculative generation (see parallel.go), which
	// changes nothing in State; nil for an ordinary one.
	x *specLog
}

// ID returns the Northbound UUID of the owner being generated.
func (g *gen) ID() ovsdb.UUID { return g.o.key.id }

func (g *gen) dep(k depKey) {
	if g.x != nil {
		g.x.dep(k)
		return
	}
	// Each once: a generator reads the same row many times.
	if e, ok := g.s.deps.add(k, g.o); ok {
		g.o.deps = append(g.o.deps, e)
	}
}

// Row returns a row of db's table and makes the owner depend on its
// non-membership columns (and on its existence).
func (g *gen) Row(db DB, table string, id ovsdb.UUID) *ovsdb.Row {
	g.dep(depKey{db: db, kind: depRow, table: table, id: id})
	return g.s.db(db).row(table, id)
}

// Members returns the UUIDs in membership column column of a row and makes
// the owner depend on that column.
func (g *gen) Members(db DB, table string, id ovsdb.UUID, column string) []ovsdb.UUID {
	g.dep(depKey{db: db, kind: depColumn, table: table, id: id, name: column})
	d := g.s.db(db)
	v, ok := d.column(table, d.row(table, id), column)
	if !ok {
		return nil
	}
	out := make([]ovsdb.UUID, 0, len(v.Keys))
	for _, a := range v.Keys {
		out = append(out, a.UUID())
	}
	return out
}

// Referrers returns the rows of table that refer to target through column,
// sorted, and makes the owner depend on that set.
func (g *gen) Referrers(db DB, table, column string, target ovsdb.UUID) []ovsdb.UUID {
	g.dep(depKey{db: db, kind: depReferrers, table: table, name: column, id: target})
	set := g.s.db(db).referrers[refKey{table, column, target}]
	return sortedUUIDs(set)
}

// ByName returns the rows of table named name (in the table's name column,
// see nameColumn) and makes the owner depend on that set.
func (g *gen) ByName(db DB, table, name string) []ovsdb.UUID {
	g.dep(depKey{db: db, kind: depName, table: table, name: name})
	return append([]ovsdb.UUID(nil), g.s.db(db).names[table][name]...)
}

// All returns the UUIDs of every row of table, sorted, and makes the owner
// depend on rows coming and going (not on their contents: read those with
// Row).
func (g *gen) All(db DB, table string) []ovsdb.UUID {
	g.dep(depKey{db: db, kind: depTable, table: table})
	rows := g.s.db(db).rows[table]
	set := make(map[ovsdb.UUID]struct{}, len(rows))
	for id := range rows {
		set[id] = struct{}{}
	}
	return sortedUUIDs(set)
}

// Logger returns the logger for warnings about bad Northbound input.
// Generators warn once per generation of the owner; since an owner is only
// regenerated when its input changes, a bad row is logged once per change.
func (g *gen) Logger() *slog.Logger { return g.s.log }

// Warn logs a problem with the owner's Northbound input.
func (g *gen) Warn(msg string, args ...any) {
	if g.x != nil {
		g.x.warns = append(g.x.warns, specWarn{msg, args})
		return
	}
	if g.o.key.kind == kindMemo {
		// A memo is no kind of ownerKinds: name it by its key.
		g.s.log.Warn(msg, append([]any{"memo", g.o.memo}, args...)...)
		return
	}
	g.s.log.Warn(msg, append([]any{"owner", g.s.kinds[g.o.key.kind].name, "uuid", g.o.key.id.String()}, args...)...)
}

// Flow adds a logical flow on datapath dp.
func (g *gen) Flow(dp dpID, st Stage, priority int, match, actions string) {
	g.addFlow(dp, flowKey{stage: st, priority: uint16(priority), match: match, actions: actions})
}

// FlowHint adds a logical flow on dp whose external_ids:stage-hint names
// the Northbound row hint (its first 8 hex digits, as ovn-northd writes).
func (g *gen) FlowHint(dp dpID, st Stage, priority int, match, actions string, hint ovsdb.UUID) {
	g.addFlow(dp, flowKey{stage: st, priority: uint16(priority), match: match, actions: actions, hint: stageHint(hint)})
}

// FlowMeter adds a logical flow on dp with a controller_meter.
func (g *gen) FlowMeter(dp dpID, st Stage, priority int, match, actions, meter string, hint ovsdb.UUID) {
	g.addFlow(dp, flowKey{stage: st, priority: uint16(priority), match: match, actions: actions, meter: meter, hint: stageHint(hint)})
}

// FlowOn is Flow on each of dps, and FlowHintOn FlowHint: a flow that
// many datapaths share (a load balancer's, on every switch of its group)
// is built once.
func (g *gen) FlowOn(dps []dpID, st Stage, priority int, match, actions string) {
	g.addFlowOn(dps, flowKey{stage: st, priority: uint16(priority), match: match, actions: actions})
}

// FlowHintOn: see FlowOn.
func (g *gen) FlowHintOn(dps []dpID, st Stage, priority int, match, actions string, hint ovsdb.UUID) {
	g.addFlowOn(dps, flowKey{stage: st, priority: uint16(priority), match: match, actions: actions, hint: stageHint(hint)})
}

func (g *gen) addFlowOn(dps []dpID, k flowKey) {
	for _, dp := range dps {
		g.addFlow(dp, k)
	}
}

func (g *gen) addFlow(dp dpID, k flowKey) {
	if g.x != nil {
		g.x.flows = append(g.x.flows, specFlow{dp, k})
		return
	}
	e := g.s.flows.add(k, dp)
	g.o.flows = append(g.o.flows, flowContribution{e, dp})
}

// stageHint is the stage-hint ovn-northd writes for a Northbound row.
func stageHint(id ovsdb.UUID) string {
	if id.IsZero() {
		return ""
	}
	return id.String()[:8]
}

// Datapath returns the northd number of the logical datapath for the
// Northbound Logical_Switch or Logical_Router row id, allocating one on
// first use. It records no dependency: the number only names the row.
func (g *gen) Datapath(id ovsdb.UUID) dpID {
	if g.x != nil {
		// Numbers are handed out only serially (Recompute numbers every
		// datapath first).
		n, ok := g.s.dpIDs[id]
		if !ok {
			g.x.conflict = true
		}
		return n
	}
	return g.s.datapath(id)
}

// CheckMatch parses a match that comes from the Northbound (an ACL's, a
// QoS rule's, a routing policy's) as OVN's logical flow language, so that
// a typo is refused here, with the reason, instead of by every chassis.
func (g *gen) CheckMatch(match string) error {
	if g.s.symtab == nil {
		return nil
	}
	_, err := g.s.symtab.ParseExpr(match)
	return err
}
