package flow

import (
	"fmt"
	"strings"
)

// DPAction is a datapath action: what a megaflow does to a packet. The
// translation of a rule pipeline yields a list of them; the fast path runs
// them without looking at flow tables.
type DPAction interface {
	fmt.Stringer
	isDPAction()
}

// DPOutput sends the packet to a port. A tunnel port encapsulates using the
// packet's tunnel fields (tun_id, tun_dst, tun_metadata0 ...), which earlier
// DPSetField actions set.
type DPOutput struct{ Port uint32 }

// DPSetField rewrites the bits of a packet field selected by Mask to Value
// (both in the field's own bit space), in the packet and in its key.
type DPSetField struct {
	Field       Field
	Value, Mask U128
}

// DPPushVLAN pushes a VLAN header.
type DPPushVLAN struct{ TPID, TCI uint16 }

// DPPopVLAN pops the outermost VLAN header.
type DPPopVLAN struct{}

// DPCT runs the packet through conntrack in Zone.
type DPCT struct {
	Zone      uint16
	Commit    bool
	Force     bool
	NAT       *NAT
	Mark      uint32 // with MarkMask: set ct_mark bits on commit
	MarkMask  uint32
	Label     U128 // with LabelMask: set ct_label bits on commit
	LabelMask U128
}

// DPCTClear clears the packet's conntrack state.
type DPCTClear struct{}

// DPRecirc re-injects the packet with recirc_id = ID; a new lookup follows.
type DPRecirc struct{ ID uint32 }

// DPHashL4 computes dp_hash over the packet's 5-tuple with Basis.
type DPHashL4 struct{ Basis uint32 }

// DPUserspace sends the packet to the controller's packet-in channel.
// Like an OpenFlow packet-in, it carries the pipeline's state where the
// controller action ran, which no datapath key holds: the table of its
// rule and the metadata and registers (Meta's pipeline-only fields; the
// rest of Meta is unused). A paused action also carries its
// continuation.
type DPUserspace struct {
	UserData []byte
	Table    uint8
	Meta     Key
	Cont     *Continuation
}

// Continuation is what a pipeline paused by a controller action would have
// run next: the rest of the actions of the paused rule, then the rest of
// the action lists that resubmitted to it, innermost first, all in the
// context of table Table; and the push/pop stack (bottom first). The
// controller resumes the packet with it (and its registers, updated with
// the action's result).
type Continuation struct {
	Table   uint8
	Actions []Action
	Stack   []U128
}

func (c *Continuation) String() string {
	s := fmt.Sprintf("table=%d,actions=%s", c.Table, ActionsString(c.Actions))
	for _, v := range c.Stack {
		s += ",stack=" + FormatValue(XXReg0, v, OnesU128(128))
	}
	return s
}

// DPClone runs Actions on a copy of the packet.
type DPClone struct{ Actions []DPAction }

// DPMeter drops the packet if it exceeds the meter of this rate and
// burst (Meter).
type DPMeter struct{ RateKbps, BurstKbits uint32 }

func (DPMeter) isDPAction()     {}
func (DPOutput) isDPAction()    {}
func (DPSetField) isDPAction()  {}
func (DPPushVLAN) isDPAction()  {}
func (DPPopVLAN) isDPAction()   {}
func (DPCT) isDPAction()        {}
func (DPCTClear) isDPAction()   {}
func (DPRecirc) isDPAction()    {}
func (DPHashL4) isDPAction()    {}
func (DPUserspace) isDPAction() {}
func (DPClone) isDPAction()     {}

func (a DPOutput) String() string { return fmt.Sprintf("%d", a.Port) }
func (a DPSetField) String() string {
	return fmt.Sprintf("set(%s=%s)", a.Field, FormatValue(a.Field, a.Value, a.Mask))
}
func (a DPPushVLAN) String() string {
	return fmt.Sprintf("push_vlan(tpid=0x%04x,tci=0x%04x)", a.TPID, a.TCI)
}
func (DPPopVLAN) String() string { return "pop_vlan" }
func (a DPCT) String() string {
	p := []string{fmt.Sprintf("zone=%d", a.Zone)}
	if a.Commit {
		p = append([]string{"commit"}, p...)
	}
	if a.Force {
		p = append(p, "force")
	}
	if a.MarkMask != 0 {
		p = append(p, fmt.Sprintf("mark=0x%x/0x%x", a.Mark, a.MarkMask))
	}
	if !a.LabelMask.IsZero() {
		p = append(p, "label="+FormatValue(CTLabel, a.Label, a.LabelMask))
	}
	if a.NAT != nil {
		p = append(p, a.NAT.String())
	}
	return "ct(" + strings.Join(p, ",") + ")"
}
func (DPCTClear) String() string { return "ct_clear" }
func (a DPMeter) String() string {
	return fmt.Sprintf("meter(rate=%d,burst=%d)", a.RateKbps, a.BurstKbits)
}
func (a DPRecirc) String() string { return fmt.Sprintf("recirc(0x%x)", a.ID) }
func (a DPHashL4) String() string { return fmt.Sprintf("hash(l4(%d))", a.Basis) }
func (a DPUserspace) String() string {
	s := fmt.Sprintf("userspace(userdata=%x", a.UserData)
	if a.Table != 0 {
		s += fmt.Sprintf(",table=%d", a.Table)
	}
	if m := a.Meta.PipelineString(); m != "" {
		s += "," + m
	}
	if a.Cont != nil {
		s += ",pause(" + a.Cont.String() + ")"
	}
	return s + ")"
}
func (a DPClone) String() string { return "clone(" + DPActionsString(a.Actions) + ")" }

// DPActionsString formats datapath actions as ovs-appctl dpctl/dump-flows
// does; the empty list is "drop".
func DPActionsString(as []DPAction) string { return joinActions(as) }
