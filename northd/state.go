package northd

import (
	"log/slog"
	"slices"
	"time"

	"github.com/govn/govn/lflow"
	"github.com/govn/govn/ovsdb"
)

// State is northd's incremental state machine: it holds the snapshot of
// both databases it has been told about, every owner's output, and what
// has changed since the Southbound was last written. It does no I/O and is
// not safe for concurrent use; the daemon (or a test) feeds it events with
// Apply, runs Process or Recompute, and writes what WriteSB yields.
type State struct {
	log   *slog.Logger
	nb    *rowDB
	sb    *rowDB
	kinds []ownerKindInfo

	owners map[ownerKey]*owner
	deps   depIndex
	dirty  []*owner

	flows   *flowTable
	records map[recordKey]*record
	// dirtyRecords lists the records (and Southbound rows) to reconcile.
	dirtyRecords map[recordKey]struct{}
	refs         map[ovsdb.UUID]recordKey // placeholder UUID -> record

	dpIDs map[ovsdb.UUID]dpID // Northbound datapath row -> number
	dpNB  []ovsdb.UUID        // number -> Northbound row
	keys  map[ovsdb.UUID]*keySpace
	// bfdDisc holds the discriminators of the BFD sessions the Southbound
	// had when the State first read it (seedKeys): each session keeps its.
	bfdDisc map[string]int64
	seeded  bool
	sbIndex *sbIndex

	featureCount featureCount
	symtab       *lflow.Symtab
	memos        map[string]*memoState
	memoOwners   map[string]*owner
	// dpSets are the sets of datapaths flows are put on (dpset.go); their
	// owners are in memoOwners.
	dpSets map[string]*dpSet
	// ownedGroups are the Southbound Logical_DP_Group rows sets own;
	// pendingGroups those the last WriteSB inserted for sets, by
	// placeholder, until Committed.
	ownedGroups   map[ovsdb.UUID]*dpSet
	pendingGroups map[ovsdb.UUID]*dpSet

	stats Stats
	nbw   nbSync
	// workers is how many goroutines generate a large batch (see
	// parallel.go); 0 is one per CPU. parallelMin is the smallest batch
	// generated in parallel (0: the constant parallelMin; tests lower it).
	workers     int
	parallelMin int
}

// Stats counts State's work, for inc-engine/show-stats and tests.
type Stats struct {
	Recomputes  uint64 // full recomputes
	Generations uint64 // owners generated
	// Flows counts the logical flows the generated owners produced: the
	// work a change cost, whether or not the flows changed.
	Flows uint64
	// Regenerated counts the owners of parallel generations that had to
	// be generated again, serially (see parallel.go).
	Regenerated uint64
}

// Options configure a State.
type Options struct {
	Logger *slog.Logger
	// Now is the clock of the Northbound timestamps WriteNB writes (nil:
	// time.Now).
	Now func() time.Time
	// Workers is how many goroutines generate a large batch of owners (a
	// full compute) at once: 0 for one per CPU, 1 to generate serially.
	// The result is the same whatever the number.
	Workers int
}

// New returns an empty State for the given Northbound and Southbound
// schemas.
func New(nbSchema, sbSchema *ovsdb.Schema, opts Options) *State {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &State{
		log:           log,
		nb:            newRowDB(NB, nbSchema),
		sb:            newRowDB(SB, sbSchema),
		kinds:         ownerKinds(),
		owners:        make(map[ownerKey]*owner),
		deps:          make(depIndex),
		flows:         newFlowTable(),
		records:       make(map[recordKey]*record),
		dirtyRecords:  make(map[recordKey]struct{}),
		refs:          make(map[ovsdb.UUID]recordKey),
		dpIDs:         make(map[ovsdb.UUID]dpID),
		keys:          make(map[ovsdb.UUID]*keySpace),
		bfdDisc:       make(map[string]int64),
		memos:         make(map[string]*memoState),
		memoOwners:    make(map[string]*owner),
		dpSets:        make(map[string]*dpSet),
		ownedGroups:   make(map[ovsdb.UUID]*dpSet),
		pendingGroups: make(map[ovsdb.UUID]*dpSet),
	}
	s.sbIndex = newSBIndex(s)
	s.nbw.now = opts.Now
	s.workers = opts.Workers
	if st, err := lflow.NewSymtab(); err == nil {
		s.symtab = st
	} else {
		log.Error("logical flow symbol table", "error", err)
	}
	return s
}

