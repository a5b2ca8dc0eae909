package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/internal/testpki"
	"github.com/govn/govn/schema"
)

// builtGovn is the govn binary the northd tests share: one build instead
// of one per test.
var builtGovn struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtGovn.dir != "" {
		os.RemoveAll(builtGovn.dir)
	}
	os.Exit(code)
}

// northdGovn returns the shared govn binary, building it on first use.
func northdGovn(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	b := &builtGovn
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "govn-northd-test"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "govn")
		if out, err := exec.Command(goTool, "build", "-o", b.path, ".").CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func TestParseNorthdFlags(t *testing.T) {
	env := map[string]string{"OVN_RUNDIR": "/run/ovn", "OVN_LOGDIR": "/log/ovn", "OVS_LOGDIR": "/log/ovs", "OVS_RUNDIR": "/run/ovs"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    northdOptions
		wantErr string
	}{
		{
			name: "defaults",
			want: northdOptions{nb: []string{"unix:/run/ovn/ovnnb_db.sock"}, sb: []string{"unix:/run/ovn/ovnsb_db.sock"}, rundir: "/run/ovn"},
		},
		{
			name: "environment",
			env:  map[string]string{"OVN_NB_DB": "tcp:1.2.3.4:6641", "OVN_SB_DB": "tcp:1.2.3.4:6642,tcp:1.2.3.5:6642"},
			want: northdOptions{nb: []string{"tcp:1.2.3.4:6641"}, sb: []string{"tcp:1.2.3.4:6642", "tcp:1.2.3.5:6642"}, rundir: "/run/ovn"},
		},
		{
			name: "ovn-ctl start_northd",
			args: []string{"-vconsole:emer", "-vsyslog:err", "-vfile:info", "--ovnnb-db=unix:/r/nb.sock", "--ovnsb-db=ssl:10.0.0.1:6642, ssl:10.0.0.2:6642",
				"-p", "/k.pem", "-c", "/c.pem", "-C", "/ca.pem", "--no-chdir", "--log-file=/l/northd.log", "--pidfile=/r/northd.pid", "--detach", "--monitor", "--n-threads=4"},
			want: northdOptions{nb: []string{"unix:/r/nb.sock"}, sb: []string{"ssl:10.0.0.1:6642", "ssl:10.0.0.2:6642"},
				privateKey: "/k.pem", cert: "/c.pem", caCrt: "/ca.pem", logFile: "/l/northd.log", pidfile: "/r/northd.pid", detach: true,
				rundir: "/run/ovn", vlog: []string{"-vconsole:emer", "-vsyslog:err", "-vfile:info"}},
		},
		{
			name: "optional values and relative paths",
			args: []string{"--pidfile", "--log-file", "--unixctl=northd.ctl", "--private-key=/k", "--certificate=/c", "--ca-cert=/ca", "--dry-run"},
			want: northdOptions{nb: []string{"unix:/run/ovn/ovnnb_db.sock"}, sb: []string{"unix:/run/ovn/ovnsb_db.sock"},
				pidfile: "/run/ovn/ovn-northd.pid", logFile: "/log/ovs/ovn-northd.log", unixctl: "/run/ovn/northd.ctl",
				privateKey: "/k", cert: "/c", caCrt: "/ca", paused: true, rundir: "/run/ovn"},
		},
		{name: "empty remote list", args: []string{"--ovnnb-db=,"}, wantErr: "--ovnnb-db: no database remote"},
		{name: "argument", args: []string{"nb.db"}, wantErr: `unexpected argument "nb.db"`},
		{name: "unknown flag", args: []string{"--frobnicate"}, wantErr: "frobnicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			get := getenv
			if tc.env != nil {
				get = func(k string) string {
					if v, ok := tc.env[k]; ok {
						return v
					}
					return env[k]
				}
			}
			got, err := parseNorthdFlags(tc.args, get)
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

func TestNorthdSSLNeedsFiles(t *testing.T) {
	o, err := parseNorthdFlags([]string{"--ovnsb-db=ssl:127.0.0.1:6642"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.tls(); err == nil || !strings.Contains(err.Error(), "--private-key") {
		t.Errorf("ssl: remote without key files: error %v", err)
	}
}

// northdEnv is a Northbound and a Southbound database server, each in its
// own process, and govn northd processes on them, all in one temporary
// directory; the real ovn-nbctl, ovn-sbctl and ovn-appctl talk to them.
type northdEnv struct {
	t    *testing.T
	govn string
	// northd is the northd to run: "govn" or, for reference, the real
	// "ovn-northd".
	northd string
	dir    string
	server string // "govn" or "ovsdb-server"
	dbs    map[string]*exec.Cmd
	// dbArgs, if set, gives further arguments of a database's server.
	dbArgs func(db string) []string
	// northdArgs replace the database arguments of northd.
	northdArgs []string
}

// needOVNTools skips the test without the real OVN command-line tools.
func needOVNTools(t *testing.T, extra ...string) {
	t.Helper()
	for _, tool := range append([]string{"ovn-nbctl", "ovn-sbctl", "ovn-appctl"}, extra...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
}

func newNorthdEnv(t *testing.T, govn, server string) *northdEnv {
	e := &northdEnv{t: t, govn: govn, northd: "govn", dir: t.TempDir(), server: server, dbs: map[string]*exec.Cmd{}}
	e.createDBs()
	return e
}

// createDBs creates and serves the two databases.
func (e *northdEnv) createDBs() {
	t := e.t
	for _, db := range []string{"nb", "sb"} {
		file := filepath.Join(e.dir, db+".db")
		var cmd *exec.Cmd
		if e.server == "govn" {
			cmd = exec.Command(e.govn, "db", "create", file, db)
		} else {
			cmd = exec.Command("ovsdb-tool", "create", file, fmt.Sprintf("/usr/share/ovn/ovn-%s.ovsschema", db))
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("creating %s: %v\n%s", file, err, out)
		}
		e.startDB(db)
	}
}

func (e *northdEnv) sock(db string) string { return filepath.Join(e.dir, db+".sock") }

// startDB starts (or restarts) the server of db ("nb" or "sb").
func (e *northdEnv) startDB(db string) {
	t := e.t
	t.Helper()
	args := []string{"--remote=punix:" + e.sock(db), "--unixctl=" + filepath.Join(e.dir, db+"-server.ctl"),
		"--log-file=" + filepath.Join(e.dir, db+"-server.log")}
	if e.dbArgs != nil {
		args = append(args, e.dbArgs(db)...)
	}
	args = append(args, filepath.Join(e.dir, db+".db"))
	var cmd *exec.Cmd
	if e.server == "govn" {
		cmd = exec.Command(e.govn, append([]string{"db"}, args...)...)
	} else {
		cmd = exec.Command("ovsdb-server", append([]string{"--no-chdir"}, args...)...)
	}
	e.start(cmd)
	e.dbs[db] = cmd
	e.waitFor(db+" server socket", 10*time.Second, func() bool {
		_, err := os.Stat(e.sock(db))
		return err == nil
	})
}

// stopDB kills db's server and waits until it is gone.
func (e *northdEnv) stopDB(db string) {
	cmd := e.dbs[db]
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	os.Remove(e.sock(db))
}

// start starts cmd and kills it when the test ends.
func (e *northdEnv) start(cmd *exec.Cmd) {
	t := e.t
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if stderr.Len() > 0 && t.Failed() {
			t.Logf("%s stderr:\n%s", filepath.Base(cmd.Path), stderr.String())
		}
	})
}

// startNorthd starts a govn northd named name and returns it and its
// control socket.
func (e *northdEnv) startNorthd(name string) (*exec.Cmd, string) {
	ctl := filepath.Join(e.dir, name+".ctl")
	args := []string{"--ovnnb-db=unix:" + e.sock("nb"), "--ovnsb-db=unix:" + e.sock("sb")}
	if e.northdArgs != nil {
		args = e.northdArgs
	}
	args = append(args, "--unixctl="+ctl, "--log-file="+filepath.Join(e.dir, name+".log"), "--pidfile="+filepath.Join(e.dir, name+".pid"))
	cmd := exec.Command(e.govn, append([]string{"northd"}, args...)...)
	if e.northd != "govn" {
		cmd = exec.Command(e.northd, args...)
	}
	e.start(cmd)
	e.waitFor(name+" control socket", 10*time.Second, func() bool {
		_, err := os.Stat(ctl)
		return err == nil
	})
	e.t.Cleanup(func() {
		if e.t.Failed() {
			if b, err := os.ReadFile(filepath.Join(e.dir, name+".log")); err == nil {
				e.t.Logf("%s log:\n%s", name, b)
			}
		}
	})
	return cmd, ctl
}

func (e *northdEnv) run(tool string, args ...string) (string, error) {
	var full []string
	switch tool {
	case "ovn-nbctl":
		full = []string{"--timeout=20", "--db=unix:" + e.sock("nb")}
	case "ovn-sbctl":
		full = []string{"--timeout=20", "--db=unix:" + e.sock("sb")}
	case "ovn-appctl":
		full = []string{"--timeout=10"}
	}
	out, err := exec.Command(tool, append(full, args...)...).CombinedOutput()
	return string(out), err
}

func (e *northdEnv) must(tool string, args ...string) string {
	e.t.Helper()
	out, err := e.run(tool, args...)
	if err != nil {
		e.t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
	}
	return out
}

func (e *northdEnv) nbctl(args ...string) string { e.t.Helper(); return e.must("ovn-nbctl", args...) }
func (e *northdEnv) sbctl(args ...string) string { e.t.Helper(); return e.must("ovn-sbctl", args...) }
func (e *northdEnv) appctl(ctl string, args ...string) string {
	e.t.Helper()
	return e.must("ovn-appctl", append([]string{"-t", ctl}, args...)...)
}

// waitFor polls cond until it holds, failing the test after timeout.
func (e *northdEnv) waitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// waitStatus waits until the northd on ctl reports status.
func (e *northdEnv) waitStatus(ctl, status string, timeout time.Duration) {
	e.t.Helper()
	e.waitFor(ctl+" "+status, timeout, func() bool {
		out, err := e.run("ovn-appctl", "-t", ctl, "status")
		return err == nil && out == "Status: "+status+"\n"
	})
}

// stat returns one engine counter of node.
func (e *northdEnv) stat(ctl, node, stat string) int {
	e.t.Helper()
	out := strings.TrimSpace(e.appctl(ctl, "inc-engine/show-stats", node, stat))
	n, err := strconv.Atoi(out)
	if err != nil {
		e.t.Fatalf("inc-engine/show-stats %s %s: %q", node, stat, out)
	}
	return n
}

// column lists one column of every row of a Southbound table, sorted.
func (e *northdEnv) column(table, col string) []string {
	e.t.Helper()
	var vals []string
	for _, l := range strings.Split(e.sbctl("--bare", "--columns="+col, "list", table), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			vals = append(vals, l)
		}
	}
	sort.Strings(vals)
	return vals
}

// TestNorthdEndToEnd runs govn northd against govn db and against the real
// ovsdb-server, driven by the real ovn-nbctl: the Southbound it writes,
// ovn-nbctl --wait=sb and --wait=hv, Logical_Switch_Port.up, the control
// socket and the engine's counters. The same test runs the real
// ovn-northd, which shows that what it checks is what ovn-northd does.
func TestNorthdEndToEnd(t *testing.T) {
	needOVNTools(t)
	govn := northdGovn(t)
	for _, tc := range []struct{ northd, server string }{
		{"govn", "govn"},
		{"govn", "ovsdb-server"},
		{"ovn-northd", "ovsdb-server"},
	} {
		t.Run(tc.northd+" on "+tc.server, func(t *testing.T) {
			for _, bin := range []string{tc.northd, tc.server} {
				if _, err := exec.LookPath(bin); bin != "govn" && err != nil {
					t.Skipf("%s not installed", bin)
				}
			}
			e := newNorthdEnv(t, govn, tc.server)
			e.northd = tc.northd
			testNorthdEndToEnd(t, e)
		})
	}
}

func testNorthdEndToEnd(t *testing.T, e *northdEnv) {
	_, ctl := e.startNorthd("northd")
	e.waitStatus(ctl, "active", 10*time.Second)
	if got := e.appctl(ctl, "is-paused"); got != "false\n" {
		t.Errorf("is-paused: %q", got)
	}

	e.nbctl("--wait=sb", "ls-add", "sw0")
	e.nbctl("--wait=sb", "lsp-add", "sw0", "p1", "--", "lsp-set-addresses", "p1", "00:00:00:00:00:01 10.0.0.1",
		"--", "lsp-add", "sw0", "r1", "--", "lsp-set-type", "r1", "router", "--", "lsp-set-addresses", "r1", "router")
	if got := e.column("Datapath_Binding", "external_ids"); len(got) != 1 || !strings.Contains(got[0], "name=sw0") {
		t.Errorf("Datapath_Binding external_ids: %q", got)
	}
	if got, want := e.column("Port_Binding", "logical_port"), []string{"p1", "r1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Port_Binding logical ports: %q, want %q", got, want)
	}
	if lflows := e.sbctl("lflow-list"); !strings.Contains(lflows, "table=") {
		t.Errorf("lflow-list shows no flows:\n%s", lflows)
	}
	// NB_Global's options that ovn-northd fills in, copied to SB_Global.
	opts := e.nbctl("get", "NB_Global", ".", "options")
	for _, k := range []string{"mac_prefix", "svc_monitor_mac", "max_tunid=\"16711680\""} {
		if !strings.Contains(opts, k) {
			t.Errorf("NB_Global options %s lack %s", opts, k)
		}
	}
	if sbOpts := e.sbctl("get", "SB_Global", ".", "options"); !strings.Contains(sbOpts, "mac_prefix") {
		t.Errorf("SB_Global options %s lack mac_prefix", sbOpts)
	}
	// A router port is up; a port no chassis has claimed is down.
	if got := e.nbctl("get", "Logical_Switch_Port", "r1", "up"); got != "true\n" {
		t.Errorf("router port up = %q, want true", got)
	}
	if got := e.nbctl("get", "Logical_Switch_Port", "p1", "up"); got != "false\n" {
		t.Errorf("unbound port up = %q, want false", got)
	}

	// An ordinary change is handled without a recompute (by govn
	// northd: ovn-northd 23.03 recomputes).
	e.appctl(ctl, "inc-engine/clear-stats")
	e.nbctl("--wait=sb", "lsp-add", "sw0", "p2")
	if e.northd == "govn" {
		if n := e.stat(ctl, "northd", "recompute"); n != 0 {
			t.Errorf("lsp-add: northd recomputed %d times, want 0", n)
		}
		if n := e.stat(ctl, "northd", "compute"); n == 0 {
			t.Error("lsp-add: northd did not compute incrementally")
		}
	}
	if got := e.column("Port_Binding", "logical_port"); len(got) != 3 {
		t.Errorf("after lsp-add p2: Port_Binding logical ports %q", got)
	}

	// --wait=hv waits for the chassis: a fake one that catches up by hand.
	e.sbctl("chassis-add", "hv1", "geneve", "127.0.0.1")
	chassis := strings.TrimSpace(e.sbctl("--bare", "--columns=_uuid", "find", "Chassis", "name=hv1"))
	e.sbctl("create", "Chassis_Private", "name=hv1", "chassis="+chassis)
	before := strings.TrimSpace(e.nbctl("get", "NB_Global", ".", "nb_cfg"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wait := exec.CommandContext(ctx, "ovn-nbctl", "--db=unix:"+e.sock("nb"), "--wait=hv", "lsp-add", "sw0", "p3")
	var waitOut bytes.Buffer
	wait.Stdout, wait.Stderr = &waitOut, &waitOut
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- wait.Wait() }()
	var cfg string
	e.waitFor("nb_cfg to grow", 10*time.Second, func() bool {
		cfg = strings.TrimSpace(e.nbctl("get", "NB_Global", ".", "nb_cfg"))
		sbCfg := strings.TrimSpace(e.nbctl("get", "NB_Global", ".", "sb_cfg"))
		return cfg == sbCfg && cfg != before
	})
	select {
	case err := <-waited:
		t.Fatalf("ovn-nbctl --wait=hv returned before the chassis caught up: %v\n%s", err, waitOut.String())
	case <-time.After(300 * time.Millisecond):
	}
	e.sbctl("set", "Chassis_Private", "hv1", "nb_cfg="+cfg, "nb_cfg_timestamp=1234")
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("ovn-nbctl --wait=hv: %v\n%s", err, waitOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ovn-nbctl --wait=hv did not return after the chassis caught up")
	}
	if got := strings.TrimSpace(e.nbctl("get", "NB_Global", ".", "hv_cfg_timestamp")); got != "1234" {
		t.Errorf("hv_cfg_timestamp = %s, want the chassis's 1234", got)
	}

	// A port that its chassis reports up is up.
	e.sbctl("set", "Port_Binding", "p1", "chassis="+chassis, "up=true")
	e.waitFor("p1 up", 10*time.Second, func() bool {
		return e.nbctl("get", "Logical_Switch_Port", "p1", "up") == "true\n"
	})

	// Paused, it writes nothing; resumed, it catches up.
	e.appctl(ctl, "pause")
	e.waitStatus(ctl, "paused", 5*time.Second)
	if got := e.appctl(ctl, "is-paused"); got != "true\n" {
		t.Errorf("is-paused when paused: %q", got)
	}
	e.nbctl("lsp-add", "sw0", "p4")
	time.Sleep(300 * time.Millisecond)
	if got := e.column("Port_Binding", "logical_port"); len(got) != 4 {
		t.Errorf("paused northd wrote the Southbound: ports %q", got)
	}
	e.appctl(ctl, "resume")
	e.waitStatus(ctl, "active", 5*time.Second)
	e.nbctl("--wait=sb", "sync")
	if got := e.column("Port_Binding", "logical_port"); len(got) != 5 {
		t.Errorf("resumed northd: ports %q, want 5", got)
	}

	// inc-engine/recompute is counted as one.
	e.appctl(ctl, "inc-engine/clear-stats")
	e.appctl(ctl, "inc-engine/recompute")
	e.waitFor("a recompute", 5*time.Second, func() bool { return e.stat(ctl, "northd", "recompute") == 1 })
	if out, err := e.run("ovn-appctl", "-t", ctl, "status", "extra"); err == nil || !strings.Contains(out, `"status" command takes at most 0 arguments`) {
		t.Errorf("status with an argument: %v %q", err, out)
	}
	e.appctl(ctl, "exit")
}

// TestNorthdStandbyTakeover runs two govn northd on the same databases:
// one takes the lock, the other waits; killed with SIGKILL, the active one
// is replaced within 5 seconds and the Southbound stays as it was (the
// standby's fresh compute writes nothing different) and follows new changes.
func TestNorthdStandbyTakeover(t *testing.T) {
	needOVNTools(t)
	govn := northdGovn(t)
	for _, tc := range []struct{ active, server string }{
		{"govn", "govn"},
		{"govn", "ovsdb-server"},
		// The real ovn-northd active, govn northd its standby.
		{"ovn-northd", "ovsdb-server"},
	} {
		t.Run(tc.active+" on "+tc.server, func(t *testing.T) {
			for _, bin := range []string{tc.active, tc.server} {
				if _, err := exec.LookPath(bin); bin != "govn" && err != nil {
					t.Skipf("%s not installed", bin)
				}
			}
			e := newNorthdEnv(t, govn, tc.server)
			e.northd = tc.active
			a, ctlA := e.startNorthd("a")
			e.waitStatus(ctlA, "active", 10*time.Second)
			e.northd = "govn"
			_, ctlB := e.startNorthd("b")
			e.waitStatus(ctlB, "standby", 10*time.Second)
			testTakeover(t, e, a, ctlB, tc.active == "govn")
		})
	}
}

// testTakeover kills northd a and checks that the standby on ctlB takes
// over within 5 seconds, keeps the Southbound's rows (all of them when
// same says a wrote what b would write, else the bindings) and follows
// new changes.
func testTakeover(t *testing.T, e *northdEnv, a *exec.Cmd, ctlB string, same bool) {
	e.nbctl("--wait=sb", "ls-add", "sw0", "--", "lsp-add", "sw0", "p1", "--", "lsp-add", "sw0", "p2")
	before := e.sbctl("lflow-list")
	ports := e.column("Port_Binding", "_uuid")
	datapaths := e.column("Datapath_Binding", "_uuid")

	a.Process.Kill()
	killed := time.Now()
	a.Wait()
	e.waitStatus(ctlB, "active", 5*time.Second)
	t.Logf("standby active %v after the kill", time.Since(killed).Round(time.Millisecond))
	// sb_cfg follows only once the new active northd has written.
	e.nbctl("--wait=sb", "sync")
	if after := e.sbctl("lflow-list"); same && after != before {
		t.Errorf("the Southbound changed at takeover:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := e.column("Port_Binding", "_uuid"); !reflect.DeepEqual(got, ports) {
		t.Errorf("Port_Binding rows replaced at takeover: %q, were %q", got, ports)
	}
	if got := e.column("Datapath_Binding", "_uuid"); !reflect.DeepEqual(got, datapaths) {
		t.Errorf("Datapath_Binding rows replaced at takeover: %q, were %q", got, datapaths)
	}
	e.nbctl("--wait=sb", "lsp-add", "sw0", "p3")
	if got := e.column("Port_Binding", "logical_port"); len(got) != 3 {
		t.Errorf("after takeover and lsp-add: ports %q", got)
	}
}

// TestNorthdDatabaseRestart restarts both databases under a running govn
// northd: it reconnects, resumes its monitors (or, with a server that
// forgot its history, takes the difference to what it had), and goes on
// without a full recompute.
func TestNorthdDatabaseRestart(t *testing.T) {
	needOVNTools(t)
	govn := northdGovn(t)
	for _, server := range []string{"govn", "ovsdb-server"} {
		t.Run(server, func(t *testing.T) {
			if _, err := exec.LookPath(server); server != "govn" && err != nil {
				t.Skipf("%s not installed", server)
			}
			testNorthdDatabaseRestart(t, newNorthdEnv(t, govn, server))
		})
	}
}

func testNorthdDatabaseRestart(t *testing.T, e *northdEnv) {
	_, ctl := e.startNorthd("northd")
	e.waitStatus(ctl, "active", 10*time.Second)
	e.nbctl("--wait=sb", "ls-add", "sw0", "--", "lsp-add", "sw0", "p1")
	e.appctl(ctl, "inc-engine/clear-stats")
	for _, db := range []string{"sb", "nb"} {
		e.stopDB(db)
		e.startDB(db)
	}
	e.waitFor("both databases connected", 10*time.Second, func() bool {
		nb, err1 := e.run("ovn-appctl", "-t", ctl, "nb-connection-status")
		sb, err2 := e.run("ovn-appctl", "-t", ctl, "sb-connection-status")
		return err1 == nil && err2 == nil && nb == "connected\n" && sb == "connected\n"
	})
	e.waitStatus(ctl, "active", 10*time.Second)
	e.nbctl("--wait=sb", "lsp-add", "sw0", "p2")
	if got := e.column("Port_Binding", "logical_port"); len(got) != 2 {
		t.Errorf("after the restart and lsp-add: ports %q", got)
	}
	if n := e.stat(ctl, "northd", "recompute"); n != 0 {
		t.Errorf("northd recomputed %d times after the databases restarted, want 0", n)
	}
	if n := e.stat(ctl, "northd", "compute"); n == 0 {
		t.Error("northd did not compute after the restart")
	}
	logText, err := os.ReadFile(filepath.Join(e.dir, "northd.log"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(logText), "session ended"); got < 2 {
		t.Errorf("the log shows %d ended sessions, want one per database at least", got)
	}
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestNorthdSSL connects govn northd to the Southbound over SSL and to the
// Northbound over TCP, each through a list of remotes whose first one does
// not answer.
func TestNorthdSSL(t *testing.T) {
	needOVNTools(t)
	govn := northdGovn(t)
	e := &northdEnv{t: t, govn: govn, northd: "govn", dir: t.TempDir(), server: "govn", dbs: map[string]*exec.Cmd{}}
	ca := testpki.NewCA(t, e.dir, "ca")
	serverKey, serverCert := ca.Issue(t, e.dir, "server")
	clientKey, clientCert := ca.Issue(t, e.dir, "northd")
	ports := map[string]int{"nb": freePort(t), "sb": freePort(t)}
	dead := freePort(t)
	e.dbArgs = func(db string) []string {
		if db == "nb" {
			return []string{fmt.Sprintf("--remote=ptcp:%d:127.0.0.1", ports[db])}
		}
		return []string{fmt.Sprintf("--remote=pssl:%d:127.0.0.1", ports[db]),
			"--private-key=" + serverKey, "--certificate=" + serverCert, "--ca-cert=" + ca.File}
	}
	e.createDBs()
	e.northdArgs = []string{
		fmt.Sprintf("--ovnnb-db=tcp:127.0.0.1:%d,tcp:127.0.0.1:%d", dead, ports["nb"]),
		fmt.Sprintf("--ovnsb-db=ssl:127.0.0.1:%d,ssl:127.0.0.1:%d", dead, ports["sb"]),
		"-p", clientKey, "-c", clientCert, "-C", ca.File,
	}
	_, ctl := e.startNorthd("northd")
	e.waitStatus(ctl, "active", 15*time.Second)
	e.nbctl("--wait=sb", "ls-add", "sw0", "--", "lsp-add", "sw0", "p1")
	if got := e.column("Port_Binding", "logical_port"); !reflect.DeepEqual(got, []string{"p1"}) {
		t.Errorf("Port_Binding logical ports over SSL: %q", got)
	}
}

// TestOVNCtlStartsGovnNorthd runs the real ovn-ctl start_northd and
// stop_northd with govn standing in for ovn-northd (a link named
// ovn-northd), on databases govn db serves.
func TestOVNCtlStartsGovnNorthd(t *testing.T) {
	const ovnCtl = "/usr/share/ovn/scripts/ovn-ctl"
	if os.Geteuid() != 0 {
		t.Skip("ovn-ctl needs root (it chowns its directories)")
	}
	if _, err := os.Stat(ovnCtl); err != nil {
		t.Skip("ovn-ctl not installed")
	}
	needOVNTools(t, "ovs-appctl")
	e := newNorthdEnv(t, northdGovn(t), "govn")
	bin, run := filepath.Join(e.dir, "bin"), filepath.Join(e.dir, "run")
	for _, d := range []string{bin, run} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(e.govn, filepath.Join(bin, "ovn-northd")); err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(run, "ovn-northd.pid")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidfile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"),
		"OVN_RUNDIR="+run, "OVS_RUNDIR="+run, "OVN_LOGDIR="+run, "OVN_DBDIR="+e.dir)
	ovnctl := func(action string) {
		t.Helper()
		cmd := exec.Command(ovnCtl, "--ovn-manage-ovsdb=no", "--ovn-northd-nb-db=unix:"+e.sock("nb"),
			"--ovn-northd-sb-db=unix:"+e.sock("sb"), action)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ovn-ctl %s: %v\n%s", action, err, out)
		}
	}
	ovnctl("start_northd")
	appctl := exec.Command("ovn-appctl", "--timeout=10", "-t", "ovn-northd", "status")
	appctl.Env = env
	// ovn-appctl -t ovn-northd finds the control socket through the pidfile.
	e.waitFor("ovn-appctl -t ovn-northd status: active", 10*time.Second, func() bool {
		cmd := exec.Command(appctl.Path, appctl.Args[1:]...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return err == nil && string(out) == "Status: active\n"
	})
	e.nbctl("--wait=sb", "ls-add", "sw0")
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(comm)) != "ovn-northd" {
		t.Errorf("the detached daemon is named %q (%v), want ovn-northd", comm, err)
	}
	ovnctl("stop_northd")
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("govn northd (pid %d) still runs after ovn-ctl stop_northd", pid)
	}
}

// TestNorthdSchemaConversion converts the Northbound online to a schema
// with one more column in every table that northd reads, which moves the
// columns of every row: govn northd starts over from the new contents
// (a full recompute) and keeps the Southbound right.
func TestNorthdSchemaConversion(t *testing.T) {
	needOVNTools(t, "ovsdb-client")
	govn := northdGovn(t)
	for _, server := range []string{"govn", "ovsdb-server"} {
		t.Run(server, func(t *testing.T) {
			if _, err := exec.LookPath(server); server != "govn" && err != nil {
				t.Skipf("%s not installed", server)
			}
			e := newNorthdEnv(t, govn, server)
			_, ctl := e.startNorthd("northd")
			e.waitStatus(ctl, "active", 10*time.Second)
			e.nbctl("--wait=sb", "ls-add", "sw0", "--", "lsp-add", "sw0", "p1")
			ports := e.column("Port_Binding", "_uuid")

			var sch map[string]any
			if err := json.Unmarshal(schema.MustLookup("nb"), &sch); err != nil {
				t.Fatal(err)
			}
			sch["version"] = "99.0.0"
			for _, tbl := range sch["tables"].(map[string]any) {
				// "aaa" sorts first: every other column moves.
				tbl.(map[string]any)["columns"].(map[string]any)["aaa"] = map[string]any{"type": "string"}
			}
			file := filepath.Join(e.dir, "nb-new.ovsschema")
			b, _ := json.Marshal(sch)
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
			// Cleared before: northd may see the conversion before
			// ovsdb-client returns.
			e.appctl(ctl, "inc-engine/clear-stats")
			if out, err := exec.Command("ovsdb-client", "--timeout=20", "convert", "unix:"+e.sock("nb"), file).CombinedOutput(); err != nil {
				t.Fatalf("ovsdb-client convert: %v\n%s", err, out)
			}
			e.nbctl("--wait=sb", "lsp-add", "sw0", "p2")
			if got := e.column("Port_Binding", "logical_port"); !reflect.DeepEqual(got, []string{"p1", "p2"}) {
				t.Errorf("after the conversion and lsp-add: ports %q", got)
			}
			if got := e.column("Port_Binding", "_uuid"); !slices.Contains(got, ports[0]) {
				t.Errorf("p1's Port_Binding %s was replaced: %q", ports[0], got)
			}
			if n := e.stat(ctl, "northd", "recompute"); n != 1 {
				t.Errorf("northd recomputed %d times after the conversion, want 1", n)
			}
		})
	}
}

// TestNorthdIncrementalEqualsRecompute builds the feature-rich Northbound
// of internal/difftrace/testdata/features-a.sh change by change under a
// running govn northd, then has it recompute everything: the full compute
// must find nothing to change in the Southbound the incremental one wrote
// (every row keeps its UUID), and no Southbound transaction may have
// failed on the way.
func TestNorthdIncrementalEqualsRecompute(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: features-a.sh runs some sixty ovn-nbctl")
	}
	needOVNTools(t)
	script, err := filepath.Abs("../../internal/difftrace/testdata/features-a.sh")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Skip("features-a.sh not found")
	}
	e := newNorthdEnv(t, northdGovn(t), "govn")
	_, ctl := e.startNorthd("northd")
	e.waitStatus(ctl, "active", 10*time.Second)
	// northd creates NB_Global in an empty Northbound, as ovn-nbctl does
	// too: let northd's come first, or the two inserts race and one fails
	// on the table's one-row limit (with ovn-northd as with govn northd).
	e.waitFor("northd's NB_Global row", 10*time.Second, func() bool {
		out, err := e.run("ovn-nbctl", "--bare", "--columns=_uuid", "list", "NB_Global")
		return err == nil && strings.TrimSpace(out) != ""
	})
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "OVN_NB_DB=unix:"+e.sock("nb"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("features-a.sh: %v\n%s", err, out)
	}
	e.nbctl("--wait=sb", "sync")
	tables := []string{"Logical_Flow", "Logical_DP_Group", "Datapath_Binding", "Port_Binding", "Multicast_Group", "SB_Global"}
	before := map[string][]string{}
	for _, table := range tables {
		before[table] = e.column(table, "_uuid")
	}
	if len(before["Logical_Flow"]) == 0 {
		t.Fatal("no logical flows")
	}
	e.appctl(ctl, "inc-engine/clear-stats")
	e.appctl(ctl, "inc-engine/recompute")
	e.waitFor("the recompute", 10*time.Second, func() bool { return e.stat(ctl, "northd", "recompute") == 1 })
	e.nbctl("--wait=sb", "sync")
	for _, table := range tables {
		if after := e.column(table, "_uuid"); !reflect.DeepEqual(after, before[table]) {
			t.Errorf("%s: the full compute changed rows the incremental one wrote (%d rows before, %d after)",
				table, len(before[table]), len(after))
		}
	}
	logText, err := os.ReadFile(filepath.Join(e.dir, "northd.log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(logText), "transaction failed") {
		t.Errorf("a transaction failed:\n%s", logText)
	}
}
