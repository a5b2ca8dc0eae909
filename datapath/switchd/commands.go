package switchd

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/govn/govn/datapath/conntrack"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/unixctl"
)

// Commands returns the control commands; "exit" calls stop.
func (s *Switch) Commands(stop func()) map[string]unixctl.Command {
	return map[string]unixctl.Command{
		"dpctl/dump-flows":      s.dumpMegaflows,
		"dpctl/del-flows":       s.flushMegaflows,
		"dpctl/show":            s.show,
		"dpif/show":             s.show,
		"upcall/show":           s.upcallShow,
		"upcall/set-flow-limit": s.setFlowLimit,
		"dump-tables":           s.dumpTables,
		"ofproto/trace":         s.trace,
		"dump-flows":            s.dumpFlows,
		"add-flow":              s.addFlow,
		"del-flows":             s.delFlows,
		"replace-flows":         s.replaceFlows,
		"conntrack/dump":        s.dumpConntrack,
		"dpctl/dump-conntrack":  s.dumpConntrack,
		"conntrack/flush":       s.flushConntrack,
		"dpctl/flush-conntrack": s.flushConntrack,
		"version":               func([]string) (string, error) { return "govn switch\n", nil },
		"exit":                  func([]string) (string, error) { stop(); return "", nil },
	}
}

// The datapath's name in dumps, as OVS's "system@ovs-system", and the
// bridge's, as "br0".
const (
	dpName     = "govn@switch"
	bridgeName = "govn"
)

// dropDPName drops a leading datapath or bridge name argument, which
// ovs-appctl users give out of habit ("dpctl/show system@ovs-system",
// "ofproto/trace govn in_port=1"): any name with '@', or the bridge's.
func dropDPName(args []string) []string {
	if len(args) > 0 && (strings.Contains(args[0], "@") || args[0] == bridgeName) {
		return args[1:]
	}
	return args
}

