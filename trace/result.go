package trace

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/govn/govn/controller"
	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/xlate"
	"github.com/govn/govn/lflow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// Result is a joined trace: the logical flows the packet ran, the
// datapath rules that ran them, and the megaflows they yield, each rule
// and each megaflow field explained by its logical flow and that flow's
// Northbound owner. It marshals to JSON as `govn trace --json` prints it.
type Result struct {
	Microflow string   `json:"microflow"`
	Datapath  string   `json:"datapath"`
	Inport    string   `json:"inport"`
	Packet    string   `json:"packet"`
	Defaults  []string `json:"defaults,omitempty"`
	// Logical are the logical flows the packet ran, in order, on every
	// chassis it crossed.
	Logical []*Flow `json:"logical"`
	// Hops are the chassis it crossed: the input port's, then each one a
	// tunnel output reached.
	Hops []Hop `json:"hops"`
}

// Hop is what one chassis's datapath did with the packet.
type Hop struct {
	Chassis string `json:"chassis"`
	// From is how the packet arrived: by the input port's interface or
	// by the tunnel from another chassis.
	From  string       `json:"from"`
	Ports []PortNumber `json:"ports"`
	// Problems are the Southbound rows the chassis's compiler skipped.
	Problems  []string   `json:"problems,omitempty"`
	Passes    []Pass     `json:"passes"`
	Megaflows []Megaflow `json:"megaflows"`
	Outputs   []Output   `json:"outputs"`
	// Live is the check against the running chassis (Options.ChassisSocket).
	Live *LiveCheck `json:"live,omitempty"`
}

// Output is a packet the chassis sent out of an interface (its headers
// after every rewrite) or through the tunnel (with the outer header).
type Output struct {
	Port   uint32 `json:"port"`
	Name   string `json:"name"`
	Packet string `json:"packet"`
	Tunnel string `json:"tunnel,omitempty"`
}

// Flow is a logical flow and who made it.
type Flow struct {
	Chassis  string `json:"chassis"`
	UUID     string `json:"uuid"`
	Datapath string `json:"datapath"`
	Pipeline string `json:"pipeline"`
	Table    int64  `json:"table"`
	Stage    string `json:"stage,omitempty"`
	Priority int64  `json:"priority"`
	Match    string `json:"match"`
	Actions  string `json:"actions"`
	// Owner is the Northbound row that made the flow, found by How:
	// "stage-hint" (the flow's external_ids), "port" (the port its match
	// or actions name) or "datapath" (a flow of the pipeline itself).
	Owner *NBObject `json:"owner,omitempty"`
	How   string    `json:"how,omitempty"`
}

// Source says where a datapath rule came from: a logical flow, or the
// chassis's own physical rules (Kind "physical", described by What), or
// a load balancer's lookup rules.
type Source struct {
	Kind string `json:"kind"`
	Flow *Flow  `json:"flow,omitempty"`
	What string `json:"what,omitempty"`
}

// Source kinds.
const (
	KindLogical  = "logical flow"
	KindPhysical = "physical"
	KindLB       = "load balancer"
	KindUnknown  = "unknown"
)

func (s *Source) String() string {
	switch {
	case s == nil:
		return ""
	case s.Flow != nil:
		return s.Flow.short()
	}
	return s.Kind + ": " + s.What
}

func (f *Flow) short() string {
	s := fmt.Sprintf("%s %s table %d", f.Datapath, f.Pipeline, f.Table)
	if f.Stage != "" {
		s += " (" + f.Stage + ")"
	}
	s += fmt.Sprintf(" priority %d", f.Priority)
	if f.Owner != nil {
		s += " ← " + f.Owner.Table
		if f.Owner.Name != "" {
			s += " " + f.Owner.Name
		}
		s += " " + f.Owner.UUID
	}
	return s
}

// Pass is one translation through the datapath tables: the first, and one
// per recirculation after a ct() action.
type Pass struct {
	RecircID uint32 `json:"recirc_id"`
	// CTState is the conntrack state the pass starts with ("" on the
	// first pass).
	CTState string `json:"ct_state,omitempty"`
	Steps   []Step `json:"steps"`
	Actions string `json:"actions"`
	Error   string `json:"error,omitempty"`
}

