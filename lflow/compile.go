package lflow

import (
	"fmt"

	"github.com/govn/govn/datapath/flow"
)

// Layout says which datapath tables implement the logical pipelines and
// OVN's fixed tables. DefaultLayout is OVN 23.03's: logical ingress table
// N is table 8+N, egress table N is 42+N (tables 37-41 are output stages).
type Layout struct {
	IngressBase uint8 // first table of the logical ingress pipeline
	EgressBase  uint8 // first table of the logical egress pipeline
	// IngressOutput is where "output;" goes from the ingress pipeline
	// (remote/local output, which then runs the egress pipeline), and
	// EgressOutput where it goes from the egress pipeline (to the port).
	IngressOutput uint8
	EgressOutput  uint8
	// Lookups maps an action that consults a table (get_arp, lookup_arp,
	// get_fdb, chk_lb_hairpin, ...) to that table and the flags bit the
	// table sets to answer yes (-1 when it answers by writing a field).
	Lookups map[string]Lookup
}

// Lookup is one of OVN's fixed lookup tables.
type Lookup struct {
	Table uint8
	Flag  int // bit of flags (reg10) that carries a Boolean answer, or -1
}

// DefaultLayout returns OVN 23.03's table layout (as ovn-controller
// programs it: ovs-ofctl dump-flows of the reference setup).
func DefaultLayout() Layout {
	return Layout{
		IngressBase:   8,
		EgressBase:    42,
		IngressOutput: 37,
		EgressOutput:  64,
		Lookups: map[string]Lookup{
			"get_arp": {66, -1}, "get_nd": {66, -1},
			"lookup_arp": {67, 6}, "lookup_nd": {67, 6},
			"lookup_arp_ip": {67, 6}, "lookup_nd_ip": {67, 6},
			"chk_lb_hairpin": {68, 7}, "chk_lb_hairpin_reply": {69, 7},
			"ct_snat_to_vip": {70, -1},
			"get_fdb":        {71, -1}, "lookup_fdb": {72, 8},
			"check_in_port_sec": {73, 12}, "check_out_port_sec": {75, 12},
			"chk_ecmp_nh_mac": {76, 13}, "chk_ecmp_nh": {77, 13},
			"chk_lb_aff": {78, 14},
		},
	}
}

// Lflow is one logical flow to compile.
type Lflow struct {
	Pipeline string // "ingress" or "egress"
	Table    int
	Priority int
	Match    string
	Actions  string
}

// Context is the caller's per-datapath compilation state.
type Context struct {
	Env Env
	// Datapath is the logical datapath's key, matched in metadata.
	Datapath uint32
	// Router says the datapath is a logical router, whose plain
	// connection tracking (ct_next, ct_commit, ct_lb) uses the DNAT zone
	// rather than the logical port's zone.
	Router bool
	// NextConjID and NextGroupID are the next conjunction and group ids
	// to hand out; Compile advances them.
	NextConjID  uint32
	NextGroupID uint32
	// Cookie is put in every rule.
	Cookie uint64
}

// Result is what a logical flow compiles into. Reuse one Result for many
// calls (truncating Rules and Groups) but never copy it: it keeps scratch
// space that each call overwrites.
type Result struct {
	Rules  []flow.Rule
	Groups []flow.GroupDef

	// A Result reused across calls reuses the memory of the parsed tree
	// (ast) and of the matches built before rules are emitted (scratch),
	// which spares the garbage collector most of what compiling a flow
	// allocates.
	ast     astArena
	scratch []flow.Match
}

// matches returns n zeroed matches of scratch space, valid until the next
// compilation into r.
func (r *Result) matches(n int) []flow.Match {
	if cap(r.scratch)-len(r.scratch) < n {
		r.scratch = make([]flow.Match, 0, max(2*cap(r.scratch), n, 16))
	}
	m := r.scratch[len(r.scratch) : len(r.scratch)+n]
	r.scratch = r.scratch[:len(r.scratch)+n]
	clear(m)
	return m
}

