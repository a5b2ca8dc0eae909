package difftest

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestControllerRegisters runs the real ovn-controller with its local
// Open_vSwitch database and the SB served by the target and by the real
// ovsdb-server (ovn-northd running too, no ovs-vswitchd). ovn-controller
// must create br-int in the local database and register its Chassis,
// Chassis_Private and Encap rows in the SB identically on both.
func TestControllerRegisters(t *testing.T) {
	need(t, "ovn-controller", "ovn-northd", "ovs-vsctl", "ovn-sbctl", "ovsdb-server", "ovsdb-tool")
	results := map[string]string{}
	for _, kind := range []string{kindReal, target()} {
		c := startCentral(t, kind)
		vs := startServer(t, kind, "vswitch")
		ctx := t.Context()
		vsctl := func(args ...string) string {
			return run(ctx, vs.dir, "ovs-vsctl", append([]string{"--db=" + vs.remote(), "--no-wait"}, args...)...)
		}
		if out := vsctl("init", "--", "set", "Open_vSwitch", ".",
			"external_ids:system-id=hv1", "external_ids:ovn-remote="+c.sb.remote(),
			"external_ids:ovn-encap-type=geneve", "external_ids:ovn-encap-ip=192.168.0.1",
			"external_ids:ovn-bridge=br-int", "external_ids:ovn-bridge-datapath-type=netdev"); strings.Contains(out, "[exit]") {
			t.Fatalf("%s: %s", kind, out)
		}
		startDaemon(t, vs.dir, "ovn-controller", "--no-chdir",
			"--pidfile="+filepath.Join(vs.dir, "controller.pid"),
			"--log-file="+filepath.Join(vs.dir, "controller.log"),
			vs.remote())
		sbctl := func(args ...string) string {
			return run(ctx, c.dir, "ovn-sbctl", append([]string{"--db=" + c.sb.remote()}, args...)...)
		}
		if !poll(ctx, func() bool {
			return strings.Contains(sbctl("--bare", "--columns=name", "list", "Chassis_Private"), "hv1")
		}) ||
			!poll(ctx, func() bool { return strings.Contains(vsctl("--bare", "--columns=name", "list", "Bridge"), "br-int") }) {
			t.Fatalf("%s: ovn-controller did not register within 20s; its log:\n%s", kind, tail(readFile(filepath.Join(vs.dir, "controller.log")), 2000))
		}
		// Let it settle (it writes Chassis and Encap in more than one
		// transaction), then capture.
		time.Sleep(time.Second)
		var b strings.Builder
		for _, step := range []step{
			listing("--columns=name,hostname,encaps,external_ids,other_config,transport_zones", "list", "Chassis"),
			listing("--columns=name,chassis,external_ids", "list", "Chassis_Private"),
			listing("list", "Encap"),
		} {
			b.WriteString(strings.ReplaceAll(sortedStep(step, sbctl(step.args...)), c.sb.remote(), "<sb>"))
		}
		for _, step := range []step{
			listing("--columns=name,fail_mode,datapath_type,other_config,external_ids,protocols", "list", "Bridge"),
			listing("--columns=name,type,external_ids", "list", "Interface"),
			listing("--columns=external_ids", "list", "Open_vSwitch"),
		} {
			b.WriteString(strings.ReplaceAll(sortedStep(step, vsctl(step.args...)), c.sb.remote(), "<sb>"))
		}
		// ovn-controller gives br-int a random MAC address and stamps its
		// start time.
		results[kind] = volatileRE.ReplaceAllString(normalizeUUIDs(normalizeNoise(b.String())), `$1=<volatile>`)
	}
	diffTranscripts(t, "ovn-controller", results[kindReal], results[target()])
}

var volatileRE = regexp.MustCompile(`(hwaddr|ovn-startup-ts)="[^"]*"`)

// sortedStep applies step's sort to the stdout part of a transcript entry.
func sortedStep(st step, entry string) string {
	head, body, ok := strings.Cut(entry, "\n")
	if !ok || st.sort == nil || strings.Contains(body, "[exit]") {
		return entry
	}
	return head + "\n" + st.sort(body)
}

// poll calls cond every 100ms until it holds (true) or 20s pass (false).
func poll(ctx context.Context, cond func() bool) bool {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}
