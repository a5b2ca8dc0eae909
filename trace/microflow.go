package trace

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/lflow"
)

// Microflow is one packet described as ovn-trace describes it: a match
// in the logical flow language that pins down every field it names
// (inport == "vm1" && eth.src == ... && tcp.dst == 80).
type Microflow struct {
	// Inport is the logical port the packet enters from.
	Inport string
	// Key holds the packet's header fields (in_port is left zero: the
	// port number depends on the chassis).
	Key flow.Key
	// Given is the mask of the fields the expression set, Defaults the
	// fields Parse filled in because a packet needs them (a TTL of 64, a
	// TCP SYN, an echo request), each as "field=value".
	Given    flow.Mask
	Defaults []string
}

// noEnv is the Env of a microflow: no address sets, port groups or
// residency (a microflow names a packet, not a set of them).
type noEnv struct{}

func (noEnv) AddressSet(string) ([]lflow.Const, bool) { return nil, false }
func (noEnv) PortGroup(string) ([]string, bool)       { return nil, false }
func (noEnv) PortKey(string) (uint32, bool)           { return 0, false }
func (noEnv) ChassisResident(string) bool             { return false }

// ParseMicroflow parses a microflow expression with st. The expression
// must be a conjunction of equality tests that leaves one packet after
// normalization (prerequisites included): "tcp.dst == 80" alone is refused
// (IPv4 or IPv6?), "ip4 && tcp.dst == 80" is not. It must name inport;
// it may not name pipeline state (registers, flags, outport, conntrack
// fields), which the pipeline computes.
func ParseMicroflow(st *lflow.Symtab, s string) (*Microflow, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("microflow: empty expression")
	}
	e, err := st.ParseExpr(s)
	if err != nil {
		return nil, fmt.Errorf("microflow %q: %w", s, err)
	}
	n, err := st.Normalize(e, noEnv{})
	if err != nil {
		return nil, fmt.Errorf("microflow %q: %w", s, err)
	}
	switch len(n) {
	case 0:
		return nil, fmt.Errorf("microflow %q: no packet matches it", s)
	case 1:
	default:
		return nil, fmt.Errorf("microflow %q: matches more than one kind of packet (%s); add what tells them apart (ip4 or ip6, say)", s, n.String())
	}
	m := &Microflow{}
	for _, c := range n[0] {
		if err := m.set(&c); err != nil {
			return nil, fmt.Errorf("microflow %q: %w", s, err)
		}
	}
	if m.Inport == "" {
		return nil, fmt.Errorf("microflow %q: say where the packet comes from (inport == \"PORT\")", s)
	}
	m.fillDefaults()
	return m, nil
}

// set applies one clause of the normal form.
func (m *Microflow) set(c *lflow.Clause) error {
	sym := c.Field
	if sym.Kind == lflow.KindString {
		if sym.Name != "inport" {
			return fmt.Errorf("%s is computed by the pipeline; a microflow names only inport", sym.Name)
		}
		if len(c.Ports) != 1 || len(c.Alts) != 0 {
			return fmt.Errorf("inport must be one port, not %d", c.Len())
		}
		m.Inport = c.Ports[0]
		return nil
	}
	if len(c.Alts) != 1 {
		return fmt.Errorf("%s must have one value, not %d (a microflow is one packet: say ip4 or ip6, tcp or udp ...)", sym.Name, len(c.Alts))
	}
	f, ok := flow.FieldByName(sym.DP)
	if !ok {
		return fmt.Errorf("%s: no datapath field %q", sym.Name, sym.DP)
	}
	if f.PipelineOnly() || isCTField(f) || f == flow.InPort || f == flow.PktLen {
		return fmt.Errorf("%s is pipeline or connection-tracking state, which the pipeline computes; a microflow names packet fields", sym.Name)
	}
	a := c.Alts[0]
	v := flow.U128{Hi: a.Value.Hi, Lo: a.Value.Lo}
	mask := flow.U128{Hi: a.Mask.Hi, Lo: a.Mask.Lo}
	if sym.DPOfs != 0 {
		v, mask = shl(v, sym.DPOfs), shl(mask, sym.DPOfs)
	}
	m.Key.SetMasked(f, v, mask)
	m.Given.SetBits(f, mask)
	return nil
}

func shl(v flow.U128, n int) flow.U128 {
	switch {
	case n >= 128:
		return flow.U128{}
	case n >= 64:
		return flow.U128{Hi: v.Lo << (n - 64)}
	case n == 0:
		return v
	}
	return flow.U128{Hi: v.Hi<<n | v.Lo>>(64-n), Lo: v.Lo << n}
}

func isCTField(f flow.Field) bool {
	switch f {
	case flow.CTState, flow.CTZone, flow.CTNWProto, flow.CTMark, flow.CTLabel, flow.CTNWSrc, flow.CTNWDst,
		flow.CTTPSrc, flow.CTTPDst, flow.CTIPv6Src, flow.CTIPv6Dst, flow.ConjID:
		return true
	}
	return false
}

// fillDefaults gives the fields a real packet cannot leave at zero their
// usual values, unless the expression set them.
func (m *Microflow) fillDefaults() {
	def := func(f flow.Field, v uint64) {
		if m.Given.Get(f).IsZero() {
			m.Key.Set(f, v)
			m.Defaults = append(m.Defaults, fmt.Sprintf("%s=%d", f, v))
		}
	}
	et := m.Key.Get(flow.EthType)
	ip := et == etherIPv4 || et == etherIPv6
	if ip {
		def(flow.NWTTL, 64)
		switch p := m.Key.Get(flow.NWProto); p {
		case protoTCP, protoUDP, protoSCTP:
			// Conntrack takes port 0 for invalid: an ephemeral port.
			def(flow.TPSrc, 32768)
			if p == protoTCP {
				def(flow.TCPFlags, tcpSYN) // the first packet of a connection
			}
		case protoICMP:
			if et == etherIPv4 {
				def(flow.ICMPType, 8) // echo request
			}
		case protoICMPv6:
			def(flow.ICMPType, 128) // echo request
		}
	}
	if et == etherARP {
		def(flow.ARPOp, 1) // request
	}
	sort.Strings(m.Defaults)
}

// Ethernet types and IP protocols the builder knows.
const (
	etherIPv4   = 0x0800
	etherIPv6   = 0x86dd
	etherARP    = 0x0806
	etherVLAN   = 0x8100
	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
	protoSCTP   = 132
	tcpSYN      = 0x002
)
