package lflow

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/govn/govn/datapath/flow"
)

// actionCompiler compiles one flow's actions.
type actionCompiler struct {
	c        *Compiler
	ctx      *Context
	res      *Result
	pipeline string
	table    int
	// forceSNAT and skipSNAT: the actions so far set flags.force_snat_for_lb
	// or flags.skip_snat_for_lb to 1, which a following ct_lb_mark commits
	// into the connection's ct_mark (ovn-northd 23.03 writes the flag, not
	// ct_lb_mark's force_snat argument, and matches ct_mark.force_snat on
	// the connection's later packets).
	forceSNAT, skipSNAT bool
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
	if one := a.Value.Value.And(Ones(int(dst.Width()))) == (U128{Lo: 1}); one {
		switch a.Dst.Sym.Name {
		case "flags.force_snat_for_lb":
			ac.forceSNAT = true
		case "flags.skip_snat_for_lb":
			ac.skipSNAT = true
		}
	}
	// As in OVN, bits beyond the destination are dropped (reg0[0] = 2).
	return append(out, flow.Load{Dst: dst, Value: toFlow(a.Value.Value.And(Ones(int(dst.Width()))))}), nil
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
		return exchange(out, ac.c.rangeOf(a.A), ac.c.rangeOf(a.B)), nil
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
	case "push", "pop":
		return ac.stackAction(out, a)
	case "check_pkt_larger":
		return ac.checkPktLarger(out, a)
	case "commit_lb_aff":
		return ac.commitLBAff(out, a)
	case "set_meter":
		return ac.setMeter(out, a)
	case "set_queue":
		return nil, &UnsupportedError{Action: a.Name, Reason: "it has no QoS queues"}
	case "sample":
		return nil, &UnsupportedError{Action: a.Name, Reason: "it has no IPFIX sampling"}
	}
	return nil, &UnsupportedError{Action: a.Name}
}

// lookup compiles an action that consults one of OVN's fixed tables:
// the arguments are moved into the registers the table matches (OVN
// passes them in outport/inport, reg0 or xxreg0, and eth.src), the table
// sets its flags bit on a hit, and the bit is copied into the result.
// As in OVN, a register that receives an argument is pushed before and
// popped after the lookup, so the action changes nothing but its result.
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
	var saved []flow.FieldRange
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
		dst := ac.c.fieldRange(dstName)
		out = append(out, flow.Push{Src: dst}, flow.Move{Src: srcRange, Dst: dst})
		saved = append(saved, dst)
	}
	out = append(out, flow.Resubmit{Table: lk.Table})
	for i := len(saved) - 1; i >= 0; i-- {
		out = append(out, flow.Pop{Dst: saved[i]})
	}
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

// natArgs reads ct_dnat's and ct_snat's "IP" and optional ", PORT" or
// ", PORT-PORT" (ParseActions has checked them).
func natArgs(n *flow.NAT, a *CallAction) error {
	toks := a.Args[0].Value
	if len(toks) != 1 || toks[0].Kind != TokInt {
		return fmt.Errorf("%s: expected an IP address", a.Name)
	}
	var err error
	if n.AddrMin, err = tokAddr(toks[0]); err != nil {
		return fmt.Errorf("%s: %w", a.Name, err)
	}
	n.AddrMax = n.AddrMin
	if len(a.Args) > 1 {
		pr := a.Args[1].Value
		var lo, hi ArgToken
		switch {
		case len(pr) == 3 && pr[0].Kind == TokInt && pr[1].Kind == TokMinus && pr[2].Kind == TokInt:
			lo, hi = pr[0], pr[2]
		case len(pr) == 1 && pr[0].Kind == TokInt:
			lo, hi = pr[0], pr[0]
		default:
			return fmt.Errorf("%s: expected a port or a port range", a.Name)
		}
		if n.PortMin, err = tokPort(lo); err != nil {
			return fmt.Errorf("%s: %w", a.Name, err)
		}
		if n.PortMax, err = tokPort(hi); err != nil {
			return fmt.Errorf("%s: %w", a.Name, err)
		}
		if n.PortMin > n.PortMax {
			return fmt.Errorf("%s: port range %d-%d is backwards", a.Name, n.PortMin, n.PortMax)
		}
	}
	return nil
}

// tokPort reads a transport port number, rejecting values that do not fit
// in 16 bits rather than truncating them.
func tokPort(t ArgToken) (uint16, error) {
	if t.Value.Hi != 0 || t.Value.Lo > 65535 {
		return 0, fmt.Errorf("port %s is not in 0..65535", t.Text)
	}
	return uint16(t.Value.Lo), nil
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
		if !inBackends || len(arg.Value) == 0 {
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
			port, err := tokPort(toks[2])
			if err != nil {
				return nil, fmt.Errorf("%s: backend: %w", a.Name, err)
			}
			cur.PortMin, cur.PortMax = port, port
		}
	}
	if len(backends) == 0 {
		return append(out, flow.CT{ZoneField: zone, Table: next, NAT: &flow.NAT{}}), nil
	}
	forceSNAT, skipSNAT = forceSNAT || ac.forceSNAT, skipSNAT || ac.skipSNAT
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