// Step is one line of a datapath trace.
type Step struct {
	Depth  int     `json:"depth"`
	Table  uint8   `json:"table"`
	Rule   string  `json:"rule,omitempty"`
	Note   string  `json:"note,omitempty"`
	Source *Source `json:"source,omitempty"`
}

// Megaflow is a megaflow the packet installed, with the reason for each
// field it matches.
type Megaflow struct {
	Pass    int     `json:"pass"`
	Match   string  `json:"match"`
	Actions string  `json:"actions"`
	Fields  []Field `json:"fields"`
}

// Field is one matched field of a megaflow and the rule that made the
// megaflow match it: Cause is "match" (the rule matched on it), "ruled
// out" (a higher-priority rule's match had to be checked) or the action
// that read it.
type Field struct {
	Field  string  `json:"field"`
	Value  string  `json:"value"`
	Table  uint8   `json:"table"`
	Cause  string  `json:"cause"`
	Rule   string  `json:"rule,omitempty"`
	Source *Source `json:"source,omitempty"`
}

// explain fills res from the translations and megaflows.
func (ix *index) explain(res *Result, hop *Hop, run *runResult, tables *classifier.Tables) {
	ifaces := map[uint32]string{}
	for _, p := range hop.Ports {
		ifaces[p.Number] = p.Name
	}
	e := &explainer{ix: ix, chassis: hop.Chassis, ifaces: ifaces, flows: map[string]*Flow{}, groups: map[uint32]*Source{}}
	for _, o := range run.outputs {
		var k flow.Key
		packet.Extract(o.frame, &k)
		out := Output{Port: o.no, Name: o.name, Packet: keyString(&k)}
		if o.tunnel.Valid() {
			md, _ := packet.OVNMetadata(o.tunnel.Options)
			out.Tunnel = fmt.Sprintf("to %s (%s), tun_id=%d, inport key %d, outport key %d",
				ix.chassisAt(o.tunnel.Dst), o.tunnel.Dst, o.tunnel.ID, md>>16&0x7fff, md&0xffff)
		}
		hop.Outputs = append(hop.Outputs, out)
	}
	mfs := run.megaflows
	for i, p := range run.passes {
		ps := Pass{RecircID: uint32(p.key.Get(flow.RecircID)), Actions: dpActions(p.res.Actions)}
		if ps.RecircID != 0 {
			ps.CTState = ctStateString(p.key.Get(flow.CTState))
		}
		if p.res.Err != nil {
			ps.Error = p.res.Err.Error()
		}
		for _, s := range p.res.Trace {
			st := Step{Depth: s.Depth, Table: s.Table, Rule: s.Rule, Note: s.Note}
			if s.Matched != nil {
				st.Source = e.source(s.Matched)
				for _, a := range s.Matched.Actions {
					if g, ok := a.(flow.Group); ok && e.groups[g.ID] == nil {
						e.groups[g.ID] = st.Source
					}
				}
				if st.Source.Flow != nil && s.Note == "" {
					e.logical(res, st.Source.Flow)
				}
			}
			ps.Steps = append(ps.Steps, st)
		}
		hop.Passes = append(hop.Passes, ps)
		mf := Megaflow{Pass: i + 1, Actions: dpActions(p.res.Actions)}
		reasons := p.res.Reasons
		if m := findMegaflow(mfs, &p.key); m != nil {
			mf.Match = m.Match.String()
			reasons = m.Reasons
		} else {
			mask := p.res.Mask
			mask.SetField(flow.InPort)
			mask.SetField(flow.RecircID)
			m := flow.Match{Key: p.key.And(&mask), Mask: mask}
			mf.Match = m.String() + " (not installed)"
		}
		for _, f := range []flow.Field{flow.RecircID, flow.InPort} {
			mf.Fields = append(mf.Fields, Field{Field: f.String(), Value: fmt.Sprint(p.key.Get(f)),
				Cause: "always matched: recirc_id and in_port select the pipeline"})
		}
		visited := visitedDatapaths(p.res.Trace)
		for _, r := range reasons {
			if r.Cause == xlate.CauseRuledOut && r.Rule != nil {
				r.Rule = sameSubtable(tables, r.Rule, visited[r.Table])
			}
			mf.Fields = append(mf.Fields, e.field(&p.key, r))
		}
		hop.Megaflows = append(hop.Megaflows, mf)
	}
}

