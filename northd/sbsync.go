package northd

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/govn/govn/ovsdb"
)

// TxnBuilder receives the operations that bring the Southbound up to date
// (client.Txn implements it). Insert returns a placeholder UUID that other
// operations of the same transaction may use to refer to the new row.
type TxnBuilder interface {
	Insert(table string, row map[string]ovsdb.Datum) ovsdb.UUID
	Update(table string, id ovsdb.UUID, row map[string]ovsdb.Datum)
	Delete(table string, id ovsdb.UUID)
}

// recordTables lists the Southbound tables whose rows are records, in the
// order WriteSB writes them: a table comes after the tables its rows refer
// to, so that a reference to a row inserted in the same transaction finds
// its placeholder.
var recordTables = []string{
	"SB_Global",
	"RBAC_Permission",
	"RBAC_Role",
	"Datapath_Binding",
	"HA_Chassis_Group",
	"Port_Binding",
	"Multicast_Group",
	"IP_Multicast",
	"Load_Balancer",
	"Address_Set",
	"Port_Group",
	"DHCP_Options",
	"DHCPv6_Options",
	"DNS",
	"Meter",
	"Service_Monitor",
	"BFD",
	"Static_MAC_Binding",
}

func isRecordTable(t string) bool { return slices.Contains(recordTables, t) }

// insertDefaults are columns northd sets when it inserts a row but leaves
// to the chassis afterwards: ovn-controller reports a port up only in a
// Port_Binding whose up column northd has set to false; a BFD row starts
// admin_down.
func insertDefaults(table string) map[string]ovsdb.Datum {
	switch table {
	case "Port_Binding":
		return map[string]ovsdb.Datum{"up": ovsdb.Scalar(ovsdb.Boolean(false))}
	case "BFD":
		// status must be one of its enum (the Southbound refuses the
		// empty default); the daemon keeps it in step with the
		// Northbound's from then on.
		return map[string]ovsdb.Datum{"status": ovsdb.Scalar(ovsdb.String("admin_down"))}
	}
	return nil
}

// sbIndex finds the Southbound rows that stand for records and logical
// flows.
type sbIndex struct {
	s      *State
	byKey  map[recordKey][]ovsdb.UUID
	rowKey map[ovsdb.UUID]recordKey
	flows  map[flowKey][]ovsdb.UUID
	// flowOf holds, of each Logical_Flow row in flows, only the stage
	// of its key: the rest of the key is the row's own columns, which
	// the row deleted or replaced still has, while the stage depends on
	// its datapath's row, which may be gone by then. (A whole key is 72
	// bytes, times every flow.)
	flowOf map[ovsdb.UUID]flowStage
	// groups finds an existing Logical_DP_Group by its datapaths, so that
	// a flow moving to a set of datapaths some group already has reuses it.
	groups  map[string]ovsdb.UUID
	groupOf map[ovsdb.UUID]string
	// resync makes the next WriteSB delete every row that stands for no
	// record or flow.
	resync bool
}

func newSBIndex(s *State) *sbIndex {
	return &sbIndex{
		s:       s,
		byKey:   make(map[recordKey][]ovsdb.UUID),
		rowKey:  make(map[ovsdb.UUID]recordKey),
		flows:   make(map[flowKey][]ovsdb.UUID),
		flowOf:  make(map[ovsdb.UUID]flowStage),
		groups:  make(map[string]ovsdb.UUID),
		groupOf: make(map[ovsdb.UUID]string),
	}
}

// groupKey is the key of a set of Southbound datapath rows in
// sbIndex.groups.
func groupKey(dps ovsdb.Datum) string {
	var b strings.Builder
	for _, a := range dps.Keys {
		b.WriteString(a.UUID().String())
		b.WriteByte(',')
	}
	return b.String()
}

