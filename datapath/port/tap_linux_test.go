package port

import (
	"context"
	"encoding/binary"
	"errors"
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
