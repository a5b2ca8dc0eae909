package northd

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/govn/govn/ovsdb"
)

// # Generating in parallel
//
// A large batch of stale owners (a full compute, above all) is generated
// on every core, with the same result as generating it owner by owner in
// the batch's order. It runs in two steps:
//
//  1. speculate: every owner's generator runs on some goroutine with a gen
//     in speculative mode (gen.x), which reads the databases as usual but
//     changes nothing in State: its dependencies, flows, records, warnings
//     and tunnel key claims go to the owner's specLog. Memos and datapath
//     sets that do not exist yet are computed once, shared by the
//     goroutines, and kept aside (specShared).
//  2. commit, one owner at a time in the batch's order: an owner's log is
//     replayed into State as if its generator had just run, unless
//     something it read is no longer what it saw (another owner of the batch
//     took a tunnel key it read), or it did what speculation cannot (a
//     datapath without a number yet, a BFD source port); then the owner is
//     generated again, as a serial run would, there and then.
//
// A generator's own new tunnel key (DatapathKey, PortKey) cannot be known
// before the keys of the owners before it are handed out, so speculation
// gives it a placeholder out of the key ranges, and the commit writes the
// real key wherever the placeholder is in the owner's records: a generator
// must put its own keys nowhere but in its records' columns.

// parallelMin is the batch size from which Process generates in parallel:
// below it, starting goroutines costs more than it saves.
const parallelMin = 256

// keyPlaceholder is the first of the placeholders speculation gives for
// tunnel keys that are not known yet: above every key range.
const keyPlaceholder = 1 << 31

// specLog is what one owner's speculative generation did.
type specLog struct {
	sh   *specShared
	deps []depKey
	seen map[depKey]struct{}
	// spareSeen is an empty set that dep may take as seen (its worker's,
	// emptied after each owner), rather than make one.
	spareSeen map[depKey]struct{}
	flows     []specFlow
	setFlows  []specSetFlow
	records   []specRecord
	refs      []specRef
	claims    []specClaim
	keyReads  []specKeyRead
	warns     []specWarn
	memos     []*specMemo
	sets      []*specSet
	// conflict says the generation cannot be replayed: the owner is
	// generated again at commit.
	conflict bool
	// same says the generation's output is what the owner has
	// (sameOutput, checked as soon as it ran): its reads, flows and
	// records are dropped then, which a full recompute of an unchanged
	// cluster would otherwise hold twice until its commit.
	same bool
}

type specFlow struct {
	dp dpID
	k  flowKey
}

type specSetFlow struct {
	set *dpSet
	k   flowKey
}

type specRecord struct {
	table, key string
	cols       map[string]ovsdb.Datum
	children   map[string]childRows
}

type specRef struct {
	id ovsdb.UUID
	k  recordKey
}

// specClaim is a tunnel key claim; got is the key the generator was given
// (a placeholder if it was not known).
type specClaim struct {
	space     ovsdb.UUID
	holder    string
	requested uint32
	got       uint32
}

// specKeyRead is a read of another owner's tunnel key.
type specKeyRead struct {
	space  ovsdb.UUID
	holder string
	got    uint32
}

type specWarn struct {
	msg  string
	args []any
}

// specShared holds the memos and datapath sets the speculating goroutines
// computed because State had none of that name yet.
type specShared struct {
	mu    sync.Mutex
	memos map[string]*specMemo
	sets  map[string]*specSet
	// decoded holds the typed models of the rows the batch read
	// (*ovsdb.Row -> pointer to the model; see Read).
	decoded sync.Map
}

// specMemo is a memo computed during speculation, installed in State by
// the commit of the first owner that read it.
type specMemo struct {
	once      sync.Once
	key       string
	compute   func(g *gen) any
	value     any
	owner     *owner
	log       *specLog
	installed bool
}

// specSet is a datapath set computed during speculation (see specMemo).
type specSet struct {
	once      sync.Once
	set       *dpSet
	owner     *owner
	log       *specLog
	installed bool
}

func (x *specLog) dep(k depKey) {
	if x.seen == nil {
		// Most owners read a few dozen things: a look through them costs
		// less than a set, and allocates nothing.
		for i := range x.deps {
			if x.deps[i] == k {
				return
			}
		}
		x.deps = append(x.deps, k)
		if len(x.deps) > specDepScan {
			x.seen, x.spareSeen = x.spareSeen, nil
			if x.seen == nil {
				x.seen = make(map[depKey]struct{}, 2*len(x.deps))
			}
			for _, d := range x.deps {
				x.seen[d] = struct{}{}
			}
		}
		return
	}
	if _, ok := x.seen[k]; ok {
		return
	}
	x.seen[k] = struct{}{}
	x.deps = append(x.deps, k)
}

