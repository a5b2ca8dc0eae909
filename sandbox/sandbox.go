package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/govn/govn/internal/lab"
)

// Prefix starts the name of every namespace a sandbox makes.
const Prefix = "govnsb-"

// DefaultDir is where a sandbox keeps its databases, sockets and logs
// unless Options.Dir says otherwise.
func DefaultDir() string { return filepath.Join(os.TempDir(), "govn-sandbox") }

// Options say how to build a sandbox.
type Options struct {
	// Govn is the path of the govn binary that runs the daemons and the
	// VMs' tools (`govn lab-tool`); required.
	Govn string
	// Dir holds the databases, sockets and logs (default DefaultDir); it
	// must not exist, and is removed by Close. Unix socket paths are
	// limited to 107 bytes, so it should be short.
	Dir string
	// Hypervisors is how many hypervisors to run (default and at least 3:
	// the demo puts a backend on each).
	Hypervisors int
	// Progress receives a line per step as the sandbox is built and
	// checked (default: none).
	Progress io.Writer
}

// Sandbox is a running sandbox.
type Sandbox struct {
	Dir     string
	Central string // namespace of the databases and northd
	NB, SB  string // unix socket paths of the Northbound and Southbound
	// DBCtl and NorthdCtl are govn db's and govn northd's control sockets.
	DBCtl, NorthdCtl string
	HVs              []*Hypervisor
	VMs              []*VM
	// Externals are hosts on the provider network (no HV).
	externals []*VM

	opts     Options
	cl       lab.Stack
	underlay string // namespace of the underlay bridge
	tool     lab.Tool
	daemons  []*lab.Daemon
	checks   []Check
	network  []string // what the demo built, a line each, for Describe
}

// Hypervisor is one hypervisor namespace running govn chassis.
type Hypervisor struct {
	Name    string // hvN: the chassis name
	NS      string
	Dir     string // its run directory (OVS_RUNDIR)
	DB      string // its local Open_vSwitch database's socket
	Ctl     string // govn chassis' control socket
	EncapIP netip.Addr
}

// VM is a namespace whose eth0 is a veth into its hypervisor's br-int,
// bound to the logical switch port of the same name.
type VM struct {
	Name    string
	NS      string
	Switch  string // its logical switch
	MAC     string
	Addr    netip.Prefix
	Gateway string
	HV      *Hypervisor
	Port    string // the veth's end on br-int
}

// IP is the VM's address without its prefix length.
func (vm *VM) IP() string { return vm.Addr.Addr().String() }

// Check is one thing the sandbox proves works.
type Check struct {
	Name string
	Run  func() error
}

// underlayNet is the underlay's prefix; hypervisor i is host 10+i.
var underlayNet = netip.MustParsePrefix("172.31.0.0/24")

// Available reports why a sandbox cannot run here, or "" if it can.
func Available() string {
	if os.Geteuid() != 0 {
		return "govn sandbox needs root (network namespaces, veth devices, packet sockets): run it with sudo"
	}
	for _, b := range []string{"ip", "ethtool", "ping", "ovn-nbctl", "ovn-sbctl", "ovs-vsctl"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Sprintf("govn sandbox needs %s on PATH (Debian packages iproute2, ethtool, iputils-ping, ovn-common, openvswitch-common)", b)
		}
	}
	return ""
}

// ErrPrevious is wrapped by Start's error when another sandbox, running
// or dead, is still there.
var ErrPrevious = errors.New("a previous sandbox is still there")

// pidFile in Dir holds the pid of the process that owns the sandbox.
const pidFile = "sandbox.pid"

// Leftovers describes what another sandbox left in dir and in the
// namespaces, and the pid of its process if that still runs (0 if not).
func Leftovers(dir string) (what []string, pid int) {
	if _, err := os.Stat(dir); err == nil {
		what = append(what, "directory "+dir)
		if b, err := os.ReadFile(filepath.Join(dir, pidFile)); err == nil {
			if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 && syscall.Kill(p, 0) == nil {
				pid = p
			}
		}
	}
	if ns := lab.Namespaces(Prefix); len(ns) > 0 {
		what = append(what, "namespaces "+strings.Join(ns, " "))
	}
	return what, pid
}

