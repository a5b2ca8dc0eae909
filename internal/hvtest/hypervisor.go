package hvtest

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/govn/govn/internal/lab"
)

// Hypervisor is one hypervisor namespace on the underlay.
type Hypervisor struct {
	Name    string // hvN: the namespace's suffix and the chassis name (system-id)
	NS      string // network namespace
	Dir     string // run directory of its daemons (OVS_RUNDIR, OVS_DBDIR, ...)
	DB      string // unix socket of its local Open_vSwitch database: Dir/db.sock
	EncapIP netip.Addr
	Cluster *Cluster
	Chassis Chassis

	vifs int // VIFs made so far, to name the next one; guarded by Cluster.mu
}

// Chassis is what runs on a hypervisor: a switch and an OVN controller,
// configured through a local Open_vSwitch database as OVN configures a
// hypervisor.
type Chassis interface {
	// Start starts the chassis inside hv.NS with hv.Dir as its run and
	// database directory, and returns once its local database answers on
	// hv.DB. Everything it starts must stop when the test ends (start it
	// with hv.Cluster.Start). The cluster then configures it with
	// ovs-vsctl: bridges br-phy (the underlay, encap IP on its internal
	// interface) and br-int, both datapath_type=netdev, and external_ids
	// system-id, ovn-remote, ovn-encap-type=geneve and ovn-encap-ip; VMs
	// are added as br-int ports with external_ids:iface-id. ovs-vsctl
	// waits for the switch to apply each change (cur_cfg).
	Start(t testing.TB, hv *Hypervisor)
}

// RealChassis is the real ovs-vswitchd (userspace datapath, no kernel
// module) with the real ovn-controller, over ovsdb-server.
type RealChassis struct {
	// Monitor runs ovs-vswitchd with --monitor: a crashed switch is
	// restarted (its pid in Dir/ovs-vswitchd.pid changes), as a
	// service manager would, instead of ending the hypervisor.
	Monitor bool
}

// Start starts ovsdb-server, ovs-vswitchd --disable-system and
// ovn-controller in the hypervisor's namespace.
func (r RealChassis) Start(t testing.TB, hv *Hypervisor) {
	t.Helper()
	needBinaries(t, "ovsdb-server", "ovsdb-tool", "ovs-vswitchd", "ovn-controller")
	const schema = "/usr/share/openvswitch/vswitch.ovsschema"
	if _, err := os.Stat(schema); err != nil {
		t.Skipf("needs %s", schema)
	}
	c, env := hv.Cluster, ovsEnv(hv.Dir)
	db := filepath.Join(hv.Dir, "conf.db")
	mustRun(t, nil, "ovsdb-tool", "create", db, schema)
	c.Start(t, hv.NS, hv.Name+"/ovsdb-server", env,
		"ovsdb-server", db, "--remote=punix:"+hv.DB,
		"--log-file="+filepath.Join(hv.Dir, "ovsdb-server.log"),
		"--pidfile="+filepath.Join(hv.Dir, "ovsdb-server.pid"), "--no-chdir")
	waitSocket(t, hv.DB)
	hv.Vsctl(t, "--no-wait", "init")
	vswitchd := []string{"ovs-vswitchd", "unix:" + hv.DB, "--disable-system",
		"--log-file=" + filepath.Join(hv.Dir, "ovs-vswitchd.log"),
		"--pidfile=" + filepath.Join(hv.Dir, "ovs-vswitchd.pid"), "--no-chdir"}
	if r.Monitor {
		vswitchd = append(vswitchd, "--monitor")
	}
	c.Start(t, hv.NS, hv.Name+"/ovs-vswitchd", env, vswitchd...)
	// The daemons' control sockets are Dir/NAME.PID.ctl (ovn-controller
	// 23.03 takes no --unixctl), which ovs-appctl -t NAME finds through
	// Dir/NAME.pid when OVS_RUNDIR is Dir: see Hypervisor.Run.
	c.Start(t, hv.NS, hv.Name+"/ovn-controller", env,
		"ovn-controller", "unix:"+hv.DB,
		"--log-file="+filepath.Join(hv.Dir, "ovn-controller.log"),
		"--pidfile="+filepath.Join(hv.Dir, "ovn-controller.pid"), "--no-chdir")
}

