package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb/server"
)

func TestParseDBFlags(t *testing.T) {
	env := map[string]string{"OVS_RUNDIR": "/run/ovs", "OVS_LOGDIR": "/log/ovs"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name    string
		args    []string
		want    dbOptions
		wantErr string // substring; "" for success
	}{
		{
			name: "ovn-ctl start_nb_ovsdb",
			args: []string{"-vconsole:off", "-vfile:info", "--log-file=/l/nb.log", "--remote=punix:/r/nb.sock",
				"--pidfile=/r/nb.pid", "--unixctl=/r/nb.ctl", "--user", "root:root", "--disable-file-column-diff",
				"--detach", "--monitor", "--remote=db:OVN_Northbound,NB_Global,connections",
				"--private-key=db:OVN_Northbound,SSL,private_key", "--certificate=db:OVN_Northbound,SSL,certificate",
				"--ca-cert=db:OVN_Northbound,SSL,ca_cert", "--ssl-protocols=db:OVN_Northbound,SSL,ssl_protocols",
				"--ssl-ciphers=db:OVN_Northbound,SSL,ssl_ciphers", "--remote=ptcp:6641:0.0.0.0", "/d/nb.db"},
			want: dbOptions{
				remotes: multiFlag{"punix:/r/nb.sock", "db:OVN_Northbound,NB_Global,connections", "ptcp:6641:0.0.0.0"},
				tls: server.TLSOptions{PrivateKey: "db:OVN_Northbound,SSL,private_key", Certificate: "db:OVN_Northbound,SSL,certificate",
					CACert: "db:OVN_Northbound,SSL,ca_cert", Protocols: "db:OVN_Northbound,SSL,ssl_protocols", Ciphers: "db:OVN_Northbound,SSL,ssl_ciphers"},
				logFile: "/l/nb.log", pidfile: "/r/nb.pid", unixctl: "/r/nb.ctl", user: "root:root",
				detach: true, monitor: true, vlog: []string{"-vconsole:off", "-vfile:info"}, files: []string{"/d/nb.db"}, rundir: "/run/ovs",
			},
		},
		{
			name: "defaults without values",
			args: []string{"--pidfile", "--log-file", "-vsyslog:err", "nb.db"},
			want: dbOptions{pidfile: "/run/ovs/ovsdb-server.pid", logFile: "/log/ovs/ovsdb-server.log",
				vlog: []string{"-vsyslog:err"}, files: []string{"nb.db"}, rundir: "/run/ovs"},
		},
		{
			name: "relative names in the run directory",
			args: []string{"--pidfile=nb.pid", "--unixctl=nb.ctl", "--log-file=nb.log", "nb.db"},
			want: dbOptions{pidfile: "/run/ovs/nb.pid", unixctl: "/run/ovs/nb.ctl", logFile: "nb.log", files: []string{"nb.db"}, rundir: "/run/ovs"},
		},
		{
			name: "no control socket, overwritten pidfile",
			args: []string{"--unixctl=none", "--pidfile", "--overwrite-pidfile", "nb.db"},
			want: dbOptions{pidfile: "/run/ovs/ovsdb-server.pid", unixctl: "none", overwrite: true, files: []string{"nb.db"}, rundir: "/run/ovs"},
		},
		{
			name: "pidfile alone does not take the next argument",
			args: []string{"--pidfile", "a.db", "b.db"},
			want: dbOptions{pidfile: "/run/ovs/ovsdb-server.pid", files: []string{"a.db", "b.db"}, rundir: "/run/ovs"},
		},
		{name: "sync-from", args: []string{"--sync-from=tcp:1.2.3.4:6641", "nb.db"}, wantErr: "--sync-from: active-backup replication"},
		{name: "active", args: []string{"--active", "nb.db"}, wantErr: "--active: active-backup replication"},
		{name: "backup", args: []string{"--backup", "nb.db"}, wantErr: "--backup: active-backup replication"},
		{name: "no file", args: []string{"--detach"}, wantErr: "no database FILE"},
		{name: "unknown flag", args: []string{"--frobnicate", "nb.db"}, wantErr: "frobnicate"},
		{name: "user without value", args: []string{"--user"}, wantErr: "flag needs an argument: -user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseDBFlags(tc.args, getenv)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDBControlSocket(t *testing.T) {
	for _, tc := range []struct {
		unixctl, want string
	}{
		{"", "/run/ovs/ovsdb-server.4242.ctl"},
		{"none", ""},
		{"/r/nb.ctl", "/r/nb.ctl"},
	} {
		o := dbOptions{unixctl: tc.unixctl, rundir: "/run/ovs"}
		if got := o.controlSocket(4242); got != tc.want {
			t.Errorf("--unixctl=%q: control socket %q, want %q", tc.unixctl, got, tc.want)
		}
	}
}

// buildGovn builds the govn command into a temporary directory.
func buildGovn(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	bin := filepath.Join(t.TempDir(), "govn")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestDBDetachReportsChildError checks that "govn db --detach" whose
// daemon cannot start exits non-zero with the daemon's error, so that a
// script knows at once.
func TestDBDetachReportsChildError(t *testing.T) {
	bin := buildGovn(t)
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "db.pid")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "db", "--detach", "--pidfile="+pidfile, "--remote=gopher:70", "--create=nb", filepath.Join(dir, "nb.db"))
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		t.Fatal("govn db --detach with a bad remote: exit status 0")
	}
	if !strings.Contains(stderr.String(), "gopher") {
		t.Errorf("stderr %q does not give the daemon's error", stderr.String())
	}
	if _, err := os.Stat(pidfile); !os.IsNotExist(err) {
		t.Errorf("pidfile left behind by the failed daemon: %v", err)
	}
}

