package difftest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// ovnCentral is one OVN control plane: NB and SB servers of one kind and
// the real ovn-northd between them.
type ovnCentral struct {
	kind   string
	nb, sb *dbServer
	dir    string
}

func startCentral(t *testing.T, kind string) *ovnCentral {
	t.Helper()
	c := &ovnCentral{kind: kind, nb: startServer(t, kind, "nb"), sb: startServer(t, kind, "sb")}
	c.dir = c.nb.dir
	startDaemon(t, c.dir, "ovn-northd", "--no-chdir",
		"--ovnnb-db="+c.nb.remote(), "--ovnsb-db="+c.sb.remote(),
		"--pidfile="+filepath.Join(c.dir, "northd.pid"),
		"--log-file="+filepath.Join(c.dir, "northd.log"),
		"--unixctl="+filepath.Join(c.dir, "northd.ctl"))
	return c
}

// nbctl runs ovn-nbctl against this central's NB with --wait=sb, so the
// change has reached the SB through northd when it returns.
func (c *ovnCentral) nbctl(ctx context.Context, args ...string) string {
	return run(ctx, c.dir, "ovn-nbctl", append([]string{"--db=" + c.nb.remote(), "--wait=sb", "--timeout=20"}, args...)...)
}

// lflows returns the SB's logical flows, normalized.
func (c *ovnCentral) lflows(ctx context.Context) string {
	return normalizeLflows(run(ctx, c.dir, "ovn-sbctl", "--db="+c.sb.remote(), "lflow-list"))
}

var (
	// ovn-northd 23.03 numbers the generated address sets of router load
	// balancers in hash order.
	rtrLBSetRE = regexp.MustCompile(`\$_rtr_lb_\d+_ip([46])`)
	// and ECMP group members in hash order: the group ids are kept, the
	// member ids are masked and the flows of a group sorted.
	ecmpMemberRE = regexp.MustCompile(`reg8\[16\.\.31\] == \d+\)`)
	ecmpSelectRE = regexp.MustCompile(`reg8\[16\.\.31\] = select\(([\d, ]+)\)`)
)

// normalizeLflows masks the nondeterminism of ovn-northd 23.03's output
// (documented in the reference notes) and numbers UUIDs.
func normalizeLflows(out string) string {
	out = rtrLBSetRE.ReplaceAllString(out, "$$_rtr_lb_N_ip$1")
	out = ecmpMemberRE.ReplaceAllString(out, "reg8[16..31] == M)")
	out = ecmpSelectRE.ReplaceAllStringFunc(out, func(s string) string {
		return "reg8[16..31] = select(" + strings.Repeat("M, ", strings.Count(s, ",")) + "M)"
	})
	// Masking made some flows equal in text but not in order: sort the
	// flows within each datapath pipeline.
	var b strings.Builder
	var flows []string
	flush := func() {
		slices.Sort(flows)
		for _, f := range flows {
			b.WriteString(f)
		}
		flows = flows[:0]
	}
	for _, line := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(line, "  table=") {
			flows = append(flows, line)
			continue
		}
		flush()
		b.WriteString(line)
	}
	flush()
	return normalizeUUIDs(normalizeNoise(b.String()))
}

