package port

import (
	"bytes"
	"errors"
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
			// are not whole words (Geneve), a partial checksum.
			bad := []*Packet{NewPacket(0), NewPacket(0), NewPacket(0)}
			for _, p := range bad {
				p.SetFrame(tcpFrame(nil))
				p.Tunnel = Tunnel{ID: 1, Dst: lo}
			}
			bad[0].Tunnel = Tunnel{}
			bad[1].Tunnel.Options = []byte{1, 2, 3}
			bad[2].Offload.NeedsCsum = true
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
