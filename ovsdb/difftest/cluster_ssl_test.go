package difftest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/bench/ovsdbbench"
	"github.com/govn/govn/internal/testpki"
	"github.com/govn/govn/schema"
)

// sslArgs issues a certificate from ca for name into dir and returns the
// SSL options of a server that trusts the CA certificates in caFiles.
func sslArgs(t testing.TB, dir string, ca *testpki.CA, name string, caFiles ...string) []string {
	t.Helper()
	key, cert := ca.Issue(t, dir, name)
	trusted := filepath.Join(dir, name+"-trusted.pem")
	var all []byte
	for _, f := range caFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if err := os.WriteFile(trusted, all, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--private-key=" + key, "--certificate=" + cert, "--ca-cert=" + trusted}
}

// overSSL turns target into one whose peers talk over ssl: (the same
// ports as the tcp: addresses it is given) and whose servers each get
// their own certificate from ca, except a server whose directory is
// named "intruder", whose certificate other signed (it trusts both CAs,
// so that only the members' check of its certificate can stop it).
func overSSL(t testing.TB, target ovsdbbench.ClusterTarget, pki string, ca, other *testpki.CA) ovsdbbench.ClusterTarget {
	ssl := func(a string) string { return "ssl:" + strings.TrimPrefix(a, "tcp:") }
	create, join, command := target.CreateCluster, target.JoinCluster, target.Command
	target.CreateCluster = func(ctx context.Context, db, schema, local string) error {
		return create(ctx, db, schema, ssl(local))
	}
	target.JoinCluster = func(ctx context.Context, db, name, local string, remotes []string) error {
		var rs []string
		for _, r := range remotes {
			rs = append(rs, ssl(r))
		}
		return join(ctx, db, name, ssl(local), rs)
	}
	target.Command = func(dbs []string, sock, ctl, dir string) *exec.Cmd {
		name := filepath.Base(dir)
		args := sslArgs(t, pki, ca, name, ca.File)
		if name == "intruder" {
			args = sslArgs(t, pki, other, name, ca.File, other.File)
		}
		cmd := command(dbs, sock, ctl, dir)
		// The options go before the files.
		cmd.Args = append(append(cmd.Args[:len(cmd.Args)-len(dbs):len(cmd.Args)-len(dbs)], args...), dbs...)
		return cmd
	}
	return target
}

// TestClusterOverSSL builds a 3-server Northbound cluster whose peers talk
// over ssl: (create-cluster and join-cluster with ssl:IP:PORT addresses,
// each server given its own certificate from one CA with --private-key,
// --certificate and --ca-cert), of ovsdb-server and of govn db, and
// checks that ovn-nbctl's writes through the cluster reach every member,
// and that a fourth server whose certificate another CA signed cannot
// join.
func TestClusterOverSSL(t *testing.T) {
	need(t, "ovsdb-server", "ovsdb-tool", "ovs-appctl", "ovn-nbctl")
	text, err := schema.Lookup("nb")
	if err != nil {
		t.Fatal(err)
	}
	real, err := ovsdbbench.OvsdbServerCluster()
	if err != nil {
		t.Skip(err)
	}
	for _, target := range []ovsdbbench.ClusterTarget{real, ovsdbbench.GovnCluster(govnBinary(t))} {
		t.Run(target.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			pki := t.TempDir()
			ca, other := testpki.NewCA(t, pki, "ca"), testpki.NewCA(t, pki, "other")
			target := overSSL(t, target, pki, ca, other)
			cl, err := ovsdbbench.StartCluster(ctx, target, "", false, text)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			c := &govnCluster{cl}
			l := c.leader(t, "OVN_Northbound", -1)
			if st := l.Status("OVN_Northbound"); strings.Count(st, " at ssl:127.0.0.1:") != 3 {
				t.Errorf("cluster/status does not show three ssl: servers:\n%s", st)
			}
			for _, sw := range []string{"sw0", "sw1"} {
				if out := run(ctx, c.Dir, "ovn-nbctl", "--db="+c.Remote(), "ls-add", sw); strings.Contains(out, "[exit]") {
					t.Fatalf("ovn-nbctl ls-add through the cluster:\n%s", out)
				}
			}
			for _, m := range c.Members {
				waitUntil(t, fmt.Sprintf("member %d to hold both switches", m.Index), 20*time.Second, func() bool {
					out := run(ctx, c.Dir, "ovn-nbctl", "--db=unix:"+m.Sock, "--no-leader-only", "ls-list")
					return strings.Contains(out, "(sw0)") && strings.Contains(out, "(sw1)")
				})
			}

			// The intruder: join-cluster, then serve; it must not
			// become a member.
			dir := filepath.Join(c.Dir, "intruder")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			file, sock, ctl := filepath.Join(dir, "nb.db"), filepath.Join(dir, "db.sock"), filepath.Join(dir, "db.ctl")
			nl, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			local := "tcp:" + nl.Addr().String()
			nl.Close()
			if err := target.JoinCluster(ctx, file, "OVN_Northbound", local, []string{peerAddress(t, l)}); err != nil {
				t.Fatal(err)
			}
			cmd := target.Command([]string{file}, sock, ctl, dir)
			cmd.Env = runEnv(dir)
			log := newLogFile(t, filepath.Join(dir, "stderr"))
			cmd.Stdout, cmd.Stderr = log, log
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			t.Cleanup(func() { cmd.Process.Kill(); <-exited })
			time.Sleep(5 * time.Second)
			out, _ := exec.CommandContext(ctx, "ovs-appctl", "-t", ctl, "cluster/status", "OVN_Northbound").CombinedOutput()
			if strings.Contains(string(out), "Status: cluster member") {
				t.Errorf("a server with another CA's certificate joined:\n%s", out)
			}
			if st := c.leader(t, "OVN_Northbound", -1).Status("OVN_Northbound"); strings.Count(st, " at ssl:") != 3 {
				t.Errorf("the cluster does not have three servers:\n%s", st)
			}
		})
	}
}

