// Package lflow implements OVN's logical flow language, the text in the
// match and actions columns of the Southbound Logical_Flow table
// (ovn-sb(5)). One package serves northd (validating what it emits), the
// controller (compiling flows for the datapath) and trace (which reads the
// same ASTs and normal forms; there is no interpreter here yet).
//
// # Pipeline
//
//	text ──Lexer──▶ tokens ──Symtab.ParseExpr / ParseActions──▶ AST
//	AST ──Symtab.Normalize──▶ Normal: OR of conjunctions of per-field clauses
//	(Normal, actions) ──Compiler.Compile──▶ datapath/flow rules and groups
//
// Symtab holds every field, subfield and predicate of the language with
// its width, prerequisites and the datapath (OpenFlow-style) field it lives
// in. It is built once by NewSymtab, is immutable, and is shared by all
// callers. Parsed expressions, actions and normal forms may share memory
// with it and with each other: treat them as read-only.
//
// # Parsing as OVN parses
//
// The parser accepts exactly what OVN 23.03's accepts and refuses the
// rest with OVN's reason. The rules that surprise: a nominal field (one
// OpenFlow cannot mask: eth.type, ip.proto, ip.ttl, icmp4.type, inport)
// may only be tested for equality, counting the enclosing ! operators
// (eth.type != 0x800 and !(inport == "p") are refused, !(eth.type !=
// 0x800) is not); a predicate over a nominal field (ip4, tcp) may only be
// tested positively; ! takes an atomic operand (!!x and !tcp.src == 80
// are refused); a bare multibit field means != 0 only under ! (!vlan.pcp);
// a constant's width is checked against the whole symbol, by OVN's widths
// (32 for any IPv4 address, 128 for IPv6, 48 for MAC, the mask's for a
// masked constant); a mask joins its number without spaces. Symtab.CheckRefs
// adds OVN's checks of address sets and port groups against an Env.
// TestDifferentialParser holds all of it to the real parser, reached
// through ovn-trace (package lflow/internal/ovnparse), on the inputs of
// testdata/ovnparse, the cases of testdata/exprs.txt and matches
// generated from the symbol table.
//
// # Normalization
//
// As in OVN: negation is pushed down to the comparisons, predicates expand,
// each comparison is joined with its symbol's prerequisites (never negated:
// !(tcp.src == 80) is tcp.src != 80 && tcp), and the result is put in
// disjunctive normal form. Each conjunction keeps at most one clause per
// field, and a clause is a small disjunction of masked values of that one
// field: a set, a range turned into aligned prefixes, or the bits of a !=.
// Several inequalities on one field (f != {a, b, c}, !(f == {a, b}), or
// f != a && f != b) are not crossed bit by bit: the clause is computed as
// the exact complement of the excluded values (exclude.go), about n times
// (w - log2 n) masked values for n values of a w-bit field at worst (7
// ports: 53 rules; 50 ports: 200; 1,000 IPv4 addresses spread over the
// whole space: 8,877; in one subnet: 24). A clause needing more than
// 65,536 masked values (about 6,000 IPv4 addresses spread over the whole
// space, or 1,000 IPv6 addresses spread over the whole space; clustered
// sets go much further) is refused as too complex, as is a match whose
// inequalities need more than a fixed budget of work (normalizeWork,
// well under a second).
// Keeping a clause's alternatives together is what lets the compiler use
// conjunctive matches: 1,000 addresses against 10 ports cost 1,010 flows
// plus one, not 10,000.
//
// Address sets, port groups, logical port keys and chassis residency come
// from the caller through Env; the package keeps no global state.
//
// # Actions
//
// ParseActions accepts exactly the actions OVN 23.03's ovn-controller
// accepts, with the same checks of each action's arguments (widths and
// types of fields, writability, option names and value types of
// put_dhcp_opts, put_dhcpv6_opts and put_nd_ra_opts, ports, weights,
// verdicts ...) and the same leniencies, and refuses the rest with the
// reason. Inside ct_commit { } only ct_mark and ct_label may be set, and
// they may be set nowhere else. The DHCP options are those ovn-northd
// 23.03 writes into the Southbound (options.go).
// TestDifferentialParser compares the verdicts with the real OVN's on
// the inputs of testdata/ovnparse/actions.txt; testdata/actions.golden
// holds govn's verdict and canonical print for each.
//
// # Compilation
//
// Compiler maps a logical pipeline table onto a datapath table through a
// Layout (OVN's by default: ingress table N is 8+N, egress 42+N). The
// logical datapath is matched in metadata, inport/outport in reg14/reg15,
// flags in reg10, logical registers in the datapath registers of the same
// number. A conjunction with two or more multi-valued clauses becomes an
// OpenFlow-style conjunctive match (conjunction(id, k/n) rules plus a
// conj_id rule, ids from Context), as ovn-controller does.
//
// Actions map as follows: next is a resubmit to the next (or named) table;
// output a resubmit to the output stage; assignments are loads and moves;
// ct_next, ct_commit, ct_dnat, ct_snat and ct_lb(_mark) are ct() actions in
// the zones OVN keeps in reg11 (DNAT), reg12 (SNAT) and reg13 (port zone),
// ct_dnat(IP, PORT-PORT) and ct_snat(...) fill the NAT address and port
// range (flow.NAT AddrMin, PortMin..PortMax), and
// backends of ct_lb_mark become a select group; actions that consult one of
// OVN's fixed tables (get_arp, lookup_arp, get_fdb, chk_lb_hairpin, ...)
// resubmit to the table Layout.Lookups names, which answers in a bit of flags;
// actions that build packets or need the controller (arp { }, icmp4 { },
// put_arp, put_dhcp_opts, log, ...) become controller(userdata=the action's
// canonical text), which pinctrl parses back with ParseActions.
//
// An Env that also implements LocalPorts lets Compile leave out rules
// that match ports absent from this chassis, as ovn-controller does.
// TestDifferentialOVNController checks all of this against the real
// ovn-controller: on the features-a setup, the number of rules per (table,
// priority, datapath) agrees for every group but those listed as explained.
// TestDifferentialInequalities adds ACLs with inequalities to that setup:
// govn needs no more rules than ovn-controller for each (42 against 426
// for tcp.dst != 80 && tcp.dst != 443), and ovn-controller had installed
// nothing after a minute for ip4.src != {6 addresses}, which takes govn 66.
//
// As in OVN, a <-> exchange and push/pop use the datapath's stack
// (flow.Push, flow.Pop), and the registers a table lookup (lookup_arp,
// get_arp, ...) receives its arguments in are pushed before the lookup and
// popped after it, so the action changes nothing but its result.
// R = check_pkt_larger(L) compiles to flow.CheckPktLarger, and
// commit_lb_aff to a flow.Learn of the affinity rule that chk_lb_aff's
// table then answers from. set_meter(rate[, burst]) compiles to
// flow.Meter, a meter named by its rate and burst.
//
// Known differences from OVN, each because datapath/flow has no
// equivalent yet: set_queue, fwd_group and sample
// compile to an *UnsupportedError. Conjunctive rules
// from two logical flows that share a match must be merged by the caller
// (the controller) into one rule with both conjunction actions, as OVN's
// ofctrl does.
package lflow