func (x *sbIndex) apply(table string, old, new *ovsdb.Row) {
	switch {
	case table == "Logical_DP_Group":
		if old != nil {
			if k, ok := x.groupOf[old.UUID]; ok {
				if x.groups[k] == old.UUID {
					delete(x.groups, k)
				}
				delete(x.groupOf, old.UUID)
			}
			if set := x.s.ownedGroups[old.UUID]; set != nil && new == nil {
				delete(x.s.ownedGroups, old.UUID)
				if set.sbGroup == old.UUID {
					set.sbGroup = ovsdb.UUID{}
				}
			}
		}
		if new != nil && x.s.ownedGroups[new.UUID] == nil {
			dps, _ := x.s.sb.column(table, new, "datapaths")
			k := groupKey(dps)
			if _, taken := x.groups[k]; !taken {
				x.groups[k] = new.UUID
			}
			x.groupOf[new.UUID] = k
		}
	case table == "Logical_Flow":
		if old != nil {
			if st, ok := x.flowOf[old.UUID]; ok {
				x.unindexFlow(x.flowKeyOf(old, st), old.UUID)
				delete(x.flowOf, old.UUID)
			}
		}
		if new != nil {
			if k, ok := x.s.sbFlowKey(new); ok {
				x.flows[k] = append(x.flows[k], new.UUID)
				x.flowOf[new.UUID] = flowStage{stage: k.stage, known: true}
				x.s.flows.shareKey(k)
			} else {
				x.flowOf[new.UUID] = flowStage{}
				x.flows[flowKey{}] = append(x.flows[flowKey{}], new.UUID)
			}
		}
	case isRecordTable(table):
		if old != nil {
			if k, ok := x.rowKey[old.UUID]; ok {
				x.byKey[k] = deleteUUID(x.byKey[k], old.UUID)
				if len(x.byKey[k]) == 0 {
					delete(x.byKey, k)
				}
				delete(x.rowKey, old.UUID)
			}
		}
		if new != nil {
			key, _ := x.s.sbRowKey(table, new)
			k := recordKey{table, key}
			x.byKey[k] = append(x.byKey[k], new.UUID)
			x.rowKey[new.UUID] = k
		}
	}
}

// flowStage is what sbIndex.flowOf keeps of a Logical_Flow row's key:
// its stage, and whether the row has a key at all (rows without one are
// under flowKey{}).
type flowStage struct {
	stage Stage
	known bool
}

// flowKeyOf is the key under which row r, with st, is in x.flows.
func (x *sbIndex) flowKeyOf(r *ovsdb.Row, st flowStage) flowKey {
	if !st.known {
		return flowKey{}
	}
	return x.s.sbFlowKeyAt(r, st.stage)
}

// unindexFlow takes id out of x.flows[k]. Should id not be there (a row
// whose columns changed under the index, which the cache's copy on
// write rules out), it is looked for under every key, so that the index
// never keeps a row that is gone.
func (x *sbIndex) unindexFlow(k flowKey, id ovsdb.UUID) {
	if ids := x.flows[k]; slices.Contains(ids, id) {
		x.dropFlow(k, ids, id)
		return
	}
	for k, ids := range x.flows {
		if slices.Contains(ids, id) {
			x.dropFlow(k, ids, id)
			return
		}
	}
}

func (x *sbIndex) dropFlow(k flowKey, ids []ovsdb.UUID, id ovsdb.UUID) {
	if ids = deleteUUID(ids, id); len(ids) == 0 {
		delete(x.flows, k)
	} else {
		x.flows[k] = ids
	}
}

func deleteUUID(s []ovsdb.UUID, id ovsdb.UUID) []ovsdb.UUID {
	for i, x := range s {
		if x == id {
			return append(s[:i:i], s[i+1:]...)
		}
	}
	return s
}

// sbRowKey returns the record key of a Southbound row northd writes. A row
// whose key cannot be found gets "" (and is deleted on a resync, unless a
// record has that key).
func (s *State) sbRowKey(table string, r *ovsdb.Row) (string, bool) {
	d := s.sb
	str := func(col string) string { return stringColumn(d, table, r, col) }
	ext := func(k string) string {
		v, _ := d.column(table, r, "external_ids")
		a, ok := v.Lookup(ovsdb.String(k))
		if !ok {
			return ""
		}
		return a.Str()
	}
	dpKey := func(col string) string {
		v, _ := d.column(table, r, col)
		if len(v.Keys) != 1 {
			return ""
		}
		id, ok := datapathNBID(d, d.row("Datapath_Binding", v.Keys[0].UUID()))
		if !ok {
			return ""
		}
		return id.String()
	}
	switch table {
	case "SB_Global":
		return "", true
	case "Datapath_Binding":
		id, ok := datapathNBID(d, r)
		if !ok {
			return "", false
		}
		return id.String(), true
	case "Port_Binding":
		return str("logical_port"), true
	case "Multicast_Group":
		return dpKey("datapath") + "/" + str("name"), true
	case "IP_Multicast":
		return dpKey("datapath"), true
	case "Load_Balancer":
		return ext("lb_id"), true
	case "DNS":
		return ext("dns_id"), true
	case "RBAC_Permission":
		return str("table"), true
	case "Service_Monitor":
		port := intColumn(d, table, r, "port")
		return fmt.Sprintf("%s/%s/%d/%s", str("logical_port"), str("ip"), port, str("protocol")), true
	case "BFD", "Static_MAC_Binding":
		return str("logical_port") + "/" + str("dst_ip") + str("ip"), true
	}
	return str("name"), true
}

