package xlate

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
)

// Limits on a translation; a packet exceeding them is dropped.
const (
	MaxDepth     = 64   // nested resubmits (a resubmit that ends its rule's actions does not nest)
	MaxResubmits = 4096 // table lookups per translation
)

// hashSlotBits is log2 of the number of dp_hash slots a SelectHash group
// distributes over its buckets: the megaflow matches this many low bits of
// dp_hash.
const hashSlotBits = 6

// Translator translates packets through a set of flow tables. It is safe for
// concurrent use.
type Translator struct {
	tables *classifier.Tables
	// pipelineOnly is flow.PipelineOnlyMask and keepPacket its inverse,
	// made once.
	pipelineOnly, keepPacket flow.Mask

	now   func() time.Time
	grace time.Duration

	mu        sync.Mutex
	frozen    map[frozenState]*recircState
	byID      map[uint32]*recircState
	nextID    uint32
	lastSweep time.Time

	lmu            sync.Mutex
	learned        map[learnKey]*learnedRule
	nLearned       atomic.Int64 // len(learned), read without the lock
	lastLearnSweep time.Time
}

// frozenState is what a recirculation resumes from.
type frozenState struct {
	Table    uint8
	HasGroup bool // resume by choosing a bucket of Group from dp_hash
	Group    uint32
	Words    [pipelineWords]uint64
	Stack    string // the translation's stack (push/pop), encoded by encodeStack
	// InPortSet says an action changed in_port before the freeze (OVN
	// zeroes it when a packet crosses a patch port, so that it may leave
	// by the port it came in on): the resumed pipeline sees InPort, as
	// in Open vSwitch, not the port the packet arrived on.
	InPortSet bool
	InPort    uint64
}

// The pipeline-only words saved across recirculation: metadata and
// registers (flow layout words 2..10).
const (
	firstPipelineWord = 2
	pipelineWords     = 9
)

// New returns a translator over tables.
func New(tables *classifier.Tables, opts ...Option) *Translator {
	t := &Translator{tables: tables, now: time.Now, grace: DefaultRecircGrace,
		frozen: map[frozenState]*recircState{}, byID: map[uint32]*recircState{},
		learned: map[learnKey]*learnedRule{}}
	for _, o := range opts {
		o(t)
	}
	t.pipelineOnly = flow.PipelineOnlyMask()
	t.keepPacket = *invert(&t.pipelineOnly)
	t.lastSweep = t.now()
	return t
}

// Options tune one translation.
type Options struct {
	// Trace records the packet's path through the tables in Result.Trace.
	Trace bool
}

// Reason says why a field is matched by a megaflow.
type Reason struct {
	Field flow.Field
	Bits  flow.U128 // the bits this cause un-wildcarded, in field space
	Table uint8
	Rule  *flow.Rule // the rule matched or ruled out, or whose action read the field
	Cause string     // CauseMatch, CauseRuledOut, or the action: "move to reg0", "dec_ttl", ...
}

// Causes of a field's examination by a table lookup.
const (
	// CauseMatch: the matched rule matches on the field.
	CauseMatch = "match"
	// CauseRuledOut: a higher-priority rule (the first of its subtable)
	// had to be ruled out, and the lookup examined the field to do it.
	CauseRuledOut = "ruled out"
)

func (r Reason) String() string {
	bits := flow.FormatValue(r.Field, r.Bits, flow.OnesU128(r.Field.Bits()))
	rule := "no rule"
	if r.Rule != nil {
		rule = r.Rule.String()
	}
	switch r.Cause {
	case CauseMatch:
		return fmt.Sprintf("%s/%s: table %d matched %s", r.Field, bits, r.Table, rule)
	case CauseRuledOut:
		return fmt.Sprintf("%s/%s: table %d ruled out %s", r.Field, bits, r.Table, rule)
	}
	return fmt.Sprintf("%s/%s: read by %s in table %d, rule %s", r.Field, bits, r.Cause, r.Table, rule)
}

// Step is one line of a trace.
type Step struct {
	Depth int
	Table uint8
	Rule  string // the matched rule, or "" for a miss
	Note  string
	// Matched is the rule matched, or whose action the note is about
	// (nil for a miss): its cookie says which logical flow made it.
	Matched *flow.Rule
}

