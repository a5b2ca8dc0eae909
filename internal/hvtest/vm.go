package hvtest

import (
	"context"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/govn/govn/internal/lab"
)

// VMSpec describes a VM to add.
type VMSpec struct {
	Name    string // unique in the cluster: letters, digits, '-'
	LSP     string // the logical switch port it is (external_ids:iface-id)
	MAC     string // its interface's MAC, as the LSP's addresses say
	Addr    string // e.g. "10.0.0.11/24"; empty for none (see VM.DHCP)
	Gateway string // default route via this address; optional
}

// VM is a namespace whose interface eth0 is a veth into its hypervisor,
// on br-int; or, made by AddExternal, a host on the provider network.
type VM struct {
	Name string
	NS   string // network namespace
	Dev  string // its interface: eth0
	MAC  string
	Addr netip.Prefix // invalid until an address is set
	LSP  string
	HV   *Hypervisor // nil for an external host
	Port string      // the veth's other end: a br-int port, or on the provider bridge

	c *Cluster
}

var vmName = regexp.MustCompile(`^[A-Za-z0-9-]{1,32}$`)

// AddVM makes a VM on hypervisor hv and plugs it into br-int as
// spec.LSP. It does not wait for the port to come up: see
// Cluster.WaitPortUp.
func (c *Cluster) AddVM(t testing.TB, hv *Hypervisor, spec VMSpec) *VM {
	t.Helper()
	vm := c.NewVM(t, hv, spec)
	vm.Plug(t)
	return vm
}

// NewVM is AddVM without the plugging in: the VM's interface is up, its
// veth's other end (Port) up in hv's namespace but on no bridge until
// Plug.
func (c *Cluster) NewVM(t testing.TB, hv *Hypervisor, spec VMSpec) *VM {
	t.Helper()
	if !vmName.MatchString(spec.Name) {
		t.Fatalf("hvtest: VM name %q: want 1 to 32 letters, digits or '-'", spec.Name)
	}
	c.mu.Lock()
	if _, dup := c.vms[spec.Name]; dup {
		c.mu.Unlock()
		t.Fatalf("hvtest: two VMs named %q", spec.Name)
	}
	hv.vifs++
	vm := &VM{Name: spec.Name, Dev: "eth0", MAC: spec.MAC, LSP: spec.LSP, HV: hv,
		Port: "vif" + strconv.Itoa(hv.vifs), c: c}
	c.vms[spec.Name] = vm
	c.mu.Unlock()

	vm.NS = c.newNS(t, "vm-"+spec.Name)
	must(t, lab.Veth(hv.NS, vm.Port, vm.NS, vm.Dev))
	vm.plugIn(t, spec.Addr, spec.Gateway, hv.NS)
	return vm
}

// Plug adds the VM's port to its hypervisor's br-int with
// external_ids:iface-id set to its logical switch port, in one ovs-vsctl
// call, as a hypervisor's VM manager does when it starts a VM.
func (vm *VM) Plug(t testing.TB) {
	t.Helper()
	must(t, lab.BindVIF(lab.VsctlOn(vm.HV.Dir, vm.HV.DB), vm.Port, vm.LSP))
}

// AddExternal makes a namespace on the provider network (Options.Physnet),
// outside every hypervisor: a host that VMs reach through a localnet port.
// Its VM has no HV and no LSP.
func (c *Cluster) AddExternal(t testing.TB, spec VMSpec) *VM {
	t.Helper()
	if c.physnet == "" {
		t.Fatal("hvtest: AddExternal needs Options.Physnet")
	}
	if !vmName.MatchString(spec.Name) {
		t.Fatalf("hvtest: namespace name %q: want 1 to 32 letters, digits or '-'", spec.Name)
	}
	c.mu.Lock()
	if _, dup := c.vms[spec.Name]; dup {
		c.mu.Unlock()
		t.Fatalf("hvtest: two VMs named %q", spec.Name)
	}
	c.externals++
	vm := &VM{Name: spec.Name, Dev: "eth0", MAC: spec.MAC, Port: "ext" + strconv.Itoa(c.externals), c: c}
	c.vms[spec.Name] = vm
	c.mu.Unlock()

	vm.NS = c.newNS(t, "ext-"+spec.Name)
	must(t, lab.Veth(c.underlayNS, vm.Port, vm.NS, vm.Dev))
	c.nsRun(t, c.underlayNS, "ip", "link", "set", vm.Port, "master", physBridge, "up")
	vm.plugIn(t, spec.Addr, spec.Gateway, c.underlayNS)
	return vm
}

