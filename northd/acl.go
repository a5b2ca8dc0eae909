package northd

import (
	"fmt"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// ACL priorities are offset by 1000 in the pipelines, leaving room for
// ovn-northd's own flows above and below (ovn-northd(8), "from-lport ACLs").
const aclPriorityOffset = 1000

// aclSwitches returns the switches an ACL applies to: those that list it,
// and those with a port in a port group that lists it, each once.
func aclSwitches(g *gen, acl ovsdb.UUID) []ovsdb.UUID {
	seen := map[ovsdb.UUID]bool{}
	var out []ovsdb.UUID
	add := func(ls ovsdb.UUID) {
		if !seen[ls] {
			seen[ls] = true
			out = append(out, ls)
		}
	}
	for _, ls := range g.Referrers(NB, nb.LogicalSwitchTable, "acls", acl) {
		add(ls)
	}
	for _, pg := range g.Referrers(NB, nb.PortGroupTable, "acls", acl) {
		for _, port := range g.Members(NB, nb.PortGroupTable, pg, "ports") {
			for _, ls := range g.Referrers(NB, nb.LogicalSwitchTable, "ports", port) {
				add(ls)
			}
		}
	}
	sortUUIDs(out)
	return out
}

// genACL generates an ACL's flows on every switch it applies to.
func genACL(g *gen) {
	acl, ok := Read[nb.ACL](g, NB, g.ID())
	if !ok {
		return
	}
	if acl.Priority < 0 || acl.Priority > 32767 {
		g.Warn("ACL priority out of range; skipping the ACL", "priority", acl.Priority)
		return
	}
	if err := g.CheckMatch(acl.Match); err != nil {
		g.Warn("ACL match does not parse; skipping the ACL", "match", acl.Match, "error", err)
		return
	}
	ct := ctNamesFor(g.Features())
	for _, ls := range aclSwitches(g, acl.UUID) {
		dp := g.Datapath(ls)
		facts := factsOf(g, ls)
		aclFlows(g, dp, &acl, facts.stateful(), ct)
	}
}

// aclFlows writes one ACL's flows on one switch.
func aclFlows(g *gen, dp dpID, acl *nb.ACL, stateful bool, ct ctNames) {
	ingress := acl.Direction == nb.ACLDirectionFromLport
	stage, preACL := LSOutACL, LSOutPreACL
	if ingress {
		stage, preACL = LSInACL, LSInPreACL
		if acl.Options["apply-after-lb"] == "true" {
			stage = LSInACLAfterLB
		}
	}
	prio := int(acl.Priority) + aclPriorityOffset
	match := acl.Match
	id := acl.UUID
	log := aclLog(acl)

	switch acl.Action {
	case nb.ACLActionAllowStateless:
		if stateful {
			g.FlowHint(dp, preACL, prio, match, regbitACLStateless+" = 1; next;", id)
		}
		g.FlowHint(dp, stage, prio, match, log+"next;", id)

	case nb.ACLActionAllow, nb.ACLActionAllowRelated:
		if !stateful {
			g.FlowHint(dp, stage, prio, match, log+"next;", id)
			return
		}
		commit := regbitConntrackCommit + " = 1; "
		label := ""
		if acl.Label != 0 {
			label = fmt.Sprintf("%s = 1; reg3 = %d; ", regbitACLLabel, acl.Label)
		}
		g.FlowHint(dp, stage, prio, regbitACLHintAllowNew+" == 1 && ("+match+")", commit+label+log+"next;", id)
		if label != "" {
			// A label must reach conntrack for known connections too.
			g.FlowHint(dp, stage, prio, regbitACLHintAllow+" == 1 && ("+match+")", commit+label+log+"next;", id)
		} else {
			g.FlowHint(dp, stage, prio, regbitACLHintAllow+" == 1 && ("+match+")", log+"next;", id)
		}

	case nb.ACLActionDrop:
		if !stateful {
			g.FlowHint(dp, stage, prio, match, log+"/* drop */", id)
			return
		}
		g.FlowHint(dp, stage, prio, regbitACLHintDrop+" == 1 && ("+match+")", log+"/* drop */", id)
		g.FlowHint(dp, stage, prio, regbitACLHintBlock+" == 1 && ("+match+")",
			"ct_commit { "+ct.blocked+" = 1; }; "+log+"/* drop */", id)

	case nb.ACLActionReject:
		reject := "reg0 = 0; " + rejectAction(ingress)
		if !stateful {
			g.FlowHint(dp, stage, prio, match, log+reject, id)
			return
		}
		g.FlowHint(dp, stage, prio, "("+regbitACLHintDrop+" == 1) && "+match, log+reject, id)
		g.FlowHint(dp, stage, prio, "("+regbitACLHintBlock+" == 1) && "+match,
			log+"ct_commit { "+ct.blocked+" = 1; };  "+reject, id)

	default:
		g.Warn("ACL with unknown action; skipping it", "action", acl.Action)
	}
}

// rejectAction is the reject { } that answers a packet an ACL rejects: a
// TCP reset, an ICMP unreachable or an SCTP abort (chosen by the chassis),
// sent back through the other pipeline.
func rejectAction(ingress bool) string {
	next := fmt.Sprintf("next(pipeline=egress,table=%d)", LSOutQoSMark.Table())
	if !ingress {
		next = fmt.Sprintf("next(pipeline=ingress,table=%d)", LSInL2Lkup.Table())
	}
	return "reject { /* eth.dst <-> eth.src; ip.dst <-> ip.src; is implicit. */ outport <-> inport; " + next + "; };"
}

// aclLog is the log() action of an ACL that logs, or "".
func aclLog(acl *nb.ACL) string {
	if !acl.Log {
		return ""
	}
	var args []string
	if acl.Name != nil && *acl.Name != "" {
		args = append(args, fmt.Sprintf("name=%q", *acl.Name))
	}
	severity := nb.ACLSeverityInfo
	if acl.Severity != nil && *acl.Severity != "" {
		severity = *acl.Severity
	}
	args = append(args, "severity="+severity)
	verdict := acl.Action
	switch verdict {
	case nb.ACLActionAllowRelated, nb.ACLActionAllowStateless:
		verdict = "allow"
	}
	args = append(args, "verdict="+verdict)
	if acl.Meter != nil && *acl.Meter != "" {
		args = append(args, fmt.Sprintf("meter=%q", *acl.Meter))
	}
	return "log(" + strings.Join(args, ", ") + "); "
}
