package switchd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
)

// Port kinds.
const (
	KindAFPacket = "afpacket" // an existing device (veth, NIC), through an AF_PACKET socket
	KindTAP      = "tap"      // a TAP device the switch creates
	KindInternal = "internal" // the switch's own interface: a TAP device
	KindGeneve   = "geneve"   // a Geneve tunnel over a UDP socket
	KindVXLAN    = "vxlan"    // a VXLAN tunnel over a UDP socket
)

// PortSpec is one --port argument: NAME[:NUMBER][=KIND], where a tunnel's
// KIND is geneve:LOCALIP[:UDPPORT] or vxlan:LOCALIP[:UDPPORT] (an IPv6
// address with a port in brackets, "[fd00::1]:6081").
type PortSpec struct {
	Name string
	No   uint32 // 0: the lowest number not otherwise taken
	Kind string // KindAFPacket, KindTAP, KindInternal, KindGeneve or KindVXLAN
	// Local is a tunnel's address: it receives there, and sends to the
	// same UDP port on the remote chassis (as OVS's options:dst_port).
	Local netip.AddrPort
}

// maxPortNo is the largest port number: OpenFlow 1.0's ports end at
// 0xff00, where the reserved ports begin.
const maxPortNo = 0xfeff

// ParsePortSpec parses NAME[:NUMBER][=KIND]. For a tunnel, NAME is only a
// label; for the other kinds it is the device.
func ParsePortSpec(s string) (PortSpec, error) {
	spec := PortSpec{Kind: KindAFPacket}
	nameNo, kind, hasKind := strings.Cut(s, "=")
	if hasKind {
		kind, addr, hasAddr := strings.Cut(kind, ":")
		switch kind {
		case KindAFPacket, KindTAP, KindInternal:
			if hasAddr {
				return PortSpec{}, fmt.Errorf("port %q: kind %s takes no address", s, kind)
			}
			spec.Kind = kind
		case KindGeneve, KindVXLAN:
			local, err := parseTunnelAddr(addr, kind)
			if err != nil {
				return PortSpec{}, fmt.Errorf("port %q: %w", s, err)
			}
			spec.Kind, spec.Local = kind, local
		default:
			return PortSpec{}, fmt.Errorf("port %q: unknown kind %q (want afpacket, tap, internal, geneve:IP or vxlan:IP)", s, kind)
		}
	}
	name, no, hasNo := strings.Cut(nameNo, ":")
	if hasNo {
		n, err := strconv.ParseUint(no, 10, 32)
		if err != nil || n == 0 || n > maxPortNo {
			return PortSpec{}, fmt.Errorf("port %q: bad port number %q (want 1..%d)", s, no, maxPortNo)
		}
		spec.No = uint32(n)
	}
	// Linux interface names: at most 15 bytes, no '/', no white space.
	if name == "" || len(name) > 15 || strings.ContainsAny(name, "/ \t\n\x00:=") {
		return PortSpec{}, fmt.Errorf("port %q: bad device name %q", s, name)
	}
	spec.Name = name
	return spec, nil
}

// parseTunnelAddr parses a tunnel's LOCALIP[:UDPPORT], the UDP port
// defaulting to the encapsulation's IANA one.
func parseTunnelAddr(s, kind string) (netip.AddrPort, error) {
	if s == "" {
		return netip.AddrPort{}, fmt.Errorf("a %s tunnel needs a local address (%s:LOCALIP[:UDPPORT])", kind, kind)
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Addr().Zone() != "" {
			// The port binds with no scope, so a zone would be dropped.
			return netip.AddrPort{}, fmt.Errorf("bad tunnel address %q (no zone: the port binds without one)", s)
		}
		if ap.Port() == 0 {
			return netip.AddrPort{}, fmt.Errorf("tunnel UDP port 0")
		}
		return ap, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("bad tunnel address %q (want IP or IP:UDPPORT)", s)
	}
	e, _ := port.ParseEncap(kind)
	return netip.AddrPortFrom(a, e.Port()), nil
}