// Result is a translation's outcome.
type Result struct {
	Key        flow.Key  // the megaflow key: the packet's key masked by Mask
	Mask       flow.Mask // every bit the translation examined
	Actions    []flow.DPAction
	Generation uint64 // the tables' generation the translation saw
	// Tables are the tables the translation looked up, and Groups whether
	// it used a group: a later change elsewhere leaves it valid.
	Tables flow.TableSet
	Groups bool
	// Recircs are the recirculation states Actions refer to; a cache
	// holds them while it keeps the actions.
	Recircs Recircs
	// Learned are the rules learn actions produced; whoever installs
	// the megaflow installs them (Learned.Install).
	Learned Learned
	// Counters are the packet counters of the translation's table
	// lookups, in order: the matched rule's, or the table's miss counter.
	// Crediting them with the megaflow's packets is how rules and tables
	// count packets (the "xlate cache" of OVS).
	Counters Counters
	Reasons  []Reason
	Trace    []Step
	Err      error // set if the packet was dropped for exceeding a limit or a missing recirculation
}

// String formats the megaflow like ovs-appctl dpctl/dump-flows.
func (r *Result) String() string {
	m := flow.Match{Key: r.Key, Mask: r.Mask}
	return m.String() + " actions:" + flow.DPActionsString(r.Actions)
}

// FormatTrace returns the trace, one step per line, then the megaflow and
// its reasons.
func (r *Result) FormatTrace() string {
	var b strings.Builder
	for _, s := range r.Trace {
		ind := strings.Repeat("    ", s.Depth)
		switch {
		case s.Note != "":
			fmt.Fprintf(&b, "%s%d. %s\n", ind, s.Table, s.Note)
		case s.Rule == "":
			fmt.Fprintf(&b, "%s%d. no match\n", ind, s.Table)
		default:
			fmt.Fprintf(&b, "%s%d. %s\n", ind, s.Table, s.Rule)
		}
	}
	fmt.Fprintf(&b, "Megaflow: %s\n", r.String())
	for _, re := range r.Reasons {
		fmt.Fprintf(&b, "  %s\n", re)
	}
	if r.Err != nil {
		fmt.Fprintf(&b, "Error: %v\n", r.Err)
	}
	return b.String()
}

// ctx is the state of one translation.
type ctx struct {
	t    *Translator
	opts Options
	k    flow.Key // working key
	wc   flow.Mask
	// arrivedOn is the port the packet came in on (the key's in_port
	// before any action set it).
	arrivedOn uint64
	acts      []flow.DPAction
	depth     int // nesting of tables, for traces
	// nested counts the resubmits still to return to: a resubmit that
	// is the last action of its list is a tail call and does not count,
	// so that a pipeline of many tables each ending in resubmit (OVN's
	// "next;" through a switch, a router and a switch) is not cut off,
	// while MaxResubmits still bounds loops.
	nested  int
	lookups int
	exit    bool
	err     error
	stack   []flow.U128 // push/pop, bottom first
	// lenDelta is how much VLAN pushes and pops changed the packet's
	// length since it was extracted (pkt_len).
	lenDelta int64
	learns   []pendingLearn
	res      *Result
	// cont is the continuation of a paused controller action while the
	// action lists it interrupted unwind (contOpen): each adds what it
	// had left to run.
	cont     *flow.Continuation
	contOpen bool
	table    uint8      // current table, for reasons
	rule     *flow.Rule // current rule, for reasons; nil for a table miss
	ruleStr  string     // rule formatted, cached
	// lookupTable is the table being looked up, for explainLookup, which
	// is made once per translation (a closure per lookup would allocate).
	lookupTable uint8
	explain     classifier.Explain
	scratch     flow.Mask // the classifier's, zero between lookups
}

// ruleString formats the current rule once per lookup, only when a reason
// or trace needs it.
func (c *ctx) ruleString() string {
	if c.rule == nil {
		return "table miss"
	}
	if c.ruleStr == "" {
		c.ruleStr = c.rule.String()
	}
	return c.ruleStr
}