// dumpMegaflows is dpctl/dump-flows [reasons]: the megaflows, busiest
// first, with the rule behind each matched field if asked.
func (s *Switch) dumpMegaflows(args []string) (string, error) {
	reasons := false
	for _, a := range dropDPName(args) {
		switch a {
		case "reasons", "--reasons":
			reasons = true
		case "-m", "--more":
			// Megaflows always show every matched field.
		default:
			return "", fmt.Errorf("dpctl/dump-flows: unknown argument %q (want [reasons])", a)
		}
	}
	mfs := s.dp.Megaflows()
	strs := make([]string, len(mfs))
	for i := range mfs {
		strs[i] = mfs[i].Match.String()
	}
	idx := make([]int, len(mfs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := cmp.Compare(mfs[b].Hits, mfs[a].Hits); c != 0 {
			return c
		}
		return strings.Compare(strs[a], strs[b])
	})
	var b strings.Builder
	if reasons && len(mfs) > 0 {
		// xlate gives no reason for these two: they are never wildcarded.
		b.WriteString("# every megaflow matches in_port and recirc_id exactly: they select the pipeline a packet runs\n")
	}
	for _, i := range idx {
		mf := mfs[i]
		if !reasons {
			mf.Reasons = nil
		}
		b.WriteString(mf.String())
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// flushMegaflows is dpctl/del-flows: the megaflow caches are emptied (the
// flow tables stay).
func (s *Switch) flushMegaflows(args []string) (string, error) {
	if len(dropDPName(args)) > 0 {
		return "", errors.New("dpctl/del-flows: deleting some megaflows is not supported; without arguments it deletes them all")
	}
	return fmt.Sprintf("%d megaflows deleted\n", s.dp.FlushMegaflows()), nil
}

// show is dpctl/show and dpif/show: the datapath's counters and its ports'.
func (s *Switch) show(args []string) (string, error) {
	for _, a := range dropDPName(args) {
		if a != "-s" && a != "--statistics" {
			return "", fmt.Errorf("show: unknown argument %q", a)
		}
	}
	st := s.dp.Stats()
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", dpName)
	fmt.Fprintf(&b, "  lookups: hit:%d missed:%d lost:%d\n", st.EMCHits+st.MegaflowHits, st.Upcalls, st.UpcallErrors)
	fmt.Fprintf(&b, "  flows: %d\n", st.Megaflows)
	fmt.Fprintf(&b, "  packets: %d emc_hits:%d megaflow_hits:%d recirculated:%d\n", st.Packets, st.EMCHits, st.MegaflowHits, st.Recirculated)
	fmt.Fprintf(&b, "  upcalls: %d errors:%d installed:%d expired:%d revalidated:%d invalidated:%d\n",
		st.Upcalls, st.UpcallErrors, st.Installed, st.Expired, st.Revalidated, st.Invalidated)
	fmt.Fprintf(&b, "  flow_limit: %d hits:%d evicted:%d\n", st.FlowLimit, st.FlowLimitHits, st.Evicted)
	fmt.Fprintf(&b, "  drops: no_port:%d loop:%d conntrack:%d meter:%d bad_offload:%d packet_in:%d fragment:%d\n",
		st.NoPortDrops, st.LoopDrops, st.CTDrops, st.MeterDrops, st.BadOffloads, st.PacketInDrops, st.FragDrops)
	pst := s.dp.PortStats()
	stats := func(ps port.Stats) {
		fmt.Fprintf(&b, "    RX packets:%d bytes:%d errors:%d dropped:%d\n", ps.RxPackets, ps.RxBytes, ps.RxErrors, ps.RxDropped)
		fmt.Fprintf(&b, "    TX packets:%d bytes:%d errors:%d dropped:%d\n", ps.TxPackets, ps.TxBytes, ps.TxErrors, ps.TxDropped)
	}
	shown := map[uint32]bool{}
	for _, p := range s.ports {
		shown[p.No] = true
		fmt.Fprintf(&b, "  port %d: %s (%s)\n", p.No, p.Port.Name(), p.Kind)
		stats(pst[p.No])
	}
	// Ports added to the datapath by someone else (the chassis'
	// controller adds its interfaces and tunnel itself).
	for _, pc := range s.dp.Ports() {
		if !shown[pc.No] {
			fmt.Fprintf(&b, "  port %d: %s\n", pc.No, pc.Name)
			stats(pc.Stats)
		}
	}
	return b.String(), nil
}

// upcallShow is upcall/show: the megaflows against the flow limit, and
// the upcalls the limit kept from installing one.
func (s *Switch) upcallShow(args []string) (string, error) {
	if len(dropDPName(args)) > 0 {
		return "", errors.New("upcall/show: takes no arguments")
	}
	st := s.dp.Stats()
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", dpName)
	fmt.Fprintf(&b, "  flows         : (current %d) (limit %d)\n", st.Megaflows, st.FlowLimit)
	fmt.Fprintf(&b, "  upcalls       : %d installed:%d flow_limit_hits:%d errors:%d\n", st.Upcalls, st.Installed, st.FlowLimitHits, st.UpcallErrors)
	fmt.Fprintf(&b, "  evicted       : %d (to get under a lowered limit)\n", st.Evicted)
	return b.String(), nil
}

// setFlowLimit is upcall/set-flow-limit N: the cap on the megaflows of
// all receive queues together; megaflows over a lowered cap are evicted,
// least recently hit first.
func (s *Switch) setFlowLimit(args []string) (string, error) {
	if len(args) != 1 {
		return "", errors.New("upcall/set-flow-limit: want one argument, the number of megaflows")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 0 {
		return "", fmt.Errorf("upcall/set-flow-limit: %q is not a number of megaflows (a non-negative integer)", args[0])
	}
	evicted, err := s.dp.SetFlowLimit(n)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("set flow_limit to %d (%d megaflows evicted)\n", n, evicted), nil
}

// dumpTables is dump-tables: for each table with rules or traffic, its
// rule count, the packets that matched a rule in it or missed, and the
// slow path's lookups in it.
func (s *Switch) dumpTables(args []string) (string, error) {
	if len(dropDPName(args)) > 0 {
		return "", errors.New("dump-tables takes no arguments")
	}
	s.dp.PushStats()
	ts := s.pipe.Tables()
	active := map[int]int{}
	for _, r := range ts.Dump(flow.NumTables) {
		active[int(r.Table)]++
	}
	var b strings.Builder
	b.WriteString("# matched/missed count packets; slow_path_lookups count the translator's lookups (upcalls, revalidations, traces)\n")
	for t := range flow.NumTables {
		st := ts.TableStats(uint8(t))
		if st.Lookups == 0 && st.MatchedPackets == 0 && st.MissedPackets == 0 && active[t] == 0 {
			continue
		}
		fmt.Fprintf(&b, "table %d: active=%d matched=%d missed=%d slow_path_lookups=%d slow_path_matched=%d\n",
			t, active[t], st.MatchedPackets, st.MissedPackets, st.Lookups, st.Matched)
	}
	return b.String(), nil
}

// trace is ofproto/trace [BRIDGE] FLOW: the packet's path through the
// tables, its megaflow as the datapath would install it, and the reasons
// for the megaflow's mask.
func (s *Switch) trace(args []string) (string, error) {
	args = dropDPName(args)
	// Any other bridge name ("br0") is a first word that is no flow.
	if len(args) > 1 && !strings.ContainsAny(args[0], "=,") {
		if _, err := ParseFlowSpec(args[0]); err != nil {
			args = args[1:]
		}
	}
	if len(args) == 0 {
		return "", errors.New("ofproto/trace: want a flow, e.g. in_port=1,icmp,nw_src=10.0.0.1,nw_dst=10.0.0.2")
	}
	spec := strings.Join(args, ",")
	k, err := ParseFlowSpec(spec)
	if err != nil {
		return "", fmt.Errorf("ofproto/trace: %s: %w", spec, err)
	}
	r := s.dp.Trace(k) // with the mask the datapath installs
	var b strings.Builder
	fmt.Fprintf(&b, "Flow: %s\n\n", flowString(k))
	fmt.Fprintf(&b, "bridge(%q)\n--------------\n", bridgeName)
	b.WriteString(r.FormatTrace())
	fmt.Fprintf(&b, "Datapath actions: %s\n", dpActions(r.Actions))
	return b.String(), nil
}

// flowString formats a packet's key: every nonzero field.
func flowString(k flow.Key) string {
	var m flow.Match
	m.Key = k
	for f := flow.Field(1); f.Valid(); f++ {
		if !k.GetU128(f).IsZero() || f == flow.InPort {
			m.Mask.SetField(f)
		}
	}
	return m.String()
}

func dpActions(as []flow.DPAction) string {
	if len(as) == 0 {
		return "drop"
	}
	return flow.DPActionsString(as)
}

// dumpFlows is dump-flows [TABLE]: the installed rules, by table and
// priority, with their packet and byte counts, in the form add-flow and
// replace-flows read (they ignore the counts, as ovs-ofctl does).
func (s *Switch) dumpFlows(args []string) (string, error) {
	args = dropDPName(args)
	table := flow.NumTables
	switch len(args) {
	case 0:
	case 1:
		v := strings.TrimPrefix(args[0], "table=")
		n, err := strconv.ParseUint(v, 10, 8)
		if err != nil || n >= flow.NumTables {
			return "", fmt.Errorf("dump-flows: bad table %q", args[0])
		}
		table = int(n)
	default:
		return "", errors.New("dump-flows: want at most a table number")
	}
	s.dp.PushStats()
	rules := s.pipe.Tables().Dump(table)
	// Matches are formatted once, not on every comparison: rules of one
	// table and priority are many in OVN's tables.
	strs := make([]string, len(rules))
	idx := make([]int, len(rules))
	for i := range rules {
		strs[i], idx[i] = rules[i].Match.String(), i
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		a, b := &rules[i], &rules[j]
		if c := cmp.Compare(a.Table, b.Table); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		return strings.Compare(strs[i], strs[j])
	})
	var b strings.Builder
	for _, i := range idx {
		b.WriteString(rules[i].DumpString())
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// apply applies a bundle and revalidates the megaflows at once, and says
// what changed.
func (s *Switch) apply(b flow.Bundle, what string) (string, error) {
	s.progMu.Lock()
	defer s.progMu.Unlock()
	return s.applyLocked(b, what)
}

// applyLocked is apply with s.progMu held.
func (s *Switch) applyLocked(b flow.Bundle, what string) (string, error) {
	before := s.dp.Stats()
	gen, err := s.pipe.Apply(b)
	if err != nil {
		return "", err
	}
	s.dp.Revalidate()
	after := s.dp.Stats()
	s.log.Info("flow tables changed", "change", what, "generation", gen)
	return fmt.Sprintf("%s; generation %d; megaflows revalidated: %d, removed: %d\n",
		what, gen, after.Revalidated-before.Revalidated, after.Invalidated-before.Invalidated), nil
}

// addFlow is add-flow RULE; a rule split over several arguments (an
// unquoted shell word list) is joined with spaces.
func (s *Switch) addFlow(args []string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("add-flow: want a rule, e.g. in_port=1,actions=output:2")
	}
	r, err := ParseRule(strings.Join(args, " "))
	if err != nil {
		return "", fmt.Errorf("add-flow: %w", err)
	}
	var b flow.Bundle
	b.Add(r)
	out, err := s.apply(b, "1 rule added")
	if err != nil {
		return "", fmt.Errorf("add-flow: %w", err)
	}
	return out, nil
}

// delFlows is del-flows: every rule and group goes.
func (s *Switch) delFlows(args []string) (string, error) {
	if len(dropDPName(args)) > 0 {
		return "", errors.New("del-flows: deleting some rules is not supported; without arguments it deletes every rule")
	}
	s.progMu.Lock() // the count is of the rules this deletes
	defer s.progMu.Unlock()
	n := len(s.pipe.Tables().Dump(flow.NumTables))
	out, err := s.applyLocked(flow.Bundle{Ops: []flow.Op{{Kind: flow.OpDeleteAll}}}, fmt.Sprintf("%d rules deleted", n))
	if err != nil {
		return "", fmt.Errorf("del-flows: %w", err)
	}
	return out, nil
}

// replaceFlows is replace-flows FILE: the flow tables become the file's
// rules in one bundle, so no packet sees a mix. Like ovs-ofctl
// replace-flows (over OpenFlow 1.3, the version it needs for tables) it
// changes only what differs: rules not in the file are deleted, new ones
// added, changed ones modified; so changed and unchanged rules keep their
// packet counts. The daemon reads FILE, so a relative name is
// relative to the daemon's directory.
func (s *Switch) replaceFlows(args []string) (string, error) {
	args = dropDPName(args)
	if len(args) != 1 {
		return "", errors.New("replace-flows: want one flow file")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return "", fmt.Errorf("replace-flows: %w", err)
	}
	defer f.Close()
	rules, err := ParseFlows(f)
	if err != nil {
		return "", fmt.Errorf("replace-flows: %s: %w", args[0], err)
	}
	s.progMu.Lock()
	defer s.progMu.Unlock()
	b, changed, deleted := replaceBundle(s.pipe.Tables().Dump(flow.NumTables), rules)
	out, err := s.applyLocked(b, fmt.Sprintf("flow tables replaced by %d rules (%d added or changed, %d deleted)", len(rules), changed, deleted))
	if err != nil {
		return "", fmt.Errorf("replace-flows: %w", err)
	}
	return out, nil
}

// ruleID is what identifies a rule in its tables: table, priority, match.
type ruleID struct {
	table    uint8
	priority uint16
	match    string // normalized
}

func idOf(r *flow.Rule) ruleID {
	m := r.Match
	m.Normalize()
	return ruleID{r.Table, r.Priority, m.String()}
}

// replaceBundle is the bundle that turns tables holding installed into
// tables holding want: deletes of the rules want lacks, then adds of the
// new rules and modifies of those that differ in cookie or actions.
func replaceBundle(installed, want []flow.Rule) (b flow.Bundle, changed, deleted int) {
	have := make(map[ruleID]*flow.Rule, len(installed))
	for i := range installed {
		have[idOf(&installed[i])] = &installed[i]
	}
	wanted := make(map[ruleID]bool, len(want))
	for i := range want {
		wanted[idOf(&want[i])] = true
	}
	for i := range installed {
		if r := &installed[i]; !wanted[idOf(r)] {
			b.Delete(*r)
			deleted++
		}
	}
	for i := range want {
		r := &want[i]
		old := have[idOf(r)]
		switch {
		case old == nil:
			b.Add(*r)
		case old.Cookie != r.Cookie || flow.ActionsString(old.Actions) != flow.ActionsString(r.Actions):
			b.Modify(*r)
		default:
			continue
		}
		changed++
	}
	return b, changed, deleted
}

// zoneArg parses an optional "zone=N" argument.
func zoneArg(cmd string, args []string) (zone uint16, all bool, err error) {
	args = dropDPName(args)
	switch len(args) {
	case 0:
		return 0, true, nil
	case 1:
		v, ok := strings.CutPrefix(args[0], "zone=")
		n, err := strconv.ParseUint(v, 0, 16)
		if !ok || err != nil {
			return 0, false, fmt.Errorf("%s: bad argument %q (want zone=N, N in 0..65535)", cmd, args[0])
		}
		return uint16(n), false, nil
	}
	return 0, false, fmt.Errorf("%s: want at most zone=N", cmd)
}

// dumpConntrack is conntrack/dump [zone=N].
func (s *Switch) dumpConntrack(args []string) (string, error) {
	zone, all, err := zoneArg("conntrack/dump", args)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	emit := func(e conntrack.Entry) bool {
		b.WriteString(e.String())
		b.WriteByte('\n')
		return true
	}
	if all {
		s.ct.DumpAll(emit)
	} else {
		s.ct.Dump(zone, emit)
	}
	return b.String(), nil
}

// flushConntrack is conntrack/flush [zone=N].
func (s *Switch) flushConntrack(args []string) (string, error) {
	zone, all, err := zoneArg("conntrack/flush", args)
	if err != nil {
		return "", err
	}
	if all {
		s.ct.FlushAll()
	} else {
		s.ct.Flush(zone)
	}
	return "", nil
}

// sortPorts orders ports by number.
func sortPorts(ps []Port) {
	slices.SortFunc(ps, func(a, b Port) int { return cmp.Compare(a.No, b.No) })
}