// UnsupportedError reports an action the datapath cannot express yet.
type UnsupportedError struct {
	Action string
	Reason string // what the datapath lacks, if known
}

func (e *UnsupportedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("action %s is not supported by the datapath yet: %s", e.Action, e.Reason)
	}
	return fmt.Sprintf("action %s is not supported by the datapath yet", e.Action)
}

// LocalPorts may be implemented by an Env to say which logical ports are
// present on this chassis. A rule whose match names a port that is not
// local (in inport or outport) can never match here, so, as
// ovn-controller does, Compile leaves it out.
type LocalPorts interface {
	IsLocalPort(name string) bool
}

// Compiler turns logical flows into datapath rules. It is immutable and
// safe for concurrent use.
type Compiler struct {
	symtab *Symtab
	layout Layout
	dp     []flow.Field // datapath field of each field symbol, by id
}

// NewCompiler returns a compiler for the symbols of st and the given
// table layout.
func NewCompiler(st *Symtab, layout Layout) (*Compiler, error) {
	c := &Compiler{symtab: st, layout: layout, dp: make([]flow.Field, len(st.byName))}
	for _, s := range st.byName {
		if s.Kind != KindField && s.Kind != KindString || s.OVNField {
			continue
		}
		f, ok := flow.FieldByName(s.DP)
		if !ok {
			return nil, fmt.Errorf("symbol %s: no datapath field %q", s.Name, s.DP)
		}
		if s.DPOfs+s.Width > int(f.Bits()) {
			return nil, fmt.Errorf("symbol %s does not fit datapath field %s", s.Name, s.DP)
		}
		c.dp[s.id] = f
	}
	return c, nil
}

func toFlow(v U128) flow.U128 { return flow.U128{Hi: v.Hi, Lo: v.Lo} }

// rangeOf returns the datapath bits of a field reference.
func (c *Compiler) rangeOf(r FieldRef) flow.FieldRange {
	base := r.Sym.Field
	return flow.FieldRange{Field: c.dp[base.id], Ofs: uint(base.DPOfs + r.BaseOfs()), Bits: uint(r.Width())}
}

func (c *Compiler) fieldRange(name string) flow.FieldRange {
	s := c.symtab.Lookup(name)
	return c.rangeOf(FieldRef{Sym: s})
}

// Compile parses, normalizes and compiles one logical flow, appending to
// res. A flow whose match is false on this chassis (unknown ports,
// non-resident ports) yields no rules.
func (c *Compiler) Compile(lf *Lflow, ctx *Context, res *Result) error {
	res.ast.reset()
	p := parser{symtab: c.symtab, arena: &res.ast}
	e, err := p.parseExpr(lf.Match)
	if err != nil {
		return fmt.Errorf("match: %w", err)
	}
	p = parser{symtab: c.symtab, arena: &res.ast}
	acts, err := p.parseActions(lf.Actions)
	if err != nil {
		return fmt.Errorf("actions: %w", err)
	}
	// Fields the actions write or read bring their prerequisites into the
	// match, as in OVN (setting tcp.dst applies only to TCP packets).
	if pre := c.actionPrereqs(acts); len(pre) > 0 {
		e = &AndExpr{Terms: append([]Expr{e}, pre...)}
	}
	nf, err := c.symtab.Normalize(e, ctx.Env)
	if err != nil {
		return fmt.Errorf("match: %w", err)
	}
	return c.CompileNormal(lf, nf, acts, ctx, res)
}