// Translate translates the packet whose datapath key is k. k's
// pipeline-only fields are ignored. For recirc_id != 0 the frozen state is
// restored; an unknown recirc_id yields a drop megaflow with Err set.
func (t *Translator) Translate(k *flow.Key, opts Options) Result {
	// Room for a typical OVN translation's lookups, so that they grow at
	// most once (a megaflow keeps a copy, not this slice).
	res := Result{Counters: make(Counters, 0, 32)}
	c := &ctx{t: t, opts: opts, k: *k, res: &res}
	c.explain = c.explainLookup
	c.k = c.k.And(&t.keepPacket)
	c.wc.SetField(flow.InPort)
	c.wc.SetField(flow.RecircID)
	c.arrivedOn = k.Get(flow.InPort)

	t.ExpireLearned()
	res.Generation = t.tables.BeginRead()
	func() {
		defer t.tables.EndRead()
		rid := uint32(k.Get(flow.RecircID))
		if rid == 0 {
			c.runTable(0)
			return
		}
		fs, ok := t.state(rid)
		if !ok {
			c.err = fmt.Errorf("unknown recirc_id 0x%x", rid)
			return
		}
		copy(c.k.W[firstPipelineWord:firstPipelineWord+pipelineWords], fs.Words[:])
		if fs.InPortSet {
			c.k.Set(flow.InPort, fs.InPort)
		}
		c.stack = decodeStack(fs.Stack)
		if fs.HasGroup {
			c.selectByHash(fs.Group)
			return
		}
		c.runTable(fs.Table)
	}()
	if len(c.learns) > 0 && c.err == nil {
		res.Learned = Learned{t: t, rules: c.learns}
	}
	if t.nLearned.Load() > 0 {
		res.Learned.t = t
	}
	if c.err != nil {
		res.Err = c.err
		res.Actions = nil
		res.Recircs = Recircs{}
		res.Counters = nil // the packet is dropped, credited to no rule
	} else {
		res.Actions = c.acts
	}
	c.wc.ClearMask(&t.pipelineOnly)
	res.Mask = c.wc
	res.Key = k.And(&c.wc)
	return res
}

// Start is where a packet the controller injects enters the pipeline:
// with the metadata and registers of Meta (its pipeline-only fields), it
// runs Actions in the context of table Table (a continuation, or the
// actions of a packet the controller built), or, if Actions is nil, the
// rules of table Table.
type Start struct {
	Table   uint8
	Actions []flow.Action
	Meta    flow.Key
	Stack   []flow.U128
}

// TranslateFrom translates the packet with key k (in_port, tunnel and
// header fields) from s rather than from table 0. The result is for that
// one packet: its mask and key say nothing of other packets, since the
// starting registers are not part of them, so it must not be installed
// as a megaflow.
func (t *Translator) TranslateFrom(k *flow.Key, s Start, opts Options) Result {
	var res Result
	c := &ctx{t: t, opts: opts, k: *k, res: &res}
	c.explain = c.explainLookup
	c.k.CopyPipeline(&s.Meta)
	c.stack = append([]flow.U128(nil), s.Stack...)
	t.ExpireLearned()
	res.Generation = t.tables.BeginRead()
	func() {
		defer t.tables.EndRead()
		if s.Actions == nil {
			c.runTable(s.Table)
			return
		}
		c.table = s.Table
		c.step(Step{Table: s.Table, Note: "controller: " + flow.ActionsString(s.Actions)})
		c.depth++
		c.runActions(s.Actions)
		c.depth--
	}()
	if len(c.learns) > 0 && c.err == nil {
		res.Learned = Learned{t: t, rules: c.learns}
	}
	if c.err != nil {
		res.Err = c.err
		res.Counters = nil
		res.Recircs = Recircs{}
	} else {
		res.Actions = c.acts
	}
	res.Mask = c.wc
	res.Key = *k
	return res
}

func invert(m *flow.Mask) *flow.Mask {
	var r flow.Mask
	for i, w := range m.W {
		r.W[i] = ^w
	}
	return &r
}

func (c *ctx) step(s Step) {
	if c.opts.Trace {
		s.Depth = c.depth
		s.Matched = c.rule
		c.res.Trace = append(c.res.Trace, s)
	}
}

// note records a Reason for every packet field with bits in examined that
// the megaflow does not match yet. Call it before adding examined to c.wc.
func (c *ctx) note(examined *flow.Mask, table uint8, rule *flow.Rule, cause string) {
	var diff flow.Mask
	var words uint64 // bit w: word w has newly examined bits
	for i := range diff.W {
		diff.W[i] = examined.W[i] &^ c.wc.W[i]
		if diff.W[i] != 0 {
			words |= 1 << i
		}
	}
	if words == 0 {
		return
	}
	for _, f := range explainedFields {
		if fieldWords[f]&words == 0 {
			continue
		}
		if b := diff.Get(f); !b.IsZero() {
			c.res.Reasons = append(c.res.Reasons, Reason{Field: f, Bits: b, Table: table, Rule: rule, Cause: cause})
		}
	}
}

