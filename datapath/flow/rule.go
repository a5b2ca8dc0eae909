package flow

import "fmt"

// Rule is one flow-table entry. Within a table the highest Priority among
// matching rules wins; two overlapping rules of equal priority are the
// programmer's error and one of them wins arbitrarily but consistently.
type Rule struct {
	Table    uint8
	Priority uint16
	Match    Match
	Actions  []Action
	Cookie   uint64 // opaque to the datapath; OVN puts the lflow UUID prefix here
	// Stats counts the packets that ran the rule. The tables holding the
	// rule set it when it is installed (whatever it was), so copies of an
	// installed rule share its counter; it is nil on a rule not installed.
	Stats *PacketCounter
}

// String formats r like ovs-ofctl dump-flows.
func (r *Rule) String() string {
	m := r.Match.String()
	if m != "" {
		m += ","
	}
	return fmt.Sprintf("cookie=0x%x, table=%d, priority=%d,%s actions=%s",
		r.Cookie, r.Table, r.Priority, m, ActionsString(r.Actions))
}

// DumpString formats r like ovs-ofctl dump-flows, with its packet and
// byte counts (zero for a rule without Stats).
func (r *Rule) DumpString() string {
	m := r.Match.String()
	if m != "" {
		m = "," + m
	}
	return fmt.Sprintf("cookie=0x%x, table=%d, n_packets=%d, n_bytes=%d, priority=%d%s actions=%s",
		r.Cookie, r.Table, r.Stats.Packets(), r.Stats.Bytes(), r.Priority, m, ActionsString(r.Actions))
}

// IsConjunctive reports whether r is a conjunction clause.
func (r *Rule) IsConjunctive() bool {
	if len(r.Actions) == 0 {
		return false
	}
	_, ok := r.Actions[0].(Conjunction)
	return ok
}

// Validate checks r's table and actions.
func (r *Rule) Validate() error {
	if r.Table >= NumTables {
		return fmt.Errorf("table %d out of range", r.Table)
	}
	return ValidateActions(r.Table, r.Actions)
}

// GroupType selects how a group uses its buckets.
type GroupType uint8

const (
	// GroupSelect runs one bucket chosen by a hash of the packet.
	GroupSelect GroupType = iota
	// GroupAll runs every bucket on a copy of the packet.
	GroupAll
)

// SelectionMethod chooses what a select group hashes.
type SelectionMethod uint8

const (
	// SelectHash hashes in the datapath (dp_hash, recirculating): the
	// megaflow does not match the packet's 5-tuple.
	SelectHash SelectionMethod = iota
	// Select5Tuple hashes the 5-tuple at translation time: the megaflow
	// matches the 5-tuple exactly.
	Select5Tuple
)

// Bucket is one choice of a group.
type Bucket struct {
	Weight  uint16 // relative weight for select groups; 0 is never chosen
	Actions []Action
}

// GroupDef defines a group.
type GroupDef struct {
	ID      uint32
	Type    GroupType
	Method  SelectionMethod
	Buckets []Bucket
}

// OpKind is what a bundle operation does.
type OpKind uint8

const (
	// OpAdd adds a rule, replacing one with the same table, priority and
	// match. The rule counts packets from zero, even in place of another
	// (as ovs-ofctl add-flow's OpenFlow 1.0 add does in Open vSwitch).
	OpAdd OpKind = iota
	// OpModify replaces the actions and cookie of the rule with the same
	// table, priority and match, keeping its packet counts; it fails if
	// there is none.
	OpModify
	// OpDelete deletes the rule with the same table, priority and match
	// (a rule added later starts counting from zero);
	// deleting a missing rule is not an error (idempotent).
	OpDelete
	// OpDeleteCookie deletes every rule, in every table, whose cookie
	// agrees with Rule.Cookie on CookieMask.
	OpDeleteCookie
	// OpAddGroup adds or replaces a group.
	OpAddGroup
	// OpDeleteGroup deletes a group.
	OpDeleteGroup
	// OpDeleteAll removes every rule and group.
	OpDeleteAll
)

// Op is one operation of a Bundle.
type Op struct {
	Kind       OpKind
	Rule       Rule
	CookieMask uint64
	Group      GroupDef
}

// Bundle is a list of operations applied atomically: translation sees the
// tables either before or after the whole bundle, and a bundle with an
// invalid operation changes nothing.
type Bundle struct {
	Ops []Op
}

// Add appends an OpAdd.
func (b *Bundle) Add(r Rule) { b.Ops = append(b.Ops, Op{Kind: OpAdd, Rule: r}) }

// Modify appends an OpModify.
func (b *Bundle) Modify(r Rule) { b.Ops = append(b.Ops, Op{Kind: OpModify, Rule: r}) }

// Delete appends an OpDelete of the rule with r's table, priority and match.
func (b *Bundle) Delete(r Rule) { b.Ops = append(b.Ops, Op{Kind: OpDelete, Rule: r}) }

// DeleteCookie appends an OpDeleteCookie.
func (b *Bundle) DeleteCookie(cookie, mask uint64) {
	b.Ops = append(b.Ops, Op{Kind: OpDeleteCookie, Rule: Rule{Cookie: cookie}, CookieMask: mask})
}

// AddGroup appends an OpAddGroup.
func (b *Bundle) AddGroup(g GroupDef) { b.Ops = append(b.Ops, Op{Kind: OpAddGroup, Group: g}) }

// DeleteGroup appends an OpDeleteGroup.
func (b *Bundle) DeleteGroup(id uint32) {
	b.Ops = append(b.Ops, Op{Kind: OpDeleteGroup, Group: GroupDef{ID: id}})
}

// Programmer is what the controller programs: flow tables that take bundles.
// Apply returns the generation the tables reached; every change bumps it.
type Programmer interface {
	Apply(b Bundle) (generation uint64, err error)
	Generation() uint64
}

// TableSet is a set of table numbers.
type TableSet [4]uint64

// Add adds table t.
func (s *TableSet) Add(t uint8) { s[t/64] |= 1 << (t % 64) }

// Has reports whether t is in s.
func (s *TableSet) Has(t uint8) bool { return s[t/64]&(1<<(t%64)) != 0 }

// Intersects reports whether s and o share a table.
func (s *TableSet) Intersects(o *TableSet) bool {
	return s[0]&o[0]|s[1]&o[1]|s[2]&o[2]|s[3]&o[3] != 0
}
