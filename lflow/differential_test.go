package lflow

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/datapath/systest/netns"
)

// TestDifferentialOVNController compiles the Southbound of the features-a
// setup with this package and compares the result with what the real
// ovn-controller 23.03 installs in br-int for the same Southbound: for
// every (table, priority, logical datapath) of the logical pipelines, the
// number of rules must agree, except where the difference is explained
// (an action this datapath cannot express yet, or a range that govn splits
// into fewer, equivalent prefixes).
//
// It runs the real daemons (ovsdb-server, ovn-northd, ovs-vswitchd in a
// network namespace, ovn-controller as chassis hv1, the gateway of
// lr0-public) and so needs root and the OVN/OVS binaries; it skips
// otherwise, and with -short.
func TestDifferentialOVNController(t *testing.T) {
	skipWithoutReference(t)
	ns := netns.New(t) // skips unless root
	ref := startReference(t, ns, nil)

	st, c := testCompiler(t)
	env := ref.env(t, st)
	mine, explained := map[string]int{}, map[string]bool{}
	ctx := &Context{Env: env, NextConjID: 1, NextGroupID: 1}
	for _, fl := range ref.lflows {
		dp, ok := ref.dpByName[fl.Datapath]
		if !ok || !ref.localDP[dp] {
			continue
		}
		env.dp = dp
		ctx.Datapath = ref.dpKey[dp]
		ctx.Router = strings.HasPrefix(fl.Stage, "lr_")
		lf := Lflow{Pipeline: fl.Pipeline, Table: fl.Table, Priority: fl.Priority, Match: fl.Match, Actions: fl.Actions}
		table, _ := c.table(fl.Pipeline, fl.Table)
		group := fmt.Sprintf("table=%d priority=%d metadata=%d", table, fl.Priority, ctx.Datapath)
		if strings.ContainsAny(fl.Match, "<>") {
			explained[group] = true // relations: equivalent but differently split ranges
		}
		var res Result
		if err := c.Compile(&lf, ctx, &res); err != nil {
			if _, unsupported := err.(*UnsupportedError); !unsupported {
				t.Errorf("line %d: %v", fl.Line, err)
			}
			explained[group] = true
			continue
		}
		mine[group] += len(res.Rules)
	}

	real := ref.ruleCounts()

	groups := map[string]bool{}
	for g := range mine {
		groups[g] = true
	}
	for g := range real {
		groups[g] = true
	}
	var keys []string
	for g := range groups {
		keys = append(keys, g)
	}
	sort.Strings(keys)
	agree := 0
	for _, g := range keys {
		switch {
		case mine[g] == real[g]:
			agree++
		case explained[g]:
			t.Logf("%s: govn %d rules, ovn-controller %d (explained)", g, mine[g], real[g])
		default:
			t.Errorf("%s: govn %d rules, ovn-controller %d", g, mine[g], real[g])
		}
	}
	t.Logf("%d of %d (table, priority, datapath) groups have the same number of rules", agree, len(keys))
	if agree < 300 {
		t.Errorf("only %d groups compared; the reference setup did not come up fully", agree)
	}
}

// ruleCounts counts ovn-controller's rules in the logical pipelines by
// (table, priority, datapath).
func (ref *reference) ruleCounts() map[string]int {
	real := map[string]int{}
	re := regexp.MustCompile(`table=(\d+), priority=(\d+),.*metadata=0x([0-9a-f]+)`)
	lay := DefaultLayout()
	for _, line := range strings.Split(ref.flows, "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		tb, _ := strconv.Atoi(m[1])
		md, _ := strconv.ParseUint(m[3], 16, 32)
		// Only the logical pipelines; the other tables are physical.
		if tb < int(lay.IngressBase) || tb >= int(lay.IngressOutput) && tb < int(lay.EgressBase) || tb >= int(lay.EgressOutput) {
			continue
		}
		real[fmt.Sprintf("table=%s priority=%s metadata=%d", m[1], m[2], md)]++
	}
	return real
}

// reference is a running real OVN/OVS setup and what was read from it.
type reference struct {
	sbctl     func(args ...string) string
	dumpFlows func(context.Context) (string, error) // ovs-ofctl dump-flows br-int
	lflows    []ListedFlow
	flows     string              // ovs-ofctl dump-flows br-int
	dpByName  map[string]string   // datapath name -> Datapath_Binding uuid
	dpKey     map[string]uint32   // uuid -> tunnel key
	localDP   map[string]bool     // datapaths ovn-controller has flows for
	ports     []map[string]string // Port_Binding and Multicast_Group rows
}