// specDepScan is the most dependencies a specLog looks through for a
// duplicate before it keeps a set of them.
const specDepScan = 32

// specSeenKeep is the largest set of reads a worker keeps for its next
// owner: emptying a set costs as much as it has room for, and the few
// owners that read thousands of things would make every later owner pay.
const specSeenKeep = 4096

// memo is gen.Memo in speculative mode.
func (g *gen) specMemo(key string, compute func(g *gen) any) any {
	x := g.x
	if m := g.s.memos[key]; m != nil {
		x.dep(depKey{kind: depDerived, name: m.key})
		return m.value
	}
	sh := x.sh
	sh.mu.Lock()
	pm := sh.memos[key]
	if pm == nil {
		pm = &specMemo{key: key, compute: compute}
		sh.memos[key] = pm
	}
	sh.mu.Unlock()
	pm.once.Do(func() {
		pm.owner = &owner{key: ownerKey{kind: kindMemo}, memo: key}
		pm.log = &specLog{sh: sh}
		g.s.speculate(pm.owner, pm.log, func(mg *gen) { pm.value = compute(mg) })
	})
	x.memos = append(x.memos, pm)
	x.dep(depKey{kind: depDerived, name: pm.key})
	return pm.value
}

// datapathSet is gen.DatapathSet in speculative mode (key has its prefix).
func (g *gen) specDatapathSet(key string, compute func(g *gen) []dpID) *dpSet {
	x := g.x
	if set := g.s.dpSets[key]; set != nil {
		x.dep(depKey{kind: depDerived, name: set.key})
		return set
	}
	sh := x.sh
	sh.mu.Lock()
	ps := sh.sets[key]
	if ps == nil {
		ps = &specSet{}
		sh.sets[key] = ps
	}
	sh.mu.Unlock()
	ps.once.Do(func() {
		ps.owner = &owner{key: ownerKey{kind: kindMemo}, memo: key}
		ps.log = &specLog{sh: sh}
		set := &dpSet{key: key, compute: compute, entries: make(map[*flowEntry]uint32), records: make(map[recordKey]struct{})}
		g.s.speculate(ps.owner, ps.log, func(mg *gen) { set.dps = normalizeSet(compute(mg)) })
		ps.set = set
	})
	x.sets = append(x.sets, ps)
	x.dep(depKey{kind: depDerived, name: ps.set.key})
	return ps.set
}

// specClaimKey is gen.claimKey in speculative mode.
func (g *gen) specClaimKey(space ovsdb.UUID, holder string, requested uint32) uint32 {
	x := g.x
	if ks := g.s.keys[space]; ks != nil {
		if key, ok := ks.held[holder]; ok && (requested == 0 || requested == key) {
			x.claims = append(x.claims, specClaim{space, holder, requested, key})
			return key
		}
	}
	if space == bfdKeySpace {
		// A BFD session checks its source port's range.
		x.conflict = true
	}
	key := uint32(keyPlaceholder + len(x.claims))
	x.claims = append(x.claims, specClaim{space, holder, requested, key})
	return key
}

// specKeyOf is DatapathKeyOf and PortKeyOf in speculative mode.
func (g *gen) specKeyOf(space ovsdb.UUID, holder string, dep depKey) uint32 {
	g.x.dep(dep)
	var key uint32
	if ks := g.s.keys[space]; ks != nil {
		key = ks.held[holder]
	}
	g.x.keyReads = append(g.x.keyReads, specKeyRead{space, holder, key})
	return key
}

// speculate runs run as owner o in speculative mode into x; a panic makes
// x a conflict (the commit generates the owner again, serially, where the
// daemon sees the panic).
func (s *State) speculate(o *owner, x *specLog, run func(g *gen)) {
	defer func() {
		if p := recover(); p != nil {
			x.conflict = true
		}
	}()
	run(&gen{s: s, o: o, x: x})
}

// normalizeSet sorts a datapath set's members and drops duplicates, as
// State.computeSet does.
func normalizeSet(dps []dpID) []dpID {
	slices.Sort(dps)
	return slices.Compact(dps)
}