// explainedFields are the fields reasons name, in field order: the packet
// fields that are not views of another's storage. fieldWords[f] has bit w
// set for each key word w that field f occupies.
var explainedFields, fieldWords = fieldTables()

// A key's words fit note's bitmap.
var _ [64 - flow.NumWords]struct{}

func fieldTables() ([]flow.Field, []uint64) {
	var fs []flow.Field
	var words []uint64
	for f := flow.InPort; f.Valid(); f++ {
		i := f.Info()
		w := uint64(1) << i.Word
		if i.Bits == 128 {
			w |= 1 << (i.Word + 1)
		}
		for len(words) <= int(f) {
			words = append(words, 0)
		}
		words[f] = w
		if !f.PipelineOnly() && !isView(f) {
			fs = append(fs, f)
		}
	}
	return fs, words
}

// isView reports whether f is an alias of storage another field names.
func isView(f flow.Field) bool {
	switch f {
	case flow.ARPSPA, flow.ARPTPA, flow.ICMPType, flow.ICMPCode:
		return true
	}
	return false
}

// explainLookup records the reasons of a table lookup's probe.
func (c *ctx) explainLookup(examined *flow.Mask, rule *flow.Rule) {
	c.note(examined, c.lookupTable, rule, CauseRuledOut)
}

// runTable looks the working key up in table and runs the matched rule.
func (c *ctx) runTable(table uint8) {
	if c.exit || c.err != nil {
		return
	}
	if c.nested >= MaxDepth {
		c.err = fmt.Errorf("resubmit depth exceeds %d at table %d", MaxDepth, table)
		return
	}
	if c.lookups++; c.lookups > MaxResubmits {
		c.err = fmt.Errorf("more than %d table lookups", MaxResubmits)
		return
	}
	c.res.Tables.Add(table)
	first := len(c.res.Reasons)
	c.lookupTable = table
	r := c.t.tables.LookupExplainScratch(table, &c.k, &c.wc, c.explain, &c.scratch)
	for i := first; i < len(c.res.Reasons); i++ {
		if c.res.Reasons[i].Rule == r {
			c.res.Reasons[i].Cause = CauseMatch
		}
	}
	if r != nil {
		c.res.Counters.add(r.Stats)
	} else {
		c.res.Counters.add(c.t.tables.MissCounter(table))
	}
	saveT, saveR, saveS := c.table, c.rule, c.ruleStr
	c.table, c.rule, c.ruleStr = table, r, ""
	defer func() { c.table, c.rule, c.ruleStr = saveT, saveR, saveS }()
	if r == nil {
		c.step(Step{Table: table})
		return
	}
	if c.opts.Trace {
		c.step(Step{Table: table, Rule: c.ruleString()})
	}
	c.depth++
	c.nested++
	c.runActions(r.Actions)
	c.nested--
	c.depth--
}

// tailTable runs table as the last action of a list: it does not nest.
func (c *ctx) tailTable(table uint8) {
	c.nested--
	c.runTable(table)
	c.nested++
}

// readField returns the bits of r in the working key, un-wildcarding them
// if r is a packet field.
func (c *ctx) readField(r flow.FieldRange, cause string) flow.U128 {
	if !r.Field.PipelineOnly() {
		var m flow.Mask
		m.SetRange(r)
		c.note(&m, c.table, c.rule, cause)
		c.wc.Or(&m)
	}
	return c.k.GetRange(r)
}

// writeField stores v into r of the working key and, for packet fields,
// emits the datapath set action.
func (c *ctx) writeField(r flow.FieldRange, v flow.U128) {
	c.k.SetRange(r, v)
	if r.Field.PipelineOnly() || r.Field == flow.InPort {
		// Writing in_port only changes which output counts as "the input
		// port" (OVN's hairpin: load:0->in_port); the datapath's packet
		// keeps its real input port.
		return
	}
	c.acts = append(c.acts, flow.DPSetField{Field: r.Field, Value: v.Shl(r.Ofs), Mask: r.FieldMask()})
}

