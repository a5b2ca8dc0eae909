package northd

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/internal/refovn"
	"github.com/govn/govn/lflow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
)

// The reference comparison: for each Northbound script in
// testdata/refdiff/*.sh, the real ovn-northd writes a Southbound; govn's
// State computes one from the same Northbound (read from the real
// ovsdb-server); the logical flows of both, per datapath name, are compared
// line by line. The differences that remain are kept in
// testdata/refdiff/NAME.diff ("-" a flow only ovn-northd has, "+" one only
// govn has); the test fails when the differences change, so that progress
// (or a regression) shows in that file's history. Regenerate with
//
//	go test ./northd -run TestReferenceFlows -update-refdiff
//
// A difference is acceptable only where govn's flows mean the same (the
// trace harness in internal/difftrace checks meaning) or ovn-northd's are
// wrong; the goal is none. A golden file whose differences remain begins
// with "#" lines that say why each cannot go; -update-refdiff keeps them.
var updateRefdiff = flag.Bool("update-refdiff", false, "rewrite testdata/refdiff/*.diff")

func TestReferenceFlows(t *testing.T) {
	scripts, _ := filepath.Glob("testdata/refdiff/*.sh")
	if len(scripts) == 0 {
		t.Fatal("no scripts in testdata/refdiff")
	}
	refovn.SkipUnlessInstalled(t)
	for _, script := range scripts {
		name := strings.TrimSuffix(filepath.Base(script), ".sh")
		t.Run(name, func(t *testing.T) {
			ref, govn, refRows, govnRows := referenceAndGovnFlows(t, script)
			// govn's parser reads every flow ovn-northd writes too
			// (issue 16: nothing OVN emits is refused), and govn's own.
			checkFlowsParse(t, "ovn-northd's", withoutOVNsOwnBadFlows(ref))
			checkFlowsParse(t, "govn's", govn)
			diff := diffFlows(normalizeLines(ref), normalizeLines(govn))
			rowDiff := diffFlows(refRows, govnRows)
			diff = append(diff, rowDiff...)
			golden := strings.TrimSuffix(script, ".sh") + ".diff"
			got := strings.Join(diff, "\n")
			if got != "" {
				got += "\n"
			}
			old, _ := os.ReadFile(golden)
			header, want := splitGoldenHeader(string(old))
			if *updateRefdiff {
				if err := os.WriteFile(golden, []byte(header+got), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: %d flows in ovn-northd's Southbound, %d in govn's; %d row lines, %d in govn's; %d differences (%d in rows)",
					name, len(ref), len(govn), len(refRows), len(govnRows), len(diff), len(rowDiff))
				return
			}
			if got != want {
				t.Errorf("%s: the differences from ovn-northd changed (%d now); run with -update-refdiff and read the diff:\n%s",
					name, len(diff), firstLines(unifiedChange(string(want), got), 60))
			}
		})
	}
}

