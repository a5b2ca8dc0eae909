package port

import (
	"context"
	"testing"
	"time"

	"github.com/govn/govn/datapath/systest/netns"
)

// TestAFPacketOpener opens ports with an opener's prepared sockets: they
// have both rings and forward (ping across two of them joined back to
// back), a missing device is an error that leaves the opener working,
// and after Close the opener still opens ports, with sockets it makes
// on the spot.
func TestAFPacketOpener(t *testing.T) {
	o := NewAFPacketOpener()
	t.Cleanup(func() { o.Close() })
	ns1, ns2 := netns.New(t), netns.New(t)
	v1 := netns.NewVeth(t, ns1, "10.78.0.1/24", "02:00:00:00:78:01")
	v2 := netns.NewVeth(t, ns2, "10.78.0.2/24", "02:00:00:00:78:02")
	open := func(name string) *AFPacket {
		t.Helper()
		p, err := o.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		if p.ring == nil || p.txr == nil {
			t.Fatalf("%s: no receive or transmit ring", name)
		}
		return p
	}
	if _, err := o.Open("no-such-dev0"); err == nil {
		t.Fatal("Open of a missing device succeeded")
	}
	p1 := open(v1.Outer)
	p2 := open(v2.Outer)
	wire(t, p1, p2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := ns1.Tool(ctx, "ping", v2.Addr, "3")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ping through prepared ports: %v\n%s", err, out)
	}
	if s := p1.Stats(); s.RxPackets == 0 || s.TxPackets == 0 {
		t.Errorf("%s counters did not move: %+v", p1.Name(), s)
	}

	p1.Close()
	o.Close()
	o.Close() // twice is fine
	open(v1.Outer)
}