// nbChanges are the further NB changes applied one by one after the
// features-a configuration, each with --wait=sb.
var nbChanges = [][]string{
	{"ls-add", "sw2"},
	{"lsp-add", "sw2", "sw2-p1", "--", "lsp-set-addresses", "sw2-p1", "50:54:00:00:02:01 30.0.0.11"},
	{"lsp-add", "sw2", "sw2-p2", "--", "lsp-set-addresses", "sw2-p2", "50:54:00:00:02:02 30.0.0.12", "--", "lsp-set-port-security", "sw2-p2", "50:54:00:00:02:02 30.0.0.12"},
	{"lrp-add", "lr0", "lr0-sw2", "00:00:00:00:ff:03", "30.0.0.1/24"},
	{"lsp-add", "sw2", "sw2-lr0", "--", "lsp-set-type", "sw2-lr0", "router", "--", "lsp-set-addresses", "sw2-lr0", "router", "--", "lsp-set-options", "sw2-lr0", "router-port=lr0-sw2"},
	{"acl-add", "sw2", "from-lport", "1000", "ip4.src == 30.0.0.11 && tcp.dst == 22", "drop"},
	{"acl-add", "sw2", "to-lport", "900", "ip4 && udp", "allow-related"},
	{"pg-add", "pg_sw2", "sw2-p1", "sw2-p2"},
	{"acl-add", "pg_sw2", "to-lport", "1001", "outport == @pg_sw2 && icmp4", "allow"},
	{"lb-add", "lb5", "30.0.0.100:80", "30.0.0.11:8080,30.0.0.12:8080", "tcp"},
	{"ls-lb-add", "sw2", "lb5"},
	{"lr-lb-add", "lr0", "lb5"},
	{"lr-nat-add", "lr0", "dnat_and_snat", "172.168.0.130", "30.0.0.12"},
	{"lr-route-add", "lr0", "10.10.0.0/16", "30.0.0.12"},
	{"lr-policy-add", "lr0", "700", "ip4.src == 30.0.0.0/24", "allow"},
	{"set", "Logical_Switch", "sw2", "other_config:subnet=30.0.0.0/24"},
	{"add", "Address_Set", "as_clients", "addresses", `"30.0.0.11"`},
	{"create", "Address_Set", "name=as_sw2", `addresses="30.0.0.11","30.0.0.12"`},
	{"acl-add", "sw2", "from-lport", "800", "ip4.src == $as_sw2", "allow"},
	{"pg-set-ports", "pg_web", "sw0-p1", "sw0-p2", "sw0-p3"},
	{"lsp-set-enabled", "sw1-p3", "disabled"},
	{"lsp-set-type", "sw1-p2", "localport"},
	{"lsp-set-addresses", "sw0-p3", "50:54:00:00:00:03 10.0.0.13 aef0::13", "50:54:00:00:00:33 10.0.0.133"},
	{"set", "Load_Balancer", "lb0", `vips:"30.0.0.1"="10.0.0.11,10.0.0.13"`},
	{"lb-add", "lb0", "30.0.0.10", "10.0.0.12"},
	{"ls-lb-del", "sw1", "lb2"},
	{"lr-nat-del", "lr0", "dnat", "172.168.0.120"},
	{"lr-route-del", "lr0", "192.168.200.0/24"},
	{"lr-policy-del", "lr0", "800", "ip4.src == 20.0.0.0/24"},
	{"acl-del", "sw1", "from-lport", "900", "ip6.src == $as_v6 && udp.dst == {53, 5353}"},
	{"lsp-del", "sw1-p1"},
	{"remove", "Address_Set", "as_clients", "addresses", `"10.0.0.12"`},
	{"set", "Logical_Router", "lr0", "options:always_learn_from_arp_request=false"},
	{"set", "Logical_Switch_Port", "sw0-p2", "options:requested-chassis=hv1"},
	{"lsp-add", "public", "ln2", "--", "lsp-set-type", "ln2", "localnet", "--", "lsp-set-addresses", "ln2", "unknown", "--", "lsp-set-options", "ln2", "network_name=phys2"},
	{"ls-add", "sw3"},
	{"lsp-add", "sw3", "sw3-p1", "--", "lsp-set-addresses", "sw3-p1", "dynamic"},
	{"set", "Logical_Switch", "sw3", "other_config:mac_only=true"},
	{"lr-add", "lr1"},
	{"lrp-add", "lr1", "lr1-sw3", "00:00:00:00:ff:31", "40.0.0.1/24"},
	{"lsp-add", "sw3", "sw3-lr1", "--", "lsp-set-type", "sw3-lr1", "router", "--", "lsp-set-addresses", "sw3-lr1", "router", "--", "lsp-set-options", "sw3-lr1", "router-port=lr1-sw3"},
	{"lr-nat-add", "lr1", "snat", "40.0.0.1", "40.0.0.0/24"},
	{"qos-add", "sw2", "to-lport", "200", "ip4.dst == 30.0.0.11", "rate=2000", "burst=200"},
	{"meter-add", "meter1", "drop", "200", "kbps"},
	{"acl-add", "sw3", "from-lport", "100", "1", "allow-stateless"},
	{"ls-del", "sw3"},
	{"lr-del", "lr1"},
	{"pg-del", "pg_sw2"},
	{"lb-del", "lb5"},
	{"set", "NB_Global", ".", "options:mac_prefix=0a:00:00"},
}