// generateBatch generates the stale owners of batch (sorted), in parallel
// when it is large, and returns how many it generated.
func (s *State) generateBatch(batch []*owner) int {
	todo := make([]*owner, 0, len(batch))
	for _, o := range batch {
		if o.dirty && o.key.kind != kindMemo {
			todo = append(todo, o)
		}
	}
	workers := s.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	least := s.parallelMin
	if least == 0 {
		least = parallelMin
	}
	if workers < 2 || len(todo) < least {
		n := 0
		for _, o := range todo {
			if !o.dirty {
				continue
			}
			o.dirty = false
			s.generate(o)
			n++
		}
		return n
	}

	sh := &specShared{memos: make(map[string]*specMemo), sets: make(map[string]*specSet)}
	logs := make([]*specLog, len(todo))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The reads and flows of a log whose output is the same are
			// dropped, so the worker uses their slices for its next owner:
			// in a full recompute of an unchanged cluster, that is nearly
			// every owner, and a fresh pair each was a good part of what
			// the recompute allocated.
			var spareDeps []depKey
			var spareFlows []specFlow
			// Likewise the set of reads of an owner that has many: a
			// fresh one each was a fifth of what the workers allocated.
			var spareSeen map[depKey]struct{}
			for {
				i := int(next.Add(1) - 1)
				if i >= len(todo) {
					return
				}
				o := todo[i]
				if o.gone {
					continue
				}
				// Sized as the owner's last output: most generate the same
				// again (a full recompute), and growing the slices was a
				// good part of what a recompute allocated.
				x := &specLog{sh: sh}
				if n := len(o.deps); n > 0 && cap(spareDeps) >= n {
					x.deps, spareDeps = spareDeps[:0], nil // x's now, until dropped
				} else if n > 0 {
					x.deps = make([]depKey, 0, n)
				}
				if n := len(o.flows); n > 0 && cap(spareFlows) >= n {
					x.flows, spareFlows = spareFlows[:0], nil
				} else if n > 0 {
					x.flows = make([]specFlow, 0, n)
				}
				x.spareSeen, spareSeen = spareSeen, nil
				s.speculate(o, x, s.kinds[o.key.kind].gen)
				// The set of reads is needed only while they are made.
				if x.seen != nil && len(x.seen) <= specSeenKeep {
					clear(x.seen)
					spareSeen = x.seen
				} else {
					spareSeen = x.spareSeen
				}
				x.seen, x.spareSeen = nil, nil
				// Nothing in State changes while the batch speculates, so
				// the owner's output is what its commit will compare with.
				if !x.conflict && s.sameOutput(o, x) {
					x.same = true
					spareDeps, spareFlows = x.deps, x.flows
					x.deps, x.flows, x.setFlows, x.records = nil, nil, nil, nil
				}
				logs[i] = x
			}
		}()
	}
	wg.Wait()

	n := 0
	for i, o := range todo {
		if !o.dirty {
			continue
		}
		o.dirty = false
		n++
		x := logs[i]
		logs[i] = nil // garbage once committed
		if x != nil && s.replayable(x) {
			s.commitSpec(o, x)
			continue
		}
		s.stats.Regenerated++
		s.generate(o)
	}
	return n
}

// replayable says whether x can be committed now: nothing it read has
// changed since and nothing it did needs a serial generation.
func (s *State) replayable(x *specLog) bool {
	if x.conflict {
		return false
	}
	for _, pm := range x.memos {
		if !pm.installed && s.memos[pm.key] == nil && !s.replayableMemo(pm.log) {
			return false
		}
	}
	for _, ps := range x.sets {
		if ps.installed {
			continue
		}
		if s.dpSets[ps.set.key] != nil {
			// A serial generation made the set meanwhile: flows must go
			// on that one.
			return false
		}
		if !s.replayableMemo(ps.log) {
			return false
		}
	}
	held := func(space ovsdb.UUID, holder string) (uint32, bool) {
		if ks := s.keys[space]; ks != nil {
			k, ok := ks.held[holder]
			return k, ok
		}
		return 0, false
	}
	for _, r := range x.keyReads {
		if k, _ := held(r.space, r.holder); k != r.got {
			return false
		}
	}
	for _, c := range x.claims {
		if c.got >= keyPlaceholder {
			continue // the commit claims it and writes it in
		}
		if k, ok := held(c.space, c.holder); !ok || k != c.got {
			return false
		}
	}
	return true
}

// replayableMemo is replayable for the log of a memo or a datapath set,
// which may only read: a memo that wrote anything or read a tunnel key
// (which depends on the order owners are generated in) is computed again.
func (s *State) replayableMemo(x *specLog) bool {
	if len(x.flows)+len(x.setFlows)+len(x.records)+len(x.claims)+len(x.keyReads) > 0 {
		return false
	}
	return s.replayable(x)
}