// Clean removes what a sandbox whose process has died left behind: its
// namespaces (killing what runs in them) and dir. It refuses while the
// sandbox's process runs.
func Clean(dir string) ([]string, error) {
	what, pid := Leftovers(dir)
	if pid != 0 {
		return nil, fmt.Errorf("the sandbox of process %d is running: stop it with kill %d (it cleans up after itself)", pid, pid)
	}
	for _, ns := range lab.Namespaces(Prefix) {
		lab.RemoveNS(ns)
	}
	if err := os.RemoveAll(dir); err != nil {
		return what, fmt.Errorf("removing %s: %w", dir, err)
	}
	return what, nil
}

// Start builds a sandbox and its demo; it returns once every logical port
// is up and every chassis has the whole Northbound, or removes all it made
// and returns the error. ctx interrupts the building.
func Start(ctx context.Context, opts Options) (*Sandbox, error) {
	if why := Available(); why != "" {
		return nil, errors.New(why)
	}
	if opts.Govn == "" {
		return nil, errors.New("sandbox: no govn binary given")
	}
	if opts.Dir == "" {
		opts.Dir = DefaultDir()
	}
	if opts.Hypervisors < 3 {
		opts.Hypervisors = 3
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if what, pid := Leftovers(opts.Dir); len(what) > 0 {
		if pid != 0 {
			return nil, fmt.Errorf("%w: process %d runs it (%s); stop it with kill %d", ErrPrevious, pid, strings.Join(what, "; "), pid)
		}
		return nil, fmt.Errorf("%w, its process gone: %s; remove it with govn sandbox --clean", ErrPrevious, strings.Join(what, "; "))
	}
	s := &Sandbox{Dir: opts.Dir, opts: opts, tool: lab.Tool{Argv: []string{opts.Govn, "lab-tool"}}}
	if err := s.build(ctx); err != nil {
		err = s.withDaemonLogs(err)
		s.Close()
		return nil, err
	}
	return s, nil
}

// withDaemonLogs adds to err the end of the log of every daemon that
// has stopped: usually why.
func (s *Sandbox) withDaemonLogs(err error) error {
	for _, d := range s.daemons {
		if done, derr := d.Exited(); done {
			err = fmt.Errorf("%w\n%s ended (%v); %s ends:\n%s", err, d.Name, derr, d.Log, lab.Tail(d.Log, 15))
		}
	}
	return err
}

// Close stops every process of the sandbox and removes its namespaces and
// its directory. It may be called more than once.
func (s *Sandbox) Close() { s.cl.Close() }

func (s *Sandbox) progress(format string, args ...any) {
	fmt.Fprintf(s.opts.Progress, format+"\n", args...)
}

// step runs one step of the building, with a progress line saying how
// long it took; it fails at once if ctx is done.
func (s *Sandbox) step(ctx context.Context, what string, f func() error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted before %s: %w", what, err)
	}
	start := time.Now()
	fmt.Fprintf(s.opts.Progress, "  %s ...", what)
	if err := f(); err != nil {
		fmt.Fprintln(s.opts.Progress, " failed")
		return fmt.Errorf("%s: %w", what, err)
	}
	fmt.Fprintf(s.opts.Progress, " done (%.1fs)\n", time.Since(start).Seconds())
	return nil
}

// start runs the govn subcommand args in ns as a daemon of the sandbox.
func (s *Sandbox) start(dir, ns, name string, env []string, args ...string) error {
	d, err := lab.StartGroup(&s.cl, dir, ns, name, env, append([]string{s.opts.Govn}, args...)...)
	if err != nil {
		return err
	}
	s.daemons = append(s.daemons, d)
	return nil
}

// waitSocket waits for a daemon's socket, giving up as soon as a daemon
// exits.
func (s *Sandbox) waitSocket(path string) error {
	var ended *lab.Daemon
	err := lab.WaitFor(lab.SocketTimeout, "socket "+path, func() bool {
		for _, d := range s.daemons {
			if done, _ := d.Exited(); done {
				ended = d
				return true
			}
		}
		return lab.Accepting(path)
	})
	if ended != nil {
		return fmt.Errorf("%s ended (%v) before %s answered", ended.Name, ended.Err(), path)
	}
	return err
}