// sbFlowKey returns the flowKey of a Southbound Logical_Flow row.
func (s *State) sbFlowKey(r *ovsdb.Row) (flowKey, bool) {
	d := s.sb
	const t = "Logical_Flow"
	kind := Switch
	dp := s.sb.row("Datapath_Binding", firstUUID(d, t, r, "logical_datapath"))
	if dp == nil {
		g := d.row("Logical_DP_Group", firstUUID(d, t, r, "logical_dp_group"))
		if g == nil {
			return flowKey{}, false
		}
		dps, _ := d.column("Logical_DP_Group", g, "datapaths")
		if len(dps.Keys) == 0 {
			return flowKey{}, false
		}
		dp = d.row("Datapath_Binding", dps.Keys[0].UUID())
		if dp == nil {
			return flowKey{}, false
		}
	}
	ext, _ := d.column("Datapath_Binding", dp, "external_ids")
	if ext.Contains(ovsdb.String("logical-router")) {
		kind = Router
	}
	pipeline := Ingress
	if stringColumn(d, t, r, "pipeline") == "egress" {
		pipeline = Egress
	}
	st, ok := stageByTable(kind, pipeline, uint8(intColumn(d, t, r, "table_id")))
	if !ok {
		return flowKey{}, false
	}
	return s.sbFlowKeyAt(r, st), true
}

// sbFlowKeyAt returns the flowKey of Southbound Logical_Flow row r in
// stage st: the rest of the key is r's own columns.
func (s *State) sbFlowKeyAt(r *ovsdb.Row, st Stage) flowKey {
	d := s.sb
	const t = "Logical_Flow"
	meter := ""
	if v, _ := d.column(t, r, "controller_meter"); len(v.Keys) == 1 {
		meter = v.Keys[0].Str()
	}
	hint := ""
	if v, _ := d.column(t, r, "external_ids"); true {
		if a, ok := v.Lookup(ovsdb.String("stage-hint")); ok {
			hint = a.Str()
		}
	}
	return flowKey{
		stage:    st,
		priority: uint16(intColumn(d, t, r, "priority")),
		match:    stringColumn(d, t, r, "match"),
		actions:  stringColumn(d, t, r, "actions"),
		meter:    meter,
		hint:     hint,
	}
}

func firstUUID(d *rowDB, table string, r *ovsdb.Row, col string) ovsdb.UUID {
	v, _ := d.column(table, r, col)
	if len(v.Keys) == 0 {
		return ovsdb.UUID{}
	}
	return v.Keys[0].UUID()
}

// resyncSB makes the next WriteSB compare every record, flow and
// Southbound row, not only those that changed.
func (s *State) resyncSB() {
	for k := range s.records {
		s.dirtyRecords[k] = struct{}{}
	}
	for k := range s.sbIndex.byKey {
		s.dirtyRecords[k] = struct{}{}
	}
	for _, e := range s.flows.entries {
		s.flows.markDirty(e)
	}
	s.sbIndex.resync = true
}

// Resync is for the daemon after a Southbound transaction failed: the next
// WriteSB compares everything again.
func (s *State) Resync() { s.resyncSB() }

// WriteSB adds to b the operations that make the Southbound match what the
// owners want, for everything that changed since the last call (everything,
// after Recompute or Resync), and returns how many it added. Anything it
// cannot write yet (a flow on a datapath whose binding is not there) stays
// pending for the next call.
func (s *State) WriteSB(b TxnBuilder) int {
	w := &sbWriter{s: s, b: b, inserted: make(map[recordKey]ovsdb.UUID), groups: make(map[string]ovsdb.UUID),
		newGroups: make(map[string]ovsdb.UUID), deleted: make(map[ovsdb.UUID]bool), setGroups: make(map[*dpSet]setGroupRow)}
	// Groups inserted by a transaction that was not committed are void.
	clear(s.pendingGroups)
	w.records()
	w.flows()
	s.sbIndex.resync = false
	s.notedWrite()
	return w.ops
}

type sbWriter struct {
	s        *State
	b        TxnBuilder
	ops      int
	inserted map[recordKey]ovsdb.UUID
	groups   map[string]ovsdb.UUID // dp set key -> group row (existing or inserted)
	// newGroups are the groups this transaction inserts, by groupKey.
	newGroups map[string]ovsdb.UUID
	retry     []recordKey
	deleted   map[ovsdb.UUID]bool // rows of other tables deleted along (deleteDependents)
	// dpRows caches, for the flows (written after every record), each
	// datapath's Southbound row: dpRowOK[dp] is 0 before the first
	// look-up, 1 when the row is known, 2 when it is not there yet.
	dpRows  []ovsdb.UUID
	dpRowOK []uint8
	// setGroups are the group rows of sets this transaction wrote.
	setGroups map[*dpSet]setGroupRow
	shared    sharedDatums
}

