package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests convert databases with the real ovsdb-client, against govn
// and against the real ovsdb-server, and read the results with the real
// ovsdb-tool.

// convServer is a database server on a file that a test can stop and
// start again: govn's in this process, or the real ovsdb-server.
type convServer struct {
	real bool
	file string
	sock string
	stop func()
}

func (s *convServer) remote() string { return "unix:" + s.sock }

// startConv serves file with govn (real false) or ovsdb-server.
func startConv(t *testing.T, real bool, file string) *convServer {
	t.Helper()
	dir := t.TempDir()
	s := &convServer{real: real, file: file, sock: filepath.Join(dir, "db.sock")}
	if real {
		cmd := exec.Command("ovsdb-server", "--remote=punix:"+s.sock, "--unixctl="+filepath.Join(dir, "ctl"),
			"--log-file="+filepath.Join(dir, "log"), "-vconsole:off", file)
		t.Cleanup(func() {
			if t.Failed() {
				b, _ := os.ReadFile(filepath.Join(dir, "log"))
				t.Logf("ovsdb-server log:\n%s", b)
			}
		})
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		s.stop = func() {
			cmd.Process.Kill()
			<-exited
		}
		t.Cleanup(s.stop)
		for i := 0; ; i++ {
			if c, err := net.Dial("unix", s.sock); err == nil {
				c.Close()
				break
			}
			if i == 200 {
				t.Fatal("ovsdb-server does not accept connections")
			}
			time.Sleep(10 * time.Millisecond)
		}
		return s
	}
	db, log, err := OpenFile(file, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	name := db.Schema.Name
	srv := New(Options{Logger: quietLogger()})
	if err := srv.AddDatabase(db, log); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := Listen(ctx, "punix:"+s.sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ctx, l); close(done) }()
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		// The log in use may be a new one if the database was converted.
		if c, ok := srv.DatabaseLog(name).(io.Closer); ok {
			c.Close()
		}
	}
	t.Cleanup(s.stop)
	return s
}

// tryTool runs a program and returns its output and error.
func tryTool(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
}

func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const convOld = `{"name":"Conv","version":"1.0.0","tables":{
 "Sw":{"isRoot":true,"columns":{
   "name":{"type":"string"},
   "tags":{"type":{"key":"string","min":0,"max":"unlimited"}},
   "mode":{"type":{"key":{"type":"string","enum":["set",["a","b"]]}}},
   "n":{"type":"integer"},
   "ports":{"type":{"key":{"type":"uuid","refTable":"Port"},"min":0,"max":"unlimited"}},
   "peer":{"type":{"key":{"type":"uuid","refTable":"Sw","refType":"weak"},"min":0,"max":1}},
   "gone":{"type":"string"}}},
 "Port":{"columns":{"name":{"type":"string"},"opts":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}}},
 "Old":{"isRoot":true,"columns":{"x":{"type":"integer"}}}}}`

// convNew drops Sw.gone and table Old, adds Sw.weight, widens the enum,
// bounds tags at 3 and makes n optional.
const convNew = `{"name":"Conv","version":"2.0.0","tables":{
 "Sw":{"isRoot":true,"columns":{
   "name":{"type":"string"},
   "tags":{"type":{"key":"string","min":0,"max":3}},
   "mode":{"type":{"key":{"type":"string","enum":["set",["a","b","c"]]}}},
   "n":{"type":{"key":"integer","min":0,"max":1}},
   "ports":{"type":{"key":{"type":"uuid","refTable":"Port"},"min":0,"max":"unlimited"}},
   "peer":{"type":{"key":{"type":"uuid","refTable":"Sw","refType":"weak"},"min":0,"max":1}},
   "weight":{"type":{"key":{"type":"integer","minInteger":0}}}}},
 "Port":{"columns":{"name":{"type":"string"},"opts":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}}}}}}`

const convFill = `["Conv",
 {"op":"insert","table":"Port","uuid":"00000000-0000-0000-0000-0000000000a1","row":{"name":"p1","opts":["map",[["k","v"]]]}},
 {"op":"insert","table":"Port","uuid":"00000000-0000-0000-0000-0000000000a2","row":{"name":"p2"}},
 {"op":"insert","table":"Sw","uuid":"00000000-0000-0000-0000-0000000000b1","row":{"name":"s1","tags":["set",["x","y"]],"mode":"b","n":5,"gone":"bye",
   "ports":["set",[["uuid","00000000-0000-0000-0000-0000000000a1"],["uuid","00000000-0000-0000-0000-0000000000a2"]]]}},
 {"op":"insert","table":"Sw","uuid":"00000000-0000-0000-0000-0000000000b2","row":{"name":"s2","mode":"a","n":7,
   "peer":["uuid","00000000-0000-0000-0000-0000000000b1"]}},
 {"op":"insert","table":"Old","uuid":"00000000-0000-0000-0000-0000000000c1","row":{"x":1}}]`

