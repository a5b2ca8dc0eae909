package conntrack

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// State is the set of ct_state bits of ovs-fields(7).
type State uint32

// The ct_state bits, with OVS's values.
const (
	StateNew         State = 0x01
	StateEstablished State = 0x02
	StateRelated     State = 0x04
	StateReply       State = 0x08
	StateInvalid     State = 0x10
	StateTracked     State = 0x20
	StateSNAT        State = 0x40
	StateDNAT        State = 0x80
)

var stateNames = []struct {
	bit  State
	name string
}{
	{StateNew, "new"}, {StateEstablished, "est"}, {StateRelated, "rel"}, {StateReply, "rpl"},
	{StateInvalid, "inv"}, {StateTracked, "trk"}, {StateSNAT, "snat"}, {StateDNAT, "dnat"},
}

// String formats the state as OVS prints it, e.g. "+trk+est+rpl".
func (s State) String() string {
	if s == 0 {
		return "0"
	}
	var b strings.Builder
	for _, n := range stateNames {
		if s&n.bit != 0 {
			b.WriteString("+" + n.name)
		}
	}
	if rest := s &^ 0xff; rest != 0 {
		fmt.Fprintf(&b, "+%#x", uint32(rest))
	}
	return b.String()
}

// Label is a 128-bit ct_label; Hi holds the most significant bits.
type Label struct{ Hi, Lo uint64 }

// IsZero reports whether every bit of l is zero.
func (l Label) IsZero() bool { return l == Label{} }

// String formats l as one hexadecimal number, as OVS prints ct_label.
func (l Label) String() string {
	if l.Hi == 0 {
		return fmt.Sprintf("%#x", l.Lo)
	}
	return fmt.Sprintf("%#x%016x", l.Hi, l.Lo)
}

// Tuple is one direction of a connection. For TCP, UDP and SCTP the ports
// are the transport ports. For ICMP and ICMPv6, as OVS's ct_tp_src and
// ct_tp_dst have it, SrcPort is the ICMP type and DstPort the code, and
// ICMPID the echo (query) identifier. For other protocols all are zero.
type Tuple struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	ICMPID           uint16
	Proto            uint8
}

func isICMP(proto uint8) bool { return proto == protoICMP || proto == protoICMPv6 }

// String formats t as "proto,src=..,dst=..,sport=..,dport=..".
func (t Tuple) String() string {
	return protoName(t.Proto) + "," + t.fields()
}

// fields formats t's addresses and ports (ICMP: id, type, code) as OVS's
// dump-conntrack does.
func (t Tuple) fields() string {
	if isICMP(t.Proto) {
		return fmt.Sprintf("src=%s,dst=%s,id=%d,type=%d,code=%d", t.Src, t.Dst, t.ICMPID, t.SrcPort, t.DstPort)
	}
	return fmt.Sprintf("src=%s,dst=%s,sport=%d,dport=%d", t.Src, t.Dst, t.SrcPort, t.DstPort)
}

// Reverse returns the tuple of the opposite direction.
func (t Tuple) Reverse() Tuple {
	r := Tuple{Src: t.Dst, Dst: t.Src, SrcPort: t.DstPort, DstPort: t.SrcPort, Proto: t.Proto}
	if isICMP(t.Proto) {
		r.SrcPort = uint16(icmpReplyType(t.Proto, uint8(t.SrcPort)))
		r.DstPort = t.DstPort
		r.ICMPID = t.ICMPID
	}
	return r
}

// NATRange is the set of addresses and ports a translation chooses from.
// MaxAddr may be invalid (zero) to mean MinAddr only; MinPort 0 means keep
// the packet's port (falling back, for SNAT, to an ephemeral port when that
// collides, as OVS does).
type NATRange struct {
	MinAddr, MaxAddr netip.Addr
	MinPort, MaxPort uint16
}

// NAT asks for address translation. With both fields nil it is OVS's bare
// "nat": translate the packet as its connection was set up when committed.
// Src and Dst set up SNAT and DNAT for a new connection being committed
// (both may be set: DNAT and SNAT on one connection); on an existing
// connection they act as a bare nat.
type NAT struct {
	Src, Dst *NATRange
}

// HashFields chooses which fields of the original tuple pick a
// load-balancer backend.
type HashFields uint8

// Fields for LB.Hash; zero means the 5-tuple.
const (
	HashSrcAddr HashFields = 1 << iota
	HashDstAddr
	HashSrcPort
	HashDstPort
	HashProto
	Hash5Tuple = HashSrcAddr | HashDstAddr | HashSrcPort | HashDstPort | HashProto
)

// Backend is one load-balancer target; Port 0 keeps the packet's port.
type Backend struct {
	Addr netip.Addr
	Port uint16
}

// LB asks a commit of a new connection to pick one of Backends by a hash of
// the chosen fields and DNAT to it (like OVN's ct_lb). The choice is kept in
// the entry: later packets use bare NAT and reach the same backend.
type LB struct {
	Backends []Backend
	Hash     HashFields
}

// Params are the arguments of one ct() action.
type Params struct {
	Zone   uint16
	Commit bool
	// Force, with Commit, ends a connection seen in its reply direction and
	// commits a new one in this packet's direction.
	Force bool
	NAT   *NAT
	LB    *LB
	// Mark and Label are written into the connection on commit, only in the
	// bits set in their masks.
	Mark, MarkMask   uint32
	Label, LabelMask Label
	// PartialChecksum says the L4 checksum holds only the pseudo-header sum
	// (transmit offload); NAT then updates it accordingly.
	PartialChecksum bool
}

