package port

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"
)

// tunnelPair opens two tunnel ports of encapsulation e on loopback, the
// first sending to the second.
func tunnelPair(t testing.TB, e Encap, lo netip.Addr) (a, b *UDPTunnel) {
	t.Helper()
	b, err := NewUDPTunnel(e, netip.AddrPortFrom(lo, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a, err = NewUDPTunnel(e, netip.AddrPortFrom(lo, 0), b.LocalAddrPort().Port())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, b
}

// recvN receives n frames from p or fails after a few seconds.
func recvN(t testing.TB, p Port, n int) []*Packet {
	t.Helper()
	var got []*Packet
	done := make(chan error, 1)
	go func() {
		for len(got) < n {
			batch := make([]*Packet, n-len(got))
			for i := range batch {
				batch[i] = NewPacket(MaxFrame)
			}
			k, err := p.Recv(batch)
			if err != nil {
				done <- err
				return
			}
			got = append(got, batch[:k]...)
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		p.Close()
		<-done
		t.Fatalf("received %d of %d frames", len(got), n)
	}
	return got
}

func TestUDPTunnelLoopback(t *testing.T) {
	opts := []byte{0x01, 0x02, 0x80, 0x01, 0, 0, 0x12, 0x34}
	for _, c := range []struct {
		encap    Encap
		lo       string
		wantOpts []byte // what arrives of opts
	}{
		{EncapGeneve, "127.0.0.1", opts},
		{EncapVXLAN, "127.0.0.1", nil},
		{EncapGeneve, "::1", opts},
		{EncapVXLAN, "::1", nil},
	} {
		t.Run(c.encap.String()+" "+c.lo, func(t *testing.T) {
			lo := netip.MustParseAddr(c.lo)
			a, b := tunnelPair(t, c.encap, lo)
			// More than one batch, each frame with its own VNI.
			const n = BatchSize + 5
			var out []*Packet
			for i := range n {
				p := NewPacket(0)
				p.SetFrame(tcpFrame([]byte{byte(i)}))
				p.Tunnel = Tunnel{ID: 0xabc000 + uint64(i), Dst: lo, Options: opts}
				out = append(out, p)
			}
			// Frames the port cannot send: no destination, options that
			// are not whole words (Geneve), a partial checksum past the
			// frame.
			bad := []*Packet{NewPacket(0), NewPacket(0), NewPacket(0)}
			for _, p := range bad {
				p.SetFrame(tcpFrame(nil))
				p.Tunnel = Tunnel{ID: 1, Dst: lo}
			}
			bad[0].Tunnel = Tunnel{}
			bad[1].Tunnel.Options = []byte{1, 2, 3}
			bad[2].Offload = Offload{NeedsCsum: true, CsumStart: 1000, CsumOffset: 16}
			wantDrops := uint64(3)
			if c.encap == EncapVXLAN {
				wantDrops = 2 // VXLAN ignores options
			}
			if err := a.Send(append(append([]*Packet{}, out[:10]...), append(bad, out[10:]...)...)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out[0].Data, tcpFrame([]byte{0})) {
				t.Error("Send changed the packet's frame")
			}
			extra := n + int(3-wantDrops)
			got := recvN(t, b, extra)
			var good []*Packet
			for _, q := range got {
				if q.Tunnel.ID != 1 { // bad[1], which VXLAN sends
					good = append(good, q)
				}
			}
			if len(good) != n {
				t.Fatalf("received %d frames, want %d", len(good), n)
			}
			for i, q := range good {
				if !bytes.Equal(q.Data, tcpFrame([]byte{byte(i)})) {
					t.Errorf("frame %d: % x", i, q.Data)
				}
				want := Tunnel{ID: 0xabc000 + uint64(i), Src: lo, Dst: lo, TTL: 64, Options: c.wantOpts}
				if q.Tunnel.ID != want.ID || q.Tunnel.Src != want.Src || q.Tunnel.Dst != want.Dst ||
					q.Tunnel.TTL != want.TTL || !bytes.Equal(q.Tunnel.Options, want.Options) {
					t.Errorf("frame %d: tunnel %+v, want %+v", i, q.Tunnel, want)
				}
			}
			sa, sb := a.Stats(), b.Stats()
			if sa.TxPackets != uint64(extra) || sa.TxDropped != wantDrops || sa.TxBatches < 2 {
				t.Errorf("sender stats %+v", sa)
			}
			if sb.RxPackets != uint64(extra) {
				t.Errorf("receiver stats %+v", sb)
			}
		})
	}
}

// TestUDPTunnelJunk sends datagrams that are not tunnel frames: they are
// counted and skipped, and Recv still returns only good frames.
func TestUDPTunnelJunk(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	for _, e := range []Encap{EncapGeneve, EncapVXLAN} {
		t.Run(e.String(), func(t *testing.T) {
			a, b := tunnelPair(t, e, lo)
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(b.LocalAddrPort()))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			junk := [][]byte{
				{1, 2, 3},
				{0, 0, 0x65, 0x58, 0, 0, 1, 0, 1, 2, 3}, // Geneve with a 3-byte frame
				{0, 0, 0, 0, 0, 0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, // VXLAN without the I flag
			}
			for _, j := range junk {
				if _, err := c.Write(j); err != nil {
					t.Fatal(err)
				}
			}
			p := NewPacket(0)
			p.SetFrame(tcpFrame(nil))
			p.Tunnel = Tunnel{ID: 9, Dst: lo}
			if err := a.Send([]*Packet{p}); err != nil {
				t.Fatal(err)
			}
			got := recvN(t, b, 1)
			if got[0].Tunnel.ID != 9 {
				t.Errorf("got tunnel %+v", got[0].Tunnel)
			}
			if s := b.Stats(); s.RxErrors != uint64(len(junk)) || s.RxPackets != 1 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func TestUDPTunnelClose(t *testing.T) {
	_, b := tunnelPair(t, EncapGeneve, netip.MustParseAddr("127.0.0.1"))
	done := make(chan error, 1)
	go func() {
		_, err := b.Recv([]*Packet{NewPacket(MaxFrame)})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	b.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Recv after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Recv did not return after Close")
	}
	if err := b.Send([]*Packet{NewPacket(0)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
}

// TestUDPTunnelWildcard binds the receiver to the unspecified address:
// the outer destination then comes from the datagram's packet info.
func TestUDPTunnelWildcard(t *testing.T) {
	for _, c := range []struct{ bind, dst string }{
		{"0.0.0.0", "127.0.0.1"},
		{"::", "::1"},
		{"::", "127.0.0.1"}, // dual stack
	} {
		t.Run(c.bind+" "+c.dst, func(t *testing.T) {
			dst := netip.MustParseAddr(c.dst)
			b, err := NewVXLAN(netip.AddrPortFrom(netip.MustParseAddr(c.bind), 0), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			a, err := NewVXLAN(netip.AddrPortFrom(dst, 0), b.LocalAddrPort().Port())
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			p := NewPacket(0)
			p.SetFrame(tcpFrame(nil))
			p.Tunnel = Tunnel{ID: 3, Dst: dst}
			if err := a.Send([]*Packet{p}); err != nil {
				t.Fatal(err)
			}
			got := recvN(t, b, 1)[0].Tunnel
			if got.Dst != dst || got.Src != dst || got.ID != 3 || got.TTL == 0 {
				t.Errorf("tunnel %+v, want src and dst %s", got, dst)
			}
		})
	}
}

// FuzzTunnelCmsgs feeds arbitrary control messages and socket addresses
// to the receive path's readers, which must stay inside them.
func FuzzTunnelCmsgs(f *testing.F) {
	f.Add([]byte{16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var tun Tunnel
		readTunnelCmsgs(b, &tun)
		sockaddrAddr(b)
	})
}

func TestParseEncap(t *testing.T) {
	for _, e := range []Encap{EncapGeneve, EncapVXLAN} {
		if got, err := ParseEncap(e.String()); got != e || err != nil {
			t.Errorf("ParseEncap(%q) = %v, %v", e, got, err)
		}
	}
	if _, err := ParseEncap("gre"); err == nil {
		t.Error("accepted gre")
	}
	if EncapGeneve.Port() != 6081 || EncapVXLAN.Port() != 4789 {
		t.Error("wrong IANA ports")
	}
}

// FuzzTunnelDecap feeds arbitrary UDP payloads to both encapsulations'
// decapsulation: an accepted one leaves a whole Ethernet header.
func FuzzTunnelDecap(f *testing.F) {
	f.Add(byte(EncapGeneve), []byte{0, 0, 0x65, 0x58, 0, 0, 1, 0})
	f.Add(byte(EncapGeneve), append([]byte{2, 0, 0x65, 0x58, 0, 0, 1, 0, 1, 2, 0x80, 1, 0, 0, 0, 1}, tcpFrame(nil)...))
	f.Add(byte(EncapVXLAN), append([]byte{8, 0, 0, 0, 0, 0, 1, 0}, tcpFrame(nil)...))
	f.Fuzz(func(t *testing.T, e byte, b []byte) {
		tp := &UDPTunnel{encap: EncapGeneve}
		if Encap(e) == EncapVXLAN {
			tp.encap = EncapVXLAN
		}
		tun, n, err := tp.decap(b, nil)
		if err != nil {
			return
		}
		if n > len(b) || len(b)-n < 14 || tun.ID >= 1<<24 || len(tun.Options)%4 != 0 {
			t.Fatalf("header %d of %d bytes, tunnel %+v", n, len(b), tun)
		}
	})
}

// recvBytes receives from p until the frames hold n payload bytes
// behind hdr-byte headers once split, or fails after a few seconds.
func recvSegments(t testing.TB, p Port, want int) (frames []*Packet, segs [][]byte) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for len(segs) < want {
			batch := make([]*Packet, BatchSize)
			for i := range batch {
				batch[i] = NewPacket(MaxFrame)
			}
			k, err := p.Recv(batch)
			if err != nil {
				done <- err
				return
			}
			for _, q := range batch[:k] {
				frames = append(frames, q)
				if err := q.Segment(nil, func(s []byte) error {
					segs = append(segs, append([]byte(nil), s...))
					return nil
				}); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		p.Close()
		<-done
		t.Fatalf("received %d of %d segments", len(segs), want)
	}
	return frames, segs
}

// TestUDPTunnelGSO sends GSO TCP frames through the tunnel: what arrives
// splits into exactly the segments the frames split into at the sender,
// whether the kernel segments the datagrams (UDP_SEGMENT) or the port
// sends them one by one, and the receiver joins them again.
func TestUDPTunnelGSO(t *testing.T) {
	for _, c := range []struct {
		lo      string
		innerV6 bool
		noGSO   bool
	}{
		{"127.0.0.1", false, false},
		{"127.0.0.1", true, false},
		{"::1", false, false},
		{"::1", true, false},
		{"127.0.0.1", false, true},
	} {
		t.Run(fmt.Sprintf("%s/inner-v6=%v/no-gso=%v", c.lo, c.innerV6, c.noGSO), func(t *testing.T) {
			lo := netip.MustParseAddr(c.lo)
			a, b := tunnelPair(t, EncapGeneve, lo)
			if c.noGSO {
				a.gso = false
			}
			opts := []byte{0x01, 0x02, 0x80, 0x01, 0, 1, 0, 2}
			var out []*Packet
			var want [][]byte
			for i, n := range []int{64000, 3000, 100} {
				p := gsoFrame(c.innerV6, n, 1448, tcpFlagACK|tcpFlagPSH)
				// Each frame continues the one before.
				if i > 0 {
					prev := out[i-1]
					l4 := int(prev.Offload.CsumStart)
					seq := binary.BigEndian.Uint32(prev.Data[l4+4:]) + uint32(len(prev.Data)-int(prev.Offload.HdrLen))
					binary.BigEndian.PutUint32(p.Data[l4+4:], seq)
				}
				p.Tunnel = Tunnel{ID: 5, Dst: lo, Options: opts}
				want = append(want, segments(t, p.Clone())...)
				out = append(out, p)
			}
			// And a partial checksum the port finishes.
			plain := gsoFrame(c.innerV6, 500, 1448, tcpFlagACK)
			plain.Offload.GSOType, plain.Offload.GSOSize = GSONone, 0
			plain.Tunnel = Tunnel{ID: 6, Dst: lo}
			want = append(want, segments(t, plain.Clone())...)
			out = append(out, plain)
			if err := a.Send(out); err != nil {
				t.Fatal(err)
			}
			frames, got := recvSegments(t, b, len(want))
			if len(got) != len(want) {
				t.Fatalf("%d segments arrived, want %d", len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("segment %d differs", i)
				}
			}
			for _, f := range frames {
				if f.Tunnel.ID != 5 && f.Tunnel.ID != 6 || (f.Tunnel.ID == 5) != bytes.Equal(f.Tunnel.Options, opts) {
					t.Errorf("tunnel %+v", f.Tunnel)
				}
			}
			if sa := a.Stats(); sa.TxPackets != uint64(len(want)) || sa.TxDropped != 0 {
				t.Errorf("sender stats %+v, want %d datagrams", sa, len(want))
			}
			t.Logf("%d segments arrived in %d frames", len(got), len(frames))
			if !c.noGSO && a.gso && b.gro && len(frames) > 5 {
				t.Errorf("%d segments arrived in %d frames: not joined", len(got), len(frames))
			}
		})
	}
}
