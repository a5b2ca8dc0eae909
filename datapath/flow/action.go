package flow

import (
	"fmt"
	"net/netip"
	"strings"
)

// Action is one action of a flow-table rule (OpenFlow-style). The concrete
// types are the exported structs in this file; a rule's actions run in order.
type Action interface {
	fmt.Stringer
	isAction()
}

// Special port numbers for Output.
const (
	// PortInPort outputs the packet back to the port it came in on; a plain
	// output to in_port is dropped, as in OpenFlow.
	PortInPort uint32 = 0xfffffff8
	// PortNone is "no port".
	PortNone uint32 = 0xffffffff
)

// NumTables is the number of flow tables (0..254); table 255 is not a table.
const NumTables = 255

// Output sends the packet to a port. If PortField is set (Field != 0) the
// port number is read from it when the action runs ("output:reg15").
type Output struct {
	Port      uint32
	PortField FieldRange
}

// Load writes a constant into a field or subfield (set_field / load).
type Load struct {
	Dst   FieldRange
	Value U128 // in Dst's own bit space (bit 0 is Dst's bit Ofs)
}

// Move copies Src into Dst; both ranges have the same width. Reading Src
// makes the megaflow match Src's bits.
type Move struct {
	Src, Dst FieldRange
}

// Resubmit runs the packet through Table, then continues with the next
// action. A missing match in Table does nothing.
type Resubmit struct {
	Table uint8
}

// GotoTable continues processing in Table after this rule's actions. It
// must be the last action of a list.
type GotoTable struct {
	Table uint8
}

// CTNoTable in CT.Table means "do not recirculate": the packet goes on
// through the current actions without conntrack's verdict.
const CTNoTable uint8 = 255

// CT sends the packet through connection tracking in a zone. With Table set
// (not CTNoTable) processing continues, after conntrack, in that table with
// the ct_* fields filled in; this ends the megaflow (a recirculation).
type CT struct {
	Zone      uint16     // zone, unless ZoneField is set
	ZoneField FieldRange // zone read from a field (e.g. reg13[0..15])
	Commit    bool       // create a connection entry if none
	Force     bool       // with Commit: replace an entry in the other direction
	Table     uint8      // table to continue in, or CTNoTable
	NAT       *NAT       // network address translation, nil for none
	Exec      []Action   // Load/Move into ct_mark and ct_label, for a commit
}

// NAT describes ct(nat...). With neither Src nor Dst, existing
// connections' translation is applied ("ct(nat)").
type NAT struct {
	Src, Dst         bool       // kind: snat or dnat
	AddrMin, AddrMax netip.Addr // address range; zero means keep
	PortMin, PortMax uint16     // port range; zero means keep
	Random           bool       // random port selection
	Persistent       bool
}

// CTClear clears all conntrack state from the packet (ct_state=0 ...).
type CTClear struct{}

// Clone runs Actions on a copy of the packet; changes inside it do not affect
// what follows.
type Clone struct {
	Actions []Action
}

// Drop stops processing; it must be the only action.
type Drop struct{}

// Controller sends the packet to the controller's packet-in channel with
// UserData (OVN's pinctrl opcodes live in it).
type Controller struct {
	UserData []byte
	Pause    bool // continuation: stop processing the packet here
}

// PushVLAN pushes a VLAN header with TPID 0x8100 or 0x88a8; set vlan_tci
// afterwards to give it an ID.
type PushVLAN struct {
	TPID uint16
}

// PopVLAN removes the outermost VLAN header.
type PopVLAN struct{}

// DecTTL decrements the IP TTL / hop limit; a packet whose TTL would reach
// zero stops here (sent to the controller, if ToController).
type DecTTL struct {
	ToController bool
}

// Group runs the packet through a group (select groups pick one bucket).
type Group struct {
	ID uint32
}

// Conjunction marks a rule as one clause of a conjunctive match: the packet
// matches conjunction ID when, at one priority, for every clause 1..NClauses
// some rule with that clause matches. Then the rule that matches
// conj_id=ID in the same table runs. A rule with Conjunction actions must have
// no other kind of action.
type Conjunction struct {
	ID       uint32
	Clause   uint8 // k, 1-based
	NClauses uint8 // n, 2..64
}

