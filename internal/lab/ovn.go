package lab

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// CtlTimeout is the --timeout that ovn-nbctl, ovn-sbctl and ovs-vsctl get.
const CtlTimeout = "--timeout=30"

// Ctl runs one of OVN's or OVS's database tools (ovn-nbctl, ovn-sbctl,
// ovs-vsctl) on the database at the unix socket db, with its run
// directories in dir (OVSEnv).
func Ctl(dir, tool, db string, args ...string) (string, error) {
	return Run(context.Background(), OVSEnv(dir), append([]string{tool, "--db=unix:" + db, CtlTimeout}, args...)...)
}

// Vsctl runs ovs-vsctl on one hypervisor's local database.
type Vsctl func(args ...string) (string, error)

// VsctlOn is the Vsctl of the local database at the unix socket db, the
// hypervisor's run directory being dir.
func VsctlOn(dir, db string) Vsctl {
	return func(args ...string) (string, error) { return Ctl(dir, "ovs-vsctl", db, args...) }
}

// ChassisBridges configures a hypervisor's switch as OVN users do, through
// its local database: bridge br-phy (datapath_type=netdev) on the
// underlay device ul0, with the encap address on its internal interface
// inside ns, and the integration bridge br-int (netdev, fail-mode=secure).
// ovs-vsctl waits for the switch to apply each change.
func ChassisBridges(vsctl Vsctl, ns string, encap netip.Prefix) error {
	if _, err := vsctl("--", "--may-exist", "add-br", "br-phy",
		"--", "set", "Bridge", "br-phy", "datapath_type=netdev",
		"--", "--may-exist", "add-port", "br-phy", "ul0",
		"--", "set", "Interface", "br-phy", "mtu_request=9000"); err != nil {
		return err
	}
	if err := WaitDevice(ns, "br-phy", 20*time.Second); err != nil {
		return err
	}
	if _, err := NSRun(ns, "ip", "addr", "add", encap.String(), "dev", "br-phy"); err != nil {
		return err
	}
	if _, err := NSRun(ns, "ip", "link", "set", "br-phy", "up"); err != nil {
		return err
	}
	_, err := vsctl("--", "--may-exist", "add-br", "br-int",
		"--", "set", "Bridge", "br-int", "datapath_type=netdev", "fail-mode=secure",
		"other-config:disable-in-band=true")
	return err
}

// ProviderBridge adds bridge br-ex (netdev) with port dev, the hypervisor's
// link to a provider network, and maps physnet to it
// (external_ids:ovn-bridge-mappings).
func ProviderBridge(vsctl Vsctl, dev, physnet string) error {
	if _, err := vsctl("--", "--may-exist", "add-br", "br-ex",
		"--", "set", "Bridge", "br-ex", "datapath_type=netdev",
		"--", "--may-exist", "add-port", "br-ex", dev); err != nil {
		return err
	}
	_, err := vsctl("set", "Open_vSwitch", ".", "external_ids:ovn-bridge-mappings="+physnet+":br-ex")
	return err
}

// ChassisIDs tells a hypervisor's controller who it is and where the
// Southbound is: system-id and hostname name, ovn-remote unix:sb, Geneve
// from encap, and br-int (netdev) as its integration bridge.
func ChassisIDs(vsctl Vsctl, name, sb string, encap netip.Addr) error {
	_, err := vsctl("set", "Open_vSwitch", ".",
		"external_ids:system-id="+name,
		"external_ids:hostname="+name,
		"external_ids:ovn-remote=unix:"+sb,
		"external_ids:ovn-encap-type=geneve",
		"external_ids:ovn-encap-ip="+encap.String(),
		"external_ids:ovn-bridge=br-int",
		"external_ids:ovn-bridge-datapath-type=netdev")
	return err
}

// BindVIF adds port to br-int bound to the logical switch port lsp
// (external_ids:iface-id).
func BindVIF(vsctl Vsctl, port, lsp string) error {
	_, err := vsctl("add-port", "br-int", port, "--", "set", "Interface", port, "external_ids:iface-id="+lsp)
	return err
}

// WaitChassis waits until the Southbound at the unix socket sb has a
// Chassis row named name.
func WaitChassis(dir, sb, name string, timeout time.Duration) error {
	return WaitFor(timeout, fmt.Sprintf("Chassis %s in the Southbound", name), func() bool {
		out, err := Ctl(dir, "ovn-sbctl", sb, "--bare", "--columns=name", "find", "Chassis", "name="+name)
		return err == nil && strings.TrimSpace(out) == name
	})
}