func (c *ctx) runActions(as []flow.Action) {
	for i, a := range as {
		if c.exit || c.err != nil {
			return
		}
		switch a := a.(type) {
		case flow.Output:
			c.output(a)
		case flow.Load:
			c.writeField(a.Dst, a.Value)
		case flow.Move:
			cause := "move" // pipeline-only sources are not explained
			if !a.Src.Field.PipelineOnly() {
				cause = "move to " + a.Dst.String()
			}
			c.writeField(a.Dst, c.readField(a.Src, cause))
		case flow.Push:
			c.push(a)
		case flow.Pop:
			c.pop(a)
		case flow.CheckPktLarger:
			c.checkPktLarger(a)
		case flow.Learn:
			c.learn(a)
		case flow.Resubmit:
			if i == len(as)-1 {
				c.tailTable(a.Table)
			} else {
				c.runTable(a.Table)
			}
		case flow.GotoTable:
			c.tailTable(a.Table)
		case flow.CT:
			c.ct(a)
		case flow.CTClear:
			for _, f := range []flow.Field{flow.CTState, flow.CTZone, flow.CTMark, flow.CTLabel, flow.CTNWProto,
				flow.CTNWSrc, flow.CTNWDst, flow.CTTPSrc, flow.CTTPDst, flow.CTIPv6Src, flow.CTIPv6Dst} {
				c.k.SetU128(f, flow.U128{})
			}
			c.acts = append(c.acts, flow.DPCTClear{})
		case flow.Clone:
			c.clone(a.Actions)
		case flow.Drop:
			return
		case flow.Meter:
			c.acts = append(c.acts, flow.DPMeter{RateKbps: a.RateKbps, BurstKbits: a.BurstKbits})
		case flow.Controller:
			u := flow.DPUserspace{UserData: a.UserData, Table: c.table, Meta: c.k}
			if a.Pause {
				c.cont = &flow.Continuation{Table: c.table, Stack: append([]flow.U128(nil), c.stack...)}
				c.contOpen = true
				u.Cont = c.cont
				c.exit = true
				c.step(Step{Table: c.table, Note: "controller action pauses the pipeline"})
			}
			c.acts = append(c.acts, u)
		case flow.PushVLAN:
			c.k.Set(flow.VLANTCIInner, c.k.Get(flow.VLANTCI))
			c.k.Set(flow.VLANTCI, 0x1000)
			c.acts = append(c.acts, flow.DPPushVLAN{TPID: a.TPID, TCI: 0x1000})
			c.lenDelta += 4
		case flow.PopVLAN:
			c.readField(flow.Whole(flow.VLANTCI), "pop_vlan")
			if c.k.Get(flow.VLANTCI)&0x1000 != 0 {
				c.k.Set(flow.VLANTCI, c.k.Get(flow.VLANTCIInner))
				c.k.Set(flow.VLANTCIInner, 0)
				c.acts = append(c.acts, flow.DPPopVLAN{})
				c.lenDelta -= 4
			}
		case flow.DecTTL:
			c.decTTL(a)
		case flow.Group:
			c.group(a.ID)
		case flow.Conjunction:
			// Clauses are resolved by the classifier; as an action it does
			// nothing.
		case flow.Exit:
			c.exit = true
		default:
			c.err = fmt.Errorf("action %s: not supported by the translator", a)
		}
		if c.contOpen {
			c.cont.Actions = append(c.cont.Actions, as[i+1:]...)
		}
	}
}

func (c *ctx) output(a flow.Output) {
	port := a.Port
	if a.PortField.Field.Valid() {
		port = uint32(c.readField(a.PortField, "output").Lo)
	}
	inPort := uint32(c.k.Get(flow.InPort))
	switch {
	case port == flow.PortInPort:
		port = inPort
	case port == inPort || port == flow.PortNone:
		// OpenFlow drops output to the input port unless it says in_port.
		if c.opts.Trace {
			c.step(Step{Table: c.table, Note: fmt.Sprintf("output:%d is the input port: skipped", port)})
		}
		return
	}
	c.acts = append(c.acts, flow.DPOutput{Port: port})
	if c.opts.Trace {
		c.step(Step{Table: c.table, Note: fmt.Sprintf("output:%d", port)})
	}
}