// visitedDatapaths returns, per table, the logical datapaths (metadata)
// of the rules a pass matched there.
func visitedDatapaths(steps []xlate.Step) map[uint8]map[uint64]bool {
	v := map[uint8]map[uint64]bool{}
	for _, s := range steps {
		r := s.Matched
		if r == nil || r.Match.Mask.Get(flow.Metadata) != flow.OnesU128(64) {
			continue
		}
		if v[s.Table] == nil {
			v[s.Table] = map[uint64]bool{}
		}
		v[s.Table][r.Match.Key.Get(flow.Metadata)] = true
	}
	return v
}

// sameSubtable returns the rule a "ruled out" reason is about. The
// classifier names the first rule of the subtable (the rules with one
// mask) whose check examined the field, which may be another logical
// datapath's: the packet's own datapath's highest-priority rule of that
// subtable, if the pass visited the table on one, says better which
// logical flow made the megaflow match the field.
func sameSubtable(tables *classifier.Tables, r *flow.Rule, dps map[uint64]bool) *flow.Rule {
	if r.Match.Mask.Get(flow.Metadata) != flow.OnesU128(64) || dps[r.Match.Key.Get(flow.Metadata)] || len(dps) == 0 {
		return r
	}
	var best *flow.Rule
	for _, c := range tables.Dump(int(r.Table)) {
		if c.Match.Mask != r.Match.Mask || !dps[c.Match.Key.Get(flow.Metadata)] {
			continue
		}
		if best == nil || c.Priority > best.Priority || c.Priority == best.Priority && c.Match.String() < best.Match.String() {
			c := c
			best = &c
		}
	}
	if best == nil {
		return r
	}
	return best
}

// findMegaflow returns the installed megaflow that k hits.
func findMegaflow(mfs []dp.Megaflow, k *flow.Key) *dp.Megaflow {
	for i := range mfs {
		if k.EqualMasked(&mfs[i].Match.Key, &mfs[i].Match.Mask) {
			return &mfs[i]
		}
	}
	return nil
}

func dpActions(as []flow.DPAction) string {
	if len(as) == 0 {
		return "drop"
	}
	return flow.DPActionsString(as)
}

type explainer struct {
	ix      *index
	chassis string
	ifaces  map[uint32]string
	flows   map[string]*Flow // by UUID and datapath
	// groups are the sources of the rules that ran each group.
	groups map[uint32]*Source
}

