package difftest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/internal/testpki"
	"github.com/govn/govn/schema"
)

// startWith is clusterMember.start with extra command-line options.
func (m *clusterMember) startWith(t testing.TB, extra ...string) {
	t.Helper()
	var cmd *exec.Cmd
	if m.kind == kindReal {
		args := append([]string{"--no-chdir", "--remote=punix:" + m.sock, "--unixctl=" + m.ctl,
			"--pidfile=" + filepath.Join(m.dir, "pid"), "--log-file=" + filepath.Join(m.dir, "log")}, extra...)
		cmd = exec.Command("ovsdb-server", append(args, m.files...)...)
	} else {
		args := append([]string{"db", "--remote=punix:" + m.sock, "--unixctl=" + m.ctl}, extra...)
		cmd = exec.Command(govnBinary(t), append(args, m.files...)...)
		cmd.Stderr = newLogFile(t, filepath.Join(m.dir, "log"))
	}
	cmd.Env = runEnv(m.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start member %d: %v", m.i, err)
	}
	m.cmd, m.exit = cmd, make(chan struct{})
	exit := m.exit
	go func() { cmd.Wait(); close(exit) }()
	t.Cleanup(func() { m.kill() })
	waitSocket(t, m.sock, m.exit, m.logTail)
}

// sslArgs issues a certificate from ca for name and returns the SSL
// options of a server that trusts the CA certificates in caFiles.
func sslArgs(t *testing.T, dir string, ca *testpki.CA, name string, caFiles ...string) []string {
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
	for _, kind := range []string{kindReal, kindGovn} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			dir := t.TempDir()
			pki := filepath.Join(dir, "pki")
			if err := os.Mkdir(pki, 0o700); err != nil {
				t.Fatal(err)
			}
			ca, other := testpki.NewCA(t, pki, "ca"), testpki.NewCA(t, pki, "other")
			sf := filepath.Join(dir, "nb.ovsschema")
			if err := os.WriteFile(sf, text, 0o644); err != nil {
				t.Fatal(err)
			}
			c := &govnCluster{dir: dir, dbs: []string{"OVN_Northbound"}}
			first := "ssl:" + strings.TrimPrefix(freeTCP(t), "tcp:")
			create := func(i int, args ...string) *clusterMember {
				md := filepath.Join(dir, fmt.Sprintf("m%d", i))
				if err := os.Mkdir(md, 0o755); err != nil {
					t.Fatal(err)
				}
				m := &clusterMember{kind: kind, i: i, dir: md, sock: filepath.Join(md, "db.sock"), ctl: filepath.Join(md, "db.ctl"), files: []string{filepath.Join(md, "nb.db")}}
				prog := "ovsdb-tool"
				args = append([]string{args[0], m.files[0]}, args[1:]...)
				if kind == kindGovn {
					prog, args = govnBinary(t), append([]string{"db"}, args...)
				}
				if out, err := exec.Command(prog, args...).CombinedOutput(); err != nil {
					t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
				}
				return m
			}
			for i := 0; i < 3; i++ {
				var m *clusterMember
				if i == 0 {
					m = create(i, "create-cluster", sf, first)
				} else {
					m = create(i, "join-cluster", "OVN_Northbound", "ssl:"+strings.TrimPrefix(freeTCP(t), "tcp:"), first)
				}
				c.members = append(c.members, m)
				m.startWith(t, sslArgs(t, pki, ca, fmt.Sprintf("m%d", i), ca.File)...)
			}
			for _, m := range c.members {
				waitUntil(t, fmt.Sprintf("member %d to be a member of the cluster", m.i), 30*time.Second, func() bool {
					return strings.Contains(m.status("OVN_Northbound"), "Status: cluster member")
				})
			}
			l := c.leader(t, "OVN_Northbound", -1)
			if st := l.status("OVN_Northbound"); strings.Count(st, " at ssl:127.0.0.1:") != 3 {
				t.Errorf("cluster/status does not show three ssl: servers:\n%s", st)
			}
			for _, sw := range []string{"sw0", "sw1"} {
				if out := run(ctx, dir, "ovn-nbctl", "--db="+c.remote(), "ls-add", sw); strings.Contains(out, "[exit]") {
					t.Fatalf("ovn-nbctl ls-add through the cluster:\n%s", out)
				}
			}
			for _, m := range c.members {
				waitUntil(t, fmt.Sprintf("member %d to hold both switches", m.i), 20*time.Second, func() bool {
					out := run(ctx, dir, "ovn-nbctl", "--db=unix:"+m.sock, "--no-leader-only", "ls-list")
					return strings.Contains(out, "(sw0)") && strings.Contains(out, "(sw1)")
				})
			}

			// A server with a certificate from another CA (trusting
			// both CAs, so that only the members' check stops it).
			j := create(3, "join-cluster", "OVN_Northbound", "ssl:"+strings.TrimPrefix(freeTCP(t), "tcp:"), first)
			j.startWith(t, sslArgs(t, pki, other, "intruder", ca.File, other.File)...)
			time.Sleep(5 * time.Second)
			if st := j.status("OVN_Northbound"); strings.Contains(st, "Status: cluster member") {
				t.Errorf("a server with another CA's certificate joined:\n%s", st)
			}
			if st := c.leader(t, "OVN_Northbound", -1).status("OVN_Northbound"); strings.Count(st, " at ssl:") != 3 {
				t.Errorf("the cluster does not have three servers:\n%s", st)
			}
			j.kill()
		})
	}
}