// plugIn configures the VM's end of its fresh veth (MAC, up, no transmit
// checksum offload on either end) and its address, if any; peerNS holds
// the other end, vm.Port.
func (vm *VM) plugIn(t testing.TB, addr, gateway, peerNS string) {
	t.Helper()
	must(t, lab.Configure(vm.NS, vm.Dev, vm.MAC, peerNS, vm.Port))
	if addr != "" {
		p, err := netip.ParsePrefix(addr)
		if err != nil {
			t.Fatalf("hvtest: VM %s: %v", vm.Name, err)
		}
		vm.SetAddr(t, p, gateway)
	}
}

// MoveTo unplugs the VM from its hypervisor and plugs it into hv with the
// same MAC, address, routes and iface-id, as a migration would: OVN then
// releases the port binding on the old chassis and claims it on the new.
func (vm *VM) MoveTo(t testing.TB, hv *Hypervisor) {
	t.Helper()
	if vm.HV == nil {
		t.Fatalf("hvtest: %s is on no hypervisor", vm.Name)
	}
	c := vm.c
	gw, err := lab.DefaultGateway(vm.NS)
	must(t, err)
	vm.HV.Vsctl(t, "del-port", "br-int", vm.Port)
	c.nsRun(t, vm.HV.NS, "ip", "link", "del", vm.Port) // takes eth0 with it
	c.mu.Lock()
	hv.vifs++
	vm.HV, vm.Port = hv, "vif"+strconv.Itoa(hv.vifs)
	c.mu.Unlock()
	must(t, lab.Veth(hv.NS, vm.Port, vm.NS, vm.Dev))
	var addr string
	if vm.Addr.IsValid() {
		addr = vm.Addr.String()
	}
	vm.plugIn(t, addr, gw, hv.NS)
	vm.Plug(t)
}

// SetAddr gives the VM's interface an address and, if gateway is not
// empty, a default route through it.
func (vm *VM) SetAddr(t testing.TB, p netip.Prefix, gateway string) {
	t.Helper()
	must(t, lab.SetAddr(vm.NS, vm.Dev, p, gateway))
	vm.Addr = p
}

// IP is the VM's address without its prefix length.
func (vm *VM) IP() string { return vm.Addr.Addr().String() }

// Command returns a command that runs args inside the VM.
func (vm *VM) Command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", vm.NS}, args...)...)
}

// Ping sends count echo requests to dst, 200 ms apart, from the VM with
// ping(8); it fails unless every one is answered within 2 s, in one of two
// tries: the userspace datapaths of several hypervisors share two cores
// with the test, and a burst can be lost when they are starved, which is
// no loss of connectivity; a second burst with losses is.
func (vm *VM) Ping(dst string, count int) error { return lab.Ping(vm.NS, dst, count) }

// WaitPing pings dst once a second until an echo is answered or timeout
// passes. Use it before counting: the first packets to a new tunnel
// neighbour are lost while OVS resolves it, and flows take a moment to
// reach every chassis.
func (vm *VM) WaitPing(dst string, timeout time.Duration) error {
	return lab.WaitPing(vm.NS, dst, timeout)
}

// HTTPServe serves HTTP on port of every VM address until the test ends;
// every response's body is the VM's name and a newline, except for path
// /ip, which answers the client's address as the VM sees it (to check
// NAT), and /peer, which answers the VM's name, a space and that address.
// It returns once the server listens.
func (vm *VM) HTTPServe(t testing.TB, port uint16) {
	t.Helper()
	tl, err := vmTool()
	must(t, err)
	_, err = tl.HTTPServe(t, vm.c.Dir, vm.NS, "vm-"+vm.Name+"/http-"+strconv.Itoa(int(port)), port, vm.Name)
	must(t, err)
}

// Curl makes one HTTP GET from the VM on a new connection and returns the
// body; it gives up after 5 s.
func (vm *VM) Curl(url string) (string, error) {
	tl, err := vmTool()
	if err != nil {
		return "", err
	}
	return tl.Curl(vm.NS, url)
}

// DHCP gets an IPv4 address for the VM by DHCP, configures it (and a
// default route if a router was offered) and returns it.
func (vm *VM) DHCP(t testing.TB) (netip.Prefix, error) {
	t.Helper()
	l, err := vm.DHCPLease(t)
	return l.Addr, err
}

// Lease is what DHCP granted a VM.
type Lease = lab.Lease

// DHCPLease is DHCP returning the whole lease.
func (vm *VM) DHCPLease(t testing.TB) (Lease, error) {
	t.Helper()
	tl, err := vmTool()
	if err != nil {
		return Lease{}, err
	}
	l, err := tl.DHCP(vm.NS, vm.Dev)
	if err != nil {
		return Lease{}, err
	}
	vm.SetAddr(t, l.Addr, l.Router)
	return l, nil
}