// GovnChassis is `govn chassis`: one process that serves the local
// database on $OVS_RUNDIR/db.sock and does ovn-controller's and
// ovs-vswitchd's jobs. Argv is the program and its leading arguments, e.g.
// {"/path/govn", "chassis"}.
type GovnChassis struct {
	Argv []string
}

// Start runs the program in the hypervisor's namespace.
func (g GovnChassis) Start(t testing.TB, hv *Hypervisor) {
	t.Helper()
	needBinaries(t, g.Argv[0])
	args := append(append([]string{}, g.Argv...),
		"--unixctl="+filepath.Join(hv.Dir, "chassis.ctl"),
		"--log-file="+filepath.Join(hv.Dir, "chassis.log"),
		"--pidfile="+filepath.Join(hv.Dir, "chassis.pid"))
	hv.Cluster.Start(t, hv.NS, hv.Name+"/chassis", ovsEnv(hv.Dir), args...)
	waitSocket(t, hv.DB)
}

// newHypervisor makes hypervisor i: its namespace, its underlay link, its
// chassis, and the chassis' configuration.
func (c *Cluster) newHypervisor(t testing.TB, i int, ch Chassis) *Hypervisor {
	t.Helper()
	hv := &Hypervisor{Name: "hv" + strconv.Itoa(i), Cluster: c, Chassis: ch}
	hv.NS = c.newNS(t, hv.Name)
	hv.Dir = filepath.Join(c.Dir, hv.Name)
	hv.DB = filepath.Join(hv.Dir, "db.sock")
	if err := os.Mkdir(hv.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := c.underlay.Addr().As4()
	base[3] += byte(10 + i)
	hv.EncapIP = netip.AddrFrom4(base)

	// The underlay link: ul0 in the hypervisor, hvN on the bridge.
	must(t, lab.UnderlayLink(c.underlayNS, "br0", hv.NS, hv.Name))

	ch.Start(t, hv)
	vsctl := lab.VsctlOn(hv.Dir, hv.DB)
	must(t, lab.ChassisBridges(vsctl, hv.NS, netip.PrefixFrom(hv.EncapIP, c.underlay.Bits())))
	if c.physnet != "" {
		c.physnetLink(t, hv)
	}
	must(t, lab.ChassisIDs(vsctl, hv.Name, c.SB, hv.EncapIP))
	return hv
}

// physBridge is the provider network's bridge in the underlay namespace.
const physBridge = "br-phys"

// physnetLink joins a hypervisor to the provider network: OVS bridge br-ex
// with port px0, a veth whose other end is on the provider bridge. px0
// has no address, so the kernel answers nothing on it.
func (c *Cluster) physnetLink(t testing.TB, hv *Hypervisor) {
	t.Helper()
	must(t, lab.BridgePort(c.underlayNS, physBridge, "px"+hv.Name, hv.NS, "px0"))
	must(t, lab.ProviderBridge(lab.VsctlOn(hv.Dir, hv.DB), "px0", c.physnet))
}

// txOff turns off transmit checksum offload on a veth end: OVS's userspace
// conntrack marks packets with partial checksums invalid.
func txOff(t testing.TB, ns, dev string) {
	t.Helper()
	must(t, lab.TxOff(ns, dev))
}

// Vsctl runs ovs-vsctl on the hypervisor's local database and fails the
// test if it fails.
func (hv *Hypervisor) Vsctl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := hv.VsctlErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// VsctlErr runs ovs-vsctl on the hypervisor's local database.
func (hv *Hypervisor) VsctlErr(args ...string) (string, error) {
	return lab.VsctlOn(hv.Dir, hv.DB)(args...)
}

// Run runs args inside the hypervisor's namespace with its daemons'
// environment (so ovs-appctl -t NAME finds their control sockets) and
// fails the test if it fails.
func (hv *Hypervisor) Run(t testing.TB, args ...string) string {
	t.Helper()
	return mustRun(t, ovsEnv(hv.Dir), inNS(hv.NS, args...)...)
}
