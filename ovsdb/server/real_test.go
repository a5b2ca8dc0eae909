package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/schema"
)

// startFileServer serves a new database file created with the named
// embedded schema and returns the socket path.
func startFileServer(t *testing.T, schemaName string) string {
	t.Helper()
	text, err := schema.Lookup(schemaName)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), schemaName+".db")
	if err := CreateFile(path, text); err != nil {
		t.Fatal(err)
	}
	return startFileServerAt(t, path)
}

// startFileServerAt serves the database file at path and returns the
// socket path.
func startFileServerAt(t *testing.T, path string) string {
	t.Helper()
	db, log, err := OpenFile(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Logger: quietLogger()})
	if err := srv.AddDatabase(db, log); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "db.sock")
	ctx, cancel := context.WithCancel(context.Background())
	l, err := Listen(ctx, "punix:"+sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done; log.Close() })
	return sock
}

func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestRealClients drives the server with the real ovn-nbctl and
// ovsdb-client.
func TestRealClients(t *testing.T) {
	for _, tool := range []string{"ovn-nbctl", "ovsdb-client", "ovsdb-tool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	sock := startFileServer(t, "nb")
	db := "--db=unix:" + sock
	runTool(t, "ovn-nbctl", db, "ls-add", "sw0")
	runTool(t, "ovn-nbctl", db, "lsp-add", "sw0", "p1", "--", "lsp-set-addresses", "p1", "00:00:00:00:00:01 10.0.0.1")
	runTool(t, "ovn-nbctl", db, "lr-add", "lr0", "--", "lrp-add", "lr0", "lrp0", "00:00:00:00:ff:01", "10.0.0.254/24")
	runTool(t, "ovn-nbctl", db, "acl-add", "sw0", "to-lport", "1000", "ip4.src == 10.0.0.2", "drop")
	show := runTool(t, "ovn-nbctl", db, "show")
	for _, want := range []string{"switch", "(sw0)", "port p1", `addresses: ["00:00:00:00:00:01 10.0.0.1"]`, "router", "(lr0)", "port lrp0", "networks: [\"10.0.0.254/24\"]"} {
		if !strings.Contains(show, want) {
			t.Errorf("ovn-nbctl show lacks %q:\n%s", want, show)
		}
	}
	if got := runTool(t, "ovn-nbctl", db, "get", "Logical_Switch_Port", "p1", "addresses"); strings.TrimSpace(got) != `["00:00:00:00:00:01 10.0.0.1"]` {
		t.Errorf("get: %q", got)
	}
	runTool(t, "ovn-nbctl", db, "lsp-del", "p1")
	if got := runTool(t, "ovn-nbctl", db, "--columns=name", "list", "Logical_Switch_Port"); strings.TrimSpace(got) != "" {
		t.Errorf("deleted port still listed: %q", got)
	}
	// Removing the ACL from the switch garbage-collects the ACL row.
	runTool(t, "ovn-nbctl", db, "acl-del", "sw0")
	if got := runTool(t, "ovn-nbctl", db, "list", "ACL"); strings.TrimSpace(got) != "" {
		t.Errorf("ACL not collected: %q", got)
	}
	remote := "unix:" + sock
	if got := runTool(t, "ovsdb-client", "list-dbs", remote); got != "OVN_Northbound\n_Server\n" {
		t.Errorf("list-dbs: %q", got)
	}
	dump := runTool(t, "ovsdb-client", "dump", remote, "OVN_Northbound", "Logical_Switch", "name")
	if !strings.Contains(dump, "sw0") {
		t.Errorf("dump: %s", dump)
	}
	tr := runTool(t, "ovsdb-client", "transact", remote, `["OVN_Northbound",{"op":"select","table":"Logical_Router","where":[],"columns":["name"]}]`)
	if strings.TrimSpace(tr) != `[{"rows":[{"name":"lr0"}]}]` {
		t.Errorf("transact: %s", tr)
	}
}

func TestRealNorthd(t *testing.T) {
	for _, tool := range []string{"ovn-nbctl", "ovn-sbctl", "ovn-northd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	nb, sb := startFileServer(t, "nb"), startFileServer(t, "sb")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	northd := exec.CommandContext(ctx, "ovn-northd", "--ovnnb-db=unix:"+nb, "--ovnsb-db=unix:"+sb,
		"--unixctl="+filepath.Join(dir, "northd.ctl"), "--log-file="+filepath.Join(dir, "northd.log"))
	if err := northd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); northd.Wait() })
	nbdb := "--db=unix:" + nb
	runTool(t, "ovn-nbctl", nbdb, "ls-add", "sw0", "--", "lsp-add", "sw0", "p1", "--", "lsp-set-addresses", "p1", "00:00:00:00:00:01 10.0.0.1")
	runTool(t, "ovn-nbctl", nbdb, "--timeout=10", "--wait=sb", "sync")
	flows := runTool(t, "ovn-sbctl", "--db=unix:"+sb, "lflow-list", "sw0")
	for _, want := range []string{"ls_in_check_port_sec", "ls_in_l2_lkup", `eth.dst == 00:00:00:00:00:01`, `outport = "p1"`} {
		if !strings.Contains(flows, want) {
			t.Errorf("northd's flows lack %q", want)
		}
	}
}

