package port

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/govn/govn/datapath/systest/netns"
)

// TestTAPEcho moves a TAP device into a namespace and answers the pings
// sent to a neighbour behind it: ping succeeds only if frames cross the
// device both ways.
func TestTAPEcho(t *testing.T) {
	ns := netns.New(t)
	name := netns.UniqueName("gvtap")
	tap, err := NewTAP(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tap.Close() })
	netns.Run(t, "ip", "link", "set", name, "netns", ns.Name)
	ns.Run(t, "ip", "addr", "add", "10.79.0.1/24", "dev", name)
	ns.Run(t, "ip", "link", "set", name, "up")
	ns.Run(t, "ip", "neigh", "add", "10.79.0.2", "lladdr", "02:00:00:00:79:02", "dev", name)
	_ = ns.Command(context.Background(), "sysctl", "-qw", "net.ipv6.conf."+name+".disable_ipv6=1").Run()

	go func() {
		pkts := []*Packet{NewPacket(MaxFrame)}
		for {
			n, err := tap.Recv(pkts)
			if errors.Is(err, ErrClosed) {
				return
			}
			if err != nil || n == 0 {
				continue
			}
			p := pkts[0]
			if err := p.FinishChecksum(); err != nil {
				continue
			}
			if echoReply(p.Data) {
				p.Offload = Offload{}
				_ = tap.Send(pkts[:1])
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd, err := ns.Tool(ctx, "ping", "10.79.0.2", "3")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ping through the TAP: %v\n%s", err, out)
	}
	if s := tap.Stats(); s.RxPackets < 3 || s.TxPackets < 3 {
		t.Errorf("stats %+v", s)
	}
}

// echoReply turns an IPv4 ICMP echo request frame into its reply in place.
func echoReply(d []byte) bool {
	if len(d) < 42 || binary.BigEndian.Uint16(d[12:]) != etherTypeIPv4 || d[23] != 1 || d[34] != 8 {
		return false
	}
	var mac [6]byte
	copy(mac[:], d[0:6])
	copy(d[0:6], d[6:12])
	copy(d[6:12], mac[:])
	var ip [4]byte
	copy(ip[:], d[26:30])
	copy(d[26:30], d[30:34])
	copy(d[30:34], ip[:])
	d[34] = 0
	d[36], d[37] = 0, 0
	binary.BigEndian.PutUint16(d[36:], ^Checksum(d[34:], 0))
	return true
}

// TestTAPPersistent: a persistent TAP device outlives its port, a new
// port attaches to it, and clearing persistence removes it with the port.
func TestTAPPersistent(t *testing.T) {
	if why := netns.Available(); why != "" {
		t.Skip(why)
	}
	name := netns.UniqueName("gvtap")
	// Whatever happens, no device stays behind.
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	tap, err := NewTAP(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := tap.SetPersistent(true); err != nil {
		tap.Close()
		t.Fatal(err)
	}
	tap.Close()
	if _, err := net.InterfaceByName(name); err != nil {
		t.Fatalf("persistent device gone with its port: %v", err)
	}
	tap, err = NewTAP(name)
	if err != nil {
		t.Fatalf("attaching to the persistent device: %v", err)
	}
	if err := tap.SetPersistent(false); err != nil {
		tap.Close()
		t.Fatal(err)
	}
	tap.Close()
	if _, err := net.InterfaceByName(name); err == nil {
		t.Error("device still there after its last port closed, no longer persistent")
	}
}