// TestOVNCtlStartsGovnDB runs the real ovn-ctl with govn standing in for
// ovsdb-server and ovsdb-tool, as a platform team would.
func TestOVNCtlStartsGovnDB(t *testing.T) {
	const ovnCtl = "/usr/share/ovn/scripts/ovn-ctl"
	if os.Geteuid() != 0 {
		t.Skip("ovn-ctl needs root (it chowns its directories)")
	}
	if _, err := os.Stat(ovnCtl); err != nil {
		t.Skip("ovn-ctl not installed")
	}
	for _, tool := range []string{"ovn-nbctl", "ovs-appctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	govn := buildGovn(t)
	dir := t.TempDir()
	bin, run, logs, dbs := filepath.Join(dir, "bin"), filepath.Join(dir, "run"), filepath.Join(dir, "log"), filepath.Join(dir, "db")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// ovsdb-server is a link to govn, which then runs as govn db under
	// that name; ovn-ctl checks the name of the process in the pidfile.
	if err := os.Symlink(govn, filepath.Join(bin, "ovsdb-server")); err != nil {
		t.Fatal(err)
	}
	wrappers := map[string]string{
		// ovs-lib runs "ovsdb-tool -vconsole:off create|schema-version|
		// db-version|needs-conversion|convert ..."; govn db has these.
		"ovsdb-tool": `for a; do shift; case $a in -v*) ;; *) set -- "$@" "$a";; esac; done
exec ` + govn + ` db "$@"`,
	}
	for name, body := range wrappers {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pidfile, sock, ctl := filepath.Join(run, "nb.pid"), filepath.Join(run, "nb.sock"), filepath.Join(run, "nb.ctl")
	t.Cleanup(func() {
		b, err := os.ReadFile(pidfile)
		if err != nil {
			return
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	ovnctl := func(action string) string {
		t.Helper()
		cmd := exec.Command(ovnCtl, "--db-nb-file="+filepath.Join(dbs, "nb.db"), "--db-nb-sock="+sock,
			"--db-nb-pidfile="+pidfile, "--db-nb-ctrl-sock="+ctl, "--ovn-nb-logfile="+filepath.Join(logs, "nb.log"), action)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"),
			"OVN_RUNDIR="+run, "OVS_RUNDIR="+run, "OVN_LOGDIR="+logs, "OVN_DBDIR="+dbs)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ovn-ctl %s: %v\n%s", action, err, out)
		}
		return string(out)
	}
	ovnctl("start_nb_ovsdb")

	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatalf("pidfile after start_nb_ovsdb: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pidfile %q: %v", b, err)
	}
	if comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err != nil || strings.TrimSpace(string(comm)) != "ovsdb-server" {
		t.Fatalf("pidfile names pid %d, comm %q (%v), want govn running as ovsdb-server", pid, comm, err)
	}
	if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err != nil || exe != govn {
		t.Fatalf("pid %d runs %q (%v), want %s", pid, exe, err, govn)
	}
	nbctl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ovn-nbctl", append([]string{"--timeout=5", "--db=unix:" + sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ovn-nbctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// Started again, ovn-ctl finds it running and starts nothing.
	ovnctl("start_nb_ovsdb")
	if b, err := os.ReadFile(pidfile); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		t.Fatalf("pidfile after a second start_nb_ovsdb: %q, %v; want %d", b, err, pid)
	}
	nbctl("ls-add", "sw0")
	if out := nbctl("show"); !strings.Contains(out, "(sw0)") {
		t.Errorf("ovn-nbctl show after ls-add sw0:\n%s", out)
	}
	// ovn-ctl's own "ovn-nbctl init" ran against govn: NB_Global exists.
	if out := nbctl("--bare", "--columns=_uuid", "list", "NB_Global"); strings.TrimSpace(out) == "" {
		t.Error("no NB_Global row after start_nb_ovsdb")
	}

	out := ovnctl("stop_nb_ovsdb")
	if !strings.Contains(out, "Exiting ovnnb_db") {
		t.Errorf("stop_nb_ovsdb did not use ovs-appctl exit:\n%s", out)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("govn db (pid %d) still runs after stop_nb_ovsdb", pid)
		}
	}
	for _, f := range []string{pidfile, ctl} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s left after stop_nb_ovsdb: %v", f, err)
		}
	}
}

