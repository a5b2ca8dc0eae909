package controller

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"reflect"
	"slices"
	"sort"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/incproc"
	"github.com/govn/govn/lflow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/sb"
)

// Engine is Translate made incremental with incproc: it keeps the
// Southbound rows and the local state it was given, and after each Run
// the rules and groups it wants in the datapath equal Translate's for
// the same input (TestEngineEqualsTranslate), while a change costs work
// in proportion to it:
//
//   - each logical flow is compiled once per local datapath and cached
//     with what the compilation read (address sets, port groups, logical
//     ports' keys and residency); a changed flow, address set, port group
//     or port recompiles only the flows that read it, and a datapath that
//     becomes local or stops being local compiles or drops its own flows;
//   - the rules are installed as a difference (add, modify, delete) of the
//     rules that changed, not as a replacement of the table.
//
// runtime_data (which datapaths are local, which ports resident, their
// keys) is re-indexed from all port bindings on each change, without
// compiling anything, and tells lflow_output what differs; pflow_output
// (physical() and lookups(): tables 0 and 37-65 and the lookup tables)
// recomputes from the index on each of its inputs' changes. The
// Southbound tables without a node of their own (gateway chassis, MAC
// bindings, FDB, load balancers) are part of the local input: a change
// of one re-indexes and recomputes the physical rules, and recompiles
// only the logical flows that read what changed. The node names are ovn-controller's where one
// matches.
//
// An Engine belongs to one goroutine, except Stats and the Commands,
// which incproc makes safe.
type Engine struct {
	tr  *Translator
	log *slog.Logger
	eng *incproc.Engine

	datapaths  *table[sb.DatapathBinding]
	ports      *table[sb.PortBinding]
	multicast  *table[sb.MulticastGroup]
	chassis    *table[sb.Chassis]
	encaps     *table[sb.Encap]
	flows      *table[sb.LogicalFlow]
	dpGroups   *table[sb.LogicalDPGroup]
	addrSets   *table[sb.AddressSet]
	portGroups *table[sb.PortGroup]

	// local is the rest of the Input (chassis identity, interfaces,
	// tunnel, hubs, and any field the engine has no table for): a change
	// of it re-indexes and recomputes the physical rules.
	local     Input
	localNode *incproc.Node
	zones     map[string]uint16
	zonesNode *incproc.Node

	rt   runtimeData
	sets setsData
	pgs  portGroupsData
	lf   lflowData
	pf   pflowData
	out  flowOutput

	runtimeNode, setsNode, pgsNode, lflowNode, pflowNode, outNode *incproc.Node

	inst installed

	// problems are the rows that could not be used, by what reported
	// them.
	problems map[string][]string
}

// table is an input node holding one Southbound table's rows.
type table[T any] struct {
	node *incproc.Node
	id   func(*T) ovsdb.UUID
	rows map[ovsdb.UUID]*T
	// old is the tracked data: each changed row as it was before the
	// changes (nil: it was inserted).
	old map[ovsdb.UUID]*T
}

func addTable[T any](e *incproc.Engine, name string, id func(*T) ovsdb.UUID) *table[T] {
	t := &table[T]{id: id, rows: map[ovsdb.UUID]*T{}, old: map[ovsdb.UUID]*T{}}
	t.node = e.AddNode(name, incproc.NodeFuncs{ClearTracked: func() { clear(t.old) }})
	return t
}

// put replaces row id (nil deletes it).
func (t *table[T]) put(e *incproc.Engine, id ovsdb.UUID, row *T) {
	if _, seen := t.old[id]; !seen {
		t.old[id] = t.rows[id]
	}
	if row == nil {
		delete(t.rows, id)
	} else {
		t.rows[id] = row
	}
	e.MarkUpdated(t.node)
}

// load makes the table hold rows, changing only the rows that differ.
func (t *table[T]) load(e *incproc.Engine, rows []T) {
	seen := make(map[ovsdb.UUID]bool, len(rows))
	for i := range rows {
		r := &rows[i]
		id := t.id(r)
		seen[id] = true
		if cur, ok := t.rows[id]; !ok || !reflect.DeepEqual(cur, r) {
			c := *r
			t.put(e, id, &c)
		}
	}
	for id := range t.rows {
		if !seen[id] {
			t.put(e, id, nil)
		}
	}
}

// sorted returns the rows in UUID order, as values.
func (t *table[T]) sorted() []T {
	ids := make([]ovsdb.UUID, 0, len(t.rows))
	for id := range t.rows {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, ovsdb.UUID.Compare)
	out := make([]T, len(ids))
	for i, id := range ids {
		out[i] = *t.rows[id]
	}
	return out
}