// numberPorts gives every spec without a number the lowest free one, in
// order, and checks that names and numbers are unique.
func numberPorts(specs []PortSpec) ([]PortSpec, error) {
	out := make([]PortSpec, len(specs))
	copy(out, specs)
	used := map[uint32]string{}
	names := map[string]bool{}
	for _, s := range out {
		if names[s.Name] {
			return nil, fmt.Errorf("port %s given twice", s.Name)
		}
		names[s.Name] = true
		if s.No == 0 {
			continue
		}
		if other, ok := used[s.No]; ok {
			return nil, fmt.Errorf("ports %s and %s both have number %d", other, s.Name, s.No)
		}
		used[s.No] = s.Name
	}
	next := uint32(1)
	for i := range out {
		if out[i].No != 0 {
			continue
		}
		for used[next] != "" {
			next++
		}
		out[i].No = next
		used[next] = out[i].Name
	}
	return out, nil
}

// ofctlStats are the counters ovs-ofctl dump-flows prints in front of a
// rule; a flow file made from its output may carry them, and they are
// skipped.
var ofctlStats = []string{"duration", "n_packets", "n_bytes", "idle_age", "hard_age"}

// ParseRule parses one rule in the text form package flow reads
// ("table=1,priority=10,ip,nw_dst=10.0.0.0/8 actions=output:2"); the
// counters of ovs-ofctl dump-flows output are skipped.
func ParseRule(s string) (flow.Rule, error) {
	match, actions, ok := strings.Cut(s, "actions=")
	if !ok {
		return flow.Rule{}, errors.New("no actions=")
	}
	var kept []string
	for _, term := range strings.FieldsFunc(match, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		name, _, _ := strings.Cut(term, "=")
		skip := false
		for _, st := range ofctlStats {
			skip = skip || name == st
		}
		if !skip {
			kept = append(kept, term)
		}
	}
	r, err := flow.ParseRule(strings.Join(kept, ",") + " actions=" + actions)
	if err != nil {
		return flow.Rule{}, err
	}
	return r, nil
}

// ParseFlows reads a flow file: one rule per line (ParseRule), with blank
// lines and lines starting with '#' skipped.
func ParseFlows(r io.Reader) ([]flow.Rule, error) {
	var rules []flow.Rule
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rule, err := ParseRule(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		rules = append(rules, rule)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading flows: %w", err)
	}
	return rules, nil
}

// ParseFlowSpec parses the packet fields ofproto/trace takes, written as a
// match ("in_port=1,icmp,nw_src=10.0.0.1,nw_dst=10.0.0.2"), into a flow
// key. Fields left out are zero; every value must be exact (no masks).
func ParseFlowSpec(s string) (flow.Key, error) {
	if strings.Contains(s, "actions=") {
		return flow.Key{}, errors.New("a flow to trace has no actions")
	}
	if strings.TrimSpace(s) == "" {
		return flow.Key{}, errors.New("empty flow")
	}
	m, err := flow.ParseMatch(s)
	if err != nil {
		return flow.Key{}, err
	}
	for f := flow.Field(1); f.Valid(); f++ {
		mask := m.Mask.Get(f)
		if mask.IsZero() || mask == flow.OnesU128(f.Bits()) || icmpView(&m, f) {
			continue
		}
		return flow.Key{}, fmt.Errorf("%s: a flow to trace takes exact values, not masks", f)
	}
	return m.Key, nil
}

// icmpView reports whether f is tp_src or tp_dst of an ICMP match that names
// icmp_type or icmp_code, which are their low bytes: exact ICMP fields,
// not masked ports.
func icmpView(m *flow.Match, f flow.Field) bool {
	if p := m.Key.Get(flow.NWProto); m.Mask.Get(flow.NWProto).IsZero() || p != 1 && p != 58 {
		return false
	}
	switch f {
	case flow.TPSrc:
		return m.Mask.Get(f) == m.Mask.Get(flow.ICMPType)
	case flow.TPDst:
		return m.Mask.Get(f) == m.Mask.Get(flow.ICMPCode)
	}
	return false
}