// actionPrereqs returns the prerequisites of fields the top-level actions
// (and clone bodies, which act on the same packet) touch.
func (c *Compiler) actionPrereqs(acts []Action) []Expr {
	var out []Expr
	add := func(r FieldRef) {
		if r.Sym.prereq != nil {
			out = append(out, r.Sym.prereq)
		}
	}
	for _, a := range acts {
		switch a := a.(type) {
		case *AssignAction:
			add(a.Dst)
			if a.Src != nil {
				add(*a.Src)
			}
		case *ExchangeAction:
			add(a.A)
			add(a.B)
		case *NestedAction:
			if a.Name == "clone" {
				out = append(out, c.actionPrereqs(a.Body)...)
			}
			if p := actionPrereq(a.Name); p != "" {
				out = append(out, c.symtab.Lookup(p).mention)
			}
		case *CallAction:
			if p := actionPrereq(a.Name); p != "" {
				out = append(out, c.symtab.Lookup(p).mention)
			}
		}
	}
	return out
}

// actionPrereq names the predicate an action implies, as OVN adds it to
// the match: connection tracking needs IP, icmp4 { } an IPv4 packet, and
// so on.
func actionPrereq(name string) string {
	switch name {
	case "ct_next", "ct_commit", "ct_commit_nat", "ct_dnat", "ct_snat", "ct_dnat_in_czone",
		"ct_snat_in_czone", "ct_lb", "ct_lb_mark":
		return "ip"
	case "icmp4", "icmp4_error", "arp":
		return "ip4"
	case "icmp6", "icmp6_error", "nd_ns":
		return "ip6"
	case "nd_na", "nd_na_router":
		return "nd_ns"
	case "tcp_reset":
		return "tcp"
	case "sctp_abort":
		return "sctp"
	}
	return ""
}

// CompileNormal compiles an already normalized match with parsed actions.
// On error res is left as it was.
func (c *Compiler) CompileNormal(lf *Lflow, nf Normal, acts []Action, ctx *Context, res *Result) error {
	nRules, nGroups := len(res.Rules), len(res.Groups)
	err := c.compileNormal(lf, nf, acts, ctx, res)
	if err != nil {
		res.Rules, res.Groups = res.Rules[:nRules], res.Groups[:nGroups]
	}
	return err
}

func (c *Compiler) compileNormal(lf *Lflow, nf Normal, acts []Action, ctx *Context, res *Result) error {
	table, err := c.table(lf.Pipeline, lf.Table)
	if err != nil {
		return err
	}
	if lf.Priority < 0 || lf.Priority > 65535 {
		return fmt.Errorf("priority %d out of range", lf.Priority)
	}
	ac := actionCompiler{c: c, ctx: ctx, res: res, pipeline: lf.Pipeline, table: lf.Table}
	program, err := ac.compile(acts)
	if err != nil {
		return err
	}
	if len(program) == 0 {
		program = []flow.Action{flow.Drop{}}
	}
	prio := uint16(lf.Priority)
	local, _ := ctx.Env.(LocalPorts)
	meta, _ := flow.FieldByName(DPLogicalDatapath)
	res.scratch = res.scratch[:0]
	for _, conj := range nf {
		bases := res.matches(1)
		base := &bases[0]
		base.Set(meta, uint64(ctx.Datapath))
		// Clauses with one alternative go into every rule; the others are
		// the dimensions of the conjunction.
		var dims, cross [][]flow.Match
		ok := true
		for i := range conj {
			cl := &conj[i]
			f := c.dp[cl.Field.id]
			shift := cl.Field.DPOfs
			if cl.Field.Kind == KindString {
				var keys []uint32
				for _, p := range cl.Ports {
					if ctx.Env == nil {
						return fmt.Errorf("port %q: no environment to resolve it", p)
					}
					if p == "none" {
						// OVN's name for "no port": key 0.
						keys = append(keys, 0)
						continue
					}
					if local != nil && !local.IsLocalPort(p) {
						continue
					}
					if k, found := ctx.Env.PortKey(p); found {
						keys = append(keys, k)
					}
				}
				switch len(keys) {
				case 0:
					ok = false
				case 1:
					base.Set(f, uint64(keys[0]))
				default:
					d := res.matches(len(keys))
					for j, k := range keys {
						d[j].Set(f, uint64(k))
					}
					dims = append(dims, d)
				}
				continue
			}
			if len(cl.Alts) == 1 {
				base.SetMaskedU128(f, toFlow(cl.Alts[0].Value.Lsh(shift)), toFlow(cl.Alts[0].Mask.Lsh(shift)))
				continue
			}
			d := res.matches(len(cl.Alts))
			for j, m := range cl.Alts {
				d[j].SetMaskedU128(f, toFlow(m.Value.Lsh(shift)), toFlow(m.Mask.Lsh(shift)))
			}
			if cl.Field.NoConjunction {
				// Nominal fields (eth.type, ip.proto) are never a
				// dimension of a conjunction: like ovn-controller, cross
				// them into every rule instead.
				cross = append(cross, d)
				continue
			}
			dims = append(dims, d)
		}
		if !ok {
			continue
		}
		for _, d := range cross {
			next := res.matches(len(bases) * len(d))[:0]
			for i := range bases {
				for j := range d {
					m := bases[i]
					mergeMatch(&m, &d[j])
					next = append(next, m)
				}
			}
			bases = next
		}
		for i := range bases {
			if err := emitRules(&bases[i], dims, program, table, prio, ctx, res); err != nil {
				return err
			}
		}
	}
	return nil
}