// NewEngine returns an Engine with no input yet.
func NewEngine(tr *Translator, log *slog.Logger) *Engine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{tr: tr, log: log, eng: incproc.New(incproc.Options{Logger: log}), problems: map[string][]string{}}
	g := e.eng
	e.datapaths = addTable(g, "SB_datapath_binding", func(r *sb.DatapathBinding) ovsdb.UUID { return r.UUID })
	e.ports = addTable(g, "SB_port_binding", func(r *sb.PortBinding) ovsdb.UUID { return r.UUID })
	e.multicast = addTable(g, "SB_multicast_group", func(r *sb.MulticastGroup) ovsdb.UUID { return r.UUID })
	e.chassis = addTable(g, "SB_chassis", func(r *sb.Chassis) ovsdb.UUID { return r.UUID })
	e.encaps = addTable(g, "SB_encap", func(r *sb.Encap) ovsdb.UUID { return r.UUID })
	e.flows = addTable(g, "SB_logical_flow", func(r *sb.LogicalFlow) ovsdb.UUID { return r.UUID })
	e.dpGroups = addTable(g, "SB_logical_dp_group", func(r *sb.LogicalDPGroup) ovsdb.UUID { return r.UUID })
	e.addrSets = addTable(g, "SB_address_set", func(r *sb.AddressSet) ovsdb.UUID { return r.UUID })
	e.portGroups = addTable(g, "SB_port_group", func(r *sb.PortGroup) ovsdb.UUID { return r.UUID })
	e.localNode = g.AddInput("OVS_interface")
	e.zonesNode = g.AddInput("ct_zones")

	e.setsNode = g.AddNode("addr_sets", incproc.NodeFuncs{Compute: e.setsCompute, ClearTracked: e.sets.clear},
		incproc.Input{Node: e.addrSets.node, Handler: e.setsHandler})
	e.pgsNode = g.AddNode("port_groups", incproc.NodeFuncs{Compute: e.pgsCompute, ClearTracked: e.pgs.clear},
		incproc.Input{Node: e.portGroups.node, Handler: e.pgsHandler})
	rtInputs := []*incproc.Node{e.datapaths.node, e.ports.node, e.multicast.node, e.chassis.node, e.encaps.node, e.localNode}
	var rtEdges []incproc.Input
	for i, n := range rtInputs {
		rtEdges = append(rtEdges, incproc.Input{Node: n, Handler: e.runtimeHandler(rtInputs, i)})
	}
	e.runtimeNode = g.AddNode("runtime_data", incproc.NodeFuncs{Compute: e.runtimeCompute, ClearTracked: e.rt.clear}, rtEdges...)
	lfInputs := []*incproc.Node{e.dpGroups.node, e.flows.node, e.runtimeNode, e.setsNode, e.pgsNode}
	e.lflowNode = g.AddNode("lflow_output", incproc.NodeFuncs{Compute: e.lflowCompute, ClearTracked: e.lf.clear},
		incproc.Input{Node: e.dpGroups.node, Handler: e.lflowHandler(lfInputs, 0, e.lflowGroupsChanged)},
		incproc.Input{Node: e.flows.node, Handler: e.lflowHandler(lfInputs, 1, e.lflowFlowsChanged)},
		incproc.Input{Node: e.runtimeNode, Handler: e.lflowHandler(lfInputs, 2, e.lflowRuntimeChanged)},
		incproc.Input{Node: e.setsNode, Handler: e.lflowHandler(lfInputs, 3, e.lflowRefsChanged("as:", &e.sets.changed))},
		incproc.Input{Node: e.pgsNode, Handler: e.lflowHandler(lfInputs, 4, e.lflowRefsChanged("pg:", &e.pgs.changed))},
	)
	// pflow_output reads the datapath groups too: a load balancer names
	// its datapaths by group.
	e.pflowNode = g.AddNode("pflow_output", incproc.NodeFuncs{Compute: e.pflowCompute, ClearTracked: e.pf.clear},
		incproc.Input{Node: e.runtimeNode}, incproc.Input{Node: e.zonesNode}, incproc.Input{Node: e.dpGroups.node})
	// flow_output's tracked changes outlive a Run: Commit takes them, and
	// the chassis may run the engine more than once before it commits.
	e.outNode = g.AddNode("flow_output", incproc.NodeFuncs{Compute: e.outCompute},
		incproc.Input{Node: e.lflowNode, Handler: e.outLflowHandler},
		incproc.Input{Node: e.pflowNode, Handler: e.outPflowHandler})
	e.sets.init()
	e.pgs.init()
	e.lf.init()
	e.out.init()
	return e
}

// Load makes the engine's input in: the rows and fields that differ from
// the last Load or Put are changes for the next Run.
func (e *Engine) Load(in *Input) {
	g := e.eng
	e.datapaths.load(g, in.Datapaths)
	e.ports.load(g, in.Ports)
	e.multicast.load(g, in.Multicast)
	e.chassis.load(g, in.AllChassis)
	e.encaps.load(g, in.Encaps)
	e.flows.load(g, in.Flows)
	e.dpGroups.load(g, in.DPGroups)
	e.addrSets.load(g, in.AddressSets)
	e.portGroups.load(g, in.PortGroups)
	e.SetLocal(in)
}

// SetLocal sets the fields of in that are not Southbound tables the
// engine tracks (chassis, interfaces, zones, tunnel, hubs...).
func (e *Engine) SetLocal(in *Input) {
	local := *in
	local.Datapaths, local.Ports, local.Multicast, local.AllChassis, local.Encaps = nil, nil, nil, nil, nil
	local.Flows, local.DPGroups, local.AddressSets, local.PortGroups = nil, nil, nil, nil
	local.Zones = nil
	if !reflect.DeepEqual(local, e.local) {
		e.local = local
		e.eng.MarkUpdated(e.localNode)
	}
	if !reflect.DeepEqual(in.Zones, e.zones) {
		e.zones = maps2(in.Zones)
		e.eng.MarkUpdated(e.zonesNode)
	}
}

