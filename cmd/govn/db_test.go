package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDBRemotesFromDatabase runs "govn db" as ovn-ctl runs ovsdb-server:
// listeners from the Connection rows, SSL files from the SSL table. It
// checks that ovn-nbctl set-connection opens a listener without a restart.
func TestDBRemotesFromDatabase(t *testing.T) {
	if _, err := exec.LookPath("ovn-nbctl"); err != nil {
		t.Skip("ovn-nbctl not installed")
	}
	dir := t.TempDir()
	t.Setenv("OVS_RUNDIR", dir) // for the default control socket
	db, sock := filepath.Join(dir, "nb.db"), filepath.Join(dir, "nb.sock")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runDB(ctx, []string{"-vconsole:off", "-vfile:info", "--create=nb", "--log-file=" + filepath.Join(dir, "log"),
			"--remote=punix:" + sock, "--remote=db:OVN_Northbound,NB_Global,connections",
			"--private-key=db:OVN_Northbound,SSL,private_key", "--certificate=db:OVN_Northbound,SSL,certificate",
			"--ca-cert=db:OVN_Northbound,SSL,ca_cert", "--ssl-protocols=db:OVN_Northbound,SSL,ssl_protocols", "--ssl-ciphers=db:OVN_Northbound,SSL,ssl_ciphers", db})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("govn db: %v", err)
		}
	})
	nbctl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ovn-nbctl", append([]string{"--timeout=5", "--db=unix:" + sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ovn-nbctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("govn db did not create its socket")
		}
	}
	nbctl("init")
	nbctl("ls-add", "sw0")
	nbctl("set-connection", fmt.Sprintf("ptcp:%d:127.0.0.1", port))
	var out []byte
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, err = exec.Command("ovn-nbctl", "--timeout=5", fmt.Sprintf("--db=tcp:127.0.0.1:%d", port), "ls-list").CombinedOutput()
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || !strings.Contains(string(out), "(sw0)") {
		t.Errorf("ovn-nbctl over the connection set by set-connection: %v\n%s", err, out)
	}
}

func TestDBBadSSLOptions(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--remote=pssl:0:127.0.0.1"},
		{"--remote=ptcp:0:127.0.0.1", "--ssl-protocols=SSLv3"},
		{"--remote=ptcp:0:127.0.0.1", "--ssl-ciphers=HIGH:NOPE"},
		{"--remote=ptcp:0:127.0.0.1", "--ssl-ciphers=DHE-RSA-AES128-SHA"},
		{"--remote=db:OVN_Northbound,NoTable,connections"},
		{"--remote=gopher:70"},
	} {
		err := runDB(context.Background(), append(args, "--unixctl=none", "--create=nb", "--log-file="+filepath.Join(dir, "log"), filepath.Join(dir, "nb.db")))
		if err == nil {
			t.Errorf("govn db %q: no error", args)
		}
	}
}

func TestSplitVlogArgs(t *testing.T) {
	rest, vlog := splitVlogArgs([]string{"-vconsole:off", "--verbose", "-vfile:info", "--verbose=dbg", "-v", "--remote=ptcp:1", "--", "-vx"})
	if got, want := strings.Join(rest, " "), "--verbose --remote=ptcp:1 -- -vx"; got != want {
		t.Errorf("rest %q, want %q", got, want)
	}
	if got, want := strings.Join(vlog, " "), "-vconsole:off -vfile:info --verbose=dbg -v"; got != want {
		t.Errorf("vlog %q, want %q", got, want)
	}
}

// TestDBDefaultControlSocketUnavailable checks what happens when the run
// directory cannot take the default control socket: with --pidfile (a
// daemon that ovs-appctl -t finds by name) govn db fails as ovsdb-server
// does; run by hand without it, govn db serves without a control socket.
func TestDBDefaultControlSocketUnavailable(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OVS_RUNDIR", filepath.Join(blocker, "run")) // under a file: never a directory
	db, sock := filepath.Join(dir, "nb.db"), filepath.Join(dir, "nb.sock")

	err := runDB(context.Background(), []string{"--create=nb", "--log-file=" + filepath.Join(dir, "log"),
		"--pidfile=" + filepath.Join(dir, "nb.pid"), "--remote=punix:" + sock, db})
	if err == nil || !strings.Contains(err.Error(), "control socket") {
		t.Errorf("with --pidfile: %v, want a control socket error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nb.pid")); !os.IsNotExist(err) {
		t.Errorf("pidfile left by the failed start: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runDB(ctx, []string{"--create=nb", "--log-file=" + filepath.Join(dir, "log"), "--remote=punix:" + sock, db})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("govn db without --pidfile: %v", err)
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("govn db without --pidfile stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("govn db without --pidfile does not serve")
		}
	}
	// The remotes answer before govn db looks for its control socket, so
	// the warning may come a moment after the socket does.
	var log []byte
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		log, _ = os.ReadFile(filepath.Join(dir, "log"))
		if strings.Contains(string(log), "no control socket") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("log does not say there is no control socket:\n%s", log)
			break
		}
	}
}