func startReference(t *testing.T, ns *netns.NS, extra [][]string) *reference {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	env := append(os.Environ(), "OVS_RUNDIR="+dir, "OVS_LOGDIR="+dir, "OVS_DBDIR="+dir,
		"OVN_RUNDIR="+dir, "OVN_LOGDIR="+dir, "OVN_DBDIR="+dir)
	run := func(cmd *exec.Cmd) string {
		t.Helper()
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
		return string(out)
	}
	sh := func(name string, args ...string) string { return run(exec.CommandContext(ctx, name, args...)) }
	// Each daemon is stopped, by its own pid, when the test ends.
	daemon := func(name string, cmd *exec.Cmd) {
		pidfile := filepath.Join(dir, name+".pid")
		cmd.Args = append(cmd.Args, "--detach", "--no-chdir", "--pidfile="+pidfile,
			"--log-file="+filepath.Join(dir, name+".log"))
		t.Cleanup(func() {
			b, err := os.ReadFile(pidfile)
			if err != nil {
				return
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
		})
		run(cmd)
	}
	sock := filepath.Join(dir, "db.sock")
	vsock := filepath.Join(dir, "vs.sock")
	sh("ovsdb-tool", "create", "nb.db", "/usr/share/ovn/ovn-nb.ovsschema")
	sh("ovsdb-tool", "create", "sb.db", "/usr/share/ovn/ovn-sb.ovsschema")
	sh("ovsdb-tool", "create", "conf.db", "/usr/share/openvswitch/vswitch.ovsschema")
	daemon("db", exec.CommandContext(ctx, "ovsdb-server", "--remote=punix:"+sock,
		"--unixctl="+filepath.Join(dir, "db.ctl"), "nb.db", "sb.db"))
	daemon("northd", exec.CommandContext(ctx, "ovn-northd", "--ovnnb-db=unix:"+sock, "--ovnsb-db=unix:"+sock,
		"--unixctl="+filepath.Join(dir, "northd.ctl")))
	script := exec.CommandContext(ctx, "bash", "../testdata/reference/features-a.sh")
	script.Env = append(env, "OVN_NB_DB=unix:"+sock)
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf("features-a.sh: %v\n%s", err, out)
	}
	for _, args := range extra {
		sh("ovn-nbctl", append([]string{"--db=unix:" + sock}, args...)...)
	}
	daemon("vsdb", exec.CommandContext(ctx, "ovsdb-server", "--remote=punix:"+vsock,
		"--unixctl="+filepath.Join(dir, "vsdb.ctl"), "conf.db"))
	sh("ovs-vsctl", "--db=unix:"+vsock, "--no-wait", "init")
	daemon("vswitchd", ns.Command(ctx, "ovs-vswitchd", "--disable-system",
		"--unixctl="+filepath.Join(dir, "vswitchd.ctl"), "unix:"+vsock))
	sh("ovs-vsctl", "--db=unix:"+vsock, "--", "add-br", "br-int", "--", "set", "bridge", "br-int",
		"datapath_type=netdev", "fail-mode=secure", "--", "set", "open_vswitch", ".",
		"external_ids:system-id=hv1", "external_ids:ovn-remote=unix:"+sock,
		"external_ids:ovn-encap-type=geneve", "external_ids:ovn-encap-ip=127.0.0.1",
		"external_ids:ovn-bridge=br-int", "external_ids:ovn-bridge-datapath-type=netdev")
	daemon("controller", ns.Command(ctx, "ovn-controller", "unix:"+vsock))
	t.Cleanup(func() {
		// What ovn-controller complained about helps explain a failure.
		if b, err := os.ReadFile(filepath.Join(dir, "controller.log")); err == nil && t.Failed() {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "|WARN|") || strings.Contains(line, "|ERR|") {
					t.Logf("ovn-controller: %.300s", line)
				}
			}
		}
	})

	ref := &reference{sbctl: func(args ...string) string {
		return sh("ovn-sbctl", append([]string{"--db=unix:" + sock}, args...)...)
	}}
	// Wait for northd's flows, then for ovn-controller's to settle.
	mgmt := "unix:" + filepath.Join(dir, "br-int.mgmt")
	ref.dumpFlows = func(ctx context.Context) (string, error) {
		out, err := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", mgmt).Output()
		return string(out), err
	}
	last := -1
	for stable := 0; stable < 3; {
		if ctx.Err() != nil {
			t.Fatal("the reference setup did not settle in time")
		}
		time.Sleep(time.Second)
		if strings.Count(ref.sbctl("lflow-list"), "table=") < 600 {
			continue
		}
		out, err := ref.dumpFlows(ctx)
		if err != nil {
			continue
		}
		n := strings.Count(out, "\n")
		if n == last && n > 500 {
			stable++
		} else {
			stable = 0
		}
		last, ref.flows = n, out
	}
	var errs []error
	var err error
	ref.lflows, errs, err = ReadListing(strings.NewReader(ref.sbctl("lflow-list")))
	if err != nil || len(errs) > 0 {
		t.Fatalf("reading lflow-list: %v %v", err, errs)
	}
	ref.dpByName, ref.dpKey, ref.localDP = map[string]string{}, map[string]uint32{}, map[string]bool{}
	nameRe := regexp.MustCompile(`name=("?)([^",}]+)`)
	for _, r := range ref.rows(t, "Datapath_Binding", "_uuid", "tunnel_key", "external_ids") {
		k, _ := strconv.Atoi(r["tunnel_key"])
		ref.dpKey[r["_uuid"]] = uint32(k)
		if m := nameRe.FindStringSubmatch(r["external_ids"]); m != nil {
			ref.dpByName[m[2]] = r["_uuid"]
		}
		if strings.Contains(ref.flows, fmt.Sprintf("metadata=0x%x,", k)) {
			ref.localDP[r["_uuid"]] = true
		}
	}
	for _, r := range ref.rows(t, "Port_Binding", "logical_port", "tunnel_key", "datapath", "type", "chassis") {
		ref.ports = append(ref.ports, r)
	}
	for _, r := range ref.rows(t, "Multicast_Group", "name", "tunnel_key", "datapath") {
		r["logical_port"], r["type"], r["chassis"] = r["name"], "multicast", ""
		ref.ports = append(ref.ports, r)
	}
	return ref
}

