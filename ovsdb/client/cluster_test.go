package client

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clusterMember is a real ovsdb-server serving a member of a clustered
// Test database.
type clusterMember struct {
	socket, ctl, raft string
}

// startClusterMember creates the Test cluster (join == "") or joins the
// one at raft address join, and runs an ovsdb-server for the member.
func startClusterMember(t *testing.T, join string) *clusterMember {
	t.Helper()
	for _, bin := range []string{"ovsdb-server", "ovsdb-tool", "ovs-appctl"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "test.db")
	m := &clusterMember{socket: filepath.Join(dir, "db.sock"), ctl: filepath.Join(dir, "ctl"), raft: "unix:" + filepath.Join(dir, "raft")}
	tool := exec.Command("ovsdb-tool", "join-cluster", db, "Test", m.raft, join)
	if join == "" {
		schemaFile := filepath.Join(dir, "test.ovsschema")
		if err := os.WriteFile(schemaFile, []byte(testSchema), 0o644); err != nil {
			t.Fatal(err)
		}
		tool = exec.Command("ovsdb-tool", "create-cluster", db, schemaFile, m.raft)
	}
	if out, err := tool.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", tool, err, out)
	}
	cmd := exec.Command("ovsdb-server", "--no-chdir", "--remote=punix:"+m.socket, "--unixctl="+m.ctl,
		"--log-file="+filepath.Join(dir, "log"), db)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	waitFor(t, func() bool { _, err := os.Stat(m.socket); return err == nil })
	return m
}

// status returns the member's cluster/status report.
func (m *clusterMember) status() string {
	out, _ := exec.Command("ovs-appctl", "-t", m.ctl, "cluster/status", "Test").CombinedOutput()
	return string(out)
}

// sessionAddr is the socket of the client's current session ("" when it
// has none).
func sessionAddr(c *Client) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return ""
	}
	return c.sess.conn.RemoteAddr()
}

// TestLeaderOnlyFollowsLeadership runs a two-server cluster of the real
// ovsdb-server: a LeaderOnly client skips the follower, and when the
// leader hands its leadership over, keeping the client's connection, the
// client moves to the new leader.
func TestLeaderOnlyFollowsLeadership(t *testing.T) {
	leader := startClusterMember(t, "")
	follower := startClusterMember(t, leader.raft)
	// The follower must have finished joining to be able to take over.
	waitFor(t, func() bool {
		s := follower.status()
		return strings.Contains(s, "Status: cluster member") && strings.Contains(s, "Role: follower")
	})

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, Options{
		Endpoints:  []string{"unix:" + follower.socket, "unix:" + leader.socket},
		Database:   "Test",
		LeaderOnly: true,
		MinBackoff: 20 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if got := sessionAddr(c); got != leader.socket {
		t.Fatalf("LeaderOnly client is on %q, want the leader %q", got, leader.socket)
	}

	// The old leader stays up and keeps the client's connection; only its
	// _Server row says it no longer leads.
	if out, err := exec.Command("ovs-appctl", "-t", leader.ctl, "cluster/failure-test", "transfer-leadership").CombinedOutput(); err != nil {
		t.Fatalf("transfer-leadership: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for sessionAddr(c) != follower.socket {
		if time.Now().After(deadline) {
			t.Fatalf("client on %q 20s after the leadership moved; follower says:\n%s", sessionAddr(c), follower.status())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.Transact(ctx, Operation{Op: "comment", Comment: "on the new leader"}); err != nil {
		t.Errorf("transaction on the new leader: %v", err)
	}
}
