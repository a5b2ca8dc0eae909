package northd

import (
	"fmt"
	"strings"

	"github.com/govn/govn/schema/nb"
)

// Register bits of the switch pipelines (ovn-northd(8) names them
// REGBIT_*): what one stage tells a later one.
const (
	regbitConntrackDefrag  = "reg0[0]"  // pre-ACL: send to conntrack
	regbitConntrackCommit  = "reg0[1]"  // commit the connection
	regbitConntrackNAT     = "reg0[2]"  // pre-LB: send to conntrack for LB
	regbitACLHintAllowNew  = "reg0[7]"  // might match allow-related, new
	regbitACLHintAllow     = "reg0[8]"  // might match allow-related, known
	regbitACLHintDrop      = "reg0[9]"  // might match drop
	regbitACLHintBlock     = "reg0[10]" // might match drop, was allowed
	regbitACLLabel         = "reg0[13]" // commit a label (reg3)
	regbitPortSecDrop      = "reg0[15]"
	regbitACLStateless     = "reg0[16]"
	regbitACLHintAllowRel  = "reg0[17]" // reply or related of an allowed connection
	regbitLBAffinity       = "reg9[6]"
	regbitHairpin          = "reg0[6]"
	regbitHairpinReply     = "reg0[12]"
	skipConntrackPredicate = "nd || nd_rs || nd_ra || mldv1 || mldv2"
)

// ctNames are the conntrack actions and fields that depend on whether every
// chassis supports ct_mark for the blocked bit (Features.CTNoMaskedLabel).
type ctNames struct {
	lb      string // "ct_lb_mark" or "ct_lb"
	blocked string // "ct_mark.blocked" or "ct_label.blocked"
}

func ctNamesFor(f Features) ctNames {
	if f.CTNoMaskedLabel {
		return ctNames{"ct_lb_mark", "ct_mark.blocked"}
	}
	return ctNames{"ct_lb", "ct_label.blocked"}
}

