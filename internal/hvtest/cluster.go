package hvtest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/internal/lab"
)

// Options say what a Cluster runs. The zero value is two hypervisors with
// the real ovsdb-server, ovn-northd, ovs-vswitchd and ovn-controller.
type Options struct {
	// Hypervisors is how many hypervisor namespaces to make (default 2);
	// they are named hv1, hv2, ... which is also their chassis name.
	Hypervisors int
	// NB and SB, if set, are the unix socket paths of Northbound and
	// Southbound databases that the caller serves; otherwise the cluster
	// starts the real ovsdb-server for each.
	NB, SB string
	// DB, if set, is the program and leading arguments of a database
	// server that takes ovsdb-server's --remote, --unixctl, --log-file and
	// --pidfile and creates its file with --create=nb or --create=sb, e.g.
	// {"/path/govn", "db"}: it serves the Northbound and Southbound in the
	// central namespace instead of the real ovsdb-server (unless NB or SB
	// are given).
	DB []string
	// Northd starts the northd (default RealNorthd); NoNorthd for none.
	Northd Northd
	// Chassis returns the chassis of hypervisor i (1-based); default
	// RealChassis for all.
	Chassis func(i int) Chassis
	// Underlay is the underlay's IPv4 prefix; hypervisor i gets host i+10
	// in it as its encap IP. Default 172.31.0.0/24.
	Underlay netip.Prefix
	// Physnet, if set, names a provider network: a second bridge in the
	// underlay namespace, reached from every hypervisor through an OVS
	// bridge br-ex (external_ids:ovn-bridge-mappings=Physnet:br-ex), for
	// localnet switch ports; AddExternal puts namespaces on it.
	Physnet string
}

// Cluster is one OVN deployment in namespaces.
type Cluster struct {
	// Prefix starts the name of every namespace of this cluster:
	// hvt<pid>-<random>.
	Prefix string
	// Dir holds the databases, sockets and logs. It is short (under
	// os.TempDir) because unix socket paths are limited to 107 bytes.
	Dir string
	// Central is the namespace of the central databases and the northd.
	Central string
	// NB and SB are the unix socket paths of the databases.
	NB, SB string
	// HVs are the hypervisors, HVs[0] is hv1.
	HVs []*Hypervisor

	underlayNS string
	underlay   netip.Prefix
	physnet    string
	externals  int // namespaces on the provider network so far; guarded by mu
	mu         sync.Mutex
	vms        map[string]*VM
}

// runPrefix starts every name made by a test process with pid.
func runPrefix(pid int) string { return "hvt" + strconv.Itoa(pid) + "-" }

// Available reports why a cluster cannot be made here, or "" if it can.
// Each component checks its own binaries when it starts.
func Available() string {
	if os.Geteuid() != 0 {
		return "needs root"
	}
	for _, b := range []string{"ip", "ethtool", "ovs-vsctl", "ovn-nbctl", "ovn-sbctl"} {
		if _, err := exec.LookPath(b); err != nil {
			return "needs " + b
		}
	}
	return ""
}

