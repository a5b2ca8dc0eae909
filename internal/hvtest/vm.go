package hvtest

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/datapath/systest/traffic"
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
	mustRun(t, nil, "ip", "link", "add", vm.Port, "netns", hv.NS, "type", "veth", "peer", "name", vm.Dev, "netns", vm.NS)
	vm.plugIn(t, spec.Addr, spec.Gateway, hv.NS)
	return vm
}

// Plug adds the VM's port to its hypervisor's br-int with
// external_ids:iface-id set to its logical switch port, in one ovs-vsctl
// call, as a hypervisor's VM manager does when it starts a VM.
func (vm *VM) Plug(t testing.TB) {
	t.Helper()
	vm.HV.Vsctl(t, "add-port", "br-int", vm.Port,
		"--", "set", "Interface", vm.Port, "external_ids:iface-id="+vm.LSP)
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
	mustRun(t, nil, "ip", "link", "add", vm.Port, "netns", c.underlayNS, "type", "veth", "peer", "name", vm.Dev, "netns", vm.NS)
	c.nsRun(t, c.underlayNS, "ip", "link", "set", vm.Port, "master", physBridge, "up")
	vm.plugIn(t, spec.Addr, spec.Gateway, c.underlayNS)
	return vm
}

// plugIn configures the VM's end of its fresh veth (MAC, up, no transmit
// checksum offload on either end) and its address, if any; peerNS holds
// the other end, vm.Port.
func (vm *VM) plugIn(t testing.TB, addr, gateway, peerNS string) {
	t.Helper()
	c := vm.c
	c.nsRun(t, vm.NS, "ip", "link", "set", vm.Dev, "address", vm.MAC, "up")
	c.nsRun(t, peerNS, "ip", "link", "set", vm.Port, "up")
	txOff(t, vm.NS, vm.Dev)
	txOff(t, peerNS, vm.Port)
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
	routes := c.nsRun(t, vm.NS, "ip", "-4", "route", "show", "default")
	vm.HV.Vsctl(t, "del-port", "br-int", vm.Port)
	c.nsRun(t, vm.HV.NS, "ip", "link", "del", vm.Port) // takes eth0 with it
	c.mu.Lock()
	hv.vifs++
	vm.HV, vm.Port = hv, "vif"+strconv.Itoa(hv.vifs)
	c.mu.Unlock()
	mustRun(t, nil, "ip", "link", "add", vm.Port, "netns", hv.NS, "type", "veth", "peer", "name", vm.Dev, "netns", vm.NS)
	var addr, gw string
	if vm.Addr.IsValid() {
		addr = vm.Addr.String()
	}
	if f := strings.Fields(routes); len(f) >= 3 && f[0] == "default" && f[1] == "via" {
		gw = f[2]
	}
	vm.plugIn(t, addr, gw, hv.NS)
	vm.Plug(t)
}

// SetAddr gives the VM's interface an address and, if gateway is not
// empty, a default route through it.
func (vm *VM) SetAddr(t testing.TB, p netip.Prefix, gateway string) {
	t.Helper()
	vm.c.nsRun(t, vm.NS, "ip", "addr", "add", p.String(), "dev", vm.Dev)
	if gateway != "" {
		vm.c.nsRun(t, vm.NS, "ip", "route", "add", "default", "via", gateway)
	}
	vm.Addr = p
}

// IP is the VM's address without its prefix length.
func (vm *VM) IP() string { return vm.Addr.Addr().String() }

// Command returns a command that runs args inside the VM.
func (vm *VM) Command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", vm.NS}, args...)...)
}

var pingCounts = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

// Ping sends count echo requests to dst, 200 ms apart, from the VM with
// ping(8); it fails unless every one is answered within 2 s, in one of two
// tries: the userspace datapaths of several hypervisors share two cores
// with the test, and a burst can be lost when they are starved, which is
// no loss of connectivity; a second burst with losses is.
func (vm *VM) Ping(dst string, count int) error {
	err := vm.pingOnce(dst, count)
	if err != nil {
		err = vm.pingOnce(dst, count)
	}
	return err
}

