package port

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestGeneveLoopback(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	b, err := NewGeneve(netip.AddrPortFrom(lo, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bPort := uint16(b.conn.LocalAddr().(*net.UDPAddr).Port)
	a, err := NewGeneve(netip.AddrPortFrom(lo, 0), bPort)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	frame := tcpFrame([]byte("inner payload"))
	p := NewPacket(len(frame))
	p.SetFrame(frame)
	opts := []byte{0x01, 0x02, 0x80, 0x01, 0, 0, 0x12, 0x34}
	p.Tunnel = Tunnel{ID: 0xabcdef, Dst: lo, Options: opts}
	if err := a.Send([]*Packet{p}); err != nil {
		t.Fatal(err)
	}
	if string(p.Data) != string(frame) {
		t.Error("Send changed the packet's frame")
	}
	got := []*Packet{NewPacket(MaxFrame)}
	done := make(chan error, 1)
	go func() { _, err := b.Recv(got); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing received")
	}
	q := got[0]
	if string(q.Data) != string(frame) || q.Tunnel.ID != 0xabcdef || string(q.Tunnel.Options) != string(opts) || q.Tunnel.Src != lo {
		t.Errorf("received tunnel %+v frame ok=%v", q.Tunnel, string(q.Data) == string(frame))
	}
	// A frame without a destination is dropped, not sent.
	p.Tunnel = Tunnel{}
	_ = a.Send([]*Packet{p})
	if s := a.Stats(); s.TxPackets != 1 || s.TxDropped != 1 {
		t.Errorf("stats %+v", s)
	}
}

func FuzzDecapGeneve(f *testing.F) {
	f.Add([]byte{0, 0, 0x65, 0x58, 0, 0, 1, 0})
	f.Add(append([]byte{2, 0, 0x65, 0x58, 0, 0, 1, 0, 1, 2, 0x80, 1, 0, 0, 0, 1}, tcpFrame(nil)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := NewPacket(len(b))
		p.SetFrame(b)
		if decapGeneve(p, netip.Addr{}, netip.Addr{}) == nil && len(p.Data) < 14 {
			t.Fatalf("accepted a %d-byte inner frame", len(p.Data))
		}
	})
}