// TestNorthdLflows runs the real ovn-northd against NB and SB served by
// the target and by the real ovsdb-server, builds the features-a
// configuration, and compares the SB's logical flows; then applies
// nbChanges one by one and compares again along the way.
func TestNorthdLflows(t *testing.T) {
	need(t, "ovn-northd", "ovn-nbctl", "ovn-sbctl", "ovsdb-server", "ovsdb-tool", "bash")
	if len(nbChanges) != 50 {
		t.Fatalf("%d NB changes, want 50", len(nbChanges))
	}
	script, err := filepath.Abs("../../testdata/reference/features-a.sh")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ref := startCentral(t, kindReal)
	got := startCentral(t, target())
	both := func(f func(c *ovnCentral) string) (string, string) {
		var r, g string
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); r = f(ref) }()
		go func() { defer wg.Done(); g = f(got) }()
		wg.Wait()
		return r, g
	}
	refOut, gotOut := both(func(c *ovnCentral) string {
		out := run(ctx, c.dir, "env", "OVN_NB_DB="+c.nb.remote(), "bash", script)
		return out + c.nbctl(ctx, "sync")
	})
	if !strings.Contains(refOut, "done") || strings.Contains(refOut, "[exit]") {
		t.Fatalf("features-a.sh failed against the reference:\n%s", refOut)
	}
	diffTranscripts(t, "features-a-script", normalizeUUIDs(normalizeNoise(strings.ReplaceAll(refOut, ref.nb.remote(), "<db>"))),
		normalizeUUIDs(normalizeNoise(strings.ReplaceAll(gotOut, got.nb.remote(), "<db>"))))
	compare := func(stage string) {
		r, g := both(func(c *ovnCentral) string { return c.lflows(ctx) })
		if strings.Count(r, "\n") < 100 {
			t.Fatalf("%s: the reference has only %d lines of lflows:\n%s", stage, strings.Count(r, "\n"), r)
		}
		if r == g {
			return
		}
		diffTranscripts(t, "lflows-"+stage, r, g)
		// Tell the core engineer where to look: if a full recompute of
		// northd on the target makes the flows agree, northd's incremental
		// view (built from monitor updates) went wrong; if not, the data
		// the target stores or serves differs.
		run(ctx, got.dir, "ovs-appctl", "-t", filepath.Join(got.dir, "northd.ctl"), "inc-engine/recompute")
		got.nbctl(ctx, "sync")
		if got.lflows(ctx) == r {
			t.Logf("%s: after ovn-northd inc-engine/recompute on %s the flows agree: the monitor updates northd received led its incremental processing astray", stage, target())
		} else {
			t.Logf("%s: even after ovn-northd inc-engine/recompute on %s the flows differ: the stored NB/SB contents differ", stage, target())
		}
		nbLists := []step{listing("list", "Logical_Switch"), listing("list", "Load_Balancer"), listing("list", "Logical_Router")}
		rn, gn := both(func(c *ovnCentral) string {
			return runSession(ctx, c.dir, "ovn-nbctl", c.nb.remote(), "--db=", nbLists)
		})
		diffTranscripts(t, "nb-after-"+stage, rn, gn)
	}
	compare("features-a")
	for i, change := range nbChanges {
		r, g := both(func(c *ovnCentral) string { return c.nbctl(ctx, change...) })
		diffTranscripts(t, fmt.Sprintf("nb-change-%d", i+1),
			normalizeUUIDs(normalizeNoise(strings.ReplaceAll(r, ref.nb.remote(), "<db>"))),
			normalizeUUIDs(normalizeNoise(strings.ReplaceAll(g, got.nb.remote(), "<db>"))))
		if n := i + 1; n == 10 || n == 25 || n == 50 {
			compare(fmt.Sprintf("after-%d-changes", n))
		}
	}
	if t.Failed() {
		for _, c := range []*ovnCentral{ref, got} {
			if b, err := os.ReadFile(filepath.Join(c.dir, "northd.log")); err == nil {
				t.Logf("%s northd log tail:\n%s", c.kind, tail(string(b), 1500))
			}
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