// Exit stops processing the packet's actions (no further resubmits run).
type Exit struct{}

// Push pushes the bits of Src onto the translation's stack (OpenFlow's
// push:field[range]). Reading Src makes the megaflow match a packet
// field's bits, as Move does.
type Push struct {
	Src FieldRange
}

// Pop pops the top of the stack into Dst (pop:field[range]); its low
// Dst.Width() bits are written. Pop on an empty stack does nothing. The
// stack belongs to one translation: it is empty at table 0, survives
// resubmits and recirculation, and a Clone's changes to it are undone at
// the end of the clone.
type Pop struct {
	Dst FieldRange
}

// CheckPktLarger writes 1 to the one-bit Dst if the packet is longer
// than Len bytes, and 0 otherwise (OVS's check_pkt_larger). The length is
// the Ethernet frame's (pkt_len, which packet.Extract fills in), adjusted
// for VLAN headers pushed or popped earlier in the translation.
type CheckPktLarger struct {
	Len uint16
	Dst FieldRange
}

// Meter rate-limits the packet: packets above RateKbps (with a bucket of
// BurstKbits) are dropped. Flows with the same rate and burst share one
// meter, as OVN's set_meter actions with the same arguments do.
type Meter struct {
	RateKbps   uint32
	BurstKbits uint32 // 0: one second's worth of the rate
}

func (Meter) isAction()          {}
func (Output) isAction()         {}
func (Load) isAction()           {}
func (Move) isAction()           {}
func (Resubmit) isAction()       {}
func (GotoTable) isAction()      {}
func (CT) isAction()             {}
func (CTClear) isAction()        {}
func (Clone) isAction()          {}
func (Drop) isAction()           {}
func (Controller) isAction()     {}
func (PushVLAN) isAction()       {}
func (PopVLAN) isAction()        {}
func (DecTTL) isAction()         {}
func (Group) isAction()          {}
func (Conjunction) isAction()    {}
func (Exit) isAction()           {}
func (Push) isAction()           {}
func (Pop) isAction()            {}
func (CheckPktLarger) isAction() {}

func (a Output) String() string {
	if a.PortField.Field.Valid() {
		return "output:" + a.PortField.String()
	}
	if a.Port == PortInPort {
		return "in_port"
	}
	return fmt.Sprintf("output:%d", a.Port)
}

func (a Load) String() string {
	if a.Dst.Ofs == 0 && a.Dst.Width() == a.Dst.Field.Bits() {
		v := FormatValue(a.Dst.Field, a.Value, fieldOnes(a.Dst.Field))
		if strings.ContainsAny(v, ".:") {
			// An address: ovs-ofctl reads load's value as an
			// integer (and "10.0.0.1" as 10), set_field's as
			// the field's own syntax.
			return fmt.Sprintf("set_field:%s->%s", v, a.Dst)
		}
		return fmt.Sprintf("load:%s->%s", v, a.Dst)
	}
	// A subfield's value is written in the subfield's own bit space.
	return fmt.Sprintf("load:%s->%s", hexU128(a.Value), a.Dst)
}

func hexU128(v U128) string {
	if v.Hi != 0 {
		return fmt.Sprintf("0x%x%016x", v.Hi, v.Lo)
	}
	return fmt.Sprintf("0x%x", v.Lo)
}

func (a Move) String() string { return fmt.Sprintf("move:%s->%s", a.Src, a.Dst) }

func (a Resubmit) String() string { return fmt.Sprintf("resubmit(,%d)", a.Table) }

func (a GotoTable) String() string { return fmt.Sprintf("goto_table:%d", a.Table) }

