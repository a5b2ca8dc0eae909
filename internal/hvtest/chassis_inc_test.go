package hvtest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// engineCounter reads one counter of one node from govn chassis'
// inc-engine/show-stats.
func engineCounter(t *testing.T, hv *Hypervisor, node, counter string) int {
	t.Helper()
	out := hv.Run(t, "ovn-appctl", "-t", hv.Dir+"/chassis.ctl", "inc-engine/show-stats", node)
	m := regexp.MustCompile(`(?m)^- ` + counter + `:\s+(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("inc-engine/show-stats %s %s:\n%s", node, counter, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestGovnChassisIncremental (issue 11, acceptance d, on a running
// chassis): binding ports, adding an ACL and adding an address-set
// member are handled without recomputing the logical flows, and the
// rules kept incrementally are those a full translation makes and are
// installed (inc-engine/verify); the time from a port's iface-id
// appearing to its ovn-installed is logged.
func TestGovnChassisIncremental(t *testing.T) {
	c := govnChassisCluster(t, 1)
	hv1 := c.Hypervisor(1)
	c.NBCtl(t, "ls-add", "ls0")
	const ports = 8
	for i := 1; i <= ports; i++ {
		name := fmt.Sprintf("vm%d", i)
		c.NBCtl(t, "lsp-add", "ls0", name, "--", "lsp-set-addresses", name, fmt.Sprintf("0a:00:00:00:00:%02x 10.0.0.%d", i, 10+i))
	}
	c.NBCtl(t, "--wait=sb", "sync")
	vms := make([]*VM, ports+1)
	for i := 1; i <= ports; i++ {
		// An iface-id of no logical port: the timing below starts when
		// the real one is set.
		vms[i] = c.AddVM(t, hv1, VMSpec{Name: fmt.Sprintf("vm%d", i), LSP: fmt.Sprintf("none%d", i), MAC: fmt.Sprintf("0a:00:00:00:00:%02x", i), Addr: fmt.Sprintf("10.0.0.%d/24", 10+i)})
	}
	bind := func(i int) time.Duration {
		start := time.Now()
		hv1.Vsctl(t, "set", "Interface", vms[i].Port, fmt.Sprintf("external_ids:iface-id=vm%d", i))
		hv1.Vsctl(t, "wait-until", "Interface", vms[i].Port, "external_ids:ovn-installed=true")
		return time.Since(start)
	}
	bind(1)
	c.WaitPortUp(t, "vm1")
	base := engineCounter(t, hv1, "lflow_output", "recompute")

	var took []time.Duration
	for i := 2; i <= ports; i++ {
		took = append(took, bind(i))
		c.WaitPortUp(t, fmt.Sprintf("vm%d", i))
	}
	slices.Sort(took)
	t.Logf("iface-id set to ovn-installed, %d ports (including two ovs-vsctl runs): p50 %v, max %v", len(took), took[len(took)/2], took[len(took)-1])
	if log, err := os.ReadFile(filepath.Join(hv1.Dir, "chassis.log")); err == nil {
		// The chassis' own measure, from seeing the iface-id to
		// writing ovn-installed.
		var own []string
		for _, m := range regexp.MustCompile(`msg="port installed".* took=(\S+)`).FindAllSubmatch(log, -1) {
			own = append(own, string(m[1]))
		}
		t.Logf("govn chassis: iface-id seen to ovn-installed written: %s", strings.Join(own, " "))
	}

	c.NBCtl(t, "create", "Address_Set", "name=as1", "addresses=10.0.0.11")
	c.NBCtl(t, "--wait=hv", "acl-add", "ls0", "to-lport", "1001", `ip4.src == $as1 && tcp.dst == 22`, "drop")
	c.NBCtl(t, "--wait=hv", "add", "Address_Set", "as1", "addresses", "10.0.0.12")
	if n := engineCounter(t, hv1, "lflow_output", "recompute"); n != base {
		out := hv1.Run(t, "ovn-appctl", "-t", hv1.Dir+"/chassis.ctl", "inc-engine/show-stats")
		t.Errorf("lflow_output recomputed %d times while binding ports, adding an ACL and an address-set member:\n%s", n-base, out)
	}
	if err := vms[2].WaitPing(vms[3].IP(), 20*time.Second); err != nil {
		t.Errorf("vm2 -> vm3: %v", err)
	}
	// The incrementally kept rules are Translate's, and installed.
	if out := strings.TrimSpace(hv1.Run(t, "ovn-appctl", "-t", hv1.Dir+"/chassis.ctl", "inc-engine/verify")); out != "" {
		t.Errorf("inc-engine/verify:\n%s", out)
	}
	// inc-engine/recompute recomputes.
	hv1.Run(t, "ovn-appctl", "-t", hv1.Dir+"/chassis.ctl", "inc-engine/recompute")
	deadline := time.Now().Add(10 * time.Second)
	for engineCounter(t, hv1, "lflow_output", "recompute") == base && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := engineCounter(t, hv1, "lflow_output", "recompute"); n == base {
		t.Errorf("inc-engine/recompute: lflow_output recompute counter stays %d", n)
	}
	if out := hv1.Run(t, "ovn-appctl", "-t", hv1.Dir+"/chassis.ctl", "inc-engine/show-stats"); !strings.Contains(out, "Node: runtime_data") {
		t.Errorf("inc-engine/show-stats has no runtime_data:\n%s", out)
	}
}
