package northd

import (
	"slices"

	"github.com/govn/govn/ovsdb"
)

// A dpSet is a set of datapaths that flows are put on as a whole: the
// switches of a load balancer group, say. It is computed like a memo (by a
// function that reads through gen, with its own dependencies, again when
// they change) but the owners that put flows on it do not depend on its
// members: a flow on the set follows the set. So a switch that joins a
// load balancer group adds itself to every flow of the group's load
// balancers without regenerating them, and the flow table holds one
// contribution per flow instead of one per flow and datapath.
//
// Readers that need to know whether the set is empty (a load balancer has
// a Southbound row only when it is on some datapath) depend on that alone
// (dpTarget.nonEmpty), which changes only when the set empties or stops
// being empty.
type dpSet struct {
	key     string
	dps     []dpID // sorted, each once
	compute func(g *gen) []dpID
	// entries counts, per flow entry, the owners' contributions of the
	// entry on the set.
	entries map[*flowEntry]uint32
	// records are the records whose children name the set
	// (childRows.dpSets); some may have stopped naming it.
	records map[recordKey]struct{}
	// sbGroup is the Southbound Logical_DP_Group row the set owns (zero
	// for none): the flows on the set alone, and the load balancers of
	// its group alone, refer to it, and it is changed in place when the
	// members change, so that a switch joining a load balancer group is
	// one update, not one per flow (see State.Committed).
	sbGroup ovsdb.UUID
}

// dpTarget is where a flow goes: datapaths one by one and whole sets.
type dpTarget struct {
	dps  []dpID
	sets []*dpSet
}

// DatapathSet returns the set of datapaths named key, computing it with
// compute if it is not known yet. Every caller must pass the same compute
// function for the same key. The owner does not depend on the members.
func (g *gen) DatapathSet(key string, compute func(g *gen) []dpID) *dpSet {
	key = "dpset/" + key
	if g.x != nil {
		return g.specDatapathSet(key, compute)
	}
	s := g.s
	set := s.dpSets[key]
	if set == nil {
		o := &owner{key: ownerKey{kind: kindMemo}, memo: key}
		set = &dpSet{key: key, compute: compute, entries: make(map[*flowEntry]uint32), records: make(map[recordKey]struct{})}
		s.dpSets[key] = set
		s.memoOwners[key] = o
		set.dps = s.computeSet(o, set)
	}
	// The owner keeps the set alive (see refreshSet) whether or not it
	// puts flows on it.
	g.dep(depKey{kind: depDerived, name: set.key})
	return set
}

// NonEmpty says whether set has any datapath, and makes the owner depend
// on that.
func (g *gen) NonEmpty(set *dpSet) bool {
	g.dep(depKey{kind: depDerived, name: set.key})
	return len(set.dps) > 0
}

func (s *State) computeSet(o *owner, set *dpSet) []dpID {
	for _, k := range o.deps {
		s.deps.remove(k, o)
	}
	o.deps = nil
	dps := set.compute(&gen{s: s, o: o})
	slices.Sort(dps)
	return slices.Compact(dps)
}

// refreshSet computes a stale set again. If its members changed, every
// flow on it and every record that names it is written again; the owners
// that depend on the set's emptiness are regenerated only when that
// changes. A set that no owner reads and no flow is on is dropped.
func (s *State) refreshSet(o *owner, set *dpSet) {
	dk := depKey{kind: depDerived, name: set.key}
	if s.deps.count(dk) == 0 && len(set.entries) == 0 {
		for _, k := range o.deps {
			s.deps.remove(k, o)
		}
		delete(s.dpSets, set.key)
		delete(s.memoOwners, set.key)
		if !set.sbGroup.IsZero() {
			delete(s.ownedGroups, set.sbGroup)
		}
		return
	}
	old := set.dps
	set.dps = s.computeSet(o, set)
	if slices.Equal(old, set.dps) {
		return
	}
	for e := range set.entries {
		s.flows.markDirty(e)
	}
	for k := range set.records {
		if r := s.records[k]; r != nil && r.names(set) {
			s.dirtyRecords[k] = struct{}{}
		} else {
			delete(set.records, k)
		}
	}
	if (len(old) == 0) != (len(set.dps) == 0) {
		s.touch(dk)
	}
}

// names says whether the record's children name set.
func (r *record) names(set *dpSet) bool {
	for _, ch := range r.children {
		if slices.Contains(ch.dpSets, set) {
			return true
		}
	}
	return false
}

// setContribution is one flow an owner put on a set of datapaths.
type setContribution struct {
	e   *flowEntry
	set *dpSet
}

// addOn puts the flow k on set once more and returns its entry.
func (t *flowTable) addOn(k flowKey, set *dpSet) *flowEntry {
	e := t.entry(k)
	n := set.entries[e]
	set.entries[e] = n + 1
	if n == 0 {
		e.sets = append(e.sets, set)
		if len(set.dps) > 0 {
			t.markDirty(e)
		}
	}
	return e
}