func (a CT) String() string {
	var p []string
	if a.Commit {
		p = append(p, "commit")
	}
	if a.Force {
		p = append(p, "force")
	}
	if a.ZoneField.Field.Valid() {
		p = append(p, "zone="+a.ZoneField.String())
	} else {
		p = append(p, fmt.Sprintf("zone=%d", a.Zone))
	}
	if a.Table != CTNoTable {
		p = append(p, fmt.Sprintf("table=%d", a.Table))
	}
	if a.NAT != nil {
		p = append(p, a.NAT.String())
	}
	if len(a.Exec) > 0 {
		p = append(p, "exec("+ActionsString(a.Exec)+")")
	}
	return "ct(" + strings.Join(p, ",") + ")"
}

func (n NAT) String() string {
	s := "nat"
	switch {
	case n.Src:
		s += "(src"
	case n.Dst:
		s += "(dst"
	default:
		return s
	}
	if n.AddrMin.IsValid() {
		bracket := n.AddrMin.Is6() && n.PortMin != 0
		s += "="
		if bracket {
			s += "["
		}
		s += n.AddrMin.String()
		if n.AddrMax.IsValid() && n.AddrMax != n.AddrMin {
			s += "-" + n.AddrMax.String()
		}
		if bracket {
			s += "]"
		}
		if n.PortMin != 0 {
			s += fmt.Sprintf(":%d", n.PortMin)
			if n.PortMax != 0 && n.PortMax != n.PortMin {
				s += fmt.Sprintf("-%d", n.PortMax)
			}
		}
	}
	if n.Random {
		s += ",random"
	}
	if n.Persistent {
		s += ",persistent"
	}
	return s + ")"
}

func (CTClear) String() string { return "ct_clear" }

func (a Clone) String() string { return "clone(" + ActionsString(a.Actions) + ")" }

func (Drop) String() string { return "drop" }

func (a Controller) String() string {
	s := "controller("
	if a.Pause {
		s += "pause,"
	}
	ud := make([]string, len(a.UserData))
	for i, b := range a.UserData {
		ud[i] = fmt.Sprintf("%02x", b)
	}
	return s + "userdata=" + strings.Join(ud, ".") + ")"
}

func (a PushVLAN) String() string { return fmt.Sprintf("push_vlan:0x%04x", a.TPID) }

func (PopVLAN) String() string { return "pop_vlan" }

func (DecTTL) String() string { return "dec_ttl" }

func (a Meter) String() string {
	return fmt.Sprintf("meter(rate=%d,burst=%d)", a.RateKbps, a.BurstKbits)
}

func (a Group) String() string { return fmt.Sprintf("group:%d", a.ID) }

func (a Conjunction) String() string {
	return fmt.Sprintf("conjunction(%d,%d/%d)", a.ID, a.Clause, a.NClauses)
}

func (Exit) String() string { return "exit" }

func (a Push) String() string { return "push:" + a.Src.String() }

func (a Pop) String() string { return "pop:" + a.Dst.String() }

func (a CheckPktLarger) String() string {
	return fmt.Sprintf("check_pkt_larger(%d)->%s", a.Len, a.Dst)
}

// ActionsString formats a list of actions as OVS does, comma-separated;
// the empty list is "drop".
func ActionsString(as []Action) string { return joinActions(as) }

