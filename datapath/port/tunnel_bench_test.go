package port

import (
	"encoding/binary"
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

// BenchmarkTunnelGSO sends 64 KB GSO TCP frames (MSS 1448) from one
// Geneve port to another over loopback and receives them: the cost of a
// VM's TSO frame through both tunnel ends, split into datagrams of its
// own segment size and joined again. "udp-segment" hands the kernel the
// datagrams of a frame in one message (UDP_SEGMENT, UDP_GRO at the
// receiver); "one-by-one" sends a message a datagram, as the port does
// where the kernel lacks UDP_SEGMENT. Reported as inner bytes/s and
// frames received per frame sent (1 when every frame was joined again).
func BenchmarkTunnelGSO(b *testing.B) {
	lo := netip.MustParseAddr("127.0.0.1")
	for _, gso := range []bool{true, false} {
		name := "udp-segment"
		if !gso {
			name = "one-by-one"
		}
		b.Run(name, func(b *testing.B) {
			tx, rx := tunnelPair(b, EncapGeneve, lo)
			tx.gso = gso && tx.gso
			p := gsoFrame(false, 64000, 1448, tcpFlagACK)
			p.Tunnel = Tunnel{ID: 7, Dst: lo, Options: []byte{0x01, 0x02, 0x80, 0x01, 0, 1, 0, 2}}
			l4 := int(p.Offload.CsumStart)
			in := make([]*Packet, BatchSize)
			for i := range in {
				in[i] = NewPacket(MaxFrame)
			}
			want := uint64(len(p.Data) - int(p.Offload.HdrLen))
			b.SetBytes(int64(want))
			b.ReportAllocs()
			seq := binary.BigEndian.Uint32(p.Data[l4+4:])
			frames := 0
			for b.Loop() {
				binary.BigEndian.PutUint32(p.Data[l4+4:], seq)
				seq += uint32(want)
				if err := tx.Send([]*Packet{p}); err != nil {
					b.Fatal(err)
				}
				for got := uint64(0); got < want; {
					n, err := rx.Recv(in)
					if err != nil {
						b.Fatal(err)
					}
					for _, q := range in[:n] {
						frames++
						got += uint64(len(q.Data)) - uint64(max(int(q.Offload.HdrLen), 66))
					}
				}
			}
			b.ReportMetric(float64(frames)/float64(b.N), "frames/op")
		})
	}
}