// dpRow returns the Southbound Datapath_Binding row (real, or the
// placeholder of this transaction's insert) of datapath dp. It may be used
// only once every record has been written.
func (w *sbWriter) dpRow(dp dpID) (ovsdb.UUID, bool) {
	if int(dp) >= len(w.dpRowOK) {
		n := len(w.s.dpNB)
		w.dpRows = slices.Grow(w.dpRows, n-len(w.dpRows))[:n]
		w.dpRowOK = slices.Grow(w.dpRowOK, n-len(w.dpRowOK))[:n]
	}
	switch w.dpRowOK[dp] {
	case 1:
		return w.dpRows[dp], true
	case 2:
		return ovsdb.UUID{}, false
	}
	id, ok := w.rowOf(recordKey{"Datapath_Binding", w.s.dpNB[dp].String()})
	w.dpRows[dp] = id
	w.dpRowOK[dp] = 2
	if ok {
		w.dpRowOK[dp] = 1
	}
	return id, ok
}

func (w *sbWriter) records() {
	s := w.s
	byTable := make(map[string][]string)
	for k := range s.dirtyRecords {
		byTable[k.table] = append(byTable[k.table], k.key)
	}
	s.dirtyRecords = make(map[recordKey]struct{})
	var order []recordKey
	for _, table := range recordTables {
		keys := byTable[table]
		sort.Strings(keys)
		for _, key := range keys {
			order = append(order, recordKey{table, key})
		}
	}
	unchanged := w.unchanged(len(order), func(i int) bool { return w.unchangedRecord(order[i]) })
	for i, k := range order {
		if unchanged != nil && unchanged[i] {
			continue
		}
		w.record(k)
	}
	for _, k := range w.retry {
		s.dirtyRecords[k] = struct{}{}
	}
}

// resolve replaces placeholders in d by real or named UUIDs; ok is false
// when one refers to a row that does not exist yet (it is left out).
func (w *sbWriter) resolve(d ovsdb.Datum) (ovsdb.Datum, bool) {
	ok := true
	// fix returns as with its placeholders replaced (and unresolved ones
	// left out), and whether anything changed.
	fix := func(as []ovsdb.Atom) ([]ovsdb.Atom, bool) {
		changed := false
		out := make([]ovsdb.Atom, 0, len(as))
		for _, a := range as {
			if a.Type() == ovsdb.TypeUUID {
				if k, isRef := w.s.refs[a.UUID()]; isRef {
					changed = true
					id, found := w.rowOf(k)
					if !found {
						ok = false
						continue
					}
					a = ovsdb.UUIDAtom(id)
				}
			}
			out = append(out, a)
		}
		return out, changed
	}
	if d.Values == nil {
		ks, changed := fix(d.Keys)
		if !changed {
			return d, ok
		}
		return ovsdb.Set(ks...), ok
	}
	// Maps with references (northd writes them only as values).
	vals, changed := fix(d.Values)
	if !changed {
		return d, ok
	}
	if len(vals) != len(d.Values) {
		return ovsdb.Datum{}, false
	}
	return ovsdb.Map(slices.Clone(d.Keys), vals), ok
}

// rowOf returns the UUID (real, or placeholder of this transaction's
// insert) of the Southbound row for record k.
func (w *sbWriter) rowOf(k recordKey) (ovsdb.UUID, bool) {
	if id, ok := w.inserted[k]; ok {
		return id, true
	}
	if ids := w.s.sbIndex.byKey[k]; len(ids) > 0 && w.s.records[k] != nil {
		return ids[0], true
	}
	return ovsdb.UUID{}, false
}

func (w *sbWriter) record(k recordKey) {
	s := w.s
	r := s.records[k]
	existing := s.sbIndex.byKey[k]
	if r == nil {
		for _, id := range existing {
			w.deleteDependents(k, id)
			w.b.Delete(k.table, id)
			w.ops++
		}
		return
	}
	cols := make(map[string]ovsdb.Datum, len(r.cols)+len(r.children))
	complete := true
	for _, rc := range r.cols {
		c, d := rc.name, rc.val
		rd, ok := w.resolve(d)
		if !ok {
			// A reference to a row that is not there yet: leave the
			// column as it is and write it once the row exists.
			complete = false
			continue
		}
		cols[c] = rd
	}
	if !complete {
		w.retry = append(w.retry, k)
	}
	if len(existing) == 0 {
		if !complete {
			return
		}
		for c, ch := range r.children {
			cols[c] = w.insertChildren(ch)
		}
		for c, d := range insertDefaults(k.table) {
			if _, set := cols[c]; !set {
				cols[c] = d
			}
		}
		w.inserted[k] = w.b.Insert(k.table, cols)
		w.ops++
		return
	}
	id := existing[0]
	for _, extra := range existing[1:] {
		w.b.Delete(k.table, extra)
		w.ops++
	}
	cur := s.sb.row(k.table, id)
	changed := make(map[string]ovsdb.Datum)
	for c, d := range cols {
		if v, ok := s.sb.column(k.table, cur, c); !ok || !v.Equal(d) {
			changed[c] = d
		}
	}
	for c, ch := range r.children {
		if !w.sameChildren(k.table, cur, c, ch) {
			changed[c] = w.insertChildren(ch)
		}
	}
	if len(changed) > 0 {
		w.b.Update(k.table, id, changed)
		w.ops++
	}
}

