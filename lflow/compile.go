package lflow

import (
	"fmt"
	"net/netip"
	"strconv"

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

// Result is what a logical flow compiles into.
type Result struct {
	Rules  []flow.Rule
	Groups []flow.GroupDef
}

// UnsupportedError reports an action the datapath cannot express yet.
type UnsupportedError struct{ Action string }

func (e *UnsupportedError) Error() string {
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
	e, err := c.symtab.ParseExpr(lf.Match)
	if err != nil {
		return fmt.Errorf("match: %w", err)
	}
	acts, err := c.symtab.ParseActions(lf.Actions)
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
	var base flow.Match
	meta, _ := flow.FieldByName(DPLogicalDatapath)
	for _, conj := range nf {
		base = flow.Match{}
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
					d := make([]flow.Match, len(keys))
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
			d := make([]flow.Match, len(cl.Alts))
			for j, m := range cl.Alts {
				d[j].SetMaskedU128(f, toFlow(m.Value.Lsh(shift)), toFlow(m.Mask.Lsh(shift)))
			}
			if cl.Field.Nominal {
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
		bases := []flow.Match{base}
		for _, d := range cross {
			next := make([]flow.Match, 0, len(bases)*len(d))
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

// actionCompiler compiles one flow's actions.
type actionCompiler struct {
	c        *Compiler
	ctx      *Context
	res      *Result
	pipeline string
	table    int
}

func (ac *actionCompiler) nextTable() (uint8, error) {
	return ac.c.table(ac.pipeline, ac.table+1)
}

func (ac *actionCompiler) compile(acts []Action) ([]flow.Action, error) {
	out := make([]flow.Action, 0, len(acts)+2)
	for _, a := range acts {
		var err error
		out, err = ac.action(out, a)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// portKey resolves a port name for an assignment to inport/outport.
func (ac *actionCompiler) portKey(name string) (uint32, error) {
	if ac.ctx.Env == nil {
		return 0, fmt.Errorf("port %q: no environment to resolve it", name)
	}
	k, ok := ac.ctx.Env.PortKey(name)
	if !ok {
		return 0, fmt.Errorf("unknown logical port %q", name)
	}
	return k, nil
}

// loadMasked writes value under mask into r, one load per run of 1-bits.
func loadMasked(out []flow.Action, r flow.FieldRange, v, mask U128) []flow.Action {
	w := int(r.Width())
	for i := 0; i < w; {
		if !mask.Bit(i) {
			i++
			continue
		}
		j := i
		for j < w && mask.Bit(j) {
			j++
		}
		sub := flow.FieldRange{Field: r.Field, Ofs: r.Ofs + uint(i), Bits: uint(j - i)}
		out = append(out, flow.Load{Dst: sub, Value: toFlow(v.Rsh(i).And(Ones(j - i)))})
		i = j
	}
	return out
}

func (ac *actionCompiler) assign(out []flow.Action, a *AssignAction) ([]flow.Action, error) {
	if a.Dst.Sym.OVNField || a.Src != nil && a.Src.Sym.OVNField {
		return nil, fmt.Errorf("%s can only be set inside actions the controller carries out (icmp4_error { ... })", a.Dst.Sym.Name)
	}
	dst := ac.c.rangeOf(a.Dst)
	if a.Src != nil {
		return append(out, flow.Move{Src: ac.c.rangeOf(*a.Src), Dst: dst}), nil
	}
	if a.Value.IsStr {
		if a.Value.Str == "" || a.Value.Str == "none" {
			// outport = ""; clears the port.
			return append(out, flow.Load{Dst: dst, Value: flow.U128{}}), nil
		}
		k, err := ac.portKey(a.Value.Str)
		if err != nil {
			return nil, err
		}
		return append(out, flow.Load{Dst: dst, Value: flow.U128{Lo: uint64(k)}}), nil
	}
	if a.Value.Masked {
		return loadMasked(out, dst, a.Value.Value, a.Value.Mask), nil
	}
	return append(out, flow.Load{Dst: dst, Value: toFlow(a.Value.Value)}), nil
}

// exchange swaps two fields. The datapath has no stack, so the swap goes
// through metadata (64 bits at a time), whose value, the logical datapath
// key, is a constant here and is reloaded afterwards.
func (ac *actionCompiler) exchange(out []flow.Action, a, b flow.FieldRange) []flow.Action {
	meta, _ := flow.FieldByName(DPLogicalDatapath)
	w := a.Width()
	for ofs := uint(0); ofs < w; ofs += 64 {
		n := min(64, w-ofs)
		pa := flow.FieldRange{Field: a.Field, Ofs: a.Ofs + ofs, Bits: n}
		pb := flow.FieldRange{Field: b.Field, Ofs: b.Ofs + ofs, Bits: n}
		tmp := flow.FieldRange{Field: meta, Ofs: 0, Bits: n}
		out = append(out, flow.Move{Src: pa, Dst: tmp}, flow.Move{Src: pb, Dst: pa}, flow.Move{Src: tmp, Dst: pb})
	}
	return append(out, flow.Load{Dst: flow.Whole(meta), Value: flow.U128{Lo: uint64(ac.ctx.Datapath)}})
}

// portZone is the zone of plain connection tracking: the logical port's
// zone on a switch, the DNAT zone on a router (as OVN does).
func (ac *actionCompiler) portZone() flow.FieldRange {
	if ac.ctx.Router {
		return ac.ctZone(DPDNATZone)
	}
	return ac.ctZone(DPCTZone)
}

func (ac *actionCompiler) ctZone(name string) flow.FieldRange {
	f, _ := flow.FieldByName(name)
	return flow.FieldRange{Field: f, Ofs: 0, Bits: 16}
}

func (ac *actionCompiler) action(out []flow.Action, a Action) ([]flow.Action, error) {
	switch a := a.(type) {
	case *NextAction:
		pipeline, t := ac.pipeline, ac.table+1
		if a.Pipeline != "" {
			pipeline = a.Pipeline
		}
		if a.Table >= 0 {
			t = a.Table
		}
		n, err := ac.c.table(pipeline, t)
		if err != nil {
			return nil, err
		}
		return append(out, flow.Resubmit{Table: n}), nil
	case *AssignAction:
		return ac.assign(out, a)
	case *ExchangeAction:
		if a.A.Sym.OVNField || a.B.Sym.OVNField {
			return nil, fmt.Errorf("OVN fields cannot be exchanged")
		}
		return ac.exchange(out, ac.c.rangeOf(a.A), ac.c.rangeOf(a.B)), nil
	case *DecTTLAction:
		return append(out, flow.DecTTL{}), nil
	case *NestedAction:
		return ac.nested(out, a)
	case *CallAction:
		return ac.call(out, a)
	}
	return nil, fmt.Errorf("unknown action %T", a)
}

func (ac *actionCompiler) nested(out []flow.Action, a *NestedAction) ([]flow.Action, error) {
	switch a.Name {
	case "clone":
		body, err := ac.compile(a.Body)
		if err != nil {
			return nil, err
		}
		return append(out, flow.Clone{Actions: body}), nil
	case "ct_commit":
		ct := flow.CT{Commit: true, ZoneField: ac.portZone(), Table: flow.CTNoTable}
		for _, b := range a.Body {
			as, ok := b.(*AssignAction)
			if !ok || as.Dst.Sym.Field == nil || (as.Dst.Sym.Field.Name != "ct_mark" && as.Dst.Sym.Field.Name != "ct_label") {
				return nil, fmt.Errorf("ct_commit { } may only set ct_mark and ct_label")
			}
			var err error
			if ct.Exec, err = ac.assign(ct.Exec, as); err != nil {
				return nil, err
			}
		}
		return append(out, ct), nil
	}
	// arp { }, icmp4 { }, nd_na { }, reject { } ... build a new packet:
	// the controller (pinctrl) does it, from the action's own text.
	return append(out, controllerAction(a, false)), nil
}

// controllerAction sends the packet to the controller with the action's
// canonical text as userdata; pinctrl parses it back with this package.
// With pause, the controller resumes the pipeline after filling in the
// action's result.
func controllerAction(a Action, pause bool) flow.Action {
	return flow.Controller{UserData: []byte(ActionsString([]Action{a})), Pause: pause}
}

func (ac *actionCompiler) call(out []flow.Action, a *CallAction) ([]flow.Action, error) {
	next, err := ac.nextTable()
	if err != nil && (a.Name != "output" && a.Name != "drop") {
		// ct_* recirculate to the next table; the last table has none.
		next = flow.CTNoTable
	}
	switch a.Name {
	case "output":
		t := ac.c.layout.IngressOutput
		if ac.pipeline == "egress" {
			t = ac.c.layout.EgressOutput
		}
		return append(out, flow.Resubmit{Table: t}), nil
	case "drop":
		return out, nil
	case "ct_next":
		return append(out, flow.CT{ZoneField: ac.portZone(), Table: next}), nil
	case "ct_clear":
		return append(out, flow.CTClear{}), nil
	case "ct_commit":
		return append(out, flow.CT{Commit: true, ZoneField: ac.portZone(), Table: flow.CTNoTable}), nil
	case "ct_commit_nat":
		return append(out, flow.CT{Commit: true, ZoneField: ac.ctZone(DPDNATZone), Table: next, NAT: &flow.NAT{}}), nil
	case "ct_dnat", "ct_snat", "ct_dnat_in_czone", "ct_snat_in_czone":
		zone := DPDNATZone
		if a.Name == "ct_snat" {
			zone = DPSNATZone
		}
		ct := flow.CT{ZoneField: ac.ctZone(zone), Table: next, NAT: &flow.NAT{}}
		if len(a.Args) > 0 {
			if err := natArgs(ct.NAT, a); err != nil {
				return nil, err
			}
			ct.Commit = true
			ct.NAT.Src = a.Name == "ct_snat" || a.Name == "ct_snat_in_czone"
			ct.NAT.Dst = !ct.NAT.Src
		}
		return append(out, ct), nil
	case "ct_lb", "ct_lb_mark":
		return ac.ctLB(out, a, next)
	case "get_arp", "get_nd":
		return ac.lookup(out, a, nil)
	case "put_arp", "put_nd", "put_fdb", "put_dhcp_opts", "put_dhcpv6_opts", "dns_lookup",
		"put_nd_ra_opts", "handle_svc_check", "log", "trigger_event", "bind_vport",
		"handle_dhcpv6_reply", "igmp", "mld", "handle_bfd_msg":
		// pinctrl's work; actions with a result pause the pipeline until
		// the controller writes it.
		return append(out, controllerAction(a, a.Result != nil)), nil
	case "lookup_arp", "lookup_nd", "lookup_arp_ip", "lookup_nd_ip", "get_fdb", "lookup_fdb",
		"chk_lb_hairpin", "chk_lb_hairpin_reply", "ct_snat_to_vip", "check_in_port_sec",
		"check_out_port_sec", "chk_ecmp_nh_mac", "chk_ecmp_nh", "chk_lb_aff":
		return ac.lookup(out, a, a.Result)
	case "select":
		return ac.selectGroup(out, a, next)
	}
	return nil, &UnsupportedError{Action: a.Name}
}

// lookup compiles an action that consults one of OVN's fixed tables:
// the arguments are moved into the registers the table matches (OVN
// passes them in outport/inport, reg0 or xxreg0, and eth.src), the table
// sets its flags bit on a hit, and the bit is copied into the result.
// Unlike OVN, argument registers are not saved and restored around the
// lookup.
func (ac *actionCompiler) lookup(out []flow.Action, a *CallAction, result *FieldRef) ([]flow.Action, error) {
	lk, ok := ac.c.layout.Lookups[a.Name]
	if !ok {
		return nil, &UnsupportedError{Action: a.Name}
	}
	flags := ac.c.fieldRange("flags")
	bit := flow.FieldRange{Field: flags.Field, Ofs: flags.Ofs + uint(max(lk.Flag, 0)), Bits: 1}
	answers := result != nil && result.Sym.Kind != KindString && lk.Flag >= 0
	if answers {
		out = append(out, flow.Load{Dst: bit, Value: flow.U128{}})
	}
	// Destinations of the positional arguments by type: a port goes to
	// inport (or outport for get_*), an address to reg0/xxreg0, a MAC to
	// eth.src.
	for i, arg := range a.Args {
		if len(arg.Value) != 1 || arg.Key != "" {
			continue
		}
		tok := arg.Value[0]
		src := ac.c.symtab.Lookup(tok.Text)
		if tok.Kind != TokIdent || src == nil || src.Kind == KindPredicate {
			continue
		}
		var dstName string
		switch {
		case src.Kind == KindString:
			dstName = "inport"
			if a.Name == "get_arp" || a.Name == "get_nd" {
				dstName = "outport"
			}
		case src.Width == 32:
			dstName = "reg0"
		case src.Width == 128:
			dstName = "xxreg0"
		case src.Width == 48 && i > 0:
			dstName = "eth.src"
		default:
			continue
		}
		if dstName == src.Name {
			continue
		}
		srcRange := ac.c.rangeOf(FieldRef{Sym: src})
		out = append(out, flow.Move{Src: srcRange, Dst: ac.c.fieldRange(dstName)})
	}
	out = append(out, flow.Resubmit{Table: lk.Table})
	if answers {
		dst := ac.c.rangeOf(*result)
		src := bit
		if dst.Width() != 1 {
			// Multi-bit results (R = ct_snat_to_vip into a register):
			// widen the flag bit.
			out = append(out, flow.Load{Dst: dst, Value: flow.U128{}})
			dst.Bits = 1
		}
		out = append(out, flow.Move{Src: src, Dst: dst})
	}
	return out, nil
}

// natArgs reads "IP" or "IP, PORT-PORT" of ct_dnat/ct_snat.
func natArgs(n *flow.NAT, a *CallAction) error {
	toks := a.Args[0].Value
	if len(toks) == 0 || toks[0].Kind != TokInt {
		return fmt.Errorf("%s: expected an IP address", a.Name)
	}
	addr, err := tokAddr(toks[0])
	if err != nil {
		return fmt.Errorf("%s: %w", a.Name, err)
	}
	n.AddrMin, n.AddrMax = addr, addr
	if len(a.Args) > 1 {
		pr := a.Args[1].Value
		if len(pr) == 3 && pr[0].Kind == TokInt && pr[1].Kind == TokMinus && pr[2].Kind == TokInt {
			n.PortMin, n.PortMax = uint16(pr[0].Value.Lo), uint16(pr[2].Value.Lo)
		} else if len(pr) == 1 && pr[0].Kind == TokInt {
			n.PortMin, n.PortMax = uint16(pr[0].Value.Lo), uint16(pr[0].Value.Lo)
		}
	}
	return nil
}

func tokAddr(t ArgToken) (netip.Addr, error) {
	switch t.Format {
	case FmtIPv4:
		v := uint32(t.Value.Lo)
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
	case FmtIPv6:
		var b [16]byte
		for i := 0; i < 8; i++ {
			b[7-i] = byte(t.Value.Hi >> (8 * i))
			b[15-i] = byte(t.Value.Lo >> (8 * i))
		}
		return netip.AddrFrom16(b), nil
	}
	return netip.Addr{}, fmt.Errorf("%q is not an IP address", t.Text)
}

// ctLB compiles ct_lb/ct_lb_mark: without backends, established traffic
// goes through NAT; with them, a select group picks a backend and commits
// the connection with DNAT to it.
func (ac *actionCompiler) ctLB(out []flow.Action, a *CallAction, next uint8) ([]flow.Action, error) {
	zone := ac.portZone()
	var backends []flow.NAT
	var cur *flow.NAT
	inBackends, hashFields, forceSNAT, skipSNAT := false, false, false, false
	for _, arg := range a.Args {
		// "backends=a,b,c; hash_fields=...; force_snat": a ';' ends the
		// list of backends.
		if arg.Key != "" || arg.Sep == ';' {
			inBackends = arg.Key == "backends"
		}
		hashFields = hashFields || arg.Key == "hash_fields"
		if arg.Key == "" && len(arg.Value) == 1 && arg.Value[0].Kind == TokIdent {
			forceSNAT = forceSNAT || arg.Value[0].Text == "force_snat"
			skipSNAT = skipSNAT || arg.Value[0].Text == "skip_snat"
		}
		if !inBackends {
			continue
		}
		toks := arg.Value
		// [ipv6]:port, ipv4:port, or a bare address.
		if len(toks) >= 3 && toks[0].Kind == TokLSquare {
			toks = append([]ArgToken{toks[1]}, toks[3:]...)
		}
		if len(toks) == 0 || toks[0].Kind != TokInt {
			return nil, fmt.Errorf("%s: bad backend", a.Name)
		}
		addr, err := tokAddr(toks[0])
		if err != nil {
			return nil, fmt.Errorf("%s: backend: %w", a.Name, err)
		}
		backends = append(backends, flow.NAT{Dst: true, AddrMin: addr, AddrMax: addr})
		cur = &backends[len(backends)-1]
		if len(toks) == 3 && toks[1].Kind == TokColon && toks[2].Kind == TokInt {
			cur.PortMin, cur.PortMax = uint16(toks[2].Value.Lo), uint16(toks[2].Value.Lo)
		}
	}
	if len(backends) == 0 {
		return append(out, flow.CT{ZoneField: zone, Table: next, NAT: &flow.NAT{}}), nil
	}
	id := ac.ctx.NextGroupID
	ac.ctx.NextGroupID++
	g := flow.GroupDef{ID: id, Type: flow.GroupSelect, Method: flow.SelectHash}
	if hashFields {
		// OVN hashes the named header fields (selection_method=hash).
		g.Method = flow.Select5Tuple
	}
	// The committed connection is marked as NATed (ct_mark for ct_lb_mark,
	// ct_label for the older ct_lb), and with the load balancer's SNAT
	// choice.
	prefix := "ct_label."
	if a.Name == "ct_lb_mark" {
		prefix = "ct_mark."
	}
	var exec []flow.Action
	for _, bit := range []struct {
		name string
		set  bool
	}{{"natted", true}, {"force_snat", forceSNAT}, {"skip_snat", skipSNAT}} {
		if bit.set {
			exec = append(exec, flow.Load{Dst: ac.c.fieldRange(prefix + bit.name), Value: flow.U128{Lo: 1}})
		}
	}
	for i := range backends {
		nat := backends[i]
		ct := flow.CT{Commit: true, ZoneField: zone, Table: next, NAT: &nat, Exec: exec}
		g.Buckets = append(g.Buckets, flow.Bucket{Weight: 100, Actions: []flow.Action{ct}})
	}
	ac.res.Groups = append(ac.res.Groups, g)
	return append(out, flow.Group{ID: id}), nil
}

// selectGroup compiles R = select(v1[=w1], ...): a select group whose
// buckets load one value into R and go on to the next table.
func (ac *actionCompiler) selectGroup(out []flow.Action, a *CallAction, next uint8) ([]flow.Action, error) {
	dst := ac.c.rangeOf(*a.Result)
	id := ac.ctx.NextGroupID
	ac.ctx.NextGroupID++
	g := flow.GroupDef{ID: id, Type: flow.GroupSelect, Method: flow.SelectHash}
	for _, arg := range a.Args {
		valText, weight := arg.Key, uint64(100)
		if valText == "" {
			if len(arg.Value) != 1 || arg.Value[0].Kind != TokInt {
				return nil, fmt.Errorf("select: bad value")
			}
			valText = strconv.FormatUint(arg.Value[0].Value.Lo, 10)
		} else if len(arg.Value) == 1 && arg.Value[0].Kind == TokInt {
			weight = arg.Value[0].Value.Lo
		}
		v, err := strconv.ParseUint(valText, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("select: bad value %q", valText)
		}
		g.Buckets = append(g.Buckets, flow.Bucket{Weight: uint16(min(weight, 65535)), Actions: []flow.Action{
			flow.Load{Dst: dst, Value: flow.U128{Lo: v}}, flow.Resubmit{Table: next}}})
	}
	ac.res.Groups = append(ac.res.Groups, g)
	return append(out, flow.Group{ID: id}), nil
}