func (s *Sandbox) build(ctx context.Context) error {
	s.progress("Building the sandbox in %s (namespaces %s*):", s.Dir, Prefix)
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		return err
	}
	s.cl.Cleanup(func() { _ = os.RemoveAll(s.Dir) })
	if err := os.WriteFile(filepath.Join(s.Dir, pidFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	s.Central = Prefix + "central"
	s.NB, s.SB = filepath.Join(s.Dir, "nb.sock"), filepath.Join(s.Dir, "sb.sock")
	s.DBCtl, s.NorthdCtl = filepath.Join(s.Dir, "db.ctl"), filepath.Join(s.Dir, "northd.ctl")
	env := lab.OVSEnv(s.Dir)
	if err := s.step(ctx, "govn db: Northbound and Southbound in namespace "+s.Central, func() error {
		if err := lab.AddNS(&s.cl, s.Central); err != nil {
			return err
		}
		nbDB, sbDB := filepath.Join(s.Dir, "nb.db"), filepath.Join(s.Dir, "sb.db")
		for _, c := range [][]string{{nbDB, "nb"}, {sbDB, "sb"}} {
			if _, err := lab.RunTimed(nil, s.opts.Govn, "db", "create", c[0], c[1]); err != nil {
				return err
			}
		}
		if err := s.start(s.Dir, s.Central, "central/db", env, "db",
			"--remote=punix:"+s.NB, "--remote=punix:"+s.SB, "--unixctl="+s.DBCtl,
			"--log-file="+filepath.Join(s.Dir, "db.log"), nbDB, sbDB); err != nil {
			return err
		}
		if err := s.waitSocket(s.NB); err != nil {
			return err
		}
		if err := s.waitSocket(s.SB); err != nil {
			return err
		}
		_, err := s.NBCtl("init")
		return err
	}); err != nil {
		return err
	}
	if err := s.step(ctx, "govn northd", func() error {
		if err := s.start(s.Dir, s.Central, "central/northd", env, "northd",
			"--ovnnb-db=unix:"+s.NB, "--ovnsb-db=unix:"+s.SB, "--unixctl="+s.NorthdCtl,
			"--log-file="+filepath.Join(s.Dir, "northd.log")); err != nil {
			return err
		}
		return s.waitSocket(s.NorthdCtl)
	}); err != nil {
		return err
	}
	s.underlay = Prefix + "underlay"
	if err := s.step(ctx, "underlay: bridge br0 in namespace "+s.underlay, func() error {
		if err := lab.AddNS(&s.cl, s.underlay); err != nil {
			return err
		}
		if err := lab.Bridge(s.underlay, "br0", lab.UnderlayMTU); err != nil {
			return err
		}
		return lab.Bridge(s.underlay, providerBridge, 0)
	}); err != nil {
		return err
	}
	for i := 1; i <= s.opts.Hypervisors; i++ {
		hv := s.newHypervisor(i)
		if err := s.step(ctx, fmt.Sprintf("govn chassis %s in namespace %s, encap %s", hv.Name, hv.NS, hv.EncapIP), func() error {
			return s.startHypervisor(hv)
		}); err != nil {
			return err
		}
		s.HVs = append(s.HVs, hv)
	}
	if err := s.step(ctx, "every chassis registered in the Southbound", func() error {
		for _, hv := range s.HVs {
			if err := lab.WaitChassis(s.Dir, s.SB, hv.Name, 30*time.Second); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	s.progress("Building the demo network:")
	for _, p := range s.demo() {
		var checks []Check
		if err := s.step(ctx, p.what, func() error {
			var err error
			checks, err = p.build()
			return err
		}); err != nil {
			return err
		}
		s.checks = append(s.checks, checks...)
	}
	return s.step(ctx, "waiting until every port is up and every chassis has the flows (a few seconds)", func() error {
		for _, vm := range s.VMs {
			if _, err := s.NBCtl("wait-until", "Logical_Switch_Port", vm.Name, "up=true"); err != nil {
				return err
			}
		}
		_, err := s.NBCtl("--wait=hv", "sync")
		return err
	})
}

func (s *Sandbox) newHypervisor(i int) *Hypervisor {
	name := "hv" + strconv.Itoa(i)
	dir := filepath.Join(s.Dir, name)
	a := underlayNet.Addr().As4()
	a[3] += byte(10 + i)
	return &Hypervisor{Name: name, NS: Prefix + name, Dir: dir,
		DB: filepath.Join(dir, "db.sock"), Ctl: filepath.Join(dir, "chassis.ctl"),
		EncapIP: netip.AddrFrom4(a)}
}

// startHypervisor makes the hypervisor's namespace and underlay link,
// starts govn chassis in it and configures it as OVN users configure a
// hypervisor, with ovs-vsctl.
func (s *Sandbox) startHypervisor(hv *Hypervisor) error {
	if err := lab.AddNS(&s.cl, hv.NS); err != nil {
		return err
	}
	if err := os.Mkdir(hv.Dir, 0o755); err != nil {
		return err
	}
	if err := lab.UnderlayLink(s.underlay, "br0", hv.NS, hv.Name); err != nil {
		return err
	}
	if err := s.start(hv.Dir, hv.NS, hv.Name+"/chassis", lab.OVSEnv(hv.Dir), "chassis",
		"--unixctl="+hv.Ctl, "--log-file="+filepath.Join(hv.Dir, "chassis.log"),
		"--pidfile="+filepath.Join(hv.Dir, "chassis.pid")); err != nil {
		return err
	}
	if err := s.waitSocket(hv.DB); err != nil {
		return err
	}
	vsctl := s.Vsctl(hv)
	if err := lab.ChassisBridges(vsctl, hv.NS, netip.PrefixFrom(hv.EncapIP, underlayNet.Bits())); err != nil {
		return err
	}
	if err := lab.BridgePort(s.underlay, providerBridge, "px"+hv.Name, hv.NS, "px0"); err != nil {
		return err
	}
	if err := lab.ProviderBridge(vsctl, "px0", physnet); err != nil {
		return err
	}
	return lab.ChassisIDs(vsctl, hv.Name, s.SB, hv.EncapIP)
}

// The provider network: a Linux bridge in the underlay namespace that
// every hypervisor reaches through its br-ex (ovn-bridge-mappings
// physnet:br-ex), for localnet ports, and where external hosts sit.
const (
	providerBridge = "br-provider"
	physnet        = "physnet"
)

// addExternal makes a host namespace on the provider network, outside
// every hypervisor.
func (s *Sandbox) addExternal(name, mac string, addr netip.Prefix) (*VM, error) {
	ext := &VM{Name: name, NS: Prefix + name, MAC: mac, Addr: addr, Port: "ext-" + name}
	if err := lab.AddNS(&s.cl, ext.NS); err != nil {
		return nil, err
	}
	if err := lab.Veth(s.underlay, ext.Port, ext.NS, "eth0"); err != nil {
		return nil, err
	}
	if _, err := lab.NSRun(s.underlay, "ip", "link", "set", ext.Port, "master", providerBridge); err != nil {
		return nil, err
	}
	if err := lab.Configure(ext.NS, "eth0", mac, s.underlay, ext.Port); err != nil {
		return nil, err
	}
	if err := lab.SetAddr(ext.NS, "eth0", addr, ""); err != nil {
		return nil, err
	}
	s.externals = append(s.externals, ext)
	return ext, nil
}

// NBCtl runs ovn-nbctl on the sandbox's Northbound.
func (s *Sandbox) NBCtl(args ...string) (string, error) {
	return lab.Ctl(s.Dir, "ovn-nbctl", s.NB, args...)
}

// SBCtl runs ovn-sbctl on the sandbox's Southbound.
func (s *Sandbox) SBCtl(args ...string) (string, error) {
	return lab.Ctl(s.Dir, "ovn-sbctl", s.SB, args...)
}

// Vsctl is ovs-vsctl on a hypervisor's local database.
func (s *Sandbox) Vsctl(hv *Hypervisor) lab.Vsctl { return lab.VsctlOn(hv.Dir, hv.DB) }

// addVM makes a VM namespace on hv and binds it to the logical switch port
// vm.Name, which the caller has made.
func (s *Sandbox) addVM(vm *VM) error {
	vm.NS = Prefix + "vm-" + vm.Name
	vifs := 0
	for _, o := range s.VMs {
		if o.HV == vm.HV {
			vifs++
		}
	}
	vm.Port = "vif" + strconv.Itoa(vifs+1)
	if err := lab.AddNS(&s.cl, vm.NS); err != nil {
		return err
	}
	if err := lab.Plug(vm.NS, "eth0", vm.MAC, vm.HV.NS, vm.Port); err != nil {
		return err
	}
	if vm.Addr.IsValid() {
		if err := lab.SetAddr(vm.NS, "eth0", vm.Addr, vm.Gateway); err != nil {
			return err
		}
	}
	if err := lab.BindVIF(s.Vsctl(vm.HV), vm.Port, vm.Name); err != nil {
		return err
	}
	s.VMs = append(s.VMs, vm)
	return nil
}

// vm returns the VM named name; the demo names only VMs it made.
func (s *Sandbox) vm(name string) *VM {
	for _, vm := range s.VMs {
		if vm.Name == name {
			return vm
		}
	}
	panic("sandbox: no VM " + name)
}

// Check runs every check of the demo, printing a line for each, and
// returns how many failed.
func (s *Sandbox) Check(ctx context.Context) (failed int) {
	s.progress("Checking:")
	for _, c := range s.checks {
		if ctx.Err() != nil {
			s.progress("  interrupted")
			return failed + 1
		}
		start := time.Now()
		err := c.Run()
		took := time.Since(start).Seconds()
		if err != nil {
			failed++
			s.progress("  FAIL %s (%.1fs): %v", c.Name, took, err)
			continue
		}
		s.progress("  ok   %s (%.1fs)", c.Name, took)
	}
	return failed
}

// Checks lists the names of the demo's checks, in the order Check runs them.
func (s *Sandbox) Checks() []string {
	var names []string
	for _, c := range s.checks {
		names = append(names, c.Name)
	}
	return names
}

// Describe prints what the sandbox built, how to reach it and how to look
// at it, with the real OVN and OVS tools.
func (s *Sandbox) Describe(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("What runs (files, sockets and logs in %s):", s.Dir)
	p("  %-16s govn db (Northbound unix:%s, Southbound unix:%s), govn northd", s.Central, s.NB, s.SB)
	for _, hv := range s.HVs {
		p("  %-16s govn chassis %s, encap %s, local database unix:%s", hv.NS, hv.Name, hv.EncapIP, hv.DB)
	}
	p("  %-16s bridge br0: the underlay joining the hypervisors", s.underlay)
	p("The logical network:")
	for _, l := range s.network {
		p("  %s", l)
	}
	p("VMs (namespaces):")
	for _, vm := range s.VMs {
		p("  %-6s %-15s on %s, %s (%s), on %s as %s", vm.Name, vm.NS, vm.Switch, vm.Addr, vm.MAC, vm.HV.Name, vm.Port)
	}
	hv, vm, dst := s.HVs[0], s.vm("vm1"), s.vm("web3")
	p("Reach it:")
	p("  ovn-nbctl --db=unix:%s show", s.NB)
	p("  ovn-sbctl --db=unix:%s show", s.SB)
	p("  ovs-vsctl --db=unix:%s show", hv.DB)
	p("  ip netns exec %s ping %s", vm.NS, dst.IP())
	p("  ip netns exec %s bash          (a shell in %s)", vm.NS, vm.Name)
	p("Look at it:")
	p("  ovn-sbctl --db=unix:%s lflow-list                  (logical flows)", s.SB)
	p("  ovs-appctl -t %s dump-flows          (%s's datapath rules, every bridge)", hv.Ctl, hv.Name)
	p("  ovs-appctl -t %s dpctl/dump-flows    (its megaflows)", hv.Ctl)
	if out, err := s.Vsctl(hv)("get", "Interface", vm.Port, "ofport"); err == nil {
		p("  ovs-appctl -t %s ofproto/trace br-int in_port=%s,icmp,dl_src=%s,dl_dst=%s,nw_src=%s,nw_dst=%s,nw_ttl=64",
			hv.Ctl, strings.TrimSpace(out), vm.MAC, routerMAC(vm.Switch), vm.IP(), dst.IP())
		p("      (a ping from %s to %s through the pipelines: each rule, and the megaflow it makes)", vm.Name, dst.Name)
	}
	if vm.Switch != "" {
		p("  %s trace --db=unix:%s --ovnnb=unix:%s %s 'inport == %q && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && tcp.dst == 80'",
			s.opts.Govn, s.SB, s.NB, vm.Switch, vm.Name, vm.MAC, routerMAC(vm.Switch), vm.IP(), vip)
		p("      (%s's HTTP request to lb0's VIP, as %s runs it: the logical flows, the datapath rules and the megaflows,", vm.Name, hv.Name)
		p("       each rule and megaflow field with the logical flow and Northbound row behind it; --json for JSON)")
	}
	p("  ovn-appctl -t %s status             (northd)", s.NorthdCtl)
	p("  logs: %s/*.log, %s/hv*/chassis.log", s.Dir, s.Dir)
}