// deleteDependents deletes, with a datapath or a port northd removes, the
// MAC_Binding rows chassis learned on it: they would be stale, and a
// MAC_Binding refers to its datapath strongly, so the datapath's row
// cannot go while one is left.
func (w *sbWriter) deleteDependents(k recordKey, id ovsdb.UUID) {
	var ids []ovsdb.UUID
	switch k.table {
	case "Datapath_Binding":
		ids = sortedUUIDs(w.s.sb.referrers[refKey{"MAC_Binding", "datapath", id}])
	case "Port_Binding":
		ids = w.s.sb.names["MAC_Binding"][k.key]
	}
	for _, mb := range ids {
		if w.deleted[mb] {
			continue
		}
		w.deleted[mb] = true
		w.b.Delete("MAC_Binding", mb)
		w.ops++
	}
}

func (w *sbWriter) insertChildren(ch childRows) ovsdb.Datum {
	if set := ch.setOnly(); set != nil {
		if g := w.setGroup(set, true); g.n > 0 && g.complete {
			return ovsdb.Set(ovsdb.UUIDAtom(g.id))
		}
	}
	atoms := make([]ovsdb.Atom, 0, len(ch.rows))
	for _, row := range ch.rows {
		resolved := make(map[string]ovsdb.Datum, len(row))
		for c, d := range row {
			resolved[c], _ = w.resolve(d)
		}
		if ch.table == "Logical_DP_Group" {
			atoms = append(atoms, ovsdb.UUIDAtom(w.groupOf(w.withSets(resolved["datapaths"], ch.dpSets))))
			continue
		}
		atoms = append(atoms, ovsdb.UUIDAtom(w.b.Insert(ch.table, resolved)))
		w.ops++
	}
	return ovsdb.Set(atoms...)
}

// sameChildren says whether the rows that column col of cur refers to have
// the contents of ch (in any order).
func (w *sbWriter) sameChildren(table string, cur *ovsdb.Row, col string, ch childRows) bool {
	v, _ := w.s.sb.column(table, cur, col)
	if set := ch.setOnly(); set != nil {
		if g := w.setGroup(set, false); !g.id.IsZero() && g.n > 0 && g.complete {
			return v.Equal(ovsdb.Set(ovsdb.UUIDAtom(g.id)))
		}
	}
	if len(v.Keys) != len(ch.rows) {
		return false
	}
	var have, want []string
	for _, a := range v.Keys {
		r := w.s.sb.row(ch.table, a.UUID())
		if r == nil {
			return false
		}
		m := make(map[string]ovsdb.Datum)
		for c := range ch.rows[0] {
			m[c], _ = w.s.sb.column(ch.table, r, c)
		}
		have = append(have, canonicalRow(m))
	}
	for _, row := range ch.rows {
		resolved := make(map[string]ovsdb.Datum, len(row))
		for c, d := range row {
			resolved[c], _ = w.resolve(d)
		}
		if ch.table == "Logical_DP_Group" {
			resolved["datapaths"] = w.withSets(resolved["datapaths"], ch.dpSets)
		}
		want = append(want, canonicalRow(resolved))
	}
	sort.Strings(have)
	sort.Strings(want)
	return slices.Equal(have, want)
}

// withSets adds to dps, a set of Datapath_Binding rows, the rows of the
// datapaths of sets that exist.
func (w *sbWriter) withSets(dps ovsdb.Datum, sets []*dpSet) ovsdb.Datum {
	if len(sets) == 0 {
		return dps
	}
	atoms := slices.Clone(dps.Keys)
	for _, set := range sets {
		for _, dp := range set.dps {
			if id, ok := w.rowOf(recordKey{"Datapath_Binding", w.s.dpNB[dp].String()}); ok {
				atoms = append(atoms, ovsdb.UUIDAtom(id))
			}
		}
	}
	return ovsdb.Set(atoms...)
}

