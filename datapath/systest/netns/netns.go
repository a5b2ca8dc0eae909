// Package netns builds throwaway network namespaces and veth pairs for
// tests of the datapath, and removes them when the test ends, even when it
// fails. Everything skips the test unless it runs as root with ip(8).
package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Available reports why namespaces cannot be made here, or "" if they can.
func Available() string {
	if os.Geteuid() != 0 {
		return "needs root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "needs ip(8)"
	}
	return ""
}

// NS is a network namespace made for one test.
type NS struct {
	Name string
}

// UniqueName returns prefix followed by random hex, at most 15 bytes long
// (the limit for device names).
func UniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	s := prefix + hex.EncodeToString(b[:])
	if len(s) > 15 {
		s = s[:15]
	}
	return s
}

// New makes a namespace with its loopback up and deletes it at cleanup.
func New(t testing.TB) *NS {
	t.Helper()
	if why := Available(); why != "" {
		t.Skip(why)
	}
	n := &NS{Name: UniqueName("gvns")}
	Run(t, "ip", "netns", "add", n.Name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.Name).Run() })
	n.Run(t, "ip", "link", "set", "lo", "up")
	return n
}

// Command returns a command that runs args inside the namespace.
func (n *NS) Command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name}, args...)...)
}

// Run runs args inside the namespace and fails the test if it fails.
func (n *NS) Run(t testing.TB, args ...string) string {
	t.Helper()
	return Run(t, append([]string{"ip", "netns", "exec", n.Name}, args...)...)
}

// Run runs a command and fails the test if it fails; it returns stdout.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Veth is a veth pair with one end (Outer) in the test's own namespace, for
// the switch, and the other (Inner) inside NS with an address.
type Veth struct {
	Outer string // device name on the switch side
	Inner string // device name inside NS
	NS    *NS
	Addr  string // Inner's address, without prefix length
	MAC   string // Inner's MAC address
}

// NewVeth makes a veth pair, moves one end into ns with address cidr
// (e.g. "10.9.0.1/24") and MAC mac, and brings both ends up. The pair is
// deleted at cleanup (deleting the namespace would do it too).
func NewVeth(t testing.TB, ns *NS, cidr, mac string) *Veth {
	t.Helper()
	v := &Veth{Outer: UniqueName("gvo"), Inner: UniqueName("gvi"), NS: ns, MAC: mac}
	v.Addr, _, _ = strings.Cut(cidr, "/")
	Run(t, "ip", "link", "add", v.Outer, "type", "veth", "peer", "name", v.Inner)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", v.Outer).Run() })
	Run(t, "ip", "link", "set", v.Inner, "netns", ns.Name)
	ns.Run(t, "ip", "link", "set", v.Inner, "address", mac)
	ns.Run(t, "ip", "addr", "add", cidr, "dev", v.Inner)
	ns.Run(t, "ip", "link", "set", v.Inner, "up")
	Run(t, "ip", "link", "set", v.Outer, "up")
	// IPv6 router solicitations and DAD would add unrelated frames.
	_ = exec.Command("sysctl", "-qw", fmt.Sprintf("net.ipv6.conf.%s.disable_ipv6=1", v.Outer)).Run()
	_ = ns.Command(context.Background(), "sysctl", "-qw", fmt.Sprintf("net.ipv6.conf.%s.disable_ipv6=1", v.Inner)).Run()
	return v
}