// New builds a cluster and removes all of it when the test ends. It skips
// the test unless it runs as root with the binaries it needs, and fails it
// if anything does not come up. It returns once every hypervisor's Chassis
// row is in the Southbound.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if why := Available(); why != "" {
		t.Skip(why)
	}
	Sweep(t)
	if opts.Hypervisors == 0 {
		opts.Hypervisors = 2
	}
	if opts.Northd == nil {
		opts.Northd = RealNorthd()
	}
	if opts.Chassis == nil {
		opts.Chassis = func(int) Chassis { return RealChassis{} }
	}
	if !opts.Underlay.IsValid() {
		opts.Underlay = netip.MustParsePrefix("172.31.0.0/24")
	}
	var r [3]byte
	_, _ = rand.Read(r[:])
	c := &Cluster{
		Prefix:   runPrefix(os.Getpid()) + hex.EncodeToString(r[:]),
		underlay: opts.Underlay,
		vms:      map[string]*VM{},
	}
	dir, err := os.MkdirTemp("", c.Prefix+"-")
	if err != nil {
		t.Fatal(err)
	}
	c.Dir = dir
	t.Cleanup(func() {
		if t.Failed() {
			// Sweep leaves a failed run's files for whoever debugs it.
			_ = os.WriteFile(filepath.Join(dir, keptFile), nil, 0o644)
			t.Logf("cluster files kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	// Held until every other cleanup has run: a Sweep in a process that
	// cannot see this one's pid (another pid namespace) leaves the
	// cluster alone while the lock is held.
	lock, err := holdLock(filepath.Join(dir, lockFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Close() })
	c.Central = c.newNS(t, "central")
	c.NB, c.SB = opts.NB, opts.SB
	if c.NB == "" {
		c.NB = c.startDB(t, opts.DB, "nb", "/usr/share/ovn/ovn-nb.ovsschema")
	}
	if c.SB == "" {
		c.SB = c.startDB(t, opts.DB, "sb", "/usr/share/ovn/ovn-sb.ovsschema")
	}
	opts.Northd.Start(t, c)
	// Runs before the databases stop (cleanups run last in, first out).
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		nb, err := c.NBCtlErr("show")
		t.Logf("ovn-nbctl show (%v):\n%s", err, nb)
		sb, err := c.sbctlErr("show")
		t.Logf("ovn-sbctl show (%v):\n%s", err, sb)
	})
	c.underlayNS = c.newNS(t, "ul")
	must(t, lab.Bridge(c.underlayNS, "br0", lab.UnderlayMTU))
	if c.physnet = opts.Physnet; c.physnet != "" {
		must(t, lab.Bridge(c.underlayNS, physBridge, 0))
	}
	for i := 1; i <= opts.Hypervisors; i++ {
		c.HVs = append(c.HVs, c.newHypervisor(t, i, opts.Chassis(i)))
	}
	for _, hv := range c.HVs {
		must(t, lab.WaitChassis(c.Dir, c.SB, hv.Name, 30*time.Second))
	}
	return c
}

// newNS makes the namespace Prefix-suffix with its loopback up and IPv6
// off (router solicitations and DAD would add unrelated traffic), and
// deletes it at cleanup, killing whatever still runs in it.
func (c *Cluster) newNS(t testing.TB, suffix string) string {
	t.Helper()
	name := c.Prefix + "-" + suffix
	must(t, lab.AddNS(t, name))
	return name
}

// removeNS kills every process left in a namespace and deletes it.
func removeNS(name string) { lab.RemoveNS(name) }

// Sweep removes the namespaces and directories that an earlier test
// process, now dead, left behind (a run killed before its cleanups ran);
// it keeps the directories of failed clusters.
// New calls it.
func Sweep(t testing.TB) {
	t.Helper()
	dead := func(name string) bool {
		rest, ok := strings.CutPrefix(name, "hvt")
		if !ok {
			return false
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid == os.Getpid() {
			return false
		}
		_, err = os.Stat("/proc/" + pidText)
		return os.IsNotExist(err)
	}
	// A cluster whose lock is held is alive, whatever /proc says.
	held := func(name string) bool {
		parts := strings.SplitN(name, "-", 3)
		if len(parts) < 2 {
			return false
		}
		locks, _ := filepath.Glob(filepath.Join(os.TempDir(), parts[0]+"-"+parts[1]+"-*", lockFile))
		for _, l := range locks {
			if locked(l) {
				return true
			}
		}
		return false
	}
	dead = func(alive func(string) bool) func(string) bool {
		return func(name string) bool { return alive(name) && !held(name) }
	}(dead)
	for _, ns := range lab.Namespaces("hvt") {
		if dead(ns) {
			t.Logf("hvtest: removing namespace %s left by an earlier run", ns)
			removeNS(ns)
		}
	}
	if ents, err := os.ReadDir(os.TempDir()); err == nil {
		for _, e := range ents {
			if e.IsDir() && dead(e.Name()) && !exists(filepath.Join(os.TempDir(), e.Name(), keptFile)) {
				_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
			}
		}
	}
}

// keptFile marks the directory of a failed cluster, kept for debugging:
// Sweep removes only the directories of killed runs.
const keptFile = "KEPT"

// lockFile, in a cluster's directory, is locked (flock) while the cluster
// is up.
const lockFile = "LOCK"

// holdLock creates path and takes an exclusive lock on it, held until the
// file is closed.
func holdLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("hvtest: cluster lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("hvtest: cluster lock %s: %w", path, err)
	}
	return f, nil
}

// locked reports whether another process holds the lock on path.
func locked(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// nsRun runs args inside the namespace ns and fails the test if it fails.
func (c *Cluster) nsRun(t testing.TB, ns string, args ...string) string {
	t.Helper()
	return mustRun(t, nil, inNS(ns, args...)...)
}

// startOVSDB creates and serves a database from schema in the central
// namespace and returns its socket path.
func (c *Cluster) startDB(t testing.TB, server []string, name, schema string) string {
	t.Helper()
	if len(server) == 0 {
		return c.startOVSDB(t, name, schema)
	}
	needBinaries(t, server[0])
	sock := filepath.Join(c.Dir, name+".sock")
	args := append(append([]string{}, server...), "--create="+name, "--remote=punix:"+sock,
		"--unixctl="+filepath.Join(c.Dir, name+".ctl"),
		"--log-file="+filepath.Join(c.Dir, "db-"+name+".log"),
		"--pidfile="+filepath.Join(c.Dir, "db-"+name+".pid"),
		filepath.Join(c.Dir, name+".db"))
	c.Start(t, c.Central, "central/db-"+name, ovsEnv(c.Dir), args...)
	waitSocket(t, sock)
	return sock
}

func (c *Cluster) startOVSDB(t testing.TB, name, schema string) string {
	t.Helper()
	needBinaries(t, "ovsdb-server", "ovsdb-tool")
	if _, err := os.Stat(schema); err != nil {
		t.Skipf("needs %s", schema)
	}
	db := filepath.Join(c.Dir, name+".db")
	sock := filepath.Join(c.Dir, name+".sock")
	mustRun(t, nil, "ovsdb-tool", "create", db, schema)
	c.Start(t, c.Central, "central/ovsdb-server-"+name, ovsEnv(c.Dir),
		"ovsdb-server", db, "--remote=punix:"+sock,
		"--unixctl="+filepath.Join(c.Dir, name+".ctl"),
		"--log-file="+filepath.Join(c.Dir, "ovsdb-server-"+name+".log"),
		"--pidfile="+filepath.Join(c.Dir, "ovsdb-server-"+name+".pid"), "--no-chdir")
	waitSocket(t, sock)
	return sock
}

// waitSocket waits until a daemon accepts connections on a unix socket
// path.
func waitSocket(t testing.TB, path string) {
	t.Helper()
	must(t, lab.WaitSocket(path))
}

// ovsEnv points the OVS and OVN run, log and database directories of a
// daemon at dir.
func ovsEnv(dir string) []string { return lab.OVSEnv(dir) }

// NBCtl runs ovn-nbctl on the Northbound and fails the test if it fails.
func (c *Cluster) NBCtl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.NBCtlErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// NBCtlErr runs ovn-nbctl on the Northbound.
func (c *Cluster) NBCtlErr(args ...string) (string, error) {
	return lab.Ctl(c.Dir, "ovn-nbctl", c.NB, args...)
}

// SBCtl runs ovn-sbctl on the Southbound and fails the test if it fails.
func (c *Cluster) SBCtl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.sbctlErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (c *Cluster) sbctlErr(args ...string) (string, error) {
	return lab.Ctl(c.Dir, "ovn-sbctl", c.SB, args...)
}

// WaitHV runs `ovn-nbctl --wait=hv sync`: it returns once every chassis
// has caught up with the Northbound as it is now.
func (c *Cluster) WaitHV(t testing.TB) {
	t.Helper()
	c.NBCtl(t, "--wait=hv", "sync")
}

// WaitPortUp waits until the Northbound says the logical switch port is up
// (its Port_Binding is claimed and its flows are installed).
func (c *Cluster) WaitPortUp(t testing.TB, lsp string) {
	t.Helper()
	c.NBCtl(t, "wait-until", "Logical_Switch_Port", lsp, "up=true")
}

// WaitBound waits until the Southbound binds the logical port to hv's
// chassis.
func (c *Cluster) WaitBound(t testing.TB, lsp string, hv *Hypervisor) {
	t.Helper()
	uuid := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=_uuid", "find", "Chassis", "name="+hv.Name))
	if uuid == "" {
		t.Fatalf("no Chassis %s in the Southbound", hv.Name)
	}
	c.SBCtl(t, "wait-until", "Port_Binding", lsp, "chassis="+uuid)
}

// Hypervisor returns hypervisor i (1-based).
func (c *Cluster) Hypervisor(i int) *Hypervisor {
	if i < 1 || i > len(c.HVs) {
		panic(fmt.Sprintf("hvtest: no hypervisor %d of %d", i, len(c.HVs)))
	}
	return c.HVs[i-1]
}
