package hvtest

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestVirtualPortRelease: the life of a virtual port's binding, on the
// real ovn-controller and on govn chassis alike (the same steps, the
// same Southbound states expected of both). vip (10.0.0.100) has the
// parents vm1 and vm2 on hv1 and vm3 on hv2. A parent's gratuitous ARP
// binds vip to the parent's chassis with it as virtual_parent; the VIP
// moves from parent to parent on one chassis and to another chassis.
// When its parent's interface goes away, or the parent's logical port,
// the chassis releases vip: chassis and virtual_parent both empty. A
// binding cleared by hand is claimed again by the parent's chassis; a
// virtual port made an ordinary one is released.
func TestVirtualPortRelease(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip(why)
	}
	eachChassis(t, 2, func(t *testing.T, _ string, c *Cluster) { virtualPortRelease(t, c) })
}

// eachChassis runs steps, as a subtest named for the chassis, on a cluster
// of hypervisors under the real northd whose every chassis is
// ovn-controller, then on one whose every chassis is govn's: the
// differential tests expect the same of both.
func eachChassis(t *testing.T, hypervisors int, steps func(t *testing.T, name string, c *Cluster)) {
	t.Helper()
	var govn govnBinary
	t.Cleanup(govn.remove)
	for _, d := range []struct {
		name    string
		chassis func(t *testing.T) Chassis
	}{
		{"ovn-controller", func(*testing.T) Chassis { return RealChassis{} }},
		{"govn-chassis", func(t *testing.T) Chassis {
			bin := govn.get(t)
			govnHas(t, bin, "chassis")
			return GovnChassis{Argv: []string{bin, "chassis"}}
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			ch := d.chassis(t)
			steps(t, d.name, New(t, Options{Hypervisors: hypervisors, Northd: RealNorthd(), Chassis: func(int) Chassis { return ch }}))
		})
	}
}

func virtualPortRelease(t *testing.T, c *Cluster) {
	hv1, hv2 := c.Hypervisor(1), c.Hypervisor(2)
	c.NBCtl(t, "ls-add", "ls0")
	vms := map[string]*VM{}
	for i, hv := range []*Hypervisor{hv1, hv1, hv2} {
		name := "vm" + string(rune('1'+i))
		mac := "0a:00:00:00:00:0" + string(rune('1'+i))
		ip := "10.0.0.1" + string(rune('1'+i))
		c.NBCtl(t, "lsp-add", "ls0", name, "--", "lsp-set-addresses", name, mac+" "+ip)
		vms[name] = c.AddVM(t, hv, VMSpec{Name: name, LSP: name, MAC: mac, Addr: ip + "/24"})
	}
	c.NBCtl(t, "lsp-add", "ls0", "vip", "--", "lsp-set-type", "vip", "virtual",
		"--", "lsp-set-addresses", "vip", "0a:00:00:00:00:64 10.0.0.100",
		"--", "lsp-set-options", "vip", "virtual-ip=10.0.0.100", "virtual-parents=vm1,vm2,vm3")
	for name := range vms {
		c.WaitPortUp(t, name)
	}
	c.WaitHV(t)
	chassisUUID := map[string]string{}
	for _, hv := range []*Hypervisor{hv1, hv2} {
		chassisUUID[strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=_uuid", "find", "Chassis", "name="+hv.Name))] = hv.Name
	}
	// state is vip's binding: "hvN/parent", "-/parent" without a
	// chassis, "hvN/-" without a parent, "-/-" for neither.
	state := func() string {
		out := c.SBCtl(t, "--columns=chassis,virtual_parent", "--format=csv", "--data=bare", "--no-headings", "find", "Port_Binding", "logical_port=vip")
		f := strings.Split(strings.TrimSpace(out), ",")
		if len(f) != 2 {
			return "?" + out
		}
		ch, parent := "-", "-"
		if f[0] != "" {
			ch = chassisUUID[f[0]]
		}
		if f[1] != "" {
			parent = f[1]
		}
		return ch + "/" + parent
	}
	defer func() {
		if t.Failed() {
			t.Logf("vip: %s", c.SBCtl(t, "--columns=chassis,virtual_parent,up", "find", "Port_Binding", "logical_port=vip"))
		}
	}()
	vip := netip.MustParseAddr("10.0.0.100")
	fds := vmSockets(t, vms)
	// announce has the VM send a gratuitous ARP for the VIP.
	announce := func(name string) func() {
		mac, _ := net.ParseMAC(vms[name].MAC)
		return func() { _, _ = unix.Write(fds[name], arpFrame(1, mac, vip, vip)) }
	}
	step := func(what, want string, act func()) {
		t.Helper()
		got := ""
		if err := waitFor(20*time.Second, what+": vip "+want, func() bool {
			if act != nil {
				act()
			}
			got = state()
			return got == want
		}); err != nil {
			t.Fatalf("%v (last %s)", err, got)
		}
		t.Logf("%s: vip %s", what, got)
	}
	step("before any announcement", "-/-", nil)
	step("vm2 announces", "hv1/vm2", announce("vm2"))
	step("vm1 announces", "hv1/vm1", announce("vm1"))
	step("vm3 on hv2 announces", "hv2/vm3", announce("vm3"))
	c.WaitHV(t)
	time.Sleep(2 * time.Second) // hv1 has had its chance to take it back
	step("hv1 leaves it to hv2", "hv2/vm3", nil)
	step("vm1 announces again", "hv1/vm1", announce("vm1"))
	// The parent's interface goes: hv1 releases vip.
	hv1.Vsctl(t, "del-port", "br-int", vms["vm1"].Port)
	step("vm1's interface deleted", "-/-", nil)
	// The parent's logical port goes: hv1 releases vip.
	step("vm2 announces", "hv1/vm2", announce("vm2"))
	c.NBCtl(t, "lsp-del", "vm2")
	step("vm2's logical port deleted", "-/-", nil)
	// And the VIP can still be taken after.
	step("vm3 announces", "hv2/vm3", announce("vm3"))
	// The binding cleared behind the chassis' back: the chassis of
	// the parent claims it again.
	c.SBCtl(t, "clear", "Port_Binding", "vip", "chassis")
	step("vip's chassis cleared", "hv2/vm3", nil)
	// No longer a virtual port: released, parent and all.
	c.NBCtl(t, "lsp-set-type", "vip", "")
	step("vip made an ordinary port", "-/-", nil)
}

// vmSockets opens a raw socket on each VM's interface, by VM name, closed
// when the test ends.
func vmSockets(t *testing.T, vms map[string]*VM) map[string]int {
	t.Helper()
	fds := map[string]int{}
	for name, vm := range vms {
		fd, _, err := rawSocket(vm.NS, vm.Dev)
		if err != nil {
			t.Fatalf("raw socket on %s: %v", name, err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		fds[name] = fd
	}
	return fds
}
