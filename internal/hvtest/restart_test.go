package hvtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/internal/daemon"
)

// TestGovnChassisSouthboundRestart: the Southbound database restarts
// while a VM pings another on a second govn chassis at 100 packets a
// second; not one echo is lost, because the datapaths keep their flows
// while the controllers reconnect. Afterwards both controllers follow the
// Southbound again: --wait=hv returns, and a port bound after the restart
// comes up and answers (issue 11 (e), its first half). The Southbound is
// served by the real ovsdb-server, and then by govn db.
func TestGovnChassisSouthboundRestart(t *testing.T) {
	t.Run("ovsdb-server", func(t *testing.T) {
		c := govnChassisCluster(t, 2)
		southboundRestart(t, c, func() { stopCentralDB(t, c, "sb") }, func() { restartCentralDB(t, c, "sb") })
	})
	t.Run("govn-db", func(t *testing.T) {
		if why := Available(); why != "" {
			t.Skip(why)
		}
		var govn govnBinary
		t.Cleanup(govn.remove)
		bin := govn.get(t)
		govnHas(t, bin, "chassis")
		govnHas(t, bin, "db")
		db := startGovnDB(t, bin, "sb")
		g := GovnChassis{Argv: []string{bin, "chassis"}}
		c := New(t, Options{Hypervisors: 2, SB: db.sock, Chassis: func(int) Chassis { return g }})
		southboundRestart(t, c, db.stop, db.start)
	})
}

// southboundRestart is TestGovnChassisSouthboundRestart on a cluster
// whose Southbound stop stops and start starts again.
func southboundRestart(t *testing.T, c *Cluster, stop, start func()) {
	c.NBCtl(t, "ls-add", "ls0")
	vm1 := addSwitchVM(t, c, 1, "vm1", "0a:00:00:00:00:01", "10.0.0.11")
	vm2 := addSwitchVM(t, c, 2, "vm2", "0a:00:00:00:00:02", "10.0.0.12")
	c.WaitPortUp(t, "vm1")
	c.WaitPortUp(t, "vm2")
	dumpOnFailure(t, c)
	if err := vm1.WaitPing(vm2.IP(), 20*time.Second); err != nil {
		t.Fatal(err)
	}

	// 10 s at 100/s: a restart slowed by a loaded machine still leaves
	// most echoes answered.
	p := startPinger(t, vm1, vm2.IP(), 1000)
	time.Sleep(time.Second)
	down := time.Now()
	stop()
	// Long enough for both controllers to see the connection go and
	// retry it.
	time.Sleep(time.Second)
	start()
	up := time.Now()
	t.Logf("Southbound down for %v", up.Sub(down).Round(time.Millisecond))
	r := p.wait(t)
	t.Logf("during the restart: %d echo requests, %d answered, %d lost", r.sent, r.received, r.sent-r.received)
	if r.sent < 400 {
		t.Errorf("ping sent only %d echo requests", r.sent)
	}
	if r.received != r.sent {
		t.Errorf("%d of %d echo requests lost across the Southbound restart", r.sent-r.received, r.sent)
	}

	// The controllers resumed: they acknowledge a new nb_cfg, and a port
	// bound now comes up.
	c.WaitHV(t)
	t.Logf("--wait=hv returned %v after the Southbound came back", time.Since(up).Round(time.Millisecond))
	vm3 := addSwitchVM(t, c, 2, "vm3", "0a:00:00:00:00:03", "10.0.0.13")
	c.WaitPortUp(t, "vm3")
	if err := vm1.WaitPing(vm3.IP(), 20*time.Second); err != nil {
		t.Errorf("port bound after the restart: %v", err)
	}
}

// govnDB is a govn db serving one database for a test, outside the
// cluster's namespaces (its clients reach it by its unix socket).
type govnDB struct {
	t         *testing.T
	argv      []string
	sock, log string
	proc      *os.Process
	done      chan struct{} // closed when proc has exited; nil when none runs
}