// removeOn takes back one addOn of e on set.
func (t *flowTable) removeOn(e *flowEntry, set *dpSet) {
	n, ok := set.entries[e]
	if !ok {
		return
	}
	if n > 1 {
		set.entries[e] = n - 1
		return
	}
	delete(set.entries, e)
	i := slices.Index(e.sets, set)
	e.sets = slices.Delete(e.sets, i, i+1)
	if len(e.sets) == 0 {
		e.sets = nil
	}
	t.markDirty(e)
}

// FlowTo adds a logical flow on every datapath of t.
func (g *gen) FlowTo(t dpTarget, st Stage, priority int, match, actions string) {
	g.addFlowTo(t, flowKey{stage: st, priority: uint16(priority), match: match, actions: actions})
}

// FlowHintTo is FlowTo with a stage hint (see FlowHint).
func (g *gen) FlowHintTo(t dpTarget, st Stage, priority int, match, actions string, hint ovsdb.UUID) {
	g.addFlowTo(t, flowKey{stage: st, priority: uint16(priority), match: match, actions: actions, hint: stageHint(hint)})
}

func (g *gen) addFlowTo(t dpTarget, k flowKey) {
	g.addFlowOn(t.dps, k)
	for _, set := range t.sets {
		if g.x != nil {
			g.x.setFlows = append(g.x.setFlows, specSetFlow{set, k})
			continue
		}
		e := g.s.flows.addOn(k, set)
		g.o.setFlows = append(g.o.setFlows, setContribution{e, set})
	}
}

// Committed tells the State that the transaction of the last WriteSB
// committed, and the real UUIDs of the rows it inserted (real maps each
// placeholder Insert returned to its row). The Logical_DP_Group rows it
// inserted for sets become theirs, to be changed in place from then on. A
// caller that does not call it gets, for a set whose members change, a
// new group and every flow on the set moved to it, and a WriteNB that
// writes sb_cfg only once the transaction's updates have been applied.
func (s *State) Committed(real func(placeholder ovsdb.UUID) ovsdb.UUID) {
	for ph, set := range s.pendingGroups {
		if id := real(ph); !id.IsZero() && s.dpSets[set.key] == set {
			set.sbGroup = id
			s.ownedGroups[id] = set
		}
	}
	clear(s.pendingGroups)
	s.notedCommit()
}

// setGroupRow is a set's group row as one transaction writes it.
type setGroupRow struct {
	id       ovsdb.UUID
	n        int  // datapaths in it
	complete bool // every datapath of the set has its row
}

// setGroup returns the Logical_DP_Group row of the datapaths of set: the
// row the set owns, changed in place if its members changed, or, if it
// owns none and create is set, a new one that becomes the set's once the
// transaction commits (else a zero id). A set owns no row after a restart
// until its rows need another group: a fresh northd writes nothing for
// rows that are as they should be.
func (w *sbWriter) setGroup(set *dpSet, create bool) setGroupRow {
	if g, ok := w.setGroups[set]; ok && (create || !g.id.IsZero()) {
		return g
	}
	s := w.s
	g := setGroupRow{complete: true}
	atoms := make([]ovsdb.Atom, 0, len(set.dps))
	for _, dp := range set.dps {
		if id, ok := w.rowOf(recordKey{"Datapath_Binding", s.dpNB[dp].String()}); ok {
			atoms = append(atoms, ovsdb.UUIDAtom(id))
		} else {
			g.complete = false
		}
	}
	g.n = len(atoms)
	want := ovsdb.Set(atoms...)
	if r := s.sb.row("Logical_DP_Group", set.sbGroup); r != nil && s.ownedGroups[set.sbGroup] == set {
		g.id = set.sbGroup
		if have, _ := s.sb.column("Logical_DP_Group", r, "datapaths"); !have.Equal(want) {
			w.b.Update("Logical_DP_Group", g.id, map[string]ovsdb.Datum{"datapaths": want})
			w.ops++
		}
	} else {
		if !set.sbGroup.IsZero() {
			delete(s.ownedGroups, set.sbGroup)
			set.sbGroup = ovsdb.UUID{}
		}
		if !create {
			return g
		}
		g.id = w.b.Insert("Logical_DP_Group", map[string]ovsdb.Datum{"datapaths": want})
		w.ops++
		s.pendingGroups[g.id] = set
	}
	w.setGroups[set] = g
	return g
}

// setOnly returns the set a flow entry or a record's group is on when it
// is on that set alone.
func (e *flowEntry) setOnly() *dpSet {
	if len(e.dps) == 0 && len(e.sets) == 1 {
		return e.sets[0]
	}
	return nil
}

// setOnly returns the set a group child row is of when it is of that set
// alone (no datapath of its own).
func (ch childRows) setOnly() *dpSet {
	if ch.table != "Logical_DP_Group" || len(ch.dpSets) != 1 || len(ch.rows) != 1 || len(ch.rows[0]["datapaths"].Keys) != 0 {
		return nil
	}
	return ch.dpSets[0]
}