// ctStateString names the ct_state bits as the logical flow language
// does.
func ctStateString(v uint64) string {
	var parts []string
	for i, n := range []string{"new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"} {
		if v&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// logical appends f to the logical trace unless it is the last one.
func (e *explainer) logical(res *Result, f *Flow) {
	if n := len(res.Logical); n > 0 && res.Logical[n-1] == f {
		return
	}
	res.Logical = append(res.Logical, f)
}

func (e *explainer) field(k *flow.Key, r xlate.Reason) Field {
	v := k.GetU128(r.Field).And(r.Bits)
	f := Field{Field: r.Field.String(), Value: flow.FormatValue(r.Field, v, r.Bits), Table: r.Table, Cause: r.Cause}
	if r.Rule != nil {
		f.Rule = r.Rule.String()
		f.Source = e.source(r.Rule)
	} else {
		var id uint32
		if _, err := fmt.Sscanf(r.Cause, "select group %d", &id); err == nil && e.groups[id] != nil {
			// The group is the load balancer's choice of a backend:
			// the rule that ran it says which logical flow chose.
			f.Source = e.groups[id]
		} else {
			f.Source = &Source{Kind: KindUnknown, What: "no rule"}
		}
	}
	return f
}

// source explains rule r.
func (e *explainer) source(r *flow.Rule) *Source {
	ix := e.ix
	var dpKey int64 = -1
	if r.Match.Mask.Get(flow.Metadata) == flow.OnesU128(64) {
		dpKey = int64(r.Match.Key.Get(flow.Metadata))
	}
	if r.Cookie != 0 {
		cookie := uint32(r.Cookie)
		if lf := ix.flowFor(cookie, r.Table, dpKey); lf != nil {
			return &Source{Kind: KindLogical, Flow: e.flow(lf, dpKey)}
		}
		if lb := ix.lbByCook[cookie]; lb != nil {
			o := ix.lbOwner(lb)
			return &Source{Kind: KindLB, What: fmt.Sprintf("%s: hairpin lookup of %s", controller.TableStage(r.Table), o)}
		}
	}
	return &Source{Kind: KindPhysical, What: e.physical(r, dpKey)}
}

// physical describes a rule of the chassis's own: its stage and the
// interface, datapath and ports it matches.
func (e *explainer) physical(r *flow.Rule, dpKey int64) string {
	var parts []string
	stage := controller.TableStage(r.Table)
	if stage == "" {
		stage = fmt.Sprintf("table %d", r.Table)
	}
	m := &r.Match
	if m.Mask.Get(flow.InPort) == flow.OnesU128(32) {
		no := uint32(m.Key.Get(flow.InPort))
		if n := e.ifaces[no]; n != "" {
			parts = append(parts, fmt.Sprintf("interface %d (%s)", no, n))
		} else {
			parts = append(parts, fmt.Sprintf("in_port %d", no))
		}
	}
	if dpKey >= 0 {
		parts = append(parts, "datapath "+e.ix.dpKeyName(dpKey))
		for _, p := range []struct {
			f    flow.Field
			what string
		}{{flow.Reg14, "inport"}, {flow.Reg15, "outport"}} {
			if m.Mask.Get(p.f) == flow.OnesU128(32) {
				k := int64(m.Key.Get(p.f))
				name := e.ix.portByKey[[2]int64{dpKey, k}]
				if name == "" {
					name = fmt.Sprint(k)
				}
				parts = append(parts, fmt.Sprintf("%s %q", p.what, name))
			}
		}
	}
	if len(parts) == 0 {
		return stage
	}
	return stage + ", " + strings.Join(parts, ", ")
}

func (ix *index) dpKeyName(k int64) string {
	if d := ix.dpByKey[k]; d != nil {
		return ix.dpName(d.UUID)
	}
	return fmt.Sprint(k)
}

// flowFor finds the logical flow with cookie whose pipeline and table
// are datapath table t's and which is on datapath dpKey (if known).
func (ix *index) flowFor(cookie uint32, t uint8, dpKey int64) *sb.LogicalFlow {
	l := lflow.DefaultLayout()
	var pipeline string
	var table int64
	switch {
	case t >= l.IngressBase && t < l.IngressOutput:
		pipeline, table = "ingress", int64(t-l.IngressBase)
	case t >= l.EgressBase && t < l.EgressOutput:
		pipeline, table = "egress", int64(t-l.EgressBase)
	default:
		// A lookup table's rule (a learned affinity, say) or a flow's
		// conjunction: take the cookie alone.
	}
	var found []*sb.LogicalFlow
	for _, f := range ix.flowsByCook[cookie] {
		if pipeline != "" && (f.Pipeline != pipeline || f.TableID != table) {
			continue
		}
		if dpKey >= 0 && !ix.flowOn(f, dpKey) {
			continue
		}
		found = append(found, f)
	}
	if len(found) == 0 {
		return nil
	}
	sort.Slice(found, func(i, j int) bool { return found[i].UUID.String() < found[j].UUID.String() })
	return found[0]
}

// flowOn reports whether f applies to the datapath with key dpKey.
func (ix *index) flowOn(f *sb.LogicalFlow, dpKey int64) bool {
	d := ix.dpByKey[dpKey]
	if d == nil {
		return false
	}
	if f.LogicalDatapath != nil {
		return *f.LogicalDatapath == d.UUID
	}
	if f.LogicalDPGroup != nil {
		for _, id := range ix.groups[*f.LogicalDPGroup] {
			if id == d.UUID {
				return true
			}
		}
	}
	return false
}

// flow returns the explained logical flow lf on datapath dpKey, once per
// pair.
func (e *explainer) flow(lf *sb.LogicalFlow, dpKey int64) *Flow {
	ix := e.ix
	var dpID ovsdb.UUID
	if d := ix.dpByKey[dpKey]; d != nil {
		dpID = d.UUID
	} else if lf.LogicalDatapath != nil {
		dpID = *lf.LogicalDatapath
	}
	key := lf.UUID.String() + "/" + dpID.String()
	if f := e.flows[key]; f != nil {
		return f
	}
	f := &Flow{Chassis: e.chassis, UUID: lf.UUID.String(), Datapath: ix.dpName(dpID), Pipeline: lf.Pipeline, Table: lf.TableID,
		Stage: lf.ExternalIDs["stage-name"], Priority: lf.Priority, Match: lf.Match, Actions: lf.Actions}
	f.Owner, f.How = ix.owner(lf, dpID)
	e.flows[key] = f
	return f
}

// portRef finds the ports a logical flow's match or actions name.
var portRef = regexp.MustCompile(`(?:inport|outport)\s*(?:==|=)\s*"([^"]+)"`)

// owner finds the Northbound row that made lf: the row of its
// stage-hint, else the port it names, else its datapath's switch or
// router. Without a Northbound the row is described from the Southbound.
func (ix *index) owner(lf *sb.LogicalFlow, dpID ovsdb.UUID) (*NBObject, string) {
	if hint := lf.ExternalIDs["stage-hint"]; hint != "" {
		if o := ix.n.hinted(hint); o != nil {
			return o, "stage-hint"
		}
		for i := range ix.s.LoadBalancers {
			lb := &ix.s.LoadBalancers[i]
			if id := lb.ExternalIDs["lb_id"]; strings.HasPrefix(id, hint) {
				return ix.lbOwner(lb), "stage-hint"
			}
		}
		return &NBObject{Table: "?", UUID: hint + "..."}, "stage-hint"
	}
	for _, m := range portRef.FindAllStringSubmatch(lf.Match+" "+lf.Actions, -1) {
		name := m[1]
		if o := ix.n.port(name); o != nil {
			return o, "port"
		}
		if p := ix.portByName[name]; p != nil && ix.n == nil {
			table := "Logical_Switch_Port"
			if d := ix.dps[p.Datapath]; d != nil {
				if _, ok := d.ExternalIDs["logical-router"]; ok {
					table = "Logical_Router_Port"
				}
			}
			return &NBObject{Table: table, UUID: p.UUID.String() + " (Port_Binding)", Name: name}, "port"
		}
	}
	if d := ix.dps[dpID]; d != nil {
		for _, t := range []struct{ key, table string }{{"logical-switch", "Logical_Switch"}, {"logical-router", "Logical_Router"}} {
			if id, ok := d.ExternalIDs[t.key]; ok {
				if o := ix.n.byUUID(id); o != nil {
					return o, "datapath"
				}
				return &NBObject{Table: t.table, UUID: id, Name: d.ExternalIDs["name"]}, "datapath"
			}
		}
	}
	return nil, ""
}

// lbOwner names the Northbound load balancer of a Southbound one.
func (ix *index) lbOwner(lb *sb.LoadBalancer) *NBObject {
	id := lb.ExternalIDs["lb_id"]
	if o := ix.n.byUUID(id); o != nil {
		return o
	}
	if id == "" {
		id = lb.UUID.String() + " (Southbound)"
	}
	return &NBObject{Table: "Load_Balancer", UUID: id, Name: lb.Name, Detail: "vips " + mapString(lb.VIPs)}
}

// keyString formats a packet's key: every nonzero header field (and
// in_port, if set).
func keyString(k *flow.Key) string {
	var m flow.Match
	m.Key = *k
	p := k.Get(flow.NWProto)
	et := k.Get(flow.EthType)
	icmp := et == etherIPv4 && p == protoICMP || et == etherIPv6 && p == protoICMPv6
	for f := flow.Field(1); f.Valid(); f++ {
		if f.PipelineOnly() || f == flow.PktLen || icmp && (f == flow.TPSrc || f == flow.TPDst) {
			continue
		}
		if !k.GetU128(f).IsZero() {
			m.Mask.SetField(f)
		}
	}
	if icmp {
		// ICMP's type and code live in tp_src and tp_dst, which
		// ovs-ofctl's syntax does not let an ICMP flow name.
		m.Mask.SetField(flow.ICMPType)
		m.Mask.SetField(flow.ICMPCode)
	}
	return m.String()
}