func canonicalRow(m map[string]ovsdb.Datum) string {
	cols := make([]string, 0, len(m))
	for c := range m {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	var b strings.Builder
	for _, c := range cols {
		fmt.Fprintf(&b, "%s=%v;", c, m[c])
	}
	return b.String()
}

func (w *sbWriter) flows() {
	s := w.s
	idx := s.sbIndex
	dirty := s.flows.takeDirty()
	unchanged := w.unchangedFlows(dirty)
	var again []*flowEntry
	for i, e := range dirty {
		if unchanged != nil && unchanged[i] {
			continue
		}
		if !w.flow(e) {
			again = append(again, e)
		}
	}
	if idx.resync {
		for k, ids := range idx.flows {
			if _, ok := s.flows.entries[k]; ok && k != (flowKey{}) {
				continue
			}
			for _, id := range ids {
				w.b.Delete("Logical_Flow", id)
				w.ops++
			}
		}
	}
	for _, e := range again {
		s.flows.markDirty(e)
	}
}

// flow writes one flow entry; false means it must be tried again later.
func (w *sbWriter) flow(e *flowEntry) bool {
	s := w.s
	existing := s.sbIndex.flows[e.key]
	if set := e.setOnly(); set != nil && len(set.dps) >= 2 {
		if g := w.setGroup(set, false); !g.id.IsZero() && g.n >= 2 {
			return w.setFlow(e, existing, g)
		}
	}
	all := e.datapaths()
	if len(all) == 0 {
		for _, id := range existing {
			w.b.Delete("Logical_Flow", id)
			w.ops++
		}
		return true
	}
	dps := make([]ovsdb.Atom, 0, len(all))
	complete := true
	for _, dp := range all {
		id, ok := w.dpRow(dp)
		if !ok {
			complete = false
			continue
		}
		dps = append(dps, ovsdb.UUIDAtom(id))
	}
	if len(dps) == 0 {
		for _, id := range existing {
			w.b.Delete("Logical_Flow", id)
			w.ops++
		}
		return !complete
	}
	var dpCol ovsdb.Datum
	if len(dps) == 1 {
		dpCol = ovsdb.Scalar(dps[0])
	}
	// The group, when one is needed: a set's own, for a flow on a set
	// alone.
	groupCol := func() ovsdb.Datum {
		if set := e.setOnly(); set != nil && complete {
			if g := w.setGroup(set, true); g.n == len(dps) {
				return ovsdb.Scalar(ovsdb.UUIDAtom(g.id))
			}
		}
		return ovsdb.Scalar(ovsdb.UUIDAtom(w.group(e, all)))
	}
	if len(existing) > 0 {
		id := existing[0]
		for _, extra := range existing[1:] {
			w.b.Delete("Logical_Flow", extra)
			w.ops++
		}
		cur := s.sb.row("Logical_Flow", id)
		curDP, _ := s.sb.column("Logical_Flow", cur, "logical_datapath")
		curGroup, _ := s.sb.column("Logical_Flow", cur, "logical_dp_group")
		upd := make(map[string]ovsdb.Datum)
		if !curDP.Equal(dpCol) {
			upd["logical_datapath"] = dpCol
		}
		if len(dps) == 1 {
			if len(curGroup.Keys) > 0 {
				upd["logical_dp_group"] = ovsdb.Datum{}
			}
		} else if !w.groupHolds(curGroup, dps) {
			upd["logical_dp_group"] = groupCol()
		}
		if len(upd) > 0 {
			w.b.Update("Logical_Flow", id, upd)
			w.ops++
		}
		return complete
	}
	if len(dps) == 1 {
		w.insertFlow(e, dpCol, ovsdb.Datum{})
	} else {
		w.insertFlow(e, dpCol, groupCol())
	}
	return complete
}

// setFlow writes a flow entry that is on one set of datapaths alone: a
// row on the set's own group.
func (w *sbWriter) setFlow(e *flowEntry, existing []ovsdb.UUID, g setGroupRow) bool {
	s := w.s
	groupCol := ovsdb.Scalar(ovsdb.UUIDAtom(g.id))
	if len(existing) == 0 {
		w.insertFlow(e, ovsdb.Datum{}, groupCol)
		return g.complete
	}
	for _, extra := range existing[1:] {
		w.b.Delete("Logical_Flow", extra)
		w.ops++
	}
	cur := s.sb.row("Logical_Flow", existing[0])
	curDP, _ := s.sb.column("Logical_Flow", cur, "logical_datapath")
	curGroup, _ := s.sb.column("Logical_Flow", cur, "logical_dp_group")
	upd := make(map[string]ovsdb.Datum)
	if len(curDP.Keys) > 0 {
		upd["logical_datapath"] = ovsdb.Datum{}
	}
	if !curGroup.Equal(groupCol) {
		upd["logical_dp_group"] = groupCol
	}
	if len(upd) > 0 {
		w.b.Update("Logical_Flow", existing[0], upd)
		w.ops++
	}
	return g.complete
}

// insertFlow inserts a row for flow entry e on datapath dpCol or group
// groupCol.
func (w *sbWriter) insertFlow(e *flowEntry, dpCol, groupCol ovsdb.Datum) {
	k := e.key
	// A transaction of a cold start inserts every flow: the columns many
	// flows have alike are one Datum, shared (nothing changes a Datum in
	// place), and the flow's own atoms are one allocation.
	own := []ovsdb.Atom{ovsdb.String(k.match), ovsdb.String(k.actions), ovsdb.String(k.hint)}
	ext := w.shared.stageName(k.stage)
	if k.hint != "" {
		ext = ovsdb.Datum{Keys: w.shared.hintKeys(), Values: []ovsdb.Atom{own[2], ext.Values[0]}}
	}
	row := map[string]ovsdb.Datum{
		"pipeline":     w.shared.pipeline(k.stage.Pipeline()),
		"table_id":     w.shared.integer(int64(k.stage.Table())),
		"priority":     w.shared.integer(int64(k.priority)),
		"match":        ovsdb.Datum{Keys: own[0:1:1]},
		"actions":      ovsdb.Datum{Keys: own[1:2:2]},
		"external_ids": ext,
	}
	if k.meter != "" {
		row["controller_meter"] = ovsdb.Scalar(ovsdb.String(k.meter))
	}
	if len(groupCol.Keys) == 0 {
		row["logical_datapath"] = dpCol
	} else {
		row["logical_dp_group"] = groupCol
	}
	w.b.Insert("Logical_Flow", row)
	w.ops++
}

// sharedDatums are the column values that many of one transaction's flows
// have alike, made once.
type sharedDatums struct {
	ints       map[int64]ovsdb.Datum
	pipelines  map[Pipeline]ovsdb.Datum
	stageNames map[Stage]ovsdb.Datum
	hints      []ovsdb.Atom
}

// hintKeys are the keys of a flow's external_ids with a stage hint, in a
// map's order (sorted).
func (d *sharedDatums) hintKeys() []ovsdb.Atom {
	if d.hints == nil {
		d.hints = []ovsdb.Atom{ovsdb.String("stage-hint"), ovsdb.String("stage-name")}
	}
	return d.hints
}

func (d *sharedDatums) integer(i int64) ovsdb.Datum {
	v, ok := d.ints[i]
	if !ok {
		if d.ints == nil {
			d.ints = make(map[int64]ovsdb.Datum)
		}
		v = ovsdb.Scalar(ovsdb.Integer(i))
		d.ints[i] = v
	}
	return v
}

func (d *sharedDatums) pipeline(p Pipeline) ovsdb.Datum {
	v, ok := d.pipelines[p]
	if !ok {
		if d.pipelines == nil {
			d.pipelines = make(map[Pipeline]ovsdb.Datum)
		}
		v = ovsdb.Scalar(ovsdb.String(p.String()))
		d.pipelines[p] = v
	}
	return v
}

// stageName is the external_ids of a flow of st without a stage hint.
func (d *sharedDatums) stageName(st Stage) ovsdb.Datum {
	v, ok := d.stageNames[st]
	if !ok {
		if d.stageNames == nil {
			d.stageNames = make(map[Stage]ovsdb.Datum)
		}
		v = ovsdb.Map([]ovsdb.Atom{ovsdb.String("stage-name")}, []ovsdb.Atom{ovsdb.String(st.Name())})
		d.stageNames[st] = v
	}
	return v
}

// unchangedFlows says, for each of dirty, whether its Southbound row is
// already what it should be, so that flow would write nothing: after a full
// compute, most are. nil means not checked.
func (w *sbWriter) unchangedFlows(dirty []*flowEntry) []bool {
	if !w.checkInParallel(len(dirty)) {
		return nil
	}
	// Every datapath's row, before the goroutines read them.
	for dp := range w.s.dpNB {
		w.dpRow(dpID(dp))
	}
	return w.unchanged(len(dirty), func(i int) bool { return w.unchangedFlow(dirty[i]) })
}

// parallelCheckMin is the number of dirty flows or records from which
// WriteSB checks them on every core first.
const parallelCheckMin = 4096

// checkInParallel says whether n flows or records are checked on every core
// before they are written.
func (w *sbWriter) checkInParallel(n int) bool {
	least := w.s.parallelMin
	if least == 0 {
		least = parallelCheckMin
	}
	return w.workers() >= 2 && n >= least
}

func (w *sbWriter) workers() int {
	if w.s.workers > 0 {
		return w.s.workers
	}
	return runtime.GOMAXPROCS(0)
}

// unchanged runs check(i) for i in [0, n) on every core, if n is large
// enough (else it returns nil), and returns the answers. check must only
// read.
func (w *sbWriter) unchanged(n int, check func(i int) bool) []bool {
	if !w.checkInParallel(n) {
		return nil
	}
	workers := w.workers()
	out := make([]bool, n)
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				out[i] = check(i)
			}
		}()
	}
	wg.Wait()
	return out
}