// switchPipeline generates the flows of a logical switch that do not
// belong to any one port, ACL or load balancer.
func switchPipeline(g *gen, sw *logicalSwitch) {
	dp := sw.dp
	facts := factsOf(g, sw.nb.UUID)
	ct := ctNamesFor(g.Features())
	defaultDrop := nbOptions(g)["default_acl_drop"] == "true"

	// Admission and port security.
	g.Flow(dp, LSInCheckPortSec, 100, "eth.src[40]", "drop;")
	g.Flow(dp, LSInCheckPortSec, 100, "vlan.present", "drop;")
	g.Flow(dp, LSInCheckPortSec, 50, "1", regbitPortSecDrop+" = check_in_port_sec(); next;")
	g.Flow(dp, LSInApplyPortSec, 50, regbitPortSecDrop+" == 1", "drop;")
	g.Flow(dp, LSInApplyPortSec, 0, "1", "next;")
	g.Flow(dp, LSInLookupFDB, 0, "1", "next;")
	g.Flow(dp, LSInPutFDB, 0, "1", "next;")
	g.Flow(dp, LSOutCheckPortSec, 100, "eth.mcast", regbitPortSecDrop+" = 0; next;")
	g.Flow(dp, LSOutCheckPortSec, 0, "1", regbitPortSecDrop+" = check_out_port_sec(); next;")
	g.Flow(dp, LSOutApplyPortSec, 50, regbitPortSecDrop+" == 1", "drop;")
	g.Flow(dp, LSOutApplyPortSec, 0, "1", "output;")

	// Pre-ACL, pre-LB and pre-stateful, in both pipelines.
	for _, p := range []struct {
		preACL, preLB, preStateful Stage
		svcMAC, port               string
	}{
		{LSInPreACL, LSInPreLB, LSInPreStateful, "eth.dst == $svc_monitor_mac", "inport"},
		{LSOutPreACL, LSOutPreLB, LSOutPreStateful, "eth.src == $svc_monitor_mac", "outport"},
	} {
		g.Flow(dp, p.preACL, 0, "1", "next;")
		g.Flow(dp, p.preACL, 110, p.svcMAC, "next;")
		if facts.hasStatefulACL {
			g.Flow(dp, p.preACL, 110, "eth.mcast", "next;")
			skip := skipConntrackPredicate + " || (udp && udp.src == 546 && udp.dst == 547)"
			g.Flow(dp, p.preACL, 110, skip, "next;")
			g.Flow(dp, p.preACL, 100, "ip", regbitConntrackDefrag+" = 1; next;")
		}
		g.Flow(dp, p.preLB, 0, "1", "next;")
		g.Flow(dp, p.preLB, 110, p.svcMAC, "next;")
		g.Flow(dp, p.preLB, 110, "eth.mcast", "next;")
		g.Flow(dp, p.preLB, 110, skipConntrackPredicate, "next;")
		g.Flow(dp, p.preLB, 110, regbitACLStateless+" == 1", "next;")
		if facts.hasLBVIP {
			g.Flow(dp, p.preLB, 100, "ip", regbitConntrackNAT+" = 1; next;")
		}
		g.Flow(dp, p.preStateful, 0, "1", "next;")
		g.Flow(dp, p.preStateful, 110, regbitConntrackNAT+" == 1", ct.lb+";")
		g.Flow(dp, p.preStateful, 100, regbitConntrackDefrag+" == 1", "ct_next;")
	}
	// Ports that cannot use conntrack here: router ports (the router does
	// its own) and localnet ports.
	hasUnknown, hasMcastStatic, hasMcastRelay := false, false, false
	for _, port := range ReadAll[nb.LogicalSwitchPort](g, NB, g.Members(NB, nb.LogicalSwitchTable, sw.nb.UUID, "ports")) {
		if hasAddress(port.Addresses, "unknown") {
			hasUnknown = true
		}
		if port.Options["mcast_flood"] == "true" && lspEnabled(&port) {
			hasMcastStatic = true
		}
		if lspEnabled(&port) && relaysMulticast(g, &port) {
			hasMcastRelay = true
		}
		if port.Type != "router" && port.Type != "localnet" {
			continue
		}
		if port.Type == "router" {
			// A switch port whose router port does not exist is no
			// router port (ovn-northd gives it no flows).
			if _, ok := attachmentOf(g, &port); !ok {
				continue
			}
		}
		in := fmt.Sprintf("ip && inport == %q", port.Name)
		out := fmt.Sprintf("ip && outport == %q", port.Name)
		if facts.hasStatefulACL {
			g.Flow(dp, LSInPreACL, 110, in, "next;")
			g.Flow(dp, LSOutPreACL, 110, out, "next;")
		}
		g.Flow(dp, LSInPreLB, 110, in, "next;")
		if !facts.hasStatefulACL {
			// Without stateful ACLs nothing on this switch needs the
			// router's conntrack state: clear it.
			g.Flow(dp, LSOutPreLB, 110, out, "ct_clear; next;")
		} else {
			g.Flow(dp, LSOutPreLB, 110, out, "next;")
		}
	}

	// ACL hints and the ACLs' switch-wide flows.
	for _, p := range []struct {
		hint, acl Stage
		svcMAC    string
		ingress   bool
	}{
		{LSInACLHint, LSInACL, "eth.dst == $svc_monitor_mac", true},
		{LSOutACLHint, LSOutACL, "eth.src == $svc_monitor_mac", false},
	} {
		if !facts.hasACLs && !facts.hasLBVIP {
			g.Flow(dp, p.hint, 65535, "1", "next;")
			g.Flow(dp, p.acl, 65535, "1", "next;")
		} else {
			g.Flow(dp, p.hint, 0, "1", "next;")
			if defaultDrop {
				g.Flow(dp, p.acl, 0, "1", "drop;")
			} else {
				g.Flow(dp, p.acl, 0, "1", "next;")
			}
			g.Flow(dp, p.acl, 34000, p.svcMAC, "next;")
		}
		g.Flow(dp, p.acl, 65532, "nd || nd_ra || nd_rs || mldv1 || mldv2", "next;")
		if !facts.stateful() {
			continue
		}
		b := ct.blocked
		g.Flow(dp, p.hint, 7, "ct.new && !ct.est", regbitACLHintAllowNew+" = 1; "+regbitACLHintDrop+" = 1; next;")
		g.Flow(dp, p.hint, 6, "!ct.new && ct.est && !ct.rpl && "+b+" == 1", regbitACLHintAllowNew+" = 1; "+regbitACLHintDrop+" = 1; next;")
		g.Flow(dp, p.hint, 5, "!ct.trk", regbitACLHintAllow+" = 1; "+regbitACLHintDrop+" = 1; next;")
		g.Flow(dp, p.hint, 4, "!ct.new && ct.est && !ct.rpl && "+b+" == 0", regbitACLHintAllow+" = 1; "+regbitACLHintBlock+" = 1; next;")
		g.Flow(dp, p.hint, 3, "!ct.est", regbitACLHintDrop+" = 1; next;")
		g.Flow(dp, p.hint, 2, "ct.est && "+b+" == 1", regbitACLHintDrop+" = 1; next;")
		g.Flow(dp, p.hint, 1, "ct.est && "+b+" == 0", regbitACLHintBlock+" = 1; next;")

		if defaultDrop {
			g.Flow(dp, p.acl, 1, "ip && !ct.est", "drop;")
		} else {
			g.Flow(dp, p.acl, 1, "ip && !ct.est", regbitConntrackCommit+" = 1; next;")
		}
		g.Flow(dp, p.acl, 1, "ip && ct.est && "+b+" == 1", regbitConntrackCommit+" = 1; next;")
		reply := "ct.est && !ct.rel && !ct.new && !ct.inv && ct.rpl && " + b + " == 0"
		related := "!ct.est && ct.rel && !ct.new && !ct.inv && " + b + " == 0"
		if p.ingress {
			g.Flow(dp, p.acl, 65532, reply, regbitACLHintDrop+" = 0; "+regbitACLHintBlock+" = 0; "+regbitACLHintAllowRel+" = 1; next;")
			g.Flow(dp, p.acl, 65532, related, regbitACLHintAllowRel+" = 1; ct_commit_nat;")
		} else {
			g.Flow(dp, p.acl, 65532, reply, "next;")
			g.Flow(dp, p.acl, 65532, related, "ct_commit_nat;")
		}
		g.Flow(dp, p.acl, 65532, "ct.inv || (ct.est && ct.rpl && "+b+" == 1)", "drop;")
	}
	if defaultDrop && (facts.hasACLs || facts.hasLBVIP) {
		g.Flow(dp, LSInACLAfterLB, 0, "1", "drop;")
	} else {
		g.Flow(dp, LSInACLAfterLB, 0, "1", "next;")
	}
	g.Flow(dp, LSInACLAfterLB, 65532, "nd || nd_ra || nd_rs || mldv1 || mldv2", "next;")
	if facts.stateful() {
		g.Flow(dp, LSInACLAfterLB, 65532, regbitACLHintAllowRel+" == 1", "next;")
	}

	// QoS, load balancing, hairpin and stateful defaults.
	for _, st := range []Stage{LSInQoSMark, LSInQoSMeter, LSOutQoSMark, LSOutQoSMeter, LSInLBAffCheck, LSInLB, LSInLBAffLearn,
		LSInPreHairpin, LSInNATHairpin, LSInHairpin} {
		g.Flow(dp, st, 0, "1", "next;")
	}
	if facts.hasLBVIP {
		g.Flow(dp, LSInPreHairpin, 100, "ip && ct.trk", regbitHairpin+" = chk_lb_hairpin(); "+regbitHairpinReply+" = chk_lb_hairpin_reply(); next;")
		g.Flow(dp, LSInNATHairpin, 100, "ip && ct.new && ct.trk && "+regbitHairpin+" == 1", "ct_snat_to_vip; next;")
		g.Flow(dp, LSInNATHairpin, 100, "ip && ct.est && ct.trk && "+regbitHairpin+" == 1", "ct_snat;")
		g.Flow(dp, LSInNATHairpin, 90, "ip && "+regbitHairpinReply+" == 1", "ct_snat;")
		g.Flow(dp, LSInHairpin, 1, "("+regbitHairpin+" == 1 || "+regbitHairpinReply+" == 1)", "eth.dst <-> eth.src; outport = inport; flags.loopback = 1; output;")
	}
	for _, st := range []Stage{LSInStateful, LSOutStateful} {
		g.Flow(dp, st, 0, "1", "next;")
		g.Flow(dp, st, 100, regbitConntrackCommit+" == 1 && "+regbitACLLabel+" == 0", "ct_commit { "+ct.blocked+" = 0; }; next;")
		g.Flow(dp, st, 100, regbitConntrackCommit+" == 1 && "+regbitACLLabel+" == 1", "ct_commit { "+ct.blocked+" = 0; ct_label.label = reg3; }; next;")
	}

	// The stages from the ARP responder on: their switch-wide defaults;
	// what ports add is in switchPort.
	for _, st := range []Stage{LSInARPRsp, LSInDHCPOptions, LSInDHCPResponse, LSInDNSLookup, LSInDNSResponse, LSInExternalPort} {
		g.Flow(dp, st, 0, "1", "next;")
	}
	g.Flow(dp, LSInL2Lkup, 110, "eth.dst == $svc_monitor_mac && (tcp || icmp || icmp6)", "handle_svc_check(inport);")
	g.Flow(dp, LSInL2Lkup, 70, "eth.mcast", `outport = "_MC_flood"; output;`)
	g.Flow(dp, LSInL2Lkup, 0, "1", "outport = get_fdb(eth.dst); next;")
	switchMcastFlows(g, sw, hasMcastStatic, hasMcastRelay)
	switchDNSFlows(g, sw, facts.stateful())
	switchForwardingGroups(g, sw)
	if hasUnknown {
		g.Flow(dp, LSInL2Unknown, 50, `outport == "none"`, `outport = "_MC_unknown"; output;`)
	} else {
		g.Flow(dp, LSInL2Unknown, 50, `outport == "none"`, "drop;")
	}
	g.Flow(dp, LSInL2Unknown, 0, "1", "output;")
}

// hasAddress says whether one of a port's addresses entries is word
// ("unknown", "router", "dynamic").
func hasAddress(addresses []string, word string) bool {
	for _, a := range addresses {
		if strings.TrimSpace(a) == word {
			return true
		}
	}
	return false
}