// Result is what the ct() action gives the pipeline.
type Result struct {
	State State
	Zone  uint16
	Mark  uint32
	Label Label
	// Orig is the connection's original-direction tuple (ct_nw_src,
	// ct_tp_dst, ...); valid when State has Tracked without Invalid and
	// the connection is committed or new.
	Orig Tuple
	// Backend is the index in LB.Backends of the connection's backend, or
	// -1.
	Backend int
	// Reason says why State is Invalid; zero otherwise.
	Reason Reason
}

// Reason explains an invalid state.
type Reason uint8

// Reasons for StateInvalid.
const (
	ReasonNone Reason = iota
	ReasonMalformed
	ReasonFragment
	ReasonUnsupported
	ReasonTCPFlags
	ReasonTCPWindow
	ReasonTCPState
	ReasonICMPNoConnection
	ReasonNATExhausted
	ReasonZoneLimit
	ReasonTableFull
	ReasonNATMismatch
	ReasonCollision
)

var reasonNames = [...]string{
	ReasonNone:             "",
	ReasonMalformed:        "malformed packet",
	ReasonFragment:         "IP fragment (reassemble before conntrack)",
	ReasonUnsupported:      "unsupported protocol message",
	ReasonTCPFlags:         "invalid TCP flag combination",
	ReasonTCPWindow:        "TCP segment outside the window",
	ReasonTCPState:         "TCP segment invalid in connection state",
	ReasonICMPNoConnection: "ICMP error for no tracked connection",
	ReasonNATExhausted:     "nat: no free address/port in the range",
	ReasonZoneLimit:        "zone connection limit reached",
	ReasonTableFull:        "connection table full",
	ReasonNATMismatch:      "nat: address family of range differs from packet",
	ReasonCollision:        "reply tuple already used by another connection",
}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Timeouts are the idle timeouts per protocol and state.
type Timeouts struct {
	TCPSynSent, TCPSynRecv, TCPEstablished, TCPFinWait, TCPTimeWait, TCPClose time.Duration
	UDPFirst, UDPSingle, UDPMultiple                                          time.Duration
	ICMPFirst, ICMPReply                                                      time.Duration
	OtherFirst, OtherSingle, OtherMultiple                                    time.Duration
}

// DefaultTimeouts are OVS userspace conntrack's defaults.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		TCPSynSent: 30 * time.Second, TCPSynRecv: 30 * time.Second,
		TCPEstablished: 24 * time.Hour, TCPFinWait: 15 * time.Minute,
		TCPTimeWait: 45 * time.Second, TCPClose: 30 * time.Second,
		UDPFirst: 60 * time.Second, UDPSingle: 60 * time.Second, UDPMultiple: 30 * time.Second,
		ICMPFirst: 60 * time.Second, ICMPReply: 30 * time.Second,
		OtherFirst: 60 * time.Second, OtherSingle: 60 * time.Second, OtherMultiple: 30 * time.Second,
	}
}

// Config configures a Tracker; the zero value gives default timeouts and no
// limits.
type Config struct {
	Timeouts *Timeouts // nil: DefaultTimeouts
	// MaxEntries bounds the entries of all zones together; 0: unbounded.
	MaxEntries int
	// DefaultZoneLimit bounds each zone without its own limit; 0: none.
	DefaultZoneLimit uint32
	// Liberal accepts TCP segments outside the window (like
	// nf_conntrack_tcp_be_liberal) instead of marking them invalid.
	Liberal bool
}

// Entry is one connection as Dump reports it.
type Entry struct {
	Zone        uint16
	Orig, Reply Tuple
	Mark        uint32
	Label       Label
	// ProtoState is the TCP state ("ESTABLISHED", "TIME_WAIT", ...) or,
	// for other protocols, "FIRST", "SINGLE" or "MULTIPLE".
	ProtoState string
	Expires    time.Duration // on the caller's clock
	SNAT, DNAT bool
}

// String formats e much as ovs-appctl dpctl/dump-conntrack does.
func (e Entry) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s,orig=(%s),reply=(%s),zone=%d", protoName(e.Orig.Proto), e.Orig.fields(), e.Reply.fields(), e.Zone)
	if e.Mark != 0 {
		fmt.Fprintf(&b, ",mark=%d", e.Mark)
	}
	if !e.Label.IsZero() {
		fmt.Fprintf(&b, ",labels=%s", e.Label)
	}
	fmt.Fprintf(&b, ",protoinfo=(state=%s)", e.ProtoState)
	return b.String()
}

// Stats are the Tracker's counters.
type Stats struct {
	Entries       int64 // committed connections in live zones
	Zones         int   // zones with a table
	PendingZones  int   // flushed zones not yet reclaimed
	Reclaimed     int64 // entries reclaimed after zone flushes
	ReclaimTime   time.Duration
	ReclaimSlices int64
	Expired       int64
}

func protoName(p uint8) string {
	switch p {
	case protoTCP:
		return "tcp"
	case protoUDP:
		return "udp"
	case protoICMP:
		return "icmp"
	case protoICMPv6:
		return "icmpv6"
	case protoSCTP:
		return "sctp"
	}
	return fmt.Sprintf("proto%d", p)
}