func (s *State) db(which DB) *rowDB {
	if which == SB {
		return s.sb
	}
	return s.nb
}

// Stats returns the work counters.
func (s *State) Stats() Stats { return s.stats }

// Apply installs changes to either database and marks stale every owner
// that read something they change. Nothing is generated until Process.
func (s *State) Apply(events []Event) {
	if len(events) >= reserveMin {
		s.reserve(events)
	}
	for _, ev := range events {
		d := s.db(ev.DB)
		d.apply(ev.Table, ev.Old, ev.New, s.touch)
		s.noteNB(ev)
		if ev.DB == SB {
			s.sbIndex.apply(ev.Table, ev.Old, ev.New)
			if ev.Table == "Chassis" {
				s.applyChassis(ev.Old, ev.New)
			}
			continue
		}
		s.ownerRows(ev.Table, ev.Old, ev.New)
	}
}

// reserveMin is the number of events from which Apply sizes the maps of
// empty tables for the rows to come.
const reserveMin = 1024

// reserve makes the row maps of the tables that events fill from nothing,
// and the Southbound index's maps of flows and records if empty, as large
// as the rows they are to hold: the initial dump of each database (a
// cold start, a reconnection) otherwise grows them step by step, and
// rehashing them was a good part of what applying it cost.
func (s *State) reserve(events []Event) {
	type table struct {
		db   DB
		name string
	}
	inserts := make(map[table]int)
	for _, ev := range events {
		if ev.Old == nil && ev.New != nil {
			inserts[table{ev.DB, ev.Table}]++
		}
	}
	records := 0
	for t, n := range inserts {
		d := s.db(t.db)
		if d.table(t.name) != nil && len(d.rows[t.name]) == 0 {
			d.rows[t.name] = make(map[ovsdb.UUID]*ovsdb.Row, n)
		}
		if t.db == SB && isRecordTable(t.name) {
			records += n
		}
	}
	x := s.sbIndex
	if n := inserts[table{SB, "Logical_Flow"}]; n > 0 && len(x.flowOf) == 0 {
		x.flows = make(map[flowKey][]ovsdb.UUID, n)
		x.flowOf = make(map[ovsdb.UUID]flowStage, n)
	}
	if records > 0 && len(x.rowKey) == 0 {
		x.byKey = make(map[recordKey][]ovsdb.UUID, records)
		x.rowKey = make(map[ovsdb.UUID]recordKey, records)
	}
}

// touch marks stale the owners that read k.
func (s *State) touch(k depKey) {
	for _, o := range s.deps.owners(k) {
		s.markDirty(o)
	}
}

func (s *State) markDirty(o *owner) {
	if !o.dirty {
		o.dirty = true
		s.dirty = append(s.dirty, o)
	}
}

// ownerRows creates and retires the owners that Northbound rows stand for.
func (s *State) ownerRows(table string, old, new *ovsdb.Row) {
	for k, info := range s.kinds {
		if info.table != table {
			continue
		}
		switch {
		case old == nil && new != nil:
			key := ownerKey{ownerKind(k), new.UUID}
			if o := s.owners[key]; o != nil {
				o.gone = false
				s.markDirty(o)
				continue
			}
			o := &owner{key: key}
			s.owners[key] = o
			s.markDirty(o)
		case old != nil && new == nil:
			if o := s.owners[ownerKey{ownerKind(k), old.UUID}]; o != nil {
				o.gone = true
				s.markDirty(o)
			}
		}
	}
}