func maps2(m map[string]uint16) map[string]uint16 {
	out := make(map[string]uint16, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Tables are the Southbound tables the engine follows row by row
// (UpdateRow).
var engineTables = []string{sb.DatapathBindingTable, sb.PortBindingTable, sb.MulticastGroupTable, sb.ChassisTable,
	sb.EncapTable, sb.LogicalFlowTable, sb.LogicalDPGroupTable, sb.AddressSetTable, sb.PortGroupTable}

// UpdateRow takes row id of table from cache (gone from the cache: a
// delete). Tables the engine does not follow are ignored.
func (e *Engine) UpdateRow(cache *client.Cache, table string, id ovsdb.UUID) {
	switch table {
	case sb.DatapathBindingTable:
		putRow(e, e.datapaths, id)(client.Get[sb.DatapathBinding](cache, id))
	case sb.PortBindingTable:
		putRow(e, e.ports, id)(client.Get[sb.PortBinding](cache, id))
	case sb.MulticastGroupTable:
		putRow(e, e.multicast, id)(client.Get[sb.MulticastGroup](cache, id))
	case sb.ChassisTable:
		putRow(e, e.chassis, id)(client.Get[sb.Chassis](cache, id))
	case sb.EncapTable:
		putRow(e, e.encaps, id)(client.Get[sb.Encap](cache, id))
	case sb.LogicalFlowTable:
		putRow(e, e.flows, id)(client.Get[sb.LogicalFlow](cache, id))
	case sb.LogicalDPGroupTable:
		putRow(e, e.dpGroups, id)(client.Get[sb.LogicalDPGroup](cache, id))
	case sb.AddressSetTable:
		putRow(e, e.addrSets, id)(client.Get[sb.AddressSet](cache, id))
	case sb.PortGroupTable:
		putRow(e, e.portGroups, id)(client.Get[sb.PortGroup](cache, id))
	}
}

// putRow returns what puts row id (a cache lookup's result) in t.
func putRow[T any](e *Engine, t *table[T], id ovsdb.UUID) func(row T, ok bool) {
	return func(row T, ok bool) {
		if ok {
			t.put(e.eng, id, &row)
		} else if _, had := t.rows[id]; had {
			t.put(e.eng, id, nil)
		}
	}
}

// Run brings the engine's outputs up to date with its inputs. Commit
// then installs what changed.
func (e *Engine) Run(ctx context.Context) error {
	_, err := e.eng.Run(ctx, incproc.RunOptions{AllowRecompute: true})
	return err
}

// NeedsRun says whether inputs changed since the last Run.
func (e *Engine) NeedsRun() bool { return e.eng.NeedsRun() }

// Commands are the inc-engine/ control commands (show-stats,
// clear-stats, recompute, compute-log-timeout); wake is called after
// inc-engine/recompute.
func (e *Engine) Commands(wake func()) map[string]func([]string) (string, error) {
	return e.eng.Commands(wake)
}

// Stats are the engine's counters.
func (e *Engine) Stats() []incproc.NodeStats { return e.eng.Stats() }

// ForceRecompute makes the next Run recompute every node.
func (e *Engine) ForceRecompute() { e.eng.ForceRecompute() }

// Bind is what Output.Bind is: the Port_Bindings this chassis should
// hold.
func (e *Engine) Bind() map[string]ovsdb.UUID {
	if e.rt.tr == nil {
		return nil
	}
	return e.rt.tr.out.Bind
}

// Problems lists the rows that could not be used, as Output.Problems
// does (in no particular order).
func (e *Engine) Problems() []string {
	var out []string
	for _, ps := range e.problems {
		out = append(out, ps...)
	}
	sort.Strings(out)
	return out
}

func (e *Engine) setProblems(source string, ps []string) {
	if len(ps) == 0 {
		delete(e.problems, source)
	} else {
		e.problems[source] = ps
	}
}

// lastChanged says whether no input after inputs[i] has changes for the
// node being run: the handler of the last changed input does the work
// that the handlers before it collected.
func lastChanged(r *incproc.Run, inputs []*incproc.Node, i int) bool {
	for _, n := range inputs[i+1:] {
		if r.Updated(n) {
			return false
		}
	}
	return true
}

// addr_sets: the parsed address sets, by name.

type setsData struct {
	parsed  map[string][]lflow.Const
	changed map[string]bool // tracked: names whose addresses changed
}

func (s *setsData) init()  { s.parsed, s.changed = map[string][]lflow.Const{}, map[string]bool{} }
func (s *setsData) clear() { clear(s.changed) }

func (e *Engine) parseSet(as *sb.AddressSet) {
	consts, err := e.tr.symtab.ParseAddresses(as.Addresses)
	if err != nil {
		delete(e.sets.parsed, as.Name)
		e.setProblems("as:"+as.Name, []string{fmt.Sprintf("address set %s: %v", as.Name, err)})
	} else {
		e.sets.parsed[as.Name] = consts
		e.setProblems("as:"+as.Name, nil)
	}
	e.sets.changed[as.Name] = true
}

func (e *Engine) setsCompute(r *incproc.Run) error {
	for name := range e.sets.parsed {
		e.sets.changed[name] = true
		e.setProblems("as:"+name, nil)
	}
	clear(e.sets.parsed)
	for _, as := range e.addrSets.rows {
		e.parseSet(as)
	}
	r.SetUpdated()
	return nil
}

func (e *Engine) setsHandler(r *incproc.Run) (bool, error) {
	for id, old := range e.addrSets.old {
		if old != nil {
			delete(e.sets.parsed, old.Name)
			e.setProblems("as:"+old.Name, nil)
			e.sets.changed[old.Name] = true
		}
		if as := e.addrSets.rows[id]; as != nil {
			e.parseSet(as)
		}
	}
	// A set deleted and another of the same name kept: parse it again.
	for _, as := range e.addrSets.rows {
		if e.sets.changed[as.Name] {
			if _, ok := e.sets.parsed[as.Name]; !ok {
				e.parseSet(as)
			}
		}
	}
	if len(e.sets.changed) > 0 {
		r.SetUpdated()
	}
	return true, nil
}

// port_groups: each port group's ports, by name.

type portGroupsData struct {
	ports   map[string][]string
	changed map[string]bool
}

func (p *portGroupsData) init()  { p.ports, p.changed = map[string][]string{}, map[string]bool{} }
func (p *portGroupsData) clear() { clear(p.changed) }

func (e *Engine) pgsCompute(r *incproc.Run) error {
	for name := range e.pgs.ports {
		e.pgs.changed[name] = true
	}
	clear(e.pgs.ports)
	for _, pg := range e.portGroups.rows {
		e.pgs.ports[pg.Name] = pg.Ports
		e.pgs.changed[pg.Name] = true
	}
	r.SetUpdated()
	return nil
}

func (e *Engine) pgsHandler(r *incproc.Run) (bool, error) {
	for id, old := range e.portGroups.old {
		if old != nil {
			delete(e.pgs.ports, old.Name)
			e.pgs.changed[old.Name] = true
		}
		if pg := e.portGroups.rows[id]; pg != nil {
			e.pgs.ports[pg.Name] = pg.Ports
			e.pgs.changed[pg.Name] = true
		}
	}
	for _, pg := range e.portGroups.rows {
		if _, ok := e.pgs.ports[pg.Name]; !ok && e.pgs.changed[pg.Name] {
			e.pgs.ports[pg.Name] = pg.Ports
		}
	}
	if len(e.pgs.changed) > 0 {
		r.SetUpdated()
	}
	return true, nil
}

// runtime_data: Translate's index of the ports and datapaths (which are
// local, which ports resident, their keys, the chassis' tunnels).

type runtimeData struct {
	tr  *translation
	dps map[ovsdb.UUID]dpFacts
	// tracked: everything changed (a recompute), or the local datapaths
	// added, removed or changed and the logical ports whose facts did.
	all          bool
	changedDPs   map[ovsdb.UUID]bool
	changedPorts map[string]bool // residency or locality
	changedKeys  map[string]bool
}

// dpFacts are what the compilation of a local datapath's flows reads of
// its Datapath_Binding.
type dpFacts struct {
	key    int64
	router bool
}

func (d *runtimeData) clear() {
	d.all = false
	clear(d.changedDPs)
	clear(d.changedPorts)
	clear(d.changedKeys)
}

// reindex rebuilds the index and records what changed for the flows.
func (e *Engine) reindex() {
	in := e.local
	in.Datapaths, in.Ports, in.Multicast = e.datapaths.sorted(), e.ports.sorted(), e.multicast.sorted()
	in.AllChassis, in.Encaps = e.chassis.sorted(), e.encaps.sorted()
	in.Zones = e.zones
	tr := e.tr.newTranslation(&in)
	tr.index()
	tr.addrSets, tr.portGroup = e.sets.parsed, e.pgs.ports
	e.setProblems("runtime_data", tr.out.Problems)
	tr.out.Problems = nil

	dps := map[ovsdb.UUID]dpFacts{}
	for id := range tr.local {
		if d := tr.dps[id]; d != nil {
			dps[id] = dpFacts{key: d.TunnelKey, router: isRouter(d)}
		}
	}
	rt := &e.rt
	if rt.changedDPs == nil {
		rt.changedDPs, rt.changedPorts, rt.changedKeys = map[ovsdb.UUID]bool{}, map[string]bool{}, map[string]bool{}
	}
	for id, f := range dps {
		if old, ok := rt.dps[id]; !ok || old != f {
			rt.changedDPs[id] = true
		}
	}
	for id := range rt.dps {
		if _, ok := dps[id]; !ok {
			rt.changedDPs[id] = true
		}
	}
	if old := rt.tr; old != nil {
		// Keys on the datapaths local before and after (a datapath
		// that changed is compiled again whole).
		for dp := range dps {
			if _, was := rt.dps[dp]; !was || rt.changedDPs[dp] {
				continue
			}
			now, before := tr.portKeys[dp], old.portKeys[dp]
			for name, k := range now {
				if bk, ok := before[name]; !ok || bk != k {
					rt.changedKeys[name] = true
				}
			}
			for name := range before {
				if _, ok := now[name]; !ok {
					rt.changedKeys[name] = true
				}
			}
		}
		for name := range tr.resident {
			if !old.resident[name] {
				rt.changedPorts[name] = true
			}
		}
		for name := range old.resident {
			if !tr.resident[name] {
				rt.changedPorts[name] = true
			}
		}
	}
	// Whether a port is local (dpEnv.IsLocalPort) also follows its
	// existence and type.
	for name := range rt.changedKeys {
		rt.changedPorts[name] = true
	}
	for id, old := range e.ports.old {
		if old != nil {
			rt.changedPorts[old.LogicalPort] = true
		}
		if p := e.ports.rows[id]; p != nil {
			rt.changedPorts[p.LogicalPort] = true
		}
	}
	rt.tr, rt.dps = tr, dps
}

func (e *Engine) runtimeCompute(r *incproc.Run) error {
	e.reindex()
	e.rt.all = true
	r.SetUpdated()
	return nil
}

// runtimeHandler re-indexes once, in the handler of the last of the
// node's changed inputs.
func (e *Engine) runtimeHandler(inputs []*incproc.Node, i int) incproc.Handler {
	return func(r *incproc.Run) (bool, error) {
		if e.rt.tr == nil {
			return false, nil
		}
		if lastChanged(r, inputs, i) {
			e.reindex()
			// The physical rules read nearly all of the index.
			r.SetUpdated()
		}
		return true, nil
	}
}

// lflow_output: the compiled logical flows.

type lflowData struct {
	compiled   map[flowKey]*compiledFlow
	byRef      map[string]map[flowKey]bool
	flowDPs    map[ovsdb.UUID][]ovsdb.UUID // the datapaths each flow is on
	flowGroup  map[ovsdb.UUID]ovsdb.UUID   // each flow's datapath group
	dpFlows    map[ovsdb.UUID]map[ovsdb.UUID]bool
	groupFlows map[ovsdb.UUID]map[ovsdb.UUID]bool
	ids        *idSpace
	compiles   int // flows compiled, for tests and the log
	ctx        lflow.Context
	res        lflow.Result

	// The work the handlers of one run collect.
	pendFlows map[ovsdb.UUID]bool
	pendDPs   map[ovsdb.UUID]bool
	pendKeys  map[flowKey]bool

	// tracked: everything (a recompute), or the flow keys compiled again
	// or dropped.
	all     bool
	changed map[flowKey]bool
}

// compiledFlow is one logical flow's rules on one datapath and what its
// compilation read.
type compiledFlow struct {
	rules  []flow.Rule
	groups []flow.GroupDef
	refs   []string
}

func (l *lflowData) init() {
	l.compiled, l.byRef = map[flowKey]*compiledFlow{}, map[string]map[flowKey]bool{}
	l.flowDPs, l.flowGroup = map[ovsdb.UUID][]ovsdb.UUID{}, map[ovsdb.UUID]ovsdb.UUID{}
	l.dpFlows, l.groupFlows = map[ovsdb.UUID]map[ovsdb.UUID]bool{}, map[ovsdb.UUID]map[ovsdb.UUID]bool{}
	l.ids = newIDSpace()
	l.pendFlows, l.pendDPs, l.pendKeys = map[ovsdb.UUID]bool{}, map[ovsdb.UUID]bool{}, map[flowKey]bool{}
	l.changed = map[flowKey]bool{}
}

func (l *lflowData) clear() {
	l.all = false
	clear(l.changed)
}

// recordingEnv is a datapath's lflow.Env that notes what the
// compilation read.
type recordingEnv struct {
	dpEnv
	refs []string
}

func (r *recordingEnv) AddressSet(name string) ([]lflow.Const, bool) {
	r.refs = append(r.refs, "as:"+name)
	return r.dpEnv.AddressSet(name)
}

func (r *recordingEnv) PortGroup(name string) ([]string, bool) {
	r.refs = append(r.refs, "pg:"+name, fmt.Sprintf("pg:%d_%s", r.dp.TunnelKey, name))
	return r.dpEnv.PortGroup(name)
}

func (r *recordingEnv) PortKey(name string) (uint32, bool) {
	r.refs = append(r.refs, "key:"+name)
	return r.dpEnv.PortKey(name)
}

func (r *recordingEnv) ChassisResident(port string) bool {
	r.refs = append(r.refs, "port:"+port)
	return r.dpEnv.ChassisResident(port)
}

func (r *recordingEnv) IsLocalPort(name string) bool {
	r.refs = append(r.refs, "port:"+name)
	return r.dpEnv.IsLocalPort(name)
}

// flowDatapaths are the datapaths lf is on.
func (e *Engine) flowDatapaths(lf *sb.LogicalFlow) (dps []ovsdb.UUID, group ovsdb.UUID) {
	if lf.LogicalDatapath != nil {
		return []ovsdb.UUID{*lf.LogicalDatapath}, ovsdb.UUID{}
	}
	if lf.LogicalDPGroup != nil {
		if g := e.dpGroups.rows[*lf.LogicalDPGroup]; g != nil {
			return g.Datapaths, g.UUID
		}
		return nil, *lf.LogicalDPGroup
	}
	return nil, ovsdb.UUID{}
}

// indexFlow brings the datapath indexes of flow id up to date and
// returns the datapaths it was and is on.
func (e *Engine) indexFlow(id ovsdb.UUID) []ovsdb.UUID {
	l := &e.lf
	was := l.flowDPs[id]
	for _, dp := range was {
		delete(l.dpFlows[dp], id)
	}
	if g, ok := l.flowGroup[id]; ok {
		delete(l.groupFlows[g], id)
		delete(l.flowGroup, id)
	}
	delete(l.flowDPs, id)
	lf := e.flows.rows[id]
	if lf == nil {
		return was
	}
	dps, group := e.flowDatapaths(lf)
	if lf.LogicalDPGroup != nil {
		l.flowGroup[id] = group
		addTo(l.groupFlows, group, id)
	}
	l.flowDPs[id] = slices.Clone(dps)
	for _, dp := range dps {
		addTo(l.dpFlows, dp, id)
	}
	return append(slices.Clone(was), dps...)
}

func addTo[K comparable](m map[K]map[ovsdb.UUID]bool, k K, id ovsdb.UUID) {
	if m[k] == nil {
		m[k] = map[ovsdb.UUID]bool{}
	}
	m[k][id] = true
}

// onDatapath says whether flow id is on datapath dp.
func (e *Engine) onDatapath(id, dp ovsdb.UUID) bool { return e.lf.dpFlows[dp][id] }

// drop removes key's rules.
func (e *Engine) drop(key flowKey) {
	l := &e.lf
	c := l.compiled[key]
	if c == nil {
		return
	}
	for _, ref := range c.refs {
		if m := l.byRef[ref]; m != nil {
			delete(m, key)
			if len(m) == 0 {
				delete(l.byRef, ref)
			}
		}
	}
	delete(l.compiled, key)
	l.ids.release(key)
	e.setProblems(problemKey(key), nil)
	l.changed[key] = true
}

func problemKey(k flowKey) string { return "lflow:" + k.flow.String() + "/" + k.dp.String() }

// maxReusedRules is the most rules a compilation may leave in the
// Result that compileKey reuses.
const maxReusedRules = 1024

// compileKey compiles a flow on a datapath again, or drops it if the
// flow is gone or the datapath is no longer local.
func (e *Engine) compileKey(key flowKey) {
	e.drop(key)
	l := &e.lf
	lf := e.flows.rows[key.flow]
	rt := e.rt.tr
	if lf == nil || !rt.local[key.dp] || !e.onDatapath(key.flow, key.dp) {
		return
	}
	d := rt.dps[key.dp]
	if d == nil {
		return
	}
	env := &recordingEnv{dpEnv: dpEnv{tr: rt, dp: d}}
	c := &compiledFlow{}
	l.compiles++
	if err := e.tr.compileFlow(lf, d, env, l.ids, &l.ctx, &l.res); err != nil {
		e.setProblems(problemKey(key), []string{err.Error()})
	} else {
		c.rules = slices.Clone(l.res.Rules)
		c.groups = slices.Clone(l.res.Groups)
	}
	if len(l.res.Rules) > maxReusedRules {
		// A flow that compiles to many rules (an ACL over a large address
		// set) would leave the reused Result, its rules and the matches
		// they were built from, as big as itself for good: a second and
		// third copy of those rules.
		l.res = lflow.Result{}
	}
	slices.Sort(env.refs)
	c.refs = slices.Compact(env.refs)
	for _, ref := range c.refs {
		if l.byRef[ref] == nil {
			l.byRef[ref] = map[flowKey]bool{}
		}
		l.byRef[ref][key] = true
	}
	l.compiled[key] = c
	l.changed[key] = true
}

func (e *Engine) lflowCompute(r *incproc.Run) error {
	l := &e.lf
	for key := range l.compiled {
		e.drop(key)
	}
	l.init()
	l.all = true
	ids := make([]ovsdb.UUID, 0, len(e.flows.rows))
	for id := range e.flows.rows {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, ovsdb.UUID.Compare)
	for _, id := range ids {
		for _, dp := range e.indexFlow(id) {
			e.compileKey(flowKey{id, dp})
		}
	}
	r.SetUpdated()
	return nil
}

// lflowHandler returns the handler of one of lflow_output's inputs: collect
// collects the work, and the handler of the last changed input does it.
func (e *Engine) lflowHandler(inputs []*incproc.Node, i int, collect func() bool) incproc.Handler {
	return func(r *incproc.Run) (bool, error) {
		if e.rt.tr == nil || !collect() {
			return false, nil
		}
		if lastChanged(r, inputs, i) {
			e.lflowApply()
			if len(e.lf.changed) > 0 {
				r.SetUpdated()
			}
		}
		return true, nil
	}
}

func (e *Engine) lflowGroupsChanged() bool {
	for id := range e.dpGroups.old {
		for f := range e.lf.groupFlows[id] {
			e.lf.pendFlows[f] = true
		}
	}
	return true
}

func (e *Engine) lflowFlowsChanged() bool {
	for id := range e.flows.old {
		e.lf.pendFlows[id] = true
	}
	return true
}

func (e *Engine) lflowRuntimeChanged() bool {
	if e.rt.all {
		return false
	}
	for dp := range e.rt.changedDPs {
		e.lf.pendDPs[dp] = true
	}
	for name := range e.rt.changedPorts {
		for key := range e.lf.byRef["port:"+name] {
			e.lf.pendKeys[key] = true
		}
	}
	for name := range e.rt.changedKeys {
		for key := range e.lf.byRef["key:"+name] {
			e.lf.pendKeys[key] = true
		}
	}
	return true
}

func (e *Engine) lflowRefsChanged(prefix string, changed *map[string]bool) func() bool {
	return func() bool {
		for name := range *changed {
			for key := range e.lf.byRef[prefix+name] {
				e.lf.pendKeys[key] = true
			}
		}
		return true
	}
}

// lflowApply does the work the handlers collected.
func (e *Engine) lflowApply() {
	l := &e.lf
	done := map[flowKey]bool{}
	do := func(k flowKey) {
		if !done[k] {
			done[k] = true
			e.compileKey(k)
		}
	}
	for _, id := range sortedUUIDs(l.pendFlows) {
		for _, dp := range e.indexFlow(id) {
			do(flowKey{id, dp})
		}
	}
	for _, dp := range sortedUUIDs(l.pendDPs) {
		for _, id := range sortedUUIDs(l.dpFlows[dp]) {
			do(flowKey{id, dp})
		}
	}
	for k := range l.pendKeys {
		do(k)
	}
	clear(l.pendFlows)
	clear(l.pendDPs)
	clear(l.pendKeys)
}

func sortedUUIDs(m map[ovsdb.UUID]bool) []ovsdb.UUID {
	ids := make([]ovsdb.UUID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, ovsdb.UUID.Compare)
	return ids
}

// pflow_output: the physical stages' rules.

type pflowData struct {
	// rules are the physical rules by their text (the ovs-ofctl form
	// physical() writes them in); the map memoizes their parsing.
	rules map[string]flow.Rule
	// tracked: the texts added and removed since the readers last saw
	// the node.
	added, removed map[string]bool
}

func (p *pflowData) clear() {
	clear(p.added)
	clear(p.removed)
}

func (e *Engine) pflowCompute(r *incproc.Run) error {
	if e.rt.tr == nil {
		return nil
	}
	pf := &e.pf
	if pf.rules == nil {
		pf.rules, pf.added, pf.removed = map[string]flow.Rule{}, map[string]bool{}, map[string]bool{}
	}
	before := make(map[string]bool, len(pf.rules))
	for t := range pf.rules {
		before[t] = true
	}
	p := *e.rt.tr
	in := *p.in
	in.Zones = e.zones
	in.DPGroups = e.dpGroups.sorted()
	var texts []string
	p.in, p.out, p.parsed, p.texts = &in, &Output{}, pf.rules, &texts
	p.fixedRules()
	p.physical()
	p.lookups()
	e.setProblems("pflow_output", p.out.Problems)
	if len(texts) != len(p.out.Rules) {
		return fmt.Errorf("physical rules: %d of %d were not written by translation.rule", len(p.out.Rules)-len(texts), len(p.out.Rules))
	}
	now := make(map[string]bool, len(texts))
	for _, t := range texts {
		now[t] = true
	}
	for t := range before {
		if now[t] {
			continue
		}
		delete(pf.rules, t)
		if pf.added[t] {
			delete(pf.added, t)
		} else {
			pf.removed[t] = true
		}
	}
	for t := range now {
		if before[t] {
			continue
		}
		if pf.removed[t] {
			delete(pf.removed, t)
		} else {
			pf.added[t] = true
		}
	}
	if len(pf.added) > 0 || len(pf.removed) > 0 {
		r.SetUpdated()
	}
	return nil
}

// physicalSource is the flow_output source of one physical rule: its
// text's hash, as the datapath half of a flowKey whose flow is zero, so
// that physical rules come before logical ones as in Translate.
func physicalSource(text string) flowKey {
	h := fnv.New128a()
	h.Write([]byte(text))
	var b [16]byte
	copy(b[:], h.Sum(nil))
	return flowKey{dp: ovsdb.UUIDFromBytes(b)}
}

// flow_output: the rules and groups wanted in the datapath, merged from
// the logical and physical rules as Translate merges them, and what
// changed since the last Commit.

type flowOutput struct {
	// contribs are, for each rule key, the rules that the sources (the
	// physical stages: the zero flowKey, or a logical flow on a datapath)
	// give it.
	contribs map[string][]contrib
	keysOf   map[flowKey][]string
	groupsOf map[flowKey][]uint32
	// rules point at a contribution's rule (or a merge of several),
	// which nothing changes once compiled: a rule is big (its match
	// alone is 640 bytes), and with 10,000 of them from one address set
	// a copy here and one in installed cost 13 MB.
	rules  map[string]*flow.Rule
	groups map[uint32]flow.GroupDef

	// tracked since the last Commit: the rule keys and groups to bring
	// the datapath in line with, or all of them.
	all           bool
	touched       map[string]bool
	touchedGroups map[uint32]bool
}

type contrib struct {
	src  flowKey
	seq  int
	rule *flow.Rule
}

func (o *flowOutput) init() {
	o.contribs, o.keysOf, o.groupsOf = map[string][]contrib{}, map[flowKey][]string{}, map[flowKey][]uint32{}
	o.rules, o.groups = map[string]*flow.Rule{}, map[uint32]flow.GroupDef{}
	o.touched, o.touchedGroups = map[string]bool{}, map[uint32]bool{}
}

func (o *flowOutput) clear() {
	o.all = false
	clear(o.touched)
	clear(o.touchedGroups)
}

func (o *flowOutput) remove(src flowKey) {
	for _, k := range o.keysOf[src] {
		cs := slices.DeleteFunc(o.contribs[k], func(c contrib) bool { return c.src == src })
		if len(cs) == 0 {
			delete(o.contribs, k)
		} else {
			o.contribs[k] = cs
		}
		o.touched[k] = true
	}
	delete(o.keysOf, src)
	for _, id := range o.groupsOf[src] {
		delete(o.groups, id)
		o.touchedGroups[id] = true
	}
	delete(o.groupsOf, src)
}

func (o *flowOutput) add(src flowKey, rules []flow.Rule, groups []flow.GroupDef) {
	keys := make([]string, 0, len(rules))
	for i := range rules {
		k := ruleKey(&rules[i])
		o.contribs[k] = append(o.contribs[k], contrib{src: src, seq: i, rule: &rules[i]})
		keys = append(keys, k)
		o.touched[k] = true
	}
	if len(keys) > 0 {
		o.keysOf[src] = keys
	}
	var ids []uint32
	for _, g := range groups {
		o.groups[g.ID] = g
		o.touchedGroups[g.ID] = true
		ids = append(ids, g.ID)
	}
	if len(ids) > 0 {
		o.groupsOf[src] = ids
	}
}

// settle computes the final rule of each touched key: as Translate's
// install sees its rules, the last source's rule wins, and conjunctive
// rules of one key merge into the first of them (OVN's ofctrl merge).
func (o *flowOutput) settle() {
	for k := range o.touched {
		cs := o.contribs[k]
		if len(cs) == 0 {
			delete(o.rules, k)
			continue
		}
		slices.SortFunc(cs, func(a, b contrib) int {
			if c := a.src.flow.Compare(b.src.flow); c != 0 {
				return c
			}
			if c := a.src.dp.Compare(b.src.dp); c != 0 {
				return c
			}
			return a.seq - b.seq
		})
		firstConj, lastPlain := -1, -1
		for i, c := range cs {
			if c.rule.IsConjunctive() {
				if firstConj < 0 {
					firstConj = i
				}
			} else {
				lastPlain = i
			}
		}
		if firstConj < 0 || lastPlain > firstConj {
			o.rules[k] = cs[lastPlain].rule
			continue
		}
		r := *cs[firstConj].rule
		r.Actions = slices.Clone(r.Actions)
		for _, c := range cs[firstConj+1:] {
			if c.rule.IsConjunctive() {
				r.Actions = append(r.Actions, c.rule.Actions...)
			}
		}
		o.rules[k] = &r
	}
}

func (e *Engine) outCompute(r *incproc.Run) error {
	o := &e.out
	for k := range o.rules {
		o.touched[k] = true
	}
	for id := range o.groups {
		o.touchedGroups[id] = true
	}
	clear(o.contribs)
	clear(o.keysOf)
	clear(o.groupsOf)
	clear(o.groups)
	for t, r := range e.pf.rules {
		o.add(physicalSource(t), []flow.Rule{r}, nil)
	}
	for key, c := range e.lf.compiled {
		o.add(key, c.rules, c.groups)
	}
	o.settle()
	o.all = true
	r.SetUpdated()
	return nil
}

func (e *Engine) outLflowHandler(r *incproc.Run) (bool, error) {
	if e.lf.all {
		return false, nil
	}
	o := &e.out
	for key := range e.lf.changed {
		o.remove(key)
		if c := e.lf.compiled[key]; c != nil {
			o.add(key, c.rules, c.groups)
		}
	}
	o.settle()
	if len(o.touched) > 0 || len(o.touchedGroups) > 0 {
		r.SetUpdated()
	}
	return true, nil
}

func (e *Engine) outPflowHandler(r *incproc.Run) (bool, error) {
	o := &e.out
	for t := range e.pf.removed {
		o.remove(physicalSource(t))
	}
	for t := range e.pf.added {
		o.add(physicalSource(t), []flow.Rule{e.pf.rules[t]}, nil)
	}
	o.settle()
	if len(o.touched) > 0 {
		r.SetUpdated()
	}
	return true, nil
}

// Rules and Groups are what the engine wants in the datapath.
func (e *Engine) Rules() map[string]*flow.Rule     { return e.out.rules }
func (e *Engine) Groups() map[uint32]flow.GroupDef { return e.out.groups }

// installed is what the last Commit put in the datapath.
type installed struct {
	rules  map[string]*flow.Rule // shared with flowOutput.rules
	groups map[uint32]flow.GroupDef
	// full makes the next Commit compare everything (after a failure).
	full bool
}

// Commit hands apply the bundle that brings the datapath from what the
// last Commit installed to what the last Run wants: only the rules and
// groups that changed. It returns the number of operations.
func (e *Engine) Commit(apply func(flow.Bundle) error) (int, error) {
	in := &e.inst
	if in.rules == nil {
		in.rules, in.groups = map[string]*flow.Rule{}, map[uint32]flow.GroupDef{}
	}
	o := &e.out
	keys, groups := o.touched, o.touchedGroups
	if o.all || in.full {
		keys, groups = map[string]bool{}, map[uint32]bool{}
		for k := range o.rules {
			keys[k] = true
		}
		for k := range in.rules {
			keys[k] = true
		}
		for id := range o.groups {
			groups[id] = true
		}
		for id := range in.groups {
			groups[id] = true
		}
	}
	var b flow.Bundle
	var delGroups []uint32
	for id := range groups {
		want, ok := o.groups[id]
		had, was := in.groups[id]
		switch {
		case ok && (!was || !reflect.DeepEqual(want, had)):
			b.AddGroup(want)
		case !ok && was:
			delGroups = append(delGroups, id)
		}
	}
	for k := range keys {
		want, ok := o.rules[k]
		had, was := in.rules[k]
		switch {
		case ok && !was:
			b.Add(*want)
		case ok && (flow.ActionsString(had.Actions) != flow.ActionsString(want.Actions) || had.Cookie != want.Cookie):
			b.Modify(*want)
		case !ok && was:
			b.Delete(*had)
		}
	}
	for _, id := range delGroups {
		b.DeleteGroup(id)
	}
	n := len(b.Ops)
	if n == 0 {
		in.full = false
		o.clear()
		return 0, nil
	}
	if err := apply(b); err != nil {
		in.full = true
		return 0, err
	}
	for k := range keys {
		if r, ok := o.rules[k]; ok {
			in.rules[k] = r
		} else {
			delete(in.rules, k)
		}
	}
	for id := range groups {
		if g, ok := o.groups[id]; ok {
			in.groups[id] = g
		} else {
			delete(in.groups, id)
		}
	}
	in.full = false
	o.clear()
	return n, nil
}

// Verify compares the engine's wanted rules with Translate's for the
// same input and with installed, the datapath's rules, and returns the
// differences (none: all three agree). It is inc-engine/verify, a
// self-check of govn chassis that ovn-controller does not have.
func (e *Engine) Verify(installed []flow.Rule) []string {
	in := e.local
	in.Datapaths, in.Ports, in.Multicast = e.datapaths.sorted(), e.ports.sorted(), e.multicast.sorted()
	in.AllChassis, in.Encaps = e.chassis.sorted(), e.encaps.sorted()
	in.Flows, in.DPGroups = e.flows.sorted(), e.dpGroups.sorted()
	in.AddressSets, in.PortGroups = e.addrSets.sorted(), e.portGroups.sorted()
	in.Zones = e.zones
	want := map[string]string{}
	for _, r := range e.tr.Translate(&in).Rules {
		want[ruleKey(&r)] = r.String()
	}
	have := map[string]string{}
	for _, r := range installed {
		r.Stats = nil
		have[ruleKey(&r)] = r.String()
	}
	var diffs []string
	compare := func(what string, other map[string]string) {
		for k, r := range e.out.rules {
			if o, ok := other[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("not %s: %s", what, r.String()))
			} else if o != r.String() {
				diffs = append(diffs, fmt.Sprintf("differs from %s: %s (%s: %s)", what, r.String(), what, o))
			}
		}
		for k, o := range other {
			if _, ok := e.out.rules[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("only %s: %s", what, o))
			}
		}
	}
	compare("in Translate's", want)
	compare("installed", have)
	sort.Strings(diffs)
	return diffs
}