// splitGoldenHeader splits a golden diff into its leading "#" lines and
// the differences.
func splitGoldenHeader(s string) (header, diff string) {
	for strings.HasPrefix(s, "#") {
		line, rest, _ := strings.Cut(s, "\n")
		header += line + "\n"
		s = rest
	}
	return header, s
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... %d more", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}

// unifiedChange lists the lines added to and removed from the golden diff.
func unifiedChange(want, got string) string {
	w := strings.Split(strings.TrimSpace(want), "\n")
	g := strings.Split(strings.TrimSpace(got), "\n")
	var out []string
	for _, l := range g {
		if l != "" && !slices.Contains(w, l) {
			out = append(out, "new: "+l)
		}
	}
	for _, l := range w {
		if l != "" && !slices.Contains(g, l) {
			out = append(out, "gone: "+l)
		}
	}
	return strings.Join(out, "\n")
}

// referenceAndGovnFlows runs script against the real OVN and returns the
// real ovn-northd's logical flows and govn's, as normalized lines, and the
// same for the other Southbound rows (sbRowLines).
func referenceAndGovnFlows(t *testing.T, script string) (ref, govn, refRows, govnRows []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := refovn.Start(t, refovn.RealNorthd)
	// Chassis as a 23.03 ovn-controller registers them: with every feature
	// it supports (Features), so that the reference writes the flows of a
	// current deployment.
	if err := env.AddChassis(ctx, "hv1", "hv2", "hv3"); err != nil {
		t.Fatal(err)
	}
	for _, hv := range []string{"hv1", "hv2", "hv3"} {
		args := []string{"set", "Chassis", hv}
		for _, f := range featureNames {
			args = append(args, "other_config:"+f+"=true")
		}
		if _, err := env.SBCtl(ctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	// ovn-northd picks these at random: fix them, as a deployment would
	// once they are chosen.
	if _, err := env.NBCtl(ctx, "init"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.NBCtl(ctx, "set", "NB_Global", ".", "options:svc_monitor_mac=\"0a:58:0a:00:00:fe\"", "options:mac_prefix=\"0a:00:00\""); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(script)
	if err := env.RunScript(ctx, abs); err != nil {
		t.Fatal(err)
	}
	if err := env.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	env.StopNorthd()
	out, err := env.SBCtl(ctx, "lflow-list")
	if err != nil {
		t.Fatal(err)
	}
	ref = parseLflowList(out)

	nbEvents, nbSchema := loadEvents(t, ctx, env.NBRemote(), "OVN_Northbound", NB, nil)
	allSB, sbSchema := loadEvents(t, ctx, env.SBRemote(), "OVN_Southbound", SB, nil)
	// The rows chassis write (Chassis, Encap...) go to govn as they are;
	// those that refer to northd's rows (IGMP_Group names a datapath and
	// ports) are written once govn has made its own, with the references
	// moved to govn's rows of the same names (chassisRowsFor).
	var sbEvents, laterEvents []Event
	for _, ev := range allSB {
		switch {
		case isRecordTable(ev.Table) || ev.Table == "Logical_Flow" || ev.Table == "Logical_DP_Group":
		case refersToRecords(sbSchema.Tables[ev.Table]):
			laterEvents = append(laterEvents, ev)
		default:
			sbEvents = append(sbEvents, ev)
		}
	}
	dpRequested := requestedDatapathKeys(nbEvents, nbSchema)
	refRows = sbRowLines(sbSchema, eventRows(allSB), dpRequested)
	s := New(nbSchema, sbSchema, Options{})
	s.Apply(nbEvents)
	s.Apply(sbEvents)
	sb := &memDB{t: t, which: SB, schema: sbSchema, rows: map[string]map[ovsdb.UUID]*ovsdb.Row{}}
	for _, ev := range sbEvents {
		if sb.rows[ev.Table] == nil {
			sb.rows[ev.Table] = map[ovsdb.UUID]*ovsdb.Row{}
		}
		sb.rows[ev.Table][ev.New.UUID] = ev.New
	}
	s.Recompute()
	settle := func() {
		for i := 0; ; i++ {
			if i == 5 {
				t.Fatal("Southbound writes did not settle")
			}
			if s.WriteSB(sb) == 0 {
				break
			}
			s.Apply(sb.commit())
			s.Process()
		}
	}
	settle()
	if len(laterEvents) > 0 {
		insertChassisRows(t, sb, eventRows(allSB), laterEvents)
		s.Apply(sb.commit())
		s.Process()
		settle()
	}
	return ref, memLflowList(sb), refRows, sbRowLines(sbSchema, rowSet(sb.rows), dpRequested)
}

// refersToRecords says whether rows of a table chassis write refer to
// rows northd writes (Datapath_Binding, Port_Binding).
func refersToRecords(ts *ovsdb.TableSchema) bool {
	for _, c := range ts.Columns {
		for _, b := range []*ovsdb.BaseType{&c.Type.Key, c.Type.Value} {
			if b != nil && isRecordTable(b.RefTable) {
				return true
			}
		}
	}
	return false
}

// insertChassisRows adds to govn's Southbound sb the rows of evs (read from
// ovn-northd's Southbound, whose rows are ref), with each reference to a
// Datapath_Binding or Port_Binding moved to govn's row of the same
// Northbound row or logical port name.
func insertChassisRows(t *testing.T, sb *memDB, ref rowSet, evs []Event) {
	t.Helper()
	dpTable, pbTable := sb.schema.Tables["Datapath_Binding"], sb.schema.Tables["Port_Binding"]
	dpName := func(r *ovsdb.Row) string {
		ext := r.Get(dpTable.Column("external_ids"))
		for _, k := range []string{"logical-switch", "logical-router"} {
			if v, ok := ext.Lookup(ovsdb.String(k)); ok {
				return v.Str()
			}
		}
		return ""
	}
	pbName := func(r *ovsdb.Row) string { return r.Get(pbTable.Column("logical_port")).Keys[0].Str() }
	govnID := map[string]ovsdb.UUID{}
	for id, r := range sb.rows["Datapath_Binding"] {
		govnID["dp/"+dpName(r)] = id
	}
	for id, r := range sb.rows["Port_Binding"] {
		govnID["pb/"+pbName(r)] = id
	}
	move := func(table string, a ovsdb.Atom) ovsdb.Atom {
		var key string
		switch table {
		case "Datapath_Binding":
			if r := ref["Datapath_Binding"][a.UUID()]; r != nil {
				key = "dp/" + dpName(r)
			}
		case "Port_Binding":
			if r := ref["Port_Binding"][a.UUID()]; r != nil {
				key = "pb/" + pbName(r)
			}
		default:
			return a
		}
		id, ok := govnID[key]
		if !ok {
			t.Fatalf("govn's Southbound has no row for ovn-northd's %s %s (%q)", table, a.UUID(), key)
		}
		return ovsdb.UUIDAtom(id)
	}
	for _, ev := range evs {
		ts := sb.schema.Tables[ev.Table]
		row := map[string]ovsdb.Datum{}
		for _, c := range ts.Columns {
			d := ev.New.Get(c)
			keys := make([]ovsdb.Atom, len(d.Keys))
			for i, a := range d.Keys {
				keys[i] = move(c.Type.Key.RefTable, a)
			}
			if c.Type.Value == nil {
				row[c.Name] = ovsdb.Set(keys...)
				continue
			}
			values := make([]ovsdb.Atom, len(d.Values))
			for i, a := range d.Values {
				values[i] = move(c.Type.Value.RefTable, a)
			}
			row[c.Name] = ovsdb.Map(keys, values)
		}
		sb.Insert(ev.Table, row)
	}
}

// requestedDatapathKeys names the switches and routers with
// other_config/options:requested-tnl-key.
func requestedDatapathKeys(evs []Event, schema *ovsdb.Schema) map[string]bool {
	out := map[string]bool{}
	for _, ev := range evs {
		col := map[string]string{"Logical_Switch": "other_config", "Logical_Router": "options"}[ev.Table]
		if col == "" {
			continue
		}
		ts := schema.Tables[ev.Table]
		if _, ok := ev.New.Get(ts.Column(col)).Lookup(ovsdb.String("requested-tnl-key")); ok {
			out[ev.New.Get(ts.Column("name")).Keys[0].Str()] = true
		}
	}
	return out
}

// loadEvents reads a whole database (the tables keep selects) as insert
// events.
func loadEvents(t *testing.T, ctx context.Context, remote, db string, which DB, keep func(string) bool) ([]Event, *ovsdb.Schema) {
	c, err := client.Connect(ctx, client.Options{Endpoints: []string{remote}, Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cache := c.Cache()
	schema := cache.Schema()
	var tables []string
	for name := range schema.Tables {
		if keep == nil || keep(name) {
			tables = append(tables, name)
		}
	}
	sort.Strings(tables)
	var evs []Event
	for _, table := range tables {
		for _, r := range cache.Rows(table) {
			evs = append(evs, Event{DB: which, Table: table, New: r})
		}
	}
	return evs, schema
}

var lflowLine = regexp.MustCompile(`^\s+table=(\d+)\s*\(([^)]*)\)\s*, priority=(\d+)\s*, match=\((.*)\), action=\((.*)\)$`)
var lflowDatapath = regexp.MustCompile(`^Datapath: "?([^" ]*)"? \(([^)]*)\)\s+Pipeline: (\w+)`)

// parseLflowList turns `ovn-sbctl lflow-list` into normalized lines.
func parseLflowList(out string) []string {
	var lines []string
	var dp, pipeline string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		l := sc.Text()
		if m := lflowDatapath.FindStringSubmatch(l); m != nil {
			dp, pipeline = m[1], m[3]
			continue
		}
		if m := lflowLine.FindStringSubmatch(l); m != nil {
			lines = append(lines, flowLine(dp, pipeline, m[1], strings.TrimSpace(m[2]), m[3], m[4], m[5]))
		}
	}
	sort.Strings(lines)
	return lines
}

func flowLine(dp, pipeline, table, stage, priority, match, actions string) string {
	return fmt.Sprintf("%s %s %s(%s) %s (%s) (%s)", dp, pipeline[:2], table, stage, priority, match, actions)
}

// normalizeLines normalizes the flow lines of both sides for comparison.
func normalizeLines(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		m := flowLineRE.FindStringSubmatch(l)
		if m == nil {
			out[i] = l
			continue
		}
		match, actions := normalizeFlowText(m[4], m[6]), normalizeFlowText(m[4], m[7])
		out[i] = fmt.Sprintf("%s %s %s(%s) %s (%s) (%s)", m[1], m[2], m[3], m[4], m[5], match, actions)
	}
	sort.Strings(out)
	return out
}

// normalizeFlowText removes what ovn-northd writes arbitrarily:
// generated address set numbers, and the numbers of ECMP groups and
// members in the routing and policy stages.
func normalizeFlowText(stage, s string) string {
	s = generatedAS.ReplaceAllString(s, "$$_rtr_lb_N_")
	switch stage {
	case "lr_in_ip_routing", "lr_in_ip_routing_ecmp", "lr_in_policy", "lr_in_policy_ecmp":
	default:
		return s
	}
	s = ecmpGroupMatch.ReplaceAllString(s, "reg8[0..15] == G")
	s = ecmpGroupSet.ReplaceAllString(s, "reg8[0..15] = G; reg8[16..31] = select(")
	return ecmpMember.ReplaceAllString(s, "reg8[16..31] == M")
}

var (
	generatedAS = regexp.MustCompile(`\$_rtr_lb_\d+_`)
	ecmpMember  = regexp.MustCompile(`reg8\[16\.\.31\] == \d+`)
	// ECMP group numbers too: reg8[0..15] is 0 outside a group.
	ecmpGroupMatch = regexp.MustCompile(`reg8\[0\.\.15\] == [1-9]\d*`)
	ecmpGroupSet   = regexp.MustCompile(`reg8\[0\.\.15\] = [1-9]\d*; reg8\[16\.\.31\] = select\(`)
)

// memLflowList lists the logical flows of a memDB Southbound as
// normalized lines.
func memLflowList(sb *memDB) []string {
	dpName := map[ovsdb.UUID]string{}
	tdp := sb.schema.Tables["Datapath_Binding"]
	for id, r := range sb.rows["Datapath_Binding"] {
		ext := r.Get(tdp.Column("external_ids"))
		if v, ok := ext.Lookup(ovsdb.String("name")); ok {
			dpName[id] = v.Str()
		}
	}
	tf := sb.schema.Tables["Logical_Flow"]
	tg := sb.schema.Tables["Logical_DP_Group"]
	col := func(r *ovsdb.Row, c string) ovsdb.Datum { return r.Get(tf.Column(c)) }
	var lines []string
	for _, r := range sb.rows["Logical_Flow"] {
		var dps []ovsdb.UUID
		for _, a := range col(r, "logical_datapath").Keys {
			dps = append(dps, a.UUID())
		}
		for _, a := range col(r, "logical_dp_group").Keys {
			if g := sb.rows["Logical_DP_Group"][a.UUID()]; g != nil {
				for _, d := range g.Get(tg.Column("datapaths")).Keys {
					dps = append(dps, d.UUID())
				}
			}
		}
		ext := col(r, "external_ids")
		stage, _ := ext.Lookup(ovsdb.String("stage-name"))
		for _, dp := range dps {
			lines = append(lines, flowLine(dpName[dp], col(r, "pipeline").Keys[0].Str(),
				fmt.Sprint(col(r, "table_id").Keys[0].Int()), stage.Str(),
				fmt.Sprint(col(r, "priority").Keys[0].Int()),
				col(r, "match").Keys[0].Str(), col(r, "actions").Keys[0].Str()))
		}
	}
	sort.Strings(lines)
	return lines
}

// checkFlowsParse checks that govn's logical flows (normalized lines) all
// parse as OVN's logical flow language, with govn's own parser, which
// refuses what OVN refuses.
func checkFlowsParse(t *testing.T, whose string, lines []string) {
	t.Helper()
	symtab, err := lflow.NewSymtab()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range lines {
		m := flowLineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("cannot read back flow line %q", l)
		}
		pipeline := "ingress"
		if m[2] == "eg" {
			pipeline = "egress"
		}
		fmt.Fprintf(&b, "Datapath: \"%s\" (00000000-0000-0000-0000-000000000000)  Pipeline: %s\n", m[1], pipeline)
		fmt.Fprintf(&b, "  table=%s (%s), priority=%s, match=(%s), action=(%s)\n", m[3], m[4], m[5], m[6], m[7])
	}
	var out strings.Builder
	res, err := symtab.CheckListing(strings.NewReader(b.String()), &out, lflow.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed > 0 {
		t.Errorf("%d of %s logical flows do not parse:\n%s", res.Failed, whose, firstLines(out.String(), 40))
	}
}

// withoutOVNsOwnBadFlows leaves out the flows ovn-northd 23.03 writes that
// OVN's own parser refuses too (its ovn-controller ignores them): a load
// balancer without backends on a router with force SNAT gets
// "flags.force_snat_for_lb = 1; drop;", and drop must stand alone.
func withoutOVNsOwnBadFlows(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasSuffix(l, "(flags.force_snat_for_lb = 1; drop;)") || strings.HasSuffix(l, "(flags.skip_snat_for_lb = 1; drop;)") {
			continue
		}
		out = append(out, l)
	}
	return out
}

var flowLineRE = regexp.MustCompile(`^(\S*) (in|eg) (\d+)\(([^)]*)\) (\d+) \((.*)\) \((.*)\)$`)

// diffFlows returns "-" lines for flows only ref has and "+" lines for
// flows only govn has, sorted by the flow.
func diffFlows(ref, govn []string) []string {
	count := map[string]int{}
	for _, l := range ref {
		count[l]++
	}
	for _, l := range govn {
		count[l]--
	}
	var out []string
	for l, n := range count {
		for ; n > 0; n-- {
			out = append(out, "- "+l)
		}
		for ; n < 0; n++ {
			out = append(out, "+ "+l)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][2:] != out[j][2:] {
			return out[i][2:] < out[j][2:]
		}
		return out[i] < out[j]
	})
	return out
}