// unchangedRecord says whether record k has one Southbound row that has
// its columns and children already, so that record would write nothing.
// It only reads; it runs before any record is written (a reference to a row
// this transaction inserts is not resolved, and the record is not
// unchanged).
func (w *sbWriter) unchangedRecord(k recordKey) bool {
	s := w.s
	r := s.records[k]
	existing := s.sbIndex.byKey[k]
	if r == nil || len(existing) != 1 {
		return false
	}
	cur := s.sb.row(k.table, existing[0])
	if cur == nil {
		return false
	}
	for _, rc := range r.cols {
		d, ok := w.resolve(rc.val)
		if !ok {
			return false
		}
		if v, ok := s.sb.column(k.table, cur, rc.name); !ok || !v.Equal(d) {
			return false
		}
	}
	for c, ch := range r.children {
		if !w.sameChildren(k.table, cur, c, ch) {
			return false
		}
	}
	return true
}

// unchangedFlow says whether e has one Southbound row that is on e's
// datapaths already. It only reads (dpRow's cache must be full).
func (w *sbWriter) unchangedFlow(e *flowEntry) bool {
	s := w.s
	existing := s.sbIndex.flows[e.key]
	if len(existing) != 1 {
		return false
	}
	all := e.datapaths()
	if len(all) == 0 {
		return false
	}
	cur := s.sb.row("Logical_Flow", existing[0])
	if cur == nil {
		return false
	}
	dps := make([]ovsdb.Atom, 0, len(all))
	for _, dp := range all {
		if int(dp) >= len(w.dpRowOK) || w.dpRowOK[dp] != 1 {
			return false
		}
		dps = append(dps, ovsdb.UUIDAtom(w.dpRows[dp]))
	}
	curDP, _ := s.sb.column("Logical_Flow", cur, "logical_datapath")
	curGroup, _ := s.sb.column("Logical_Flow", cur, "logical_dp_group")
	if len(dps) == 1 {
		return len(curGroup.Keys) == 0 && curDP.Equal(ovsdb.Scalar(dps[0]))
	}
	return len(curDP.Keys) == 0 && w.groupHolds(curGroup, dps)
}