// FuzzParseDBFlags checks that no command line crashes the parser.
func FuzzParseDBFlags(f *testing.F) {
	f.Add("--pidfile --log-file -vconsole:off --detach --monitor --user root:root nb.db")
	f.Add("--sync-from=tcp:1.2.3.4:6641 --pidfile=x -- --unixctl")
	f.Add("--user")
	f.Fuzz(func(t *testing.T, line string) {
		o, err := parseDBFlags(strings.Fields(line), func(string) string { return "" })
		if err == nil && len(o.files) == 0 {
			t.Errorf("%q: parsed without a database FILE", line)
		}
	})
}

// TestDBDetachUser checks that "govn db --detach --user nobody" serves as
// nobody: the pidfile names a process with nobody's ids.
func TestDBDetachUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--user needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	bin := buildGovn(t)
	// nobody must reach the files; t.TempDir's parents are root's 0700.
	dir, err := os.MkdirTemp("", "govn-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	pidfile, ctl := filepath.Join(dir, "db.pid"), filepath.Join(dir, "db.ctl")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidfile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	out, err := exec.Command(bin, "db", "--detach", "--user=nobody", "--pidfile="+pidfile, "--unixctl="+ctl,
		"--log-file="+filepath.Join(dir, "log"), "--create=nb", "--remote=punix:"+filepath.Join(dir, "db.sock"),
		filepath.Join(dir, "nb.db")).CombinedOutput()
	if err != nil {
		t.Fatalf("govn db --detach --user=nobody: %v\n%s", err, out)
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 5 && (f[0] == "Uid:" || f[0] == "Gid:") {
			want := nobody.Uid
			if f[0] == "Gid:" {
				want = nobody.Gid
			}
			for _, id := range f[1:] {
				if id != want {
					t.Errorf("daemon %s %v, want all %s", f[0], f[1:], want)
					break
				}
			}
		}
	}
	if out, err := exec.Command(bin, "appctl", "-t", ctl, "exit").CombinedOutput(); err != nil {
		t.Errorf("govn appctl exit: %v\n%s", err, out)
	}
}