// Process generates every stale owner again and returns how many it
// generated.
func (s *State) Process() int {
	s.seedKeys()
	n := 0
	for len(s.dirty) > 0 {
		batch := s.dirty
		s.dirty = nil
		// Memos first: what they decide may make more owners stale.
		memosDone := false
		for _, o := range batch {
			if o.key.kind == kindMemo && o.dirty {
				o.dirty = false
				s.refreshMemo(o)
				memosDone = true
			}
		}
		if memosDone && len(s.dirty) > 0 {
			s.dirty = append(s.dirty, batch...)
			continue
		}
		// Generate in a fixed order, so that tunnel keys are handed out
		// the same way whatever order the changes came in.
		slices.SortFunc(batch, func(a, b *owner) int {
			if a.key.kind != b.key.kind {
				return int(a.key.kind) - int(b.key.kind)
			}
			return a.key.id.Compare(b.key.id)
		})
		n += s.generateBatch(batch)
	}
	s.stats.Generations += uint64(n)
	return n
}

// Recompute generates every owner again from the current snapshot, as a
// freshly started northd would, and returns how many it generated. The
// Southbound is then reconciled in full by the next WriteSB.
func (s *State) Recompute() int {
	s.stats.Recomputes++
	s.ensureOwners()
	s.numberDatapaths()
	// Memos are dropped rather than refreshed one by one: every owner is
	// generated again, and computes the memos it reads afresh as it
	// does (in parallel, see parallel.go). Datapath sets, which flows and
	// records hold, are refreshed.
	for key := range s.memos {
		if o := s.memoOwners[key]; o != nil {
			for _, e := range o.deps {
				s.deps.remove(e, o)
			}
			o.deps = nil
			delete(s.memoOwners, key)
		}
		delete(s.memos, key)
	}
	for _, o := range s.owners {
		s.markDirty(o)
	}
	for _, o := range s.memoOwners {
		s.markDirty(o)
	}
	s.resyncSB()
	return s.Process()
}

// ensureOwners creates the owners of every row present, and the singletons.
func (s *State) ensureOwners() {
	for k, info := range s.kinds {
		if info.table == "" {
			key := ownerKey{kind: ownerKind(k)}
			if s.owners[key] == nil {
				s.owners[key] = &owner{key: key}
			}
			continue
		}
		for id := range s.nb.rows[info.table] {
			key := ownerKey{ownerKind(k), id}
			if s.owners[key] == nil {
				s.owners[key] = &owner{key: key}
			}
		}
	}
}

// numberDatapaths gives every switch and router a number (in UUID
// order), so that a parallel generation finds them all numbered.
func (s *State) numberDatapaths() {
	for _, table := range []string{"Logical_Switch", "Logical_Router"} {
		ids := make(map[ovsdb.UUID]struct{}, len(s.nb.rows[table]))
		for id := range s.nb.rows[table] {
			ids[id] = struct{}{}
		}
		for _, id := range sortedUUIDs(ids) {
			s.datapath(id)
		}
	}
}

// generate replaces o's output with a fresh generation (or removes it, for
// an owner whose row is gone).
func (s *State) generate(o *owner) {
	old := s.beginGenerate(o)
	if !o.gone {
		s.kinds[o.key.kind].gen(&gen{s: s, o: o})
	}
	s.finishGenerate(o, old)
}

// oldOutput is an owner's output before its generation.
type oldOutput struct {
	flows    []flowContribution
	setFlows []setContribution
	records  []recordKey
	keys     []keyClaim
}

// beginGenerate takes o's output and dependencies away before a
// generation, and returns the output.
func (s *State) beginGenerate(o *owner) oldOutput {
	old := oldOutput{o.flows, o.setFlows, o.records, o.keys}
	for _, k := range o.deps {
		s.deps.remove(k, o)
	}
	o.flows, o.setFlows, o.records, o.deps, o.keys = nil, nil, nil, nil, nil
	return old
}