// TestConvertRealClientDifferential converts the same database with the
// real "ovsdb-client convert", once served by govn and once by the real
// ovsdb-server, and compares the dumps; then restarts both and reads the
// files with ovsdb-tool.
func TestConvertRealClientDifferential(t *testing.T) {
	needTools(t, "ovsdb-server", "ovsdb-client", "ovsdb-tool")
	oldSchema := writeTemp(t, "old.ovsschema", convOld)
	newSchema := writeTemp(t, "new.ovsschema", convNew)
	narrow := writeTemp(t, "narrow.ovsschema", strings.Replace(convNew, `"max":3`, `"max":1`, 1))
	dir := t.TempDir()
	govnFile, realFile := filepath.Join(dir, "govn.db"), filepath.Join(dir, "real.db")
	if err := CreateFile(govnFile, []byte(convOld)); err != nil {
		t.Fatal(err)
	}
	runTool(t, "ovsdb-tool", "create", realFile, oldSchema)
	servers := []*convServer{startConv(t, false, govnFile), startConv(t, true, realFile)}

	dumps := func(stage string) string {
		t.Helper()
		g := runTool(t, "ovsdb-client", "dump", servers[0].remote(), "Conv")
		r := runTool(t, "ovsdb-client", "dump", servers[1].remote(), "Conv")
		if g != r {
			t.Fatalf("%s: dumps differ\ngovn:\n%s\novsdb-server:\n%s", stage, g, r)
		}
		return g
	}
	for _, s := range servers {
		runTool(t, "ovsdb-client", "transact", s.remote(), convFill)
		if out := runTool(t, "ovsdb-client", "needs-conversion", s.remote(), newSchema); strings.TrimSpace(out) != "yes" {
			t.Errorf("needs-conversion before: %q", out)
		}
	}
	before := dumps("before conversion")

	// A conversion the data do not fit fails and changes nothing. (Only
	// against govn: ovsdb-server 3.1.0 crashes with a segmentation fault
	// on this failed conversion, after the "Sw" rows with references.)
	if out, err := tryTool("ovsdb-client", "convert", servers[0].remote(), narrow); err == nil {
		t.Errorf("narrowing conversion succeeded: %s", out)
	} else {
		mustContain(t, out, "tags")
	}
	if got := runTool(t, "ovsdb-client", "dump", servers[0].remote(), "Conv"); got != before {
		t.Errorf("failed conversion changed the data:\n%s", got)
	}

	// On each server, a db_change_aware client monitoring _Server and Conv,
	// and one that is not.
	type watchers struct{ aware, unaware *client }
	var ws []watchers
	for _, s := range servers {
		w := watchers{dial(t, s.sock), dial(t, s.sock)}
		mustContain(t, w.aware.call("set_db_change_aware", `[true]`), `{}`)
		mustContain(t, w.aware.call("monitor_cond", `["_Server","srv",{"Database":[{"columns":["name","schema"]}]}]`), `"Conv"`)
		mustContain(t, w.aware.call("monitor_cond", `["Conv","m1",{"Sw":[{"columns":["name"]}]}]`), `"s1"`)
		mustContain(t, w.unaware.call("monitor", `["Conv","m2",{"Sw":{"columns":["name"]}}]`), `"s1"`)
		ws = append(ws, w)
	}

	for _, s := range servers {
		runTool(t, "ovsdb-client", "convert", s.remote(), newSchema)
	}
	var heard []string
	for i, w := range ws {
		var notes []string
		for {
			select {
			case m := <-w.aware.notes:
				p := string(m.Params)
				if m.Method == "update2" {
					if !strings.Contains(p, `"srv"`) || !strings.Contains(p, `2.0.0`) {
						t.Errorf("real=%v: unexpected update2 %s", servers[i].real, p)
					}
					p = "srv: new schema"
				}
				notes = append(notes, m.Method+" "+p)
				continue
			case <-time.After(300 * time.Millisecond):
			}
			break
		}
		sort.Strings(notes)
		heard = append(heard, strings.Join(notes, "\n"))
		select {
		case <-w.unaware.conn.Done():
		case <-time.After(5 * time.Second):
			t.Errorf("real=%v: client that is not db_change_aware still connected", servers[i].real)
		}
		mustContain(t, w.aware.call("get_schema", `["Conv"]`), `"2.0.0"`)
	}
	// Both cancel the monitor. govn also changes the database's schema in
	// _Server.Database, as ovsdb-server(7) describes; ovsdb-server 3.1.0
	// leaves the old schema there (checked by hand: "ovsdb-client dump
	// _Server Database schema" still shows the old version afterwards).
	if heard[1] != `monitor_canceled ["m1"]` {
		t.Errorf("ovsdb-server's db_change_aware client heard\n%s", heard[1])
	}
	if want := `monitor_canceled ["m1"]` + "\nupdate2 srv: new schema"; heard[0] != want {
		t.Errorf("govn's db_change_aware client heard\n%s\nwant\n%s", heard[0], want)
	}
	after := dumps("after conversion")
	if !strings.Contains(after, "weight") || strings.Contains(after, "gone") || strings.Contains(after, "Old table") {
		t.Errorf("converted dump:\n%s", after)
	}
	for _, s := range servers {
		if out := runTool(t, "ovsdb-client", "get-schema-version", s.remote(), "Conv"); strings.TrimSpace(out) != "2.0.0" {
			t.Errorf("real=%v: get-schema-version %q", s.real, out)
		}
		if out := runTool(t, "ovsdb-client", "needs-conversion", s.remote(), newSchema); strings.TrimSpace(out) != "no" {
			t.Errorf("real=%v: needs-conversion after: %q", s.real, out)
		}
		// Both stay writable under the new schema.
		runTool(t, "ovsdb-client", "transact", s.remote(), `["Conv",{"op":"update","table":"Sw","where":[["name","==","s2"]],"row":{"mode":"c","weight":4}}]`)
	}
	dumps("after a write under the new schema")

	// The file holds the converted database: for ovsdb-tool, and for a
	// restarted server.
	for i, s := range servers {
		s.stop()
		if out := runTool(t, "ovsdb-tool", "db-version", s.file); strings.TrimSpace(out) != "2.0.0" {
			t.Errorf("real=%v: ovsdb-tool db-version %q", s.real, out)
		}
		if out := runTool(t, "ovsdb-tool", "needs-conversion", s.file, newSchema); strings.TrimSpace(out) != "no" {
			t.Errorf("real=%v: ovsdb-tool needs-conversion %q", s.real, out)
		}
		runTool(t, "ovsdb-tool", "show-log", s.file)
		servers[i] = startConv(t, s.real, s.file)
	}
	dumps("after restart")
}

