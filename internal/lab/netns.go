package lab

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// NetnsDir is where ip-netns(8) keeps named namespaces.
const NetnsDir = "/run/netns"

// AddNS makes the namespace name with its loopback up and IPv6 off (router
// solicitations and DAD would add unrelated traffic) and registers its
// removal (RemoveNS) with cl.
func AddNS(cl Cleaner, name string) error {
	if _, err := RunTimed(nil, "ip", "netns", "add", name); err != nil {
		return err
	}
	cl.Cleanup(func() { RemoveNS(name) })
	if _, err := RunTimed(nil, InNS(name, "ip", "link", "set", "lo", "up")...); err != nil {
		return err
	}
	_, err := RunTimed(nil, InNS(name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")...)
	return err
}

// RemoveNS kills every process left in a namespace and deletes it, which
// deletes its devices too. A missing namespace is no error.
func RemoveNS(name string) {
	out, _ := exec.Command("ip", "netns", "pids", name).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	}
	_ = exec.Command("ip", "netns", "del", name).Run()
}

// Namespaces lists the named namespaces that start with prefix.
func Namespaces(prefix string) []string {
	ents, err := os.ReadDir(NetnsDir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// NSRun runs args inside the namespace ns (RunTimed).
func NSRun(ns string, args ...string) (string, error) {
	return RunTimed(nil, InNS(ns, args...)...)
}

// Veth makes a veth pair: devA inside nsA, devB inside nsB.
func Veth(nsA, devA, nsB, devB string) error {
	_, err := RunTimed(nil, "ip", "link", "add", devA, "netns", nsA, "type", "veth", "peer", "name", devB, "netns", nsB)
	return err
}

// TxOff turns off transmit checksum offload on a veth end: OVS's userspace
// conntrack marks packets with partial checksums invalid, and so does
// govn's datapath.
func TxOff(ns, dev string) error {
	_, err := NSRun(ns, "ethtool", "-K", dev, "tx", "off")
	return err
}

// Bridge makes a Linux bridge dev inside ns and sets it up; mtu 0 keeps
// the default.
func Bridge(ns, dev string, mtu int) error {
	args := []string{"ip", "link", "add", dev}
	if mtu > 0 {
		args = append(args, "mtu", strconv.Itoa(mtu))
	}
	if _, err := NSRun(ns, append(args, "type", "bridge")...); err != nil {
		return err
	}
	_, err := NSRun(ns, "ip", "link", "set", dev, "up")
	return err
}

// UnderlayMTU is the underlay's MTU: room for Geneve around 1500-byte
// frames.
const UnderlayMTU = 9000

// UnderlayLink joins a hypervisor namespace to the underlay bridge:
// device ul0 inside hvNS, its peer (named peer) on bridge inside ulNS, MTU
// UnderlayMTU. The kernel sees every frame on ul0 although the switch owns
// it: with ARP on it would answer for the encap IP with ul0's MAC, racing
// br-phy, and a tunnel neighbour with that MAC black-holes Geneve; so ARP
// is off on ul0.
func UnderlayLink(ulNS, bridge, hvNS, peer string) error {
	mtu := strconv.Itoa(UnderlayMTU)
	steps := [][]string{
		InNS(ulNS, "ip", "link", "set", peer, "mtu", mtu, "master", bridge, "up"),
		InNS(hvNS, "sysctl", "-qw", "net.ipv4.conf.ul0.arp_ignore=1"),
		InNS(hvNS, "ip", "link", "set", "ul0", "mtu", mtu, "arp", "off", "up"),
	}
	if err := Veth(hvNS, "ul0", ulNS, peer); err != nil {
		return err
	}
	for _, s := range steps {
		if _, err := RunTimed(nil, s...); err != nil {
			return err
		}
	}
	if err := TxOff(ulNS, peer); err != nil {
		return err
	}
	return TxOff(hvNS, "ul0")
}

// BridgePort joins a fresh veth to a Linux bridge: dev inside devNS, its
// peer on bridge inside brNS; both ends up, checksum offload off. Used for
// the provider network's links.
func BridgePort(brNS, bridge, peer, devNS, dev string) error {
	if err := Veth(devNS, dev, brNS, peer); err != nil {
		return err
	}
	if _, err := NSRun(brNS, "ip", "link", "set", peer, "master", bridge, "up"); err != nil {
		return err
	}
	if _, err := NSRun(devNS, "ip", "link", "set", dev, "up"); err != nil {
		return err
	}
	if err := TxOff(brNS, peer); err != nil {
		return err
	}
	return TxOff(devNS, dev)
}

// Plug makes a host's interface: dev inside hostNS with the given MAC, a
// veth whose other end, port, is inside peerNS (a hypervisor, where a
// switch takes it); both up, checksum offload off.
func Plug(hostNS, dev, mac, peerNS, port string) error {
	if err := Veth(peerNS, port, hostNS, dev); err != nil {
		return err
	}
	return Configure(hostNS, dev, mac, peerNS, port)
}

// Configure sets up both ends of a fresh veth from hostNS's dev to
// peerNS's port: the MAC on dev, both up, checksum offload off.
func Configure(hostNS, dev, mac, peerNS, port string) error {
	if _, err := NSRun(hostNS, "ip", "link", "set", dev, "address", mac, "up"); err != nil {
		return err
	}
	if _, err := NSRun(peerNS, "ip", "link", "set", port, "up"); err != nil {
		return err
	}
	if err := TxOff(hostNS, dev); err != nil {
		return err
	}
	return TxOff(peerNS, port)
}

// SetAddr gives dev inside ns the address p and, if gateway is not empty,
// a default route through it.
func SetAddr(ns, dev string, p netip.Prefix, gateway string) error {
	if _, err := NSRun(ns, "ip", "addr", "add", p.String(), "dev", dev); err != nil {
		return err
	}
	if gateway == "" {
		return nil
	}
	_, err := NSRun(ns, "ip", "route", "add", "default", "via", gateway)
	return err
}

// DefaultGateway returns the IPv4 default route's gateway inside ns, or ""
// if there is none.
func DefaultGateway(ns string) (string, error) {
	out, err := NSRun(ns, "ip", "-4", "route", "show", "default")
	if err != nil {
		return "", err
	}
	if f := strings.Fields(out); len(f) >= 3 && f[0] == "default" && f[1] == "via" {
		return f[2], nil
	}
	return "", nil
}

// WaitDevice waits until the device dev exists inside ns (a switch makes
// its internal ports a moment after ovs-vsctl returns).
func WaitDevice(ns, dev string, timeout time.Duration) error {
	return WaitFor(timeout, ns+": device "+dev, func() bool {
		_, err := Run(context.Background(), nil, InNS(ns, "ip", "link", "show", dev)...)
		return err == nil
	})
}