// peerAddress is member m's peer address from its cluster/status, as
// tcp:IP:PORT (overSSL's JoinCluster makes it ssl: again).
func peerAddress(t *testing.T, m *clusterMember) string {
	t.Helper()
	for _, line := range strings.Split(m.Status("OVN_Northbound"), "\n") {
		if a, ok := strings.CutPrefix(line, "Address: ssl:"); ok {
			return "tcp:" + strings.TrimSpace(a)
		}
	}
	t.Fatalf("no ssl: address in member %d's cluster/status:\n%s", m.Index, m.Status("OVN_Northbound"))
	return ""
}

// BenchmarkClusterInsertsOverSSL compares one client's inserts to the
// leader of 3-server clusters of ovsdb-server and of govn db, with the
// peers over tcp: and over ssl: (each insert is replicated to a majority
// before its reply).
func BenchmarkClusterInsertsOverSSL(b *testing.B) {
	need(b, "ovsdb-server", "ovsdb-tool", "ovs-appctl")
	text, err := schema.Lookup("nb")
	if err != nil {
		b.Fatal(err)
	}
	real, err := ovsdbbench.OvsdbServerCluster()
	if err != nil {
		b.Skip(err)
	}
	for _, base := range []ovsdbbench.ClusterTarget{real, ovsdbbench.GovnCluster(govnBinary(b))} {
		for _, scheme := range []string{"tcp", "ssl"} {
			b.Run(base.Name+"/"+scheme, func(b *testing.B) {
				target := base
				if scheme == "ssl" {
					pki := b.TempDir()
					target = overSSL(b, base, pki, testpki.NewCA(b, pki, "ca"), testpki.NewCA(b, pki, "other"))
				}
				cl, err := ovsdbbench.StartCluster(b.Context(), target, "", false, text)
				if err != nil {
					b.Fatal(err)
				}
				defer cl.Close()
				l, err := cl.Leader(b.Context(), "OVN_Northbound", -1)
				if err != nil {
					b.Fatal(err)
				}
				conn, err := dialMember(l)
				if err != nil {
					b.Fatal(err)
				}
				defer conn.conn.Close()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := conn.insertSwitch(b.Context(), fmt.Sprintf("sw%d", i)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