func (vm *VM) pingOnce(dst string, count int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(count)*time.Second+10*time.Second)
	defer cancel()
	out, err := vm.Command(ctx, "ping", "-n", "-q", "-c", strconv.Itoa(count), "-i", "0.2", "-W", "2", dst).CombinedOutput()
	m := pingCounts.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("ping %s from %s: %v: %s", dst, vm.Name, err, strings.TrimSpace(string(out)))
	}
	if got, _ := strconv.Atoi(string(m[2])); got != count {
		return fmt.Errorf("ping %s from %s: %s of %d answered", dst, vm.Name, m[2], count)
	}
	return nil
}

// WaitPing pings dst once a second until an echo is answered or timeout
// passes. Use it before counting: the first packets to a new tunnel
// neighbour are lost while OVS resolves it, and flows take a moment to
// reach every chassis.
func (vm *VM) WaitPing(dst string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := vm.Command(ctx, "ping", "-n", "-q", "-c", "1", "-W", "1", dst).Run()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ping %s from %s: no answer within %v", dst, vm.Name, timeout)
		}
	}
}

// tool returns a command that re-executes the test binary inside the VM to
// run a tool (see runTool).
func (vm *VM) tool(ctx context.Context, args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("hvtest: %w", err)
	}
	cmd := vm.Command(ctx, append([]string{self}, args...)...)
	cmd.Env = append(os.Environ(), toolEnv+"=1")
	return cmd, nil
}

// HTTPServe serves HTTP on port of every VM address until the test ends;
// every response's body is the VM's name and a newline, except for path
// /ip, which answers the client's address as the VM sees it (to check
// NAT), and /peer, which answers the VM's name, a space and that address.
// It returns once the server listens.
func (vm *VM) HTTPServe(t testing.TB, port uint16) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := vm.c.Start(t, vm.NS, "vm-"+vm.Name+"/http-"+strconv.Itoa(int(port)), []string{toolEnv + "=1"},
		self, "http-serve", fmt.Sprintf("0.0.0.0:%d", port), vm.Name)
	if err := waitFor(20*time.Second, vm.Name+": HTTP server on port "+strconv.Itoa(int(port)), func() bool {
		return traffic.Listening(d.Pid(), "tcp", port)
	}); err != nil {
		t.Fatal(err)
	}
}

// Curl makes one HTTP GET from the VM on a new connection and returns the
// body; it gives up after 5 s.
func (vm *VM) Curl(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd, err := vm.tool(ctx, "http-get", url)
	if err != nil {
		return "", err
	}
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = strings.TrimSpace(string(ee.Stderr))
		}
		return "", fmt.Errorf("GET %s from %s: %v: %s", url, vm.Name, err, stderr)
	}
	return string(out), nil
}

// DHCP gets an IPv4 address for the VM by DHCP, configures it (and a
// default route if a router was offered) and returns it.
func (vm *VM) DHCP(t testing.TB) (netip.Prefix, error) {
	t.Helper()
	l, err := vm.DHCPLease(t)
	return l.Addr, err
}

// Lease is what DHCP granted a VM.
type Lease struct {
	Addr   netip.Prefix
	Router string // "" if none
	DNS    string // the first DNS server, "" if none
	MTU    int    // 0 if none
}

// DHCPLease is DHCP returning the whole lease.
func (vm *VM) DHCPLease(t testing.TB) (Lease, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := vm.tool(ctx, "dhcp4", vm.Dev)
	if err != nil {
		return Lease{}, err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Lease{}, fmt.Errorf("dhcp on %s: %v: %s", vm.Name, err, strings.TrimSpace(string(out)))
	}
	f := strings.Fields(string(out))
	if len(f) != 4 {
		return Lease{}, fmt.Errorf("dhcp on %s: unexpected output %q", vm.Name, out)
	}
	p, err := netip.ParsePrefix(f[0])
	if err != nil {
		return Lease{}, fmt.Errorf("dhcp on %s: %w", vm.Name, err)
	}
	l := Lease{Addr: p, Router: strings.TrimPrefix(f[1], "-"), DNS: strings.TrimPrefix(f[2], "-")}
	if l.MTU, err = strconv.Atoi(f[3]); err != nil {
		return Lease{}, fmt.Errorf("dhcp on %s: MTU %q: %w", vm.Name, f[3], err)
	}
	vm.SetAddr(t, p, l.Router)
	return l, nil
}