// joinActions formats a list of rule or datapath actions, comma-separated,
// with "drop" for the empty list: both have that form in OVS.
func joinActions[A fmt.Stringer](as []A) string {
	if len(as) == 0 {
		return "drop"
	}
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// ValidateActions checks a rule's action list: ranges fit their fields,
// moves have equal widths, goto_table is last and goes forward from table,
// drop and conjunction stand alone.
func ValidateActions(table uint8, as []Action) error { return validateActions(table, as, false) }

// ReadOnly reports whether actions may not write f: conntrack results
// (ct_mark and ct_label are set only through ct(exec(...))), recirc_id,
// dp_hash, conj_id, and the derived fields eth_type, nw_proto, nw_frag,
// tcp_flags and pkt_len.
func (f Field) ReadOnly() bool {
	switch f {
	case RecircID, DPHash, ConjID, CTState, CTZone, CTMark, CTLabel, CTNWProto, CTNWSrc, CTNWDst,
		CTTPSrc, CTTPDst, CTIPv6Src, CTIPv6Dst, EthType, NWProto, NWFrag, TCPFlags, PktLen:
		return true
	}
	return false
}

func writable(dst FieldRange, inCTExec bool) error {
	if inCTExec && (dst.Field == CTMark || dst.Field == CTLabel) {
		return nil
	}
	if dst.Field.Valid() && dst.Field.ReadOnly() {
		return fmt.Errorf("%s is read-only", dst.Field)
	}
	return nil
}

func validateActions(table uint8, as []Action, inCTExec bool) error {
	nConj := 0
	for i, a := range as {
		var err error
		switch a := a.(type) {
		case Output:
			if a.PortField.Field.Valid() {
				err = a.PortField.Validate()
			}
		case Load:
			err = a.Dst.Validate()
			if err == nil && !a.Value.AndNot(OnesU128(a.Dst.Width())).IsZero() {
				err = fmt.Errorf("value does not fit %s", a.Dst)
			}
			if err == nil {
				err = writable(a.Dst, inCTExec)
			}
		case Move:
			if err = a.Src.Validate(); err == nil {
				err = a.Dst.Validate()
			}
			if err == nil {
				err = writable(a.Dst, inCTExec)
			}
			if err == nil && a.Src.Width() != a.Dst.Width() {
				err = fmt.Errorf("move %s->%s: widths differ", a.Src, a.Dst)
			}
		case Learn:
			err = validateLearn(table, a)
		case Push:
			err = a.Src.Validate()
		case Pop:
			if err = a.Dst.Validate(); err == nil {
				err = writable(a.Dst, inCTExec)
			}
		case CheckPktLarger:
			if err = a.Dst.Validate(); err == nil {
				err = writable(a.Dst, inCTExec)
			}
			if err == nil && a.Dst.Width() != 1 {
				err = fmt.Errorf("check_pkt_larger: %s is not one bit", a.Dst)
			}
		case Resubmit:
			if a.Table >= NumTables {
				err = fmt.Errorf("table %d out of range", a.Table)
			}
		case GotoTable:
			switch {
			case i != len(as)-1:
				err = fmt.Errorf("goto_table must be the last action")
			case a.Table <= table || a.Table >= NumTables:
				err = fmt.Errorf("goto_table:%d from table %d must go forward", a.Table, table)
			}
		case CT:
			if a.ZoneField.Field.Valid() {
				err = a.ZoneField.Validate()
			}
			for _, e := range a.Exec {
				var dst FieldRange
				switch e := e.(type) {
				case Load:
					dst = e.Dst
				case Move:
					dst = e.Dst
				default:
					return fmt.Errorf("action %d: ct exec allows only load/move, not %s", i, e)
				}
				if dst.Field != CTMark && dst.Field != CTLabel {
					return fmt.Errorf("action %d: ct exec may set only ct_mark and ct_label, not %s", i, dst)
				}
			}
			if err == nil {
				err = validateActions(table, a.Exec, true)
			}
		case Clone:
			err = validateActions(table, a.Actions, inCTExec)
		case Drop:
			if len(as) != 1 {
				err = fmt.Errorf("drop must be the only action")
			}
		case PushVLAN:
			if a.TPID != 0x8100 && a.TPID != 0x88a8 {
				err = fmt.Errorf("push_vlan: bad TPID 0x%x", a.TPID)
			}
		case Conjunction:
			nConj++
			if a.NClauses < 2 || a.NClauses > 64 || a.Clause < 1 || a.Clause > a.NClauses {
				err = fmt.Errorf("conjunction(%d,%d/%d): bad clause", a.ID, a.Clause, a.NClauses)
			}
		case nil:
			err = fmt.Errorf("nil action")
		}
		if err != nil {
			return fmt.Errorf("action %d (%v): %w", i, as[i], err)
		}
	}
	if nConj > 0 && nConj != len(as) {
		return fmt.Errorf("conjunction actions cannot be mixed with other actions")
	}
	return nil
}
