package port

import (
	"net"
	"net/netip"
	"testing"
)

// BenchmarkGeneveLoopback sends batches of BatchSize small frames from one
// Geneve port to another over loopback and receives them all: the cost of
// a frame through both tunnel ends, reported as frames/s.
func BenchmarkGeneveLoopback(b *testing.B) {
	lo := netip.MustParseAddr("127.0.0.1")
	rx, err := NewGeneve(netip.AddrPortFrom(lo, 0), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer rx.Close()
	tx, err := NewGeneve(netip.AddrPortFrom(lo, 0), uint16(rx.LocalAddr().(*net.UDPAddr).Port))
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Close()
	frame := tcpFrame(make([]byte, 10))
	out := make([]*Packet, BatchSize)
	in := make([]*Packet, BatchSize)
	for i := range out {
		out[i] = NewPacket(len(frame))
		out[i].SetFrame(frame)
		out[i].Tunnel = Tunnel{ID: 7, Dst: lo, Options: []byte{0x01, 0x02, 0x80, 0x01, 0, 1, 0, 2}}
		in[i] = NewPacket(MaxFrame)
	}
	b.ReportAllocs()
	b.ResetTimer()
	frames := 0
	for b.Loop() {
		if err := tx.Send(out); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < len(out); {
			n, err := rx.Recv(in[:len(out)-got])
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
		frames += len(out)
	}
	b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
	if s := rx.Stats(); s.RxPackets != uint64(frames) {
		b.Errorf("received %d of %d frames", s.RxPackets, frames)
	}
}
