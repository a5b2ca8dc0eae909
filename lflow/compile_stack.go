package lflow

import (
	"fmt"
	"strconv"

	"github.com/govn/govn/datapath/flow"
)

// argField reads a field argument, "reg0" or "reg0[8..15]" or "reg0[3]",
// of push(field) and pop(field).
func (c *Compiler) argField(name string, arg Arg) (FieldRef, error) {
	toks := arg.Value
	if arg.Key != "" || len(toks) == 0 || toks[0].Kind != TokIdent {
		return FieldRef{}, fmt.Errorf("%s: expected a field", name)
	}
	sym := c.symtab.Lookup(toks[0].Text)
	if sym == nil {
		return FieldRef{}, fmt.Errorf("%s: unknown field %s", name, toks[0].Text)
	}
	if sym.Kind == KindPredicate || sym.Field == nil {
		return FieldRef{}, fmt.Errorf("%s: %s is not a field", name, sym.Name)
	}
	if sym.OVNField {
		return FieldRef{}, fmt.Errorf("%s: %s can only be used inside actions the controller carries out", name, sym.Name)
	}
	r := FieldRef{Sym: sym}
	toks = toks[1:]
	if len(toks) == 0 {
		return r, nil
	}
	bad := fmt.Errorf("%s: bad subfield of %s", name, sym.Name)
	if len(toks) < 3 || toks[0].Kind != TokLSquare || toks[1].Kind != TokInt || toks[len(toks)-1].Kind != TokRSquare {
		return FieldRef{}, bad
	}
	lo, hi := toks[1].Value, toks[1].Value
	switch {
	case len(toks) == 3:
	case len(toks) == 5 && toks[2].Kind == TokEllipsis && toks[3].Kind == TokInt:
		hi = toks[3].Value
	default:
		return FieldRef{}, bad
	}
	if lo.Hi != 0 || hi.Hi != 0 || lo.Lo > hi.Lo || hi.Lo >= uint64(sym.Width) {
		return FieldRef{}, fmt.Errorf("%s: bit range [%d..%d] outside %s's %d bits", name, lo.Lo, hi.Lo, sym.Name, sym.Width)
	}
	r.Bits, r.Lo, r.Hi = true, int(lo.Lo), int(hi.Lo)
	return r, nil
}

// stackAction compiles push(field) and pop(field).
func (ac *actionCompiler) stackAction(out []flow.Action, a *CallAction) ([]flow.Action, error) {
	if len(a.Args) != 1 {
		return nil, fmt.Errorf("%s: expected one field, got %s arguments", a.Name, strconv.Itoa(len(a.Args)))
	}
	r, err := ac.c.argField(a.Name, a.Args[0])
	if err != nil {
		return nil, err
	}
	if a.Name == "push" {
		return append(out, flow.Push{Src: ac.c.rangeOf(r)}), nil
	}
	if err := checkWritable(r, scopePacket); err != nil {
		return nil, fmt.Errorf("pop: %w", err)
	}
	return append(out, flow.Pop{Dst: ac.c.rangeOf(r)}), nil
}

// exchange swaps two fields through the stack, as OVN does: push both,
// pop them in the same order.
func exchange(out []flow.Action, a, b flow.FieldRange) []flow.Action {
	return append(out, flow.Push{Src: a}, flow.Push{Src: b}, flow.Pop{Dst: a}, flow.Pop{Dst: b})
}

// checkPktLarger compiles R = check_pkt_larger(L): the datapath compares
// the frame's length with L and writes the answer into the one-bit R.
func (ac *actionCompiler) checkPktLarger(out []flow.Action, a *CallAction) ([]flow.Action, error) {
	if a.Result == nil {
		return nil, fmt.Errorf("check_pkt_larger: needs a result (R = check_pkt_larger(L))")
	}
	if len(a.Args) != 1 || a.Args[0].Key != "" || len(a.Args[0].Value) != 1 || a.Args[0].Value[0].Kind != TokInt {
		return nil, fmt.Errorf("check_pkt_larger: expected one length")
	}
	n := a.Args[0].Value[0].Value
	if n.Hi != 0 || n.Lo > 65535 {
		return nil, fmt.Errorf("check_pkt_larger: length %s out of range", a.Args[0].Value[0].Text)
	}
	dst := ac.c.rangeOf(*a.Result)
	if dst.Width() != 1 {
		return nil, fmt.Errorf("check_pkt_larger: result %s must be one bit", a.Result.Sym.Name)
	}
	return append(out, flow.CheckPktLarger{Len: uint16(n.Lo), Dst: dst}), nil
}

// setMeter compiles set_meter(rate[, burst]) (kbps, kilobits) to a
// flow.Meter: the datapath drops packets above the rate, and flows with the
// same arguments share the meter, as in OVN.
func (ac *actionCompiler) setMeter(out []flow.Action, a *CallAction) ([]flow.Action, error) {
	if a.Result != nil || len(a.Args) < 1 || len(a.Args) > 2 {
		return nil, fmt.Errorf("set_meter: expected set_meter(rate) or set_meter(rate, burst)")
	}
	var v [2]uint32
	for i, arg := range a.Args {
		if arg.Key != "" || len(arg.Value) != 1 || arg.Value[0].Kind != TokInt {
			return nil, fmt.Errorf("set_meter: argument %d must be an integer", i+1)
		}
		n := arg.Value[0].Value
		if n.Hi != 0 || n.Lo > 0xffffffff {
			return nil, fmt.Errorf("set_meter: %s out of range", arg.Value[0].Text)
		}
		v[i] = uint32(n.Lo)
	}
	if v[0] == 0 {
		return nil, fmt.Errorf("set_meter: rate must be nonzero")
	}
	return append(out, flow.Meter{RateKbps: v[0], BurstKbits: v[1]}), nil
}