// TestDBPidfileLockAndDefaultControlSocket runs govn db as ovsdb-server
// is run without --unixctl: the pidfile is held locked, so that a second
// govn db (or the real ovsdb-server) refuses to start, the control socket
// is $OVS_RUNDIR/ovsdb-server.PID.ctl, which the real ovs-appctl finds by
// name through the pidfile, and a pidfile left by a killed daemon is taken
// over.
func TestDBPidfileLockAndDefaultControlSocket(t *testing.T) {
	bin := buildGovn(t)
	run := t.TempDir()
	env := append(os.Environ(), "OVS_RUNDIR="+run, "OVS_LOGDIR="+run)
	pidfile := filepath.Join(run, "ovsdb-server.pid")
	db := filepath.Join(run, "nb.db")
	var started []int
	t.Cleanup(func() {
		for _, pid := range started {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	start := func(prog string, args ...string) (int, string, error) {
		t.Helper()
		cmd := exec.Command(prog, append(args, "--pidfile", "--detach", "--log-file",
			"--remote=punix:"+filepath.Join(run, "db.sock"), db)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, string(out), err
		}
		b, err := os.ReadFile(pidfile)
		if err != nil {
			return 0, string(out), err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil {
			started = append(started, pid)
		}
		return pid, string(out), err
	}
	gone := func(pid int) bool {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if syscall.Kill(pid, 0) != nil {
				return true
			}
		}
		return false
	}

	pid, out, err := start(bin, "db", "--create=nb")
	if err != nil {
		t.Fatalf("govn db --pidfile --detach: %v\n%s", err, out)
	}
	ctl := filepath.Join(run, fmt.Sprintf("ovsdb-server.%d.ctl", pid))
	if fi, err := os.Stat(ctl); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("default control socket %s: %v", ctl, err)
	}

	// A second govn db refuses, naming the first.
	want := fmt.Sprintf("%s: already running as pid %d, aborting", pidfile, pid)
	if _, out, err := start(bin, "db"); err == nil || !strings.Contains(out, want) {
		t.Errorf("second govn db: %v, output %q; want a failure saying %q", err, out, want)
	}
	if b, err := os.ReadFile(pidfile); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		t.Errorf("pidfile after the refused start: %q, %v; want %d", b, err, pid)
	}
	if _, err := exec.LookPath("ovsdb-server"); err == nil {
		// So does the real ovsdb-server: the locks are the same kind.
		if _, out, err := start("ovsdb-server", "--no-chdir"); err == nil || !strings.Contains(out, want) {
			t.Errorf("ovsdb-server while govn db runs: %v, output %q; want a failure saying %q", err, out, want)
		}
	}

	appctl := func(target string, args ...string) (string, error) {
		cmd := exec.Command("ovs-appctl", append([]string{"-t", target}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if _, err := exec.LookPath("ovs-appctl"); err != nil {
		t.Log("ovs-appctl not installed: not checking it finds govn db")
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	} else {
		for _, target := range []string{"ovsdb-server", ctl} {
			if out, err := appctl(target, "memory/show"); err != nil || !strings.Contains(out, "sessions:") {
				t.Errorf("ovs-appctl -t %s memory/show: %v\n%s", target, err, out)
			}
		}
		if out, err := appctl("ovsdb-server", "exit"); err != nil {
			t.Errorf("ovs-appctl -t ovsdb-server exit: %v\n%s", err, out)
		}
	}
	if !gone(pid) {
		t.Fatalf("govn db (pid %d) still runs after exit", pid)
	}
	for _, f := range []string{pidfile, ctl} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s after a clean exit: %v", f, err)
		}
	}

	// A pidfile left by a killed daemon is taken over.
	pid, out, err = start(bin, "db")
	if err != nil {
		t.Fatalf("govn db: %v\n%s", err, out)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if !gone(pid) {
		t.Fatalf("pid %d survived SIGKILL", pid)
	}
	if _, err := os.Stat(pidfile); err != nil {
		t.Fatalf("the killed daemon's pidfile: %v", err)
	}
	pid2, out, err := start(bin, "db")
	if err != nil {
		t.Fatalf("govn db over a stale pidfile: %v\n%s", err, out)
	}
	if pid2 == pid {
		t.Fatalf("pidfile still names the killed pid %d", pid)
	}
	syscall.Kill(pid2, syscall.SIGTERM)
	if !gone(pid2) {
		t.Fatalf("govn db (pid %d) still runs after SIGTERM", pid2)
	}
	if _, err := os.Stat(pidfile); !os.IsNotExist(err) {
		t.Errorf("pidfile after SIGTERM: %v", err)
	}

	// The other way round: govn db refuses the real ovsdb-server's
	// pidfile while it runs.
	if _, err := exec.LookPath("ovsdb-server"); err != nil {
		return
	}
	realPID, out, err := start("ovsdb-server", "--no-chdir")
	if err != nil {
		t.Fatalf("ovsdb-server --pidfile --detach: %v\n%s", err, out)
	}
	want = fmt.Sprintf("%s: already running as pid %d, aborting", pidfile, realPID)
	if _, out, err := start(bin, "db"); err == nil || !strings.Contains(out, want) {
		t.Errorf("govn db while ovsdb-server runs: %v, output %q; want a failure saying %q", err, out, want)
	}
	syscall.Kill(realPID, syscall.SIGTERM)
	if !gone(realPID) {
		t.Fatalf("ovsdb-server (pid %d) still runs after SIGTERM", realPID)
	}
}