// startGovnDB serves a new database of schema (nb, sb) with govn db
// until the test ends.
func startGovnDB(t *testing.T, bin, schema string) *govnDB {
	t.Helper()
	// Short, and named as the cluster's files are so that Sweep removes
	// it after a killed run: a unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", runPrefix(os.Getpid())+schema+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("govn db %s log:\n%s", schema, tail(filepath.Join(dir, "db.log"), 30))
		}
		_ = os.RemoveAll(dir)
	})
	d := &govnDB{t: t, sock: filepath.Join(dir, schema+".sock"), log: filepath.Join(dir, "db.log")}
	d.argv = []string{bin, "db", "--create=" + schema, "--remote=punix:" + d.sock, "--log-file=" + d.log,
		filepath.Join(dir, schema+".db")}
	t.Cleanup(d.stop)
	d.start()
	return d
}

// start runs govn db and waits for its socket.
func (d *govnDB) start() {
	d.t.Helper()
	cmd := exec.Command(d.argv[0], d.argv[1:]...)
	if err := cmd.Start(); err != nil {
		d.t.Fatalf("govn db: %v", err)
	}
	d.proc, d.done = cmd.Process, make(chan struct{})
	done := d.done
	go func() { _ = cmd.Wait(); close(done) }()
	waitSocket(d.t, d.sock)
}

// stop ends govn db with SIGTERM (SIGKILL after stopGrace) and waits.
func (d *govnDB) stop() {
	if d.done == nil {
		return
	}
	_ = d.proc.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(stopGrace):
		_ = d.proc.Kill()
		<-d.done
	}
	d.done = nil
}