func (c *ctx) ct(a flow.CT) {
	zone := a.Zone
	if a.ZoneField.Field.Valid() {
		zone = uint16(c.readField(a.ZoneField, "ct zone").Lo)
	}
	dp := flow.DPCT{Zone: zone, Commit: a.Commit, Force: a.Force, NAT: a.NAT}
	for _, e := range a.Exec {
		var dst flow.FieldRange
		var v flow.U128
		switch e := e.(type) {
		case flow.Load:
			dst, v = e.Dst, e.Value
		case flow.Move:
			dst, v = e.Dst, c.readField(e.Src, "ct exec")
		default:
			continue
		}
		m := dst.FieldMask()
		v = v.Shl(dst.Ofs).And(m)
		switch dst.Field {
		case flow.CTMark:
			dp.Mark = dp.Mark&^uint32(m.Lo) | uint32(v.Lo)
			dp.MarkMask |= uint32(m.Lo)
		case flow.CTLabel:
			dp.Label = dp.Label.AndNot(m).Or(v)
			dp.LabelMask = dp.LabelMask.Or(m)
		}
	}
	c.acts = append(c.acts, dp)
	if a.Table == flow.CTNoTable {
		if c.opts.Trace {
			c.step(Step{Table: c.table, Note: dp.String()})
		}
		return
	}
	fs := frozenState{Table: a.Table, Stack: encodeStack(c.stack)}
	copy(fs.Words[:], c.k.W[firstPipelineWord:firstPipelineWord+pipelineWords])
	c.freezeInPort(&fs)
	id := c.t.freeze(fs)
	c.recircs(id)
	c.acts = append(c.acts, flow.DPRecirc{ID: id})
	if c.opts.Trace {
		c.step(Step{Table: c.table, Note: fmt.Sprintf("%s; recirc(0x%x) resumes in table %d", dp, id, a.Table)})
	}
}

// clone runs as on a copy of the working key; datapath actions go into a
// clone() unless they do not change the packet.
func (c *ctx) clone(as []flow.Action) {
	saveK, saveActs, saveExit := c.k, c.acts, c.exit
	saveStack := append([]flow.U128(nil), c.stack...)
	saveDelta := c.lenDelta
	c.acts = nil
	c.runActions(as)
	c.contOpen = false // a pause in a clone continues the clone only
	inner := c.acts
	c.k, c.acts, c.exit, c.stack, c.lenDelta = saveK, saveActs, saveExit, saveStack, saveDelta
	if len(inner) == 0 {
		return
	}
	if onlyOutputs(inner) {
		c.acts = append(c.acts, inner...)
		return
	}
	c.acts = append(c.acts, flow.DPClone{Actions: inner})
}

func onlyOutputs(as []flow.DPAction) bool {
	for _, a := range as {
		switch a.(type) {
		case flow.DPOutput, flow.DPUserspace:
		default:
			return false
		}
	}
	return true
}

func (c *ctx) decTTL(a flow.DecTTL) {
	et := c.readField(flow.Whole(flow.EthType), "dec_ttl").Lo
	if et != 0x0800 && et != 0x86dd {
		return
	}
	ttl := c.readField(flow.Whole(flow.NWTTL), "dec_ttl").Lo
	if ttl <= 1 {
		if a.ToController {
			c.acts = append(c.acts, flow.DPUserspace{UserData: []byte("dec_ttl")})
		}
		c.step(Step{Table: c.table, Note: "dec_ttl: TTL expired"})
		c.exit = true
		return
	}
	c.writeField(flow.Whole(flow.NWTTL), flow.U128{Lo: ttl - 1})
}

