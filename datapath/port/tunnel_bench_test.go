package port

import (
	"net/netip"
	"testing"
)

// tunnelBatches returns a batch of BatchSize small frames to send
// through a tunnel to dst, each with OVN's Geneve option, and a batch of
// packets to receive into.
func tunnelBatches(dst netip.Addr) (out, in []*Packet) {
	frame := tcpFrame(make([]byte, 10))
	out = make([]*Packet, BatchSize)
	in = make([]*Packet, BatchSize)
	for i := range out {
		out[i] = NewPacket(len(frame))
		out[i].SetFrame(frame)
		out[i].Tunnel = Tunnel{ID: 7, Dst: dst, Options: []byte{0x01, 0x02, 0x80, 0x01, 0, 1, 0, 2}}
		in[i] = NewPacket(MaxFrame)
	}
	return out, in
}

// roundTrip sends out from a and receives as many frames at b.
func roundTrip(tb testing.TB, a, b Port, out, in []*Packet) {
	if err := a.Send(out); err != nil {
		tb.Fatal(err)
	}
	for got := 0; got < len(out); {
		n, err := b.Recv(in[:len(out)-got])
		if err != nil {
			tb.Fatal(err)
		}
		got += n
	}
}

// BenchmarkTunnelLoopback sends batches of BatchSize small frames from
// one tunnel port to another over loopback and receives them all: the
// cost of a frame through both tunnel ends, reported as frames/s.
func BenchmarkTunnelLoopback(b *testing.B) {
	lo := netip.MustParseAddr("127.0.0.1")
	for _, e := range []Encap{EncapGeneve, EncapVXLAN} {
		b.Run(e.String(), func(b *testing.B) {
			tx, rx := tunnelPair(b, e, lo)
			out, in := tunnelBatches(lo)
			b.ReportAllocs()
			frames := 0
			for b.Loop() {
				roundTrip(b, tx, rx, out, in)
				frames += len(out)
			}
			b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
			if s := rx.Stats(); s.RxPackets != uint64(frames) {
				b.Errorf("received %d of %d frames", s.RxPackets, frames)
			}
		})
	}
}

// TestTunnelAllocs holds the tunnel port to a few allocations per batch,
// not per frame: Geneve options land in storage the packets already have.
func TestTunnelAllocs(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	tx, rx := tunnelPair(t, EncapGeneve, lo)
	out, in := tunnelBatches(lo)
	roundTrip(t, tx, rx, out, in)
	if n := testing.AllocsPerRun(50, func() { roundTrip(t, tx, rx, out, in) }); n > 8 {
		t.Errorf("%v allocations per batch of %d frames", n, len(out))
	}
}