// finishGenerate retires what o had before its generation and no longer
// has.
func (s *State) finishGenerate(o *owner, old oldOutput) {
	oldFlows, oldSetFlows, oldRecords, oldKeys := old.flows, old.setFlows, old.records, old.keys
	if !o.gone {
		s.stats.Flows += uint64(len(o.flows) + len(o.setFlows))
	}

	// Add before removing, so that a flow the owner makes again keeps its
	// entry (and its Southbound row) instead of being deleted and reinserted.
	for _, c := range oldFlows {
		s.flows.remove(c.e, c.dp)
	}
	for _, c := range oldSetFlows {
		s.flows.removeOn(c.e, c.set)
	}
	kept := make(map[recordKey]bool, len(o.records))
	for _, k := range o.records {
		kept[k] = true
	}
	for _, k := range oldRecords {
		if !kept[k] {
			if r := s.records[k]; r != nil && r.owner == o {
				delete(s.records, k)
				s.dirtyRecords[k] = struct{}{}
			}
		}
	}
	heldNow := make(map[keyClaim]bool, len(o.keys))
	for _, c := range o.keys {
		heldNow[c] = true
	}
	for _, c := range oldKeys {
		if !heldNow[c] {
			s.keySpace(c.space).release(c.holder)
		}
	}
	if o.gone {
		delete(s.owners, o.key)
	}
}

// datapath returns the number of the datapath for Northbound row id.
func (s *State) datapath(id ovsdb.UUID) dpID {
	if n, ok := s.dpIDs[id]; ok {
		return n
	}
	n := dpID(len(s.dpNB))
	s.dpNB = append(s.dpNB, id)
	s.dpIDs[id] = n
	return n
}

// seedKeys takes, once, the tunnel keys the Southbound already has, so
// that datapaths and ports keep them across a restart of northd.
func (s *State) seedKeys() {
	if s.seeded || s.sb.schema == nil {
		return
	}
	s.seeded = true
	for _, r := range s.sb.rows["Datapath_Binding"] {
		nbID, ok := datapathNBID(s.sb, r)
		if !ok {
			continue
		}
		key := intColumn(s.sb, "Datapath_Binding", r, "tunnel_key")
		s.keySpace(ovsdb.UUID{}).seed(nbID.String(), uint32(key))
	}
	for _, r := range s.sb.rows["Port_Binding"] {
		dpv, _ := s.sb.column("Port_Binding", r, "datapath")
		if len(dpv.Keys) != 1 {
			continue
		}
		dp := s.sb.row("Datapath_Binding", dpv.Keys[0].UUID())
		nbID, ok := datapathNBID(s.sb, dp)
		if !ok {
			continue
		}
		name := stringColumn(s.sb, "Port_Binding", r, "logical_port")
		key := intColumn(s.sb, "Port_Binding", r, "tunnel_key")
		s.keySpace(nbID).seed(name, uint32(key))
	}
	// A BFD session keeps its source port and discriminator, which the
	// peer knows it by.
	for _, r := range s.sb.rows["BFD"] {
		key := bfdSessionKey(stringColumn(s.sb, "BFD", r, "logical_port"), stringColumn(s.sb, "BFD", r, "dst_ip"))
		if port := intColumn(s.sb, "BFD", r, "src_port"); port >= bfdSrcPortBase {
			s.keySpace(bfdKeySpace).seed(key, uint32(port-bfdSrcPortBase+1))
		}
		if disc := intColumn(s.sb, "BFD", r, "disc"); disc != 0 {
			s.bfdDisc[key] = disc
		}
	}
}

// datapathNBID returns the Northbound row a Datapath_Binding stands for
// (its external_ids:logical-switch or logical-router).
func datapathNBID(d *rowDB, r *ovsdb.Row) (ovsdb.UUID, bool) {
	if r == nil {
		return ovsdb.UUID{}, false
	}
	ext, _ := d.column("Datapath_Binding", r, "external_ids")
	for _, k := range []string{"logical-switch", "logical-router"} {
		if v, ok := ext.Lookup(ovsdb.String(k)); ok {
			id, err := ovsdb.ParseUUID(v.Str())
			if err == nil {
				return id, true
			}
		}
	}
	return ovsdb.UUID{}, false
}

func intColumn(d *rowDB, table string, r *ovsdb.Row, col string) int64 {
	v, _ := d.column(table, r, col)
	if len(v.Keys) != 1 {
		return 0
	}
	return v.Keys[0].Int()
}

func stringColumn(d *rowDB, table string, r *ovsdb.Row, col string) string {
	v, _ := d.column(table, r, col)
	if len(v.Keys) != 1 {
		return ""
	}
	return v.Keys[0].Str()
}