// commitSpec does to State what generating o would have done, from the
// log of o's speculative generation.
func (s *State) commitSpec(o *owner, x *specLog) {
	for _, pm := range x.memos {
		s.installMemo(pm)
	}
	for _, ps := range x.sets {
		s.installSet(ps)
	}
	if x.same {
		// A full recompute of an unchanged Northbound, above all: the
		// owner's dependencies, flows, records and keys stay as they are.
		g := &gen{s: s, o: o}
		for _, r := range x.refs {
			s.refs[r.id] = r.k
		}
		for _, w := range x.warns {
			g.Warn(w.msg, w.args...)
		}
		s.stats.Flows += uint64(len(o.flows) + len(o.setFlows))
		return
	}
	old := s.beginGenerate(o)
	g := &gen{s: s, o: o}
	for _, k := range x.deps {
		g.dep(k)
	}
	var real map[uint32]uint32
	for _, c := range x.claims {
		k := g.claimKey(c.space, c.holder, c.requested)
		if c.got >= keyPlaceholder {
			if real == nil {
				real = make(map[uint32]uint32)
			}
			real[c.got] = k
		}
	}
	for _, r := range x.refs {
		s.refs[r.id] = r.k
	}
	for _, w := range x.warns {
		g.Warn(w.msg, w.args...)
	}
	for _, r := range x.records {
		if real != nil {
			patchKeys(r.cols, real)
		}
		g.RecordWithChildren(r.table, r.key, r.cols, r.children)
	}
	for _, f := range x.flows {
		g.addFlow(f.dp, f.k)
	}
	for _, f := range x.setFlows {
		e := s.flows.addOn(f.k, f.set)
		o.setFlows = append(o.setFlows, setContribution{e, f.set})
	}
	s.finishGenerate(o, old)
}

// sameOutput says whether the log x of o's speculative generation is
// exactly what o has now: the same reads, flows, records and tunnel keys,
// in the same order. Committing it would change nothing but churn.
func (s *State) sameOutput(o *owner, x *specLog) bool {
	if o.gone || len(x.deps) != len(o.deps) || len(x.flows) != len(o.flows) || len(x.setFlows) != len(o.setFlows) ||
		len(x.records) != len(o.records) || len(x.claims) != len(o.keys) {
		return false
	}
	for i, c := range x.claims {
		// A new key, or a requested one not given (which warns).
		if c.got >= keyPlaceholder || (c.requested != 0 && c.requested != c.got) || o.keys[i] != (keyClaim{c.space, c.holder}) {
			return false
		}
	}
	for i, k := range x.deps {
		if o.deps[i].key != k {
			return false
		}
	}
	for i, f := range x.flows {
		if c := o.flows[i]; c.dp != f.dp || c.e.key != f.k {
			return false
		}
	}
	for i, f := range x.setFlows {
		if c := o.setFlows[i]; c.set != f.set || c.e.key != f.k {
			return false
		}
	}
	for i, r := range x.records {
		k := recordKey{r.table, r.key}
		have := s.records[k]
		if o.records[i] != k || have == nil || have.owner != o || r.children != nil || have.children != nil || len(have.cols) != len(r.cols) {
			return false
		}
		for _, c := range have.cols {
			if d, ok := r.cols[c.name]; !ok || !d.Equal(c.val) {
				return false
			}
		}
	}
	return true
}

// patchKeys writes the real keys in place of the placeholders in cols.
func patchKeys(cols map[string]ovsdb.Datum, real map[uint32]uint32) {
	for c, d := range cols {
		if len(d.Keys) != 1 || d.Values != nil || d.Keys[0].Type() != ovsdb.TypeInteger {
			continue
		}
		v := d.Keys[0].Int()
		if v < keyPlaceholder || v >= 1<<32 {
			continue
		}
		if k, ok := real[uint32(v)]; ok {
			cols[c] = dInt(int64(k))
		}
	}
}

// installMemo puts a memo computed during speculation into State, unless
// State has one of that name by now (the same value: a memo depends only
// on what it reads, which did not change).
func (s *State) installMemo(pm *specMemo) {
	if pm.installed {
		return
	}
	pm.installed = true
	if s.memos[pm.key] != nil {
		return
	}
	for _, nested := range pm.log.memos {
		s.installMemo(nested)
	}
	for _, nested := range pm.log.sets {
		s.installSet(nested)
	}
	s.memos[pm.key] = &memoState{key: pm.key, value: pm.value, compute: pm.compute}
	s.memoOwners[pm.key] = pm.owner
	s.installDeps(pm.owner, pm.log)
}

// installSet is installMemo for a datapath set.
func (s *State) installSet(ps *specSet) {
	if ps.installed {
		return
	}
	ps.installed = true
	if s.dpSets[ps.set.key] != nil {
		return
	}
	for _, nested := range ps.log.memos {
		s.installMemo(nested)
	}
	for _, nested := range ps.log.sets {
		s.installSet(nested)
	}
	s.dpSets[ps.set.key] = ps.set
	s.memoOwners[ps.set.key] = ps.owner
	s.installDeps(ps.owner, ps.log)
}

func (s *State) installDeps(o *owner, x *specLog) {
	g := &gen{s: s, o: o}
	for _, k := range x.deps {
		g.dep(k)
	}
	for _, w := range x.warns {
		g.Warn(w.msg, w.args...)
	}
	for _, r := range x.refs {
		s.refs[r.id] = r.k
	}
}