// TestReadRealServerFile serves a database file that the real ovsdb-server
// wrote (with its "_is_diff" records) and compares ovsdb-client dump of
// both servers.
func TestReadRealServerFile(t *testing.T) {
	for _, tool := range []string{"ovsdb-server", "ovsdb-tool", "ovsdb-client", "ovn-nbctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "nb.db")
	text, err := schema.Lookup("nb")
	if err != nil {
		t.Fatal(err)
	}
	schemaPath := filepath.Join(dir, "nb.ovsschema")
	if err := os.WriteFile(schemaPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, "ovsdb-tool", "create", path, schemaPath)
	sock := filepath.Join(dir, "real.sock")
	ctx, cancel := context.WithCancel(context.Background())
	real := exec.CommandContext(ctx, "ovsdb-server", "--no-chdir", "--remote=punix:"+sock,
		"--unixctl="+filepath.Join(dir, "real.ctl"), "--log-file="+filepath.Join(dir, "real.log"), path)
	if err := real.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			real.Wait()
		}
	}
	t.Cleanup(stop)
	waitUnixSocket(t, sock)
	db := "--db=unix:" + sock
	runTool(t, "ovn-nbctl", db, "ls-add", "sw0", "--", "set", "Logical_Switch", "sw0", "other_config:a=1", "other_config:b=2")
	runTool(t, "ovn-nbctl", db, "lsp-add", "sw0", "p1", "--", "lsp-set-addresses", "p1", "00:00:00:00:00:01 10.0.0.1", "00:00:00:00:00:02")
	runTool(t, "ovn-nbctl", db, "lsp-add", "sw0", "p2", "--", "lsp-add", "sw0", "p3")
	// Modifications become diff records: map keys removed and changed, set
	// elements removed, rows deleted.
	runTool(t, "ovn-nbctl", db, "set", "Logical_Switch", "sw0", "other_config:a=9", "--", "remove", "Logical_Switch", "sw0", "other_config", "b")
	runTool(t, "ovn-nbctl", db, "lsp-set-addresses", "p1", "00:00:00:00:00:02")
	runTool(t, "ovn-nbctl", db, "lsp-del", "p2")
	want := runTool(t, "ovsdb-client", "dump", "unix:"+sock, "OVN_Northbound")
	stop()
	if file, err := os.ReadFile(path); err != nil || !strings.Contains(string(file), `"_is_diff":true`) {
		t.Fatalf("ovsdb-server wrote no diff records (%v); the test would prove nothing", err)
	}

	govn := startFileServerAt(t, path)
	got := runTool(t, "ovsdb-client", "dump", "unix:"+govn, "OVN_Northbound")
	if got != want {
		t.Errorf("dump differs after reading ovsdb-server's file\ngovn:\n%s\novsdb-server:\n%s", got, want)
	}
}
