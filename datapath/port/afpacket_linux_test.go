package port

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/govn/govn/datapath/systest/netns"
)

func TestMain(m *testing.M) {
	netns.RunToolIfAsked()
	os.Exit(m.Run())
}

// wire forwards every frame from a to b and back, as a two-port switch
// with no table would, until the test ends.
func wire(t *testing.T, a, b Port) {
	t.Helper()
	fwd := func(from, to Port) {
		pkts := make([]*Packet, BatchSize)
		for i := range pkts {
			pkts[i] = NewPacket(MaxFrame)
		}
		for {
			n, err := from.Recv(pkts)
			if err != nil {
				if !errors.Is(err, ErrClosed) {
					t.Errorf("recv %s: %v", from.Name(), err)
				}
				return
			}
			if err := to.Send(pkts[:n]); err != nil {
				return
			}
		}
	}
	go fwd(a, b)
	go fwd(b, a)
}

func openAFPacket(t *testing.T, name string) *AFPacket {
	t.Helper()
	return openAFPacketMode(t, name, true)
}

func openAFPacketMode(t *testing.T, name string, ring bool) *AFPacket {
	t.Helper()
	p, err := newAFPacket(name, ring)
	if err != nil {
		t.Fatal(err)
	}
	if ring && (p.ring == nil || p.txr == nil) {
		t.Fatal("no receive or transmit ring")
	}
	if !ring && (p.ring != nil || p.txr != nil) {
		t.Fatal("rings although asked for none")
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestAFPacketForwarding runs ping and a TCP transfer between two
// namespaces through two AF_PACKET ports joined back to back. TCP from a
// veth carries partial checksums and GSO segments; the transfer passes only
// if the offload metadata crosses the ports intact.
//
// With "tx-off" the ports' devices have no transmit offloads, so the
// kernel must split the GSO segments the ports send in software: a port
// that sent them on a socket bypassing the qdisc layer would lose them
// all.
func TestAFPacketForwarding(t *testing.T) {
	t.Run("ring", func(t *testing.T) { testAFPacketForwarding(t, true, false) })
	t.Run("recvmmsg", func(t *testing.T) { testAFPacketForwarding(t, false, false) })
	t.Run("tx-off", func(t *testing.T) { testAFPacketForwarding(t, true, true) })
}

func testAFPacketForwarding(t *testing.T, ring, txOff bool) {
	ns1, ns2 := netns.New(t), netns.New(t)
	v1 := netns.NewVeth(t, ns1, "10.77.0.1/24", "02:00:00:00:77:01")
	v2 := netns.NewVeth(t, ns2, "10.77.0.2/24", "02:00:00:00:77:02")
	if txOff {
		netns.Run(t, "ethtool", "-K", v1.Outer, "tx", "off")
		netns.Run(t, "ethtool", "-K", v2.Outer, "tx", "off")
	}
	p1, p2 := openAFPacketMode(t, v1.Outer, ring), openAFPacketMode(t, v2.Outer, ring)
	wire(t, p1, p2)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(ns *netns.NS, args ...string) {
		t.Helper()
		cmd, err := ns.Tool(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	run(ns1, "ping", v2.Addr, "3")

	ns2.Serve(t, "tcp-sink", v2.Addr+":5001")
	run(ns1, "tcp-send", v2.Addr+":5001", "20000000")

	s1 := p1.Stats()
	if s1.RxPackets == 0 || s1.TxPackets == 0 {
		t.Errorf("%s counters did not move: %+v", p1.Name(), s1)
	}
	if s1.TxErrors != 0 {
		t.Errorf("%s transmit errors: %+v", p1.Name(), s1)
	}
	p1.Close()
	if err := p1.Send(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v, want ErrClosed", err)
	}
}

// TestAFPacketKernelDropsAfterClose fills a port's receive ring (nobody
// receives) and checks that the frames the kernel dropped are counted, and
// still are after Close: a switch reports its final counters after closing
// its ports.
func TestAFPacketKernelDropsAfterClose(t *testing.T) {
	ns := netns.New(t)
	v := netns.NewVeth(t, ns, "10.78.0.1/24", "02:00:00:00:78:01")
	p, err := newAFPacket(v.Outer, true)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sent := udpBlastFill(t, ns, v.Inner, "10.78.0.2", "02:00:00:00:78:02", "0.5", 30*time.Second, p.ring.frames)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	s := p.Stats()
	if s.RxDropped == 0 {
		t.Errorf("after %d datagrams into a %d-slot ring nobody read, RxDropped is 0: %+v", sent, p.ring.frames, s)
	}
}

// TestAFPacketPartialChecksum checks that a UDP datagram sent from a
// namespace arrives with its checksum partial, and that FinishChecksum
// makes it valid.
func TestAFPacketPartialChecksum(t *testing.T) {
	ns1 := netns.New(t)
	v1 := netns.NewVeth(t, ns1, "10.78.0.1/24", "02:00:00:00:78:01")
	p1 := openAFPacket(t, v1.Outer)
	// A static neighbour so the datagram goes out without ARP.
	ns1.Run(t, "ip", "neigh", "add", "10.78.0.2", "lladdr", "02:00:00:00:78:02", "dev", v1.Inner)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	blast, err := ns1.Tool(ctx, "udp-blast", "10.78.0.2:9", "0.3", "200")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := blast.CombinedOutput(); err != nil {
		t.Fatalf("udp-blast: %v\n%s", err, out)
	}
	pkts := []*Packet{NewPacket(MaxFrame)}
	// Recv blocks; closing the port ends the wait if no datagram comes.
	timeout := time.AfterFunc(10*time.Second, func() { p1.Close() })
	defer timeout.Stop()
	for {
		if _, err := p1.Recv(pkts); err != nil {
			t.Fatalf("no UDP datagram received: %v", err)
		}
		d := pkts[0].Data
		if len(d) >= 42 && binary.BigEndian.Uint16(d[12:]) == etherTypeIPv4 && d[23] == 17 {
			break
		}
	}
	p := pkts[0]
	if !p.Offload.NeedsCsum {
		t.Skipf("this kernel sent a complete checksum (%+v); nothing to finish", p.Offload)
	}
	if err := p.FinishChecksum(); err != nil {
		t.Fatal(err)
	}
	d := p.Data
	udpLen := len(d) - 34
	if s := Checksum(d[34:], pseudoUDP(d, udpLen)); s != 0xffff {
		t.Errorf("UDP checksum does not verify after FinishChecksum: sum %#04x", s)
	}
}

func pseudoUDP(d []byte, l4len int) uint32 {
	var s uint32
	for i := 26; i < 34; i += 2 {
		s += uint32(binary.BigEndian.Uint16(d[i:]))
	}
	return s + 17 + uint32(l4len)
}

// inNetns runs fn on a thread inside the named namespace; sockets fn opens
// stay in that namespace.
func inNetns(t *testing.T, name string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open("/var/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			t.Error(err)
			return
		}
		fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			return // leave the thread locked: the runtime discards it
		}
		runtime.UnlockOSThread()
	}()
	<-done
}

// TestAFPacketVLAN sends a VLAN-tagged frame into a veth: the receiving end
// hands the tag to the packet socket out of band (PACKET_AUXDATA), and the
// port must put it back into the frame.
func TestAFPacketVLAN(t *testing.T) {
	t.Run("ring", func(t *testing.T) { testAFPacketVLAN(t, true) })
	t.Run("recvmmsg", func(t *testing.T) { testAFPacketVLAN(t, false) })
}

func testAFPacketVLAN(t *testing.T, ring bool) {
	ns1 := netns.New(t)
	v1 := netns.NewVeth(t, ns1, "10.76.0.1/24", "02:00:00:00:76:01")
	rx := openAFPacketMode(t, v1.Outer, ring)
	var tx *AFPacket
	inNetns(t, ns1.Name, func() {
		var err error
		if tx, err = NewAFPacket(v1.Inner); err != nil {
			t.Error(err)
		}
	})
	if tx == nil {
		t.FailNow()
	}
	t.Cleanup(func() { tx.Close() })

	inner := tcpFrame([]byte("tagged"))
	frame := append(append(append([]byte(nil), inner[:12]...), 0x81, 0x00, 0x20, 0x0a), inner[12:]...)
	copy(frame[0:6], []byte{2, 0, 0, 0, 0x76, 2})
	p := NewPacket(len(frame))
	p.SetFrame(frame)
	got := []*Packet{NewPacket(MaxFrame)}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if err := tx.Send([]*Packet{p}); err != nil {
			t.Fatal(err)
		}
		if _, err := rx.Recv(got); err != nil {
			t.Fatal(err)
		}
		if string(got[0].Data[:6]) == string(frame[:6]) {
			break
		}
	}
	if g := got[0].Data; string(g) != string(frame) {
		t.Errorf("received\n% x\nwant\n% x", g, frame)
	}
}

func FuzzVLANFromAux(f *testing.F) {
	var b [auxCmsgSpace]byte
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_PACKET, unix.PACKET_AUXDATA
	h.SetLen(unix.CmsgLen(int(unsafe.Sizeof(unix.TpacketAuxdata{}))))
	aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&b[unix.SizeofCmsghdr]))
	aux.Status, aux.Vlan_tci = unix.TP_STATUS_VLAN_VALID, 10
	f.Add(b[:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
			b = append(make([]byte, 0, len(b)+8), b...) // the kernel's buffer is aligned
		}
		_, _, _ = vlanFromAux(b)
	})
}

// udpBlastFill sends small UDP datagrams from ns out of dev to ip (given a
// static neighbour at mac, so that they leave without ARP) for seconds, and
// skips the test when fewer went than the frames of a ring it is to fill.
// It returns how many it sent.
func udpBlastFill(t *testing.T, ns *netns.NS, dev, ip, mac, seconds string, timeout time.Duration, frames int) int {
	t.Helper()
	ns.Run(t, "ip", "neigh", "replace", ip, "lladdr", mac, "dev", dev, "nud", "permanent")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd, err := ns.Tool(ctx, "udp-blast", ip+":9", seconds, "18")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("udp-blast: %v", err)
	}
	var sent struct{ Packets int }
	if err := json.Unmarshal(out, &sent); err != nil {
		t.Fatalf("udp-blast output %q: %v", out, err)
	}
	if sent.Packets <= frames {
		t.Skipf("sent only %d datagrams, too few to fill a %d-slot ring", sent.Packets, frames)
	}
	return sent.Packets
}