// groupHolds says whether the group column cur refers to a group of
// exactly dps.
func (w *sbWriter) groupHolds(cur ovsdb.Datum, dps []ovsdb.Atom) bool {
	if len(cur.Keys) != 1 || w.s.ownedGroups[cur.Keys[0].UUID()] != nil {
		// A set's own group changes with the set: only the set's flows
		// may refer to it.
		return false
	}
	g := w.s.sb.row("Logical_DP_Group", cur.Keys[0].UUID())
	if g == nil {
		return false
	}
	have, _ := w.s.sb.column("Logical_DP_Group", g, "datapaths")
	return have.Equal(ovsdb.Set(slices.Clone(dps)...))
}

// group returns a Logical_DP_Group row for e's datapaths: one this
// transaction inserted for the same set, or a new one. (Groups are not
// root rows: the database drops one as soon as no flow refers to it.)
func (w *sbWriter) group(e *flowEntry, all []dpID) ovsdb.UUID {
	var key string
	if len(e.dps) == 0 && len(e.sets) == 1 {
		// The flows of a set: named by the set, not by its members.
		key = e.sets[0].key
	} else {
		b := make([]byte, 0, 4*len(all))
		for _, dp := range all {
			b = strconv.AppendUint(b, uint64(dp), 10)
			b = append(b, ',')
		}
		key = string(b)
	}
	if id, ok := w.groups[key]; ok {
		return id
	}
	var dps []ovsdb.Atom
	for _, dp := range all {
		if id, ok := w.dpRow(dp); ok {
			dps = append(dps, ovsdb.UUIDAtom(id))
		}
	}
	id := w.groupOf(ovsdb.Set(dps...))
	w.groups[key] = id
	return id
}

// groupOf returns a Logical_DP_Group row of the datapaths dps: one in the
// Southbound, one this transaction inserts, or a new one. Flows and load
// balancers on the same datapaths share it (groups are never changed in
// place).
func (w *sbWriter) groupOf(dps ovsdb.Datum) ovsdb.UUID {
	k := groupKey(dps)
	if id, ok := w.s.sbIndex.groups[k]; ok && w.s.ownedGroups[id] == nil {
		return id
	}
	if id, ok := w.newGroups[k]; ok {
		return id
	}
	id := w.b.Insert("Logical_DP_Group", map[string]ovsdb.Datum{"datapaths": dps})
	w.ops++
	w.newGroups[k] = id
	return id
}