// oldNBSchema returns the installed OVN Northbound schema made to look
// older: tables and a column removed, an enum narrowed, the version
// lowered.
func oldNBSchema(t *testing.T, text []byte) string {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal(text, &s); err != nil {
		t.Fatal(err)
	}
	s["version"] = "6.3.0"
	delete(s, "cksum")
	tables := s["tables"].(map[string]any)
	for _, name := range []string{"Static_MAC_Binding", "Chassis_Template_Var", "Mirror"} {
		delete(tables, name)
	}
	lsp := tables["Logical_Switch_Port"].(map[string]any)["columns"].(map[string]any)
	delete(lsp, "mirror_rules")
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// TestConvertRealNB upgrades an OVN Northbound database filled by
// ovn-nbctl under an older schema to the installed schema, online with
// ovsdb-client as ovn-ctl does, on govn and on ovsdb-server alike.
func TestConvertRealNB(t *testing.T) {
	needTools(t, "ovsdb-server", "ovsdb-client", "ovsdb-tool", "ovn-nbctl")
	const installed = "/usr/share/ovn/ovn-nb.ovsschema"
	text, err := os.ReadFile(installed)
	if err != nil {
		t.Skipf("no installed NB schema: %v", err)
	}
	var cur struct{ Version string }
	json.Unmarshal(text, &cur)
	oldSchema := writeTemp(t, "old-nb.ovsschema", oldNBSchema(t, text))
	dir := t.TempDir()
	govnFile, realFile := filepath.Join(dir, "govn.db"), filepath.Join(dir, "real.db")
	runTool(t, "ovsdb-tool", "create", realFile, oldSchema)
	oldText, _ := os.ReadFile(oldSchema)
	if err := CreateFile(govnFile, oldText); err != nil {
		t.Fatal(err)
	}
	servers := []*convServer{startConv(t, false, govnFile), startConv(t, true, realFile)}
	show := func(stage string) string {
		t.Helper()
		var outs []string
		for _, s := range servers {
			out := runTool(t, "ovn-nbctl", "--db="+s.remote(), "show")
			outs = append(outs, uuidRE.ReplaceAllString(out, "UUID"))
		}
		if outs[0] != outs[1] {
			t.Fatalf("%s: ovn-nbctl show differs\ngovn:\n%s\novsdb-server:\n%s", stage, outs[0], outs[1])
		}
		return outs[0]
	}
	for _, s := range servers {
		db := "--db=" + s.remote()
		runTool(t, "ovn-nbctl", db, "ls-add", "sw0", "--", "lsp-add", "sw0", "p1", "--", "lsp-set-addresses", "p1", "00:00:00:00:00:01 10.0.0.1")
		runTool(t, "ovn-nbctl", db, "lr-add", "lr0", "--", "lrp-add", "lr0", "lrp0", "00:00:00:00:ff:01", "10.0.0.254/24")
		runTool(t, "ovn-nbctl", db, "acl-add", "sw0", "to-lport", "1000", "ip4.src == 10.0.0.2", "drop")
		runTool(t, "ovn-nbctl", db, "lb-add", "lb0", "10.0.0.10:80", "10.0.0.1:8080", "--", "ls-lb-add", "sw0", "lb0")
	}
	before := show("before conversion")
	// A long-running db_change_aware client (ovn-nbctl's daemon mode, an
	// ovsdb-idl client) connected through the conversion.
	var daemons []string
	for _, s := range servers {
		daemons = append(daemons, startNbctlDaemon(t, s.remote()))
	}
	for _, s := range servers {
		if out := runTool(t, "ovsdb-client", "needs-conversion", s.remote(), installed); strings.TrimSpace(out) != "yes" {
			t.Errorf("real=%v: needs-conversion %q", s.real, out)
		}
		runTool(t, "ovsdb-client", "convert", s.remote(), installed)
		if out := runTool(t, "ovsdb-client", "get-schema-version", s.remote(), "OVN_Northbound"); strings.TrimSpace(out) != cur.Version {
			t.Errorf("real=%v: version after conversion %q, want %s", s.real, out, cur.Version)
		}
	}
	if got := show("after conversion"); got != before {
		t.Errorf("conversion changed what ovn-nbctl shows:\n%s\nwas:\n%s", got, before)
	}
	for i, s := range servers {
		// A table the old schema lacked is usable now, also through the
		// daemon, which learned the new schema without reconnecting.
		if out, err := nbctlVia(daemons[i], "static-mac-binding-add", "lrp0", "10.0.0.7", "00:00:00:00:00:07"); err != nil {
			t.Errorf("real=%v: ovn-nbctl daemon after conversion: %v\n%s", s.real, err, out)
		}
		s.stop()
		if out := runTool(t, "ovsdb-tool", "db-version", s.file); strings.TrimSpace(out) != cur.Version {
			t.Errorf("real=%v: ovsdb-tool db-version %q", s.real, out)
		}
		servers[i] = startConv(t, s.real, s.file)
	}
	after := show("after restart")
	mustContain(t, after, "sw0", "p1", "lr0", "lrp0")
	for _, s := range servers {
		out := runTool(t, "ovn-nbctl", "--db="+s.remote(), "--columns=ip,mac", "list", "Static_MAC_Binding")
		mustContain(t, out, "10.0.0.7", "00:00:00:00:00:07")
	}
}

// startNbctlDaemon starts "ovn-nbctl --detach" against remote and returns
// its control socket.
func startNbctlDaemon(t *testing.T, remote string) string {
	t.Helper()
	dir := t.TempDir()
	ctl, pidfile := filepath.Join(dir, "nbctl.ctl"), filepath.Join(dir, "nbctl.pid")
	cmd := exec.Command("ovn-nbctl", "--db="+remote, "--detach", "--pidfile="+pidfile, "--unixctl="+ctl, "--log-file="+filepath.Join(dir, "log"))
	cmd.Env = append(os.Environ(), "OVN_RUNDIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ovn-nbctl --detach: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidfile); err == nil {
			var pid int
			if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGTERM)
			}
		}
	})
	if out, err := nbctlVia(ctl, "ls-list"); err != nil {
		t.Fatalf("ovn-nbctl daemon: %v\n%s", err, out)
	}
	return ctl
}

// nbctlVia runs an ovn-nbctl command through the daemon at ctl.
func nbctlVia(ctl string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ovn-nbctl", args...)
	cmd.Env = append(os.Environ(), "OVN_NB_DAEMON="+ctl)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