// emitRules appends the rules of one conjunction: base plus each
// alternative of a single multi-valued clause, or a conjunctive match when
// there are several.
func emitRules(base *flow.Match, dims [][]flow.Match, program []flow.Action, table uint8, prio uint16, ctx *Context, res *Result) error {
	rule := flow.Rule{Table: table, Priority: prio, Cookie: ctx.Cookie}
	switch len(dims) {
	case 0:
		rule.Match, rule.Actions = *base, program
		res.Rules = append(res.Rules, rule)
	case 1:
		for j := range dims[0] {
			rule.Match = *base
			mergeMatch(&rule.Match, &dims[0][j])
			rule.Actions = program
			res.Rules = append(res.Rules, rule)
		}
	default:
		if len(dims) > 64 {
			return fmt.Errorf("conjunction of %d clauses exceeds 64", len(dims))
		}
		// A conjunctive match: one rule per alternative of each
		// dimension, plus the rule that matches the conjunction id.
		id := ctx.NextConjID
		ctx.NextConjID++
		for k, d := range dims {
			for j := range d {
				rule.Match = *base
				mergeMatch(&rule.Match, &d[j])
				rule.Actions = []flow.Action{flow.Conjunction{ID: id, Clause: uint8(k + 1), NClauses: uint8(len(dims))}}
				res.Rules = append(res.Rules, rule)
			}
		}
		conjID, _ := flow.FieldByName("conj_id")
		rule.Match = *base
		rule.Match.Set(conjID, uint64(id))
		rule.Actions = program
		res.Rules = append(res.Rules, rule)
	}
	return nil
}

// mergeMatch adds the constraints of o to m (their fields are disjoint).
func mergeMatch(m, o *flow.Match) {
	for i := range m.Key.W {
		m.Key.W[i] |= o.Key.W[i]
		m.Mask.W[i] |= o.Mask.W[i]
	}
}

// table maps a logical pipeline table to a datapath table.
func (c *Compiler) table(pipeline string, t int) (uint8, error) {
	var base int
	switch pipeline {
	case "ingress", "":
		base = int(c.layout.IngressBase)
	case "egress":
		base = int(c.layout.EgressBase)
	default:
		return 0, fmt.Errorf("unknown pipeline %q", pipeline)
	}
	n := base + t
	if t < 0 || n >= flow.NumTables {
		return 0, fmt.Errorf("%s table %d is outside the datapath's tables", pipeline, t)
	}
	return uint8(n), nil
}
