package dp

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
)

// TestGeneveTunnel joins two datapaths with Geneve over loopback: the
// first sets the tunnel fields and outputs to its Geneve port; the second
// receives the frame with tun_id and tun_metadata0 in its key and forwards
// it by them. The inner frame must arrive unchanged.
func TestGeneveTunnel(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	// Datapath 1: port 1 (channel) → set tunnel, output to port 9 (Geneve).
	f1 := &fakeFlows{translate: func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		if k.Get(flow.InPort) != 1 {
			return flow.Mask{}, nil
		}
		all := flow.U128{Hi: ^uint64(0), Lo: ^uint64(0)}
		return flow.Mask{}, []flow.DPAction{
			flow.DPSetField{Field: flow.TunID, Value: flow.U128{Lo: 5}, Mask: all},
			flow.DPSetField{Field: flow.TunDst, Value: flow.U128{Lo: flow.IPv4(lo)}, Mask: all},
			flow.DPSetField{Field: flow.TunMetadata0, Value: flow.U128{Lo: 0x10002}, Mask: all},
			flow.DPOutput{Port: 9},
		}
	}}
	// Datapath 2: from the tunnel with tun_id 5 and OVN's option → port 2.
	f2 := &fakeFlows{translate: func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		m.SetField(flow.TunID)
		m.SetField(flow.TunMetadata0)
		if k.Get(flow.TunID) == 5 && k.Get(flow.TunMetadata0) == 0x10002 && k.Get(flow.TunSrc) == flow.IPv4(lo) {
			return m, []flow.DPAction{flow.DPOutput{Port: 2}}
		}
		return m, nil
	}}
	in, out, _ := geneveRig(t, f1, f2, false)

	frame := udpFrame(mac2, mac1, 1, 2, 30)
	if err := in.Inject(frame, port.Offload{}); err != nil {
		t.Fatal(err)
	}
	r := &rig{ports: map[uint32]*port.Channel{2: out}}
	got := r.expect(t, 2)
	if string(got.Data) != string(frame) {
		t.Errorf("inner frame changed:\n% x\n% x", got.Data, frame)
	}
}

// geneveRig joins two datapaths running f1 and f2 with Geneve over
// loopback, each with the tunnel as port 9: frames injected into in
// (port 1 of the first) that cross it leave by out (port 2 of the
// second). offloads says whether in and out take GSO frames; sender is
// the first datapath's tunnel port. Both run until the test ends.
func geneveRig(t *testing.T, f1, f2 *fakeFlows, offloads bool) (in, out *port.Channel, sender *port.UDPTunnel) {
	t.Helper()
	lo := netip.MustParseAddr("127.0.0.1")
	g2, err := port.NewGeneve(netip.AddrPortFrom(lo, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := g2LocalPort(g2)
	if !ok {
		t.Fatal("no local port for the Geneve socket")
	}
	g1, err := port.NewGeneve(netip.AddrPortFrom(lo, 0), addr)
	if err != nil {
		t.Fatal(err)
	}
	in = port.NewChannel("in", 8, offloads)
	out = port.NewChannel("out", 8, offloads)
	d1, _ := New(Config{Flows: f1})
	d2, _ := New(Config{Flows: f2})
	for _, a := range []struct {
		d  *Datapath
		no uint32
		p  port.Port
	}{{d1, 1, in}, {d1, 9, g1}, {d2, 9, g2}, {d2, 2, out}} {
		if err := a.d.AddPort(a.no, a.p); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	for _, d := range []*Datapath{d1, d2} {
		go func() { d.Run(ctx); done <- struct{}{} }()
	}
	t.Cleanup(func() { cancel(); <-done; <-done })
	return in, out, g1
}

// g2LocalPort returns the UDP port a Geneve port listens on.
func g2LocalPort(g *port.UDPTunnel) (uint16, bool) {
	a, ok := g.LocalAddr().(*net.UDPAddr)
	if !ok {
		return 0, false
	}
	return uint16(a.Port), true
}
