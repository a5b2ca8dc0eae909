package lflow

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"text/tabwriter"
)

// SymbolKind says what a symbol of the match language is.
type SymbolKind uint8

// Symbol kinds, as ovn-sb(5) defines them.
const (
	// KindField is a packet header or metadata field with an integer value.
	KindField SymbolKind = iota
	// KindString is a field whose value is a logical port name (inport,
	// outport); it compiles to an integer key in a register.
	KindString
	// KindSubfield is an alias for some bits of a field (vlan.vid is
	// vlan.tci[0..11]).
	KindSubfield
	// KindPredicate is shorthand for a Boolean expression (ip4 is
	// eth.type == 0x800).
	KindPredicate
)

func (k SymbolKind) String() string {
	switch k {
	case KindField:
		return "field"
	case KindString:
		return "string field"
	case KindSubfield:
		return "subfield"
	case KindPredicate:
		return "predicate"
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Symbol is one name of the logical flow language.
type Symbol struct {
	Name  string
	Kind  SymbolKind
	Width int // in bits; 1 for predicates, 0 for string fields

	// Field is the field that holds the bits: the symbol itself for a
	// field, the underlying field for a subfield, nil for a predicate.
	Field *Symbol
	// Ofs is the offset of a subfield's lowest bit inside Field.
	Ofs int

	// Prereq is an expression implied by any use of the symbol ("icmp4"
	// for icmp4.type), empty for none.
	Prereq string
	// Expansion is a predicate's expression.
	Expansion string

	// Nominal fields support only equality tests (eth.type, ip.proto,
	// inport), taking enclosing negations into account: relations, !=
	// and !(f == c) are refused, as OVN refuses them. OVN makes every
	// field nominal that OpenFlow cannot mask, and a predicate nominal
	// when its expansion tests a nominal field (ip4, tcp): such a
	// predicate may only be tested positively.
	Nominal bool
	// NoConjunction fields are never a dimension of a conjunctive match
	// (OVN's "must crossproduct" fields: eth.type, ip.proto).
	NoConjunction bool
	// ReadOnly fields may be matched but not assigned.
	ReadOnly bool
	// OVNField marks a field OVN sets itself because the datapath has
	// none (icmp4.frag_mtu): it may only be assigned inside actions that
	// the controller carries out (icmp4_error { ... }), never matched.
	OVNField bool
	// Format is how constants for the field are usually written; used by
	// the normalized-form printer.
	Format Format

	// DP names the datapath (OpenFlow-style) field that carries a field,
	// and DPOfs the offset of the field's lowest bit inside it. Only set
	// for fields and string fields.
	DP    string
	DPOfs int

	id        int       // index in the table, for per-symbol arrays
	mention   *PredExpr // the (read-only) node for a mention of a predicate
	prereq    Expr      // parsed Prereq, nil when none
	expansion Expr      // parsed Expansion

	// Normal forms of the above, computed once by NewSymtab (they depend
	// on no Env). Shared and never modified.
	cached     bool
	prereqNorm Normal
	posNorm    Normal // expansion
	negNorm    Normal // !expansion
	negErr     error  // why negNorm could not be computed
}

// Mask returns the bits of Field that the symbol covers.
func (s *Symbol) Mask() U128 { return Ones(s.Width).Lsh(s.Ofs) }

// Symtab is the table of symbols. It is immutable once built and safe for
// concurrent use.
type Symtab struct {
	byName map[string]*Symbol
}

// Lookup returns the symbol called name, or nil.
func (t *Symtab) Lookup(name string) *Symbol { return t.byName[name] }

// Symbols returns all symbols sorted by name.
func (t *Symtab) Symbols() []*Symbol {
	out := make([]*Symbol, 0, len(t.byName))
	for _, s := range t.byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Datapath register layout used by OVN for logical metadata. Logical
// registers reg0..reg9 are datapath registers of the same number.
const (
	DPLogicalFlags    = "reg10"    // flags.*
	DPDNATZone        = "reg11"    // conntrack zone for DNAT
	DPSNATZone        = "reg12"    // conntrack zone for SNAT
	DPCTZone          = "reg13"    // conntrack zone of the logical port
	DPInport          = "reg14"    // logical input port key
	DPOutport         = "reg15"    // logical output port key
	DPLogicalDatapath = "metadata" // logical datapath key
)

type symbolBuilder struct {
	t   *Symtab
	err error
}

func (b *symbolBuilder) add(s *Symbol) *Symbol {
	if _, dup := b.t.byName[s.Name]; dup && b.err == nil {
		b.err = fmt.Errorf("symbol %s defined twice", s.Name)
	}
	s.id = len(b.t.byName)
	b.t.byName[s.Name] = s
	return s
}

func (b *symbolBuilder) field(name string, width int, dp, prereq string, f Format) *Symbol {
	s := &Symbol{Name: name, Kind: KindField, Width: width, DP: dp, Prereq: prereq, Format: f}
	s.Field = s
	return b.add(s)
}

func (b *symbolBuilder) nominal(name string, width int, dp, prereq string, f Format) *Symbol {
	s := b.field(name, width, dp, prereq, f)
	s.Nominal = true
	return s
}

func (b *symbolBuilder) subfield(name string, of *Symbol, lo, hi int, prereq string) *Symbol {
	if prereq == "" {
		prereq = of.Prereq
	}
	return b.add(&Symbol{Name: name, Kind: KindSubfield, Width: hi - lo + 1, Field: of, Ofs: lo,
		Prereq: prereq, Format: FmtDecimal, ReadOnly: of.ReadOnly})
}

func (b *symbolBuilder) predicate(name, expansion string) *Symbol {
	s := b.add(&Symbol{Name: name, Kind: KindPredicate, Width: 1, Expansion: expansion, ReadOnly: true})
	s.mention = &PredExpr{Sym: s}
	// Parsed now, with the symbols defined so far, because its level
	// (nominal or Boolean) decides how later expansions may use it.
	p := &parser{symtab: b.t}
	e, err := p.parseExpr(expansion)
	if err != nil {
		if b.err == nil {
			b.err = fmt.Errorf("expansion of %s: %w", name, err)
		}
		return s
	}
	s.Nominal = testsNominal(e)
	return s
}

// testsNominal reports whether e tests a nominal field or predicate.
func testsNominal(e Expr) bool {
	switch e := e.(type) {
	case *AndExpr:
		return slices.ContainsFunc(e.Terms, testsNominal)
	case *OrExpr:
		return slices.ContainsFunc(e.Terms, testsNominal)
	case *NotExpr:
		return testsNominal(e.X)
	case *CmpExpr:
		return e.Sym.Nominal
	case *PredExpr:
		return e.Sym.Nominal
	}
	return false
}

// noConjunction marks a field as one never used as a dimension of a
// conjunctive match.
func noConjunction(s *Symbol) *Symbol {
	s.NoConjunction = true
	return s
}

// NewSymtab builds the symbol table of OVN 23.03's logical flow language
// (ovn-sb(5), Logical_Flow "Symbols"), with each field mapped onto the
// datapath field that carries it.
func NewSymtab() (*Symtab, error) {
	b := &symbolBuilder{t: &Symtab{byName: make(map[string]*Symbol, 256)}}

	// Registers. xxreg0 overlays reg0..reg3 and xreg0 overlays reg0..reg1,
	// the lower-numbered register holding the more significant bits.
	for i := 0; i <= 9; i++ {
		b.field(fmt.Sprintf("reg%d", i), 32, fmt.Sprintf("reg%d", i), "", FmtHex)
	}
	for i := 0; i <= 4; i++ {
		b.field(fmt.Sprintf("xreg%d", i), 64, fmt.Sprintf("xreg%d", i), "", FmtHex)
	}
	for i := 0; i <= 1; i++ {
		b.field(fmt.Sprintf("xxreg%d", i), 128, fmt.Sprintf("xxreg%d", i), "", FmtHex)
	}

	// Logical ports: names that compile to keys in registers.
	for _, p := range []struct{ name, dp string }{{"inport", DPInport}, {"outport", DPOutport}} {
		s := &Symbol{Name: p.name, Kind: KindString, Width: 32, DP: p.dp, Nominal: true, NoConjunction: true}
		s.Field = s
		b.add(s)
	}

	// Logical flags, bits of reg10.
	flags := b.field("flags", 32, DPLogicalFlags, "", FmtHex)
	for _, f := range []struct {
		name string
		bit  int
	}{
		{"flags.loopback", 0},
		{"flags.force_snat_for_dnat", 2},
		{"flags.force_snat_for_lb", 3},
		{"flags.skip_snat_for_lb", 9},
		{"flags.use_snat_zone", 11},
	} {
		b.subfield(f.name, flags, f.bit, f.bit, "")
	}

	b.field("pkt.mark", 32, "pkt_mark", "", FmtHex)

	// Connection tracking.
	ctState := b.field("ct_state", 32, "ct_state", "", FmtHex)
	ctState.ReadOnly = true
	b.subfield("ct.trk", ctState, 5, 5, "")
	for _, c := range []struct {
		name string
		bit  int
	}{
		{"ct.new", 0}, {"ct.est", 1}, {"ct.rel", 2}, {"ct.rpl", 3},
		{"ct.inv", 4}, {"ct.snat", 6}, {"ct.dnat", 7},
	} {
		b.subfield(c.name, ctState, c.bit, c.bit, "ct.trk")
	}
	ctMark := b.field("ct_mark", 32, "ct_mark", "", FmtHex)
	b.subfield("ct_mark.blocked", ctMark, 0, 0, "")
	b.subfield("ct_mark.natted", ctMark, 1, 1, "")
	b.subfield("ct_mark.skip_snat", ctMark, 2, 2, "")
	b.subfield("ct_mark.force_snat", ctMark, 3, 3, "")
	b.subfield("ct_mark.ecmp_reply_port", ctMark, 16, 31, "")
	ctLabel := b.field("ct_label", 128, "ct_label", "", FmtHex)
	b.subfield("ct_label.blocked", ctLabel, 0, 0, "")
	b.subfield("ct_label.natted", ctLabel, 1, 1, "")
	b.subfield("ct_label.skip_snat", ctLabel, 2, 2, "")
	b.subfield("ct_label.force_snat", ctLabel, 3, 3, "")
	b.subfield("ct_label.ecmp_reply_eth", ctLabel, 32, 79, "")
	b.subfield("ct_label.ecmp_reply_port", ctLabel, 80, 95, "")
	b.subfield("ct_label.label", ctLabel, 96, 127, "")
	// OVN 23.03 has no ct_proto, ct_nw_src, ... (later versions do).

	// Ethernet and VLAN.
	b.field("eth.src", 48, "eth_src", "", FmtMAC)
	ethDst := b.field("eth.dst", 48, "eth_dst", "", FmtMAC)
	noConjunction(b.nominal("eth.type", 16, "eth_type", "", FmtHex)).ReadOnly = true
	b.predicate("eth.bcast", "eth.dst == ff:ff:ff:ff:ff:ff")
	b.subfield("eth.mcast", ethDst, 40, 40, "") // a subfield in OVN, not a predicate
	b.predicate("eth.mcastv6", "eth.dst[32..47] == 0x3333")
	tci := b.field("vlan.tci", 16, "vlan_tci", "", FmtHex)
	b.predicate("vlan.present", "vlan.tci[12]")
	b.subfield("vlan.vid", tci, 0, 11, "vlan.present")
	b.subfield("vlan.pcp", tci, 13, 15, "vlan.present")

	// IP, common to IPv4 and IPv6.
	b.predicate("ip4", "eth.type == 0x800")
	b.predicate("ip6", "eth.type == 0x86dd")
	b.predicate("ip", "ip4 || ip6")
	noConjunction(b.nominal("ip.proto", 8, "nw_proto", "ip", FmtDecimal)).ReadOnly = true
	b.nominal("ip.dscp", 6, "nw_tos", "ip", FmtDecimal).DPOfs = 2
	b.nominal("ip.ecn", 2, "nw_ecn", "ip", FmtDecimal)
	b.nominal("ip.ttl", 8, "nw_ttl", "ip", FmtDecimal)
	frag := b.field("ip.frag", 2, "nw_frag", "ip", FmtDecimal)
	frag.ReadOnly = true
	b.predicate("ip.is_frag", "ip.frag[0]")
	b.predicate("ip.later_frag", "ip.frag[1]")
	b.predicate("ip.first_frag", "ip.is_frag && !ip.later_frag")

	// IPv4.
	b.field("ip4.src", 32, "nw_src", "ip4", FmtIPv4)
	b.field("ip4.dst", 32, "nw_dst", "ip4", FmtIPv4)
	b.predicate("ip4.src_mcast", "ip4.src[28..31] == 0xe")
	b.predicate("ip4.mcast", "eth.mcast && ip4.dst[28..31] == 0xe")
	b.predicate("igmp", "ip4 && ip.proto == 2")

	// IPv6.
	b.field("ip6.src", 128, "ipv6_src", "ip6", FmtIPv6)
	b.field("ip6.dst", 128, "ipv6_dst", "ip6", FmtIPv6)
	b.field("ip6.label", 20, "ipv6_label", "ip6", FmtHex)
	// Multicast predicates as the real ovn-controller 23.03 compiles them
	// (ovn-sb(5) gives only some; the daemon is the reference).
	b.predicate("ip6.mcast", "eth.mcastv6 && ip6.dst[120..127] == 0xff")
	b.predicate("ip6.mcast_rsvd", "ip6.dst[116..119] == 0 && ip6.dst[120..127] == 0xff && ip6.dst[0..111] == 0")
	b.predicate("ip6.mcast_all_nodes", "ip6.dst == {ff01::1, ff02::1}")
	b.predicate("ip6.mcast_all_rtrs", "ip6.dst == {ff01::2, ff02::2, ff05::2}")
	b.predicate("ip6.mcast_sol_node", "ip6.dst == ff02::1:ff00:0/104")
	b.predicate("ip6.mcast_flood", "eth.mcastv6 && (ip6.mcast_rsvd || ip6.mcast_all_nodes || ip6.mcast_all_rtrs || ip6.mcast_sol_node)")

	// ICMP.
	b.predicate("icmp4", "ip4 && ip.proto == 1")
	b.nominal("icmp4.type", 8, "icmp_type", "icmp4", FmtDecimal)
	b.nominal("icmp4.code", 8, "icmp_code", "icmp4", FmtDecimal)
	b.predicate("icmp6", "ip6 && ip.proto == 58")
	b.nominal("icmp6.type", 8, "icmpv6_type", "icmp6", FmtDecimal)
	b.nominal("icmp6.code", 8, "icmpv6_code", "icmp6", FmtDecimal)
	b.predicate("icmp", "icmp4 || icmp6")

	// ARP and RARP share datapath fields.
	b.predicate("arp", "eth.type == 0x806")
	b.predicate("rarp", "eth.type == 0x8035")
	for _, p := range []string{"arp", "rarp"} {
		b.nominal(p+".op", 16, "arp_op", p, FmtDecimal)
		b.field(p+".spa", 32, "arp_spa", p, FmtIPv4)
		b.field(p+".tpa", 32, "arp_tpa", p, FmtIPv4)
		b.field(p+".sha", 48, "arp_sha", p, FmtMAC)
		b.field(p+".tha", 48, "arp_tha", p, FmtMAC)
	}

	// Neighbor discovery and MLD.
	b.predicate("nd", "icmp6.type == {135, 136} && icmp6.code == 0 && ip.ttl == 255")
	b.predicate("nd_ns", "icmp6.type == 135 && icmp6.code == 0 && ip.ttl == 255")
	b.predicate("nd_na", "icmp6.type == 136 && icmp6.code == 0 && ip.ttl == 255")
	b.predicate("nd_rs", "icmp6.type == 133 && icmp6.code == 0 && ip.ttl == 255")
	b.predicate("nd_ra", "icmp6.type == 134 && icmp6.code == 0 && ip.ttl == 255")
	b.field("nd.target", 128, "nd_target", "nd", FmtIPv6)
	b.field("nd.sll", 48, "nd_sll", "nd_ns", FmtMAC)
	b.field("nd.tll", 48, "nd_tll", "nd_na", FmtMAC)
	b.predicate("mldv1", "ip6.src == fe80::/10 && icmp6.type == {130, 131, 132}")
	b.predicate("mldv2", "ip6.dst == ff02::16 && icmp6.type == 143")

	// Transport.
	b.predicate("tcp", "ip.proto == 6")
	b.field("tcp.src", 16, "tcp_src", "tcp", FmtDecimal)
	b.field("tcp.dst", 16, "tcp_dst", "tcp", FmtDecimal)
	b.field("tcp.flags", 12, "tcp_flags", "tcp", FmtHex).ReadOnly = true
	b.predicate("udp", "ip.proto == 17")
	b.field("udp.src", 16, "udp_src", "udp", FmtDecimal)
	b.field("udp.dst", 16, "udp_dst", "udp", FmtDecimal)
	b.predicate("sctp", "ip.proto == 132")
	b.field("sctp.src", 16, "sctp_src", "sctp", FmtDecimal)
	b.field("sctp.dst", 16, "sctp_dst", "sctp", FmtDecimal)

	// OVN fields (ovn-sb(5) "ovn_field = constant").
	for _, p := range []struct {
		name  string
		width int // as OVN has them: icmp6's is the 32-bit MTU of Packet Too Big
	}{{"icmp4", 16}, {"icmp6", 32}} {
		s := &Symbol{Name: p.name + ".frag_mtu", Kind: KindField, Width: p.width, Prereq: p.name, Format: FmtDecimal, OVNField: true, Nominal: true}
		s.Field = s
		b.add(s)
	}

	if b.err != nil {
		return nil, b.err
	}
	// Parse every prerequisite and expansion once, now, so that a typo in
	// the table is an error here rather than on some later flow.
	p := &parser{symtab: b.t}
	for _, s := range b.t.byName {
		if s.Prereq != "" {
			e, err := p.parseExpr(s.Prereq)
			if err != nil {
				return nil, fmt.Errorf("prerequisite of %s: %w", s.Name, err)
			}
			s.prereq = e
		}
		if s.Expansion != "" {
			e, err := p.parseExpr(s.Expansion)
			if err != nil {
				return nil, fmt.Errorf("expansion of %s: %w", s.Name, err)
			}
			s.expansion = e
		}
	}
	// Normalize them too: normalization then reuses the shared results
	// instead of re-deriving "tcp" from "ip.proto == 6 && (ip4 || ip6)"
	// for every flow.
	n := normalizer{cx: newComplementer()}
	for _, s := range b.t.byName {
		var err error
		if s.prereq != nil {
			if s.prereqNorm, err = n.norm(s.prereq, false); err != nil {
				return nil, fmt.Errorf("prerequisite of %s: %w", s.Name, err)
			}
		}
		if s.expansion != nil {
			if s.posNorm, err = n.norm(s.expansion, false); err != nil {
				return nil, fmt.Errorf("expansion of %s: %w", s.Name, err)
			}
			// Some negations are too big to write out (!ip6.mcast_flood);
			// that is an error only for a flow that uses one.
			s.negNorm, s.negErr = n.norm(s.expansion, true)
		}
	}
	for _, s := range b.t.byName {
		s.cached = true
	}
	return b.t, nil
}

// DatapathBits describes where a symbol's bits live in the datapath, e.g.
// "reg10[0]" for flags.loopback or "nw_src" for ip4.src; "" for
// predicates and OVN fields.
func (s *Symbol) DatapathBits() string {
	if s.Field == nil || s.Field.DP == "" {
		return ""
	}
	base := s.Field
	lo := base.DPOfs + s.Ofs
	if s.Kind != KindSubfield && lo == 0 {
		return base.DP
	}
	if s.Width == 1 {
		return fmt.Sprintf("%s[%d]", base.DP, lo)
	}
	return fmt.Sprintf("%s[%d..%d]", base.DP, lo, lo+s.Width-1)
}

// WriteTable writes the symbol table as text, one symbol a line: name,
// kind, width, datapath bits, and prerequisite or expansion.
func (t *Symtab) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tWIDTH\tDATAPATH\tPREREQUISITE / EXPANSION")
	for _, s := range t.Symbols() {
		width := strconv.Itoa(s.Width)
		if s.Kind == KindString {
			width = "string"
		}
		extra := s.Prereq
		if s.Kind == KindPredicate {
			extra = "= " + s.Expansion
		}
		kind := s.Kind.String()
		if s.Nominal {
			kind += ", nominal"
		}
		if s.ReadOnly && s.Kind != KindPredicate {
			kind += ", read-only"
		}
		if s.OVNField {
			kind += ", OVN field"
		}
		dp := s.DatapathBits()
		if dp == "" {
			dp = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, kind, width, dp, extra)
	}
	return tw.Flush()
}