func (c *ctx) group(id uint32) {
	c.res.Groups = true
	g := c.t.tables.Group(id)
	if g == nil {
		if c.opts.Trace {
			c.step(Step{Table: c.table, Note: fmt.Sprintf("group:%d does not exist: drop", id)})
		}
		return
	}
	if g.Type == flow.GroupAll {
		for _, b := range g.Buckets {
			c.clone(b.Actions)
		}
		return
	}
	if b, ok := onlyBucket(g); ok {
		// Nothing to choose (a load balancer with one backend): neither a
		// hash in the datapath, whose recirculation would need a
		// megaflow per dp_hash slot, nor the 5-tuple, which would need
		// one per connection.
		if c.opts.Trace {
			c.step(Step{Table: c.table, Note: fmt.Sprintf("group:%d has one bucket", id)})
		}
		c.depth++
		c.runActions(b.Actions)
		c.depth--
		return
	}
	switch g.Method {
	case flow.Select5Tuple:
		cause := fmt.Sprintf("select group %d", id)
		h := uint64(0)
		for _, f := range []flow.Field{flow.EthType, flow.NWProto} {
			h = flow.HashWord(h, c.readField(flow.Whole(f), cause).Lo)
		}
		addr := []flow.Field{flow.NWSrc, flow.NWDst}
		if c.k.Get(flow.EthType) == 0x86dd {
			addr = []flow.Field{flow.IPv6Src, flow.IPv6Dst}
		}
		if p := c.k.Get(flow.NWProto); p == 6 || p == 17 || p == 132 {
			addr = append(addr, flow.TPSrc, flow.TPDst)
		}
		for _, f := range addr {
			v := c.readField(flow.Whole(f), cause)
			h = flow.HashWord(flow.HashWord(h, v.Hi), v.Lo)
		}
		c.runBucket(g, flow.HashFinish(h))
	default:
		// Hash in the datapath, then choose after recirculation.
		fs := frozenState{HasGroup: true, Group: id, Stack: encodeStack(c.stack)}
		copy(fs.Words[:], c.k.W[firstPipelineWord:firstPipelineWord+pipelineWords])
		c.freezeInPort(&fs)
		rid := c.t.freeze(fs)
		c.recircs(rid)
		c.acts = append(c.acts, flow.DPHashL4{Basis: id}, flow.DPRecirc{ID: rid})
		if c.opts.Trace {
			c.step(Step{Table: c.table, Note: fmt.Sprintf("group:%d: hash(l4), recirc(0x%x)", id, rid)})
		}
		c.exit = true
	}
}

// freezeInPort keeps in fs an in_port that actions changed. One left
// alone is not frozen, so packets from every port share the state.
func (c *ctx) freezeInPort(fs *frozenState) {
	if p := c.k.Get(flow.InPort); p != c.arrivedOn {
		fs.InPortSet, fs.InPort = true, p
	}
}

// selectByHash resumes a SelectHash group after recirculation.
func (c *ctx) selectByHash(id uint32) {
	c.res.Groups = true
	g := c.t.tables.Group(id)
	if g == nil {
		if c.opts.Trace {
			c.step(Step{Note: fmt.Sprintf("group:%d does not exist: drop", id)})
		}
		return
	}
	r := flow.FieldRange{Field: flow.DPHash, Bits: hashSlotBits}
	slot := c.readField(r, fmt.Sprintf("select group %d", id)).Lo
	// The slots are shared out in proportion to the weights, so that
	// every bucket gets its share of them (a hash of 64 slots modulo the
	// total weight gave one of OVN's three 100-weight buckets one slot).
	if total := groupWeight(g); total > 0 {
		c.runPick(g, slot*total>>hashSlotBits)
	}
}

// onlyBucket returns a select group's one bucket of nonzero weight, if it
// has exactly one.
func onlyBucket(g *flow.GroupDef) (*flow.Bucket, bool) {
	var only *flow.Bucket
	for i := range g.Buckets {
		if g.Buckets[i].Weight == 0 {
			continue
		}
		if only != nil {
			return nil, false
		}
		only = &g.Buckets[i]
	}
	return only, only != nil
}

func groupWeight(g *flow.GroupDef) uint64 {
	total := uint64(0)
	for _, b := range g.Buckets {
		total += uint64(b.Weight)
	}
	return total
}

// runBucket runs the bucket that h selects by weight.
func (c *ctx) runBucket(g *flow.GroupDef, h uint64) {
	if total := groupWeight(g); total > 0 {
		c.runPick(g, (h>>16)%total)
	}
}

// runPick runs the bucket whose share of the total weight holds pick.
func (c *ctx) runPick(g *flow.GroupDef, pick uint64) {
	for i, b := range g.Buckets {
		if pick < uint64(b.Weight) {
			if c.opts.Trace {
				c.step(Step{Table: c.table, Note: fmt.Sprintf("group:%d bucket %d", g.ID, i)})
			}
			c.depth++
			c.runActions(b.Actions)
			c.depth--
			return
		}
		pick -= uint64(b.Weight)
	}
}