// TestGovnChassisKillGap: a govn chassis killed (SIGKILL) while its VM
// pings a VM on another chassis at 100 packets a second, and started
// again at once, keeps its Chassis row (same UUID), its port binding and
// its conntrack zones; the gap from the restart to the first answered
// echo, and the echoes lost, are logged (issue 11 (e): aim under 1 s).
func TestGovnChassisKillGap(t *testing.T) {
	c := govnChassisCluster(t, 2)
	hv1 := c.Hypervisor(1)
	c.NBCtl(t, "ls-add", "ls0")
	vm1 := addSwitchVM(t, c, 1, "vm1", "0a:00:00:00:00:01", "10.0.0.11")
	vm2 := addSwitchVM(t, c, 2, "vm2", "0a:00:00:00:00:02", "10.0.0.12")
	c.WaitPortUp(t, "vm1")
	c.WaitPortUp(t, "vm2")
	dumpOnFailure(t, c)
	if err := vm1.WaitPing(vm2.IP(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	chassisRow := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=_uuid", "find", "Chassis", "name=hv1"))
	binding := c.SBCtl(t, "--bare", "--columns=chassis", "find", "Port_Binding", "logical_port=vm1")
	zones := ctZones(t, hv1)
	if len(zones) == 0 {
		t.Fatal("hv1 stored no conntrack zones")
	}
	zoneList := hv1.Run(t, "ovs-appctl", "-t", hv1.Dir+"/chassis.ctl", "ct-zone-list")

	// 10 s at 100/s: a restart slowed by a loaded machine still leaves
	// most echoes answered.
	p := startPinger(t, vm1, vm2.IP(), 1000)
	time.Sleep(time.Second)
	pid, err := daemon.ReadPidfile(filepath.Join(hv1.Dir, "chassis.pid"))
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for syscall.Kill(pid, 0) == nil {
		time.Sleep(5 * time.Millisecond)
	}
	// The killed process left its socket behind: wait for the new one.
	if err := os.Remove(hv1.DB); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	restarted := time.Now()
	hv1.Chassis.Start(t, hv1)
	r := p.wait(t)
	first, ok := r.firstReplyAfter(restarted)
	if !ok {
		t.Fatalf("no echo answered after the restart (%d sent, %d answered)", r.sent, r.received)
	}
	t.Logf("kill to restart %v; restart to the first answered echo %v; %d of %d echoes lost (%v at 100/s)",
		restarted.Sub(killed).Round(time.Millisecond), first.Sub(restarted).Round(time.Millisecond),
		r.sent-r.received, r.sent, time.Duration(r.sent-r.received)*10*time.Millisecond)
	if r.received < r.sent/2 {
		t.Errorf("ping answered only %d of %d", r.received, r.sent)
	}

	if got := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=_uuid", "find", "Chassis", "name=hv1")); got != chassisRow {
		t.Errorf("Chassis hv1 is row %q, was %q", got, chassisRow)
	}
	if got := c.SBCtl(t, "--bare", "--columns=chassis", "find", "Port_Binding", "logical_port=vm1"); got != binding {
		t.Errorf("vm1 bound to %q, was %q", got, binding)
	}
	if got := ctZones(t, hv1); !sameZones(got, zones) {
		t.Errorf("conntrack zones %v, were %v", got, zones)
	}
	if got := hv1.Run(t, "ovs-appctl", "-t", hv1.Dir+"/chassis.ctl", "ct-zone-list"); got != zoneList {
		t.Errorf("ct-zone-list:\n%s\nwas:\n%s", got, zoneList)
	}
}

// addSwitchVM adds logical switch port name on ls0 and its VM on
// hypervisor hv.
func addSwitchVM(t *testing.T, c *Cluster, hv int, name, mac, ip string) *VM {
	t.Helper()
	c.NBCtl(t, "lsp-add", "ls0", name, "--", "lsp-set-addresses", name, mac+" "+ip)
	return c.AddVM(t, c.Hypervisor(hv), VMSpec{Name: name, LSP: name, MAC: mac, Addr: ip + "/24"})
}

// ctZones returns the conntrack zones a chassis keeps in its local
// database: external_ids ct-zone-NAME=ZONE of the Open_vSwitch row.
func ctZones(t *testing.T, hv *Hypervisor) map[string]string {
	t.Helper()
	zones := map[string]string{}
	out := strings.Trim(strings.TrimSpace(hv.Vsctl(t, "get", "Open_vSwitch", ".", "external_ids")), "{}")
	for _, kv := range strings.Split(out, ", ") {
		k, v, _ := strings.Cut(kv, "=")
		if k = strings.Trim(k, `"`); strings.HasPrefix(k, "ct-zone-") {
			zones[k] = strings.Trim(v, `"`)
		}
	}
	return zones
}

func sameZones(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// centralDB names the files of central database name ("nb" or "sb") as
// Cluster.startOVSDB made them.
func centralDB(c *Cluster, name string) (db, sock, pidfile string) {
	return filepath.Join(c.Dir, name+".db"), filepath.Join(c.Dir, name+".sock"),
		filepath.Join(c.Dir, "ovsdb-server-"+name+".pid")
}

// stopCentralDB stops the cluster's ovsdb-server of database name with
// SIGTERM and waits until it has exited.
func stopCentralDB(t *testing.T, c *Cluster, name string) {
	t.Helper()
	_, _, pidfile := centralDB(c, name)
	pid, err := daemon.ReadPidfile(pidfile)
	if err != nil {
		t.Fatalf("%s database: %v", name, err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("%s database: %v", name, err)
	}
	if err := waitFor(10*time.Second, name+" database exit", func() bool { return syscall.Kill(pid, 0) != nil }); err != nil {
		t.Fatal(err)
	}
}

// restartCentralDB serves database name again from its file, as
// startOVSDB first did, and waits for its socket.
func restartCentralDB(t *testing.T, c *Cluster, name string) {
	t.Helper()
	db, sock, pidfile := centralDB(c, name)
	c.Start(t, c.Central, "central/ovsdb-server-"+name+"-restarted", ovsEnv(c.Dir),
		"ovsdb-server", db, "--remote=punix:"+sock,
		"--unixctl="+filepath.Join(c.Dir, name+".ctl"),
		"--log-file="+filepath.Join(c.Dir, "ovsdb-server-"+name+".log"),
		"--pidfile="+pidfile, "--no-chdir")
	waitSocket(t, sock)
}

// pinger is ping(8) running in a VM at 100 echo requests a second.
type pinger struct {
	out    bytes.Buffer // written by exec until done
	done   chan error
	count  int
	dst    string
	vmName string
}

// startPinger sends count echo requests from vm to dst, 10 ms apart, each
// reply timestamped (ping -D); it is killed when the test ends if it
// still runs.
func startPinger(t *testing.T, vm *VM, dst string, count int) *pinger {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cmd := vm.Command(ctx, "ping", "-n", "-D", "-i", "0.01", "-W", "1", "-c", strconv.Itoa(count), dst)
	p := &pinger{done: make(chan error, 1), count: count, dst: dst, vmName: vm.Name}
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("ping from %s: %v", vm.Name, err)
	}
	go func() { p.done <- cmd.Wait() }()
	return p
}

// pingResult is what a pinger saw.
type pingResult struct {
	sent, received int
	replies        []time.Time // when each answer arrived, in order
}

var (
	pingReply   = regexp.MustCompile(`(?m)^\[(\d+)\.(\d+)\] \d+ bytes from .*icmp_seq=\d+`)
	pingSummary = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)
)

// wait waits for the pinger to end (its count sent, and a second for the
// last answers) and parses what it printed.
func (p *pinger) wait(t *testing.T) pingResult {
	t.Helper()
	select {
	case <-p.done: // ping exits 1 when an echo went unanswered
	case <-time.After(time.Duration(p.count)*10*time.Millisecond + 30*time.Second):
		t.Fatalf("ping from %s to %s did not end", p.vmName, p.dst)
	}
	out := p.out.String()
	r, err := parsePing(out)
	if err != nil {
		t.Fatalf("ping from %s to %s: %v:\n%s", p.vmName, p.dst, err, out)
	}
	return r
}

func parsePing(out string) (pingResult, error) {
	var r pingResult
	m := pingSummary.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no summary line")
	}
	r.sent, _ = strconv.Atoi(m[1])
	r.received, _ = strconv.Atoi(m[2])
	for _, m := range pingReply.FindAllStringSubmatch(out, -1) {
		sec, _ := strconv.ParseInt(m[1], 10, 64)
		frac := (m[2] + "000000000")[:9]
		nsec, _ := strconv.ParseInt(frac, 10, 64)
		r.replies = append(r.replies, time.Unix(sec, nsec))
	}
	return r, nil
}