// rows lists a Southbound table as maps of column to text.
func (ref *reference) rows(t *testing.T, table string, cols ...string) []map[string]string {
	out := ref.sbctl("--format=csv", "--no-headings", "--columns="+strings.Join(cols, ","), "list", table)
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", table, err)
	}
	var rows []map[string]string
	for _, rec := range recs {
		r := map[string]string{}
		for i, c := range cols {
			r[c] = strings.Trim(rec[i], `"`)
		}
		rows = append(rows, r)
	}
	return rows
}

// refEnv resolves names from the reference Southbound, for one datapath at
// a time. Ports without a chassis (VIFs, virtual ports, localports and
// gateway ports of other chassis) are not local to hv1.
type refEnv struct {
	dp     string
	keys   map[string]map[string]uint32 // datapath uuid -> port -> key
	local  map[string]bool
	sets   map[string][]Const
	groups map[string][]string // "<datapath key>_<name>" -> ports
	dpKey  map[string]uint32
}

func (ref *reference) env(t *testing.T, st *Symtab) *refEnv {
	e := &refEnv{keys: map[string]map[string]uint32{}, local: map[string]bool{},
		sets: map[string][]Const{}, groups: map[string][]string{}, dpKey: ref.dpKey}
	for _, p := range ref.ports {
		k, _ := strconv.Atoi(p["tunnel_key"])
		if e.keys[p["datapath"]] == nil {
			e.keys[p["datapath"]] = map[string]uint32{}
		}
		e.keys[p["datapath"]][p["logical_port"]] = uint32(k)
		switch p["type"] {
		case "patch", "localnet", "multicast":
			e.local[p["logical_port"]] = true
		default:
			e.local[p["logical_port"]] = p["chassis"] != "" && p["chassis"] != "[]"
		}
	}
	list := regexp.MustCompile(`[^\[\]", ]+`)
	for _, r := range ref.rows(t, "Address_Set", "name", "addresses") {
		cs, err := st.ParseAddresses(list.FindAllString(r["addresses"], -1))
		if err != nil {
			t.Fatalf("address set %s: %v", r["name"], err)
		}
		e.sets[r["name"]] = cs
	}
	for _, r := range ref.rows(t, "Port_Group", "name", "ports") {
		e.groups[r["name"]] = list.FindAllString(r["ports"], -1)
	}
	return e
}

func (e *refEnv) AddressSet(name string) ([]Const, bool) { c, ok := e.sets[name]; return c, ok }
func (e *refEnv) PortGroup(name string) ([]string, bool) {
	g, ok := e.groups[fmt.Sprintf("%d_%s", e.dpKey[e.dp], name)]
	return g, ok
}
func (e *refEnv) PortKey(name string) (uint32, bool) { k, ok := e.keys[e.dp][name]; return k, ok }
func (e *refEnv) IsLocalPort(name string) bool       { return e.local[name] }
func (e *refEnv) ChassisResident(port string) bool   { return e.local[port] }

// skipWithoutReference skips a test that runs the real OVN daemons when
// -short is given or a binary it needs is missing.
func skipWithoutReference(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the real OVN daemons")
	}
	for _, tool := range []string{"ovsdb-server", "ovsdb-tool", "ovn-northd", "ovn-nbctl", "ovn-sbctl",
		"ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ovn-controller", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
}
