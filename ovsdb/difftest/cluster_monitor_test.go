package difftest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var monitoredNameRE = regexp.MustCompile(`"name":"([^"]*)"`)

// TestClusterMonitorCondSinceOnAnotherMember compares ovsdb-server's and
// govn db's 3-server clusters when a client's member dies: the client had
// monitored Logical_Switch on a follower with monitor_cond_since, that
// follower is killed (kill -9), another switch is committed, and the
// client asks each remaining member for the changes since the last
// transaction id it saw. Each must find that id (a transaction id names
// the same commit on every member) and send only the new switch, not the
// whole table again.
func TestClusterMonitorCondSinceOnAnotherMember(t *testing.T) {
	need(t, "ovsdb-server", "ovsdb-tool", "ovs-appctl")
	results := map[string]string{}
	for _, kind := range []string{kindReal, kindGovn} {
		results[kind] = clusterResume(t, kind)
	}
	if results[kindGovn] != results[kindReal] {
		t.Errorf("monitor_cond_since on another member differs:\novsdb-server:\n%s\ngovn db:\n%s", results[kindReal], results[kindGovn])
	}
	t.Logf("govn db:\n%s", results[kindGovn])
	for _, line := range strings.Split(results[kindGovn], "\n") {
		if !strings.HasSuffix(line, "found=true names=[sw-new]") {
			t.Errorf("%s", line)
		}
	}
}

func clusterResume(t *testing.T, kind string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := startCluster(t, kind, "nb")
	defer func() {
		for _, m := range c.Members {
			m.Kill()
		}
	}()
	l := c.leader(t, "OVN_Northbound", -1)
	var followers []*clusterMember
	for _, m := range c.Members {
		if m != l {
			followers = append(followers, m)
		}
	}
	lc, err := dialMember(l)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.conn.Close()
	for _, sw := range []string{"sw-old1", "sw-old2"} {
		if err := lc.insertSwitch(ctx, sw); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
	}
	// The client monitors on the first follower, once it holds both.
	f := followers[0]
	fc, err := dialMember(f)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the follower to hold both switches", 20*time.Second, func() bool {
		names, err := fc.switchNames(ctx)
		return err == nil && len(names) == 2
	})
	found, last, names := monitorSince(ctx, t, fc, "00000000-0000-0000-0000-000000000000")
	if len(names) != 2 {
		t.Fatalf("%s: first monitor_cond_since: found=%v names=%v", kind, found, names)
	}
	f.Kill()
	fc.conn.Close()
	if err := lc.insertSwitch(ctx, "sw-new"); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	var out []string
	for _, m := range []*clusterMember{followers[1], l} {
		mc, err := dialMember(m)
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the member to hold the new switch", 20*time.Second, func() bool {
			names, err := mc.switchNames(ctx)
			return err == nil && len(names) == 3
		})
		found, _, names := monitorSince(ctx, t, mc, last)
		role := "follower"
		if m == l {
			role = "leader"
		}
		out = append(out, fmt.Sprintf("resume on the %s: found=%v names=%v", role, found, names))
		mc.conn.Close()
	}
	return strings.Join(out, "\n")
}

// monitorSince sends monitor_cond_since for Logical_Switch names from
// last and returns whether the server found last, its last transaction
// id, and the switch names in the updates, sorted.
func monitorSince(ctx context.Context, t *testing.T, c *ovsdbConn, last string) (bool, string, []string) {
	t.Helper()
	res, err := c.conn.CallRaw(ctx, "monitor_cond_since", []any{"OVN_Northbound", "m",
		map[string]any{"Logical_Switch": []any{map[string]any{"columns": []string{"name"}}}}, last})
	if err != nil {
		t.Fatalf("monitor_cond_since: %v", err)
	}
	var reply []json.RawMessage
	if err := json.Unmarshal(res, &reply); err != nil || len(reply) != 3 {
		t.Fatalf("monitor_cond_since reply: %s", res)
	}
	var found bool
	var id string
	json.Unmarshal(reply[0], &found)
	json.Unmarshal(reply[1], &id)
	var names []string
	for _, m := range monitoredNameRE.FindAllStringSubmatch(strings.ReplaceAll(string(reply[2]), " ", ""), -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	return found, id, names
}