// firstReplyAfter is when the first answer after t arrived.
func (r pingResult) firstReplyAfter(t time.Time) (time.Time, bool) {
	for _, at := range r.replies {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

func TestParsePing(t *testing.T) {
	for _, tc := range []struct {
		name, out      string
		sent, received int
		replies        []time.Time
		err            bool
	}{
		{name: "all answered", out: "PING 10.0.0.12 (10.0.0.12) 56(84) bytes of data.\n" +
			"[1764633600.012345] 64 bytes from 10.0.0.12: icmp_seq=1 ttl=64 time=0.321 ms\n" +
			"[1764633600.5] 64 bytes from 10.0.0.12: icmp_seq=2 ttl=64 time=0.2 ms\n\n" +
			"--- 10.0.0.12 ping statistics ---\n2 packets transmitted, 2 received, 0% packet loss, time 10ms\n",
			sent: 2, received: 2,
			replies: []time.Time{time.Unix(1764633600, 12345000), time.Unix(1764633600, 500000000)}},
		{name: "losses", out: "[1764633600.000001] 64 bytes from 10.0.0.12: icmp_seq=3 ttl=64 time=1 ms\n" +
			"5 packets transmitted, 1 received, +2 errors, 80% packet loss, time 40ms\n",
			sent: 5, received: 1, replies: []time.Time{time.Unix(1764633600, 1000)}},
		{name: "no summary", out: "ping: connect: Network is unreachable\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parsePing(tc.out)
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want one: %v", err, tc.err)
			}
			if r.sent != tc.sent || r.received != tc.received || len(r.replies) != len(tc.replies) {
				t.Fatalf("got %+v", r)
			}
			for i := range r.replies {
				if !r.replies[i].Equal(tc.replies[i]) {
					t.Errorf("reply %d at %v, want %v", i, r.replies[i], tc.replies[i])
				}
			}
		})
	}
}
