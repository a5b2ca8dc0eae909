package pinctrl

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
)

var (
	hv1IP = netip.MustParseAddr("192.168.0.1")
	hv2IP = netip.MustParseAddr("192.168.0.2")
)

// tunnelIn is the packet-in of the tunnel rule for po, sent by from.
func tunnelIn(po dp.PacketOut, from netip.Addr) *dp.PacketIn {
	pi := &dp.PacketIn{Frame: po.Frame, UserData: []byte(TunnelBFDUserData)}
	pi.Key.Set(flow.TunSrc, flow.IPv4(from))
	return pi
}

func TestTunnelBFD(t *testing.T) {
	fast := BFDConfig{MinTx: 50 * time.Millisecond, MinRx: 50 * time.Millisecond, Jitter: noJitter}
	a, b := NewTunnelBFD(), NewTunnelBFD()
	a.Configure(TunnelBFDConfig{Port: 7, LocalIP: hv1IP, Session: fast, Peers: []TunnelPeer{{"hv2", hv2IP}, {"hv1", hv1IP}}}, t0)
	b.Configure(TunnelBFDConfig{Port: 9, LocalIP: hv2IP, Session: fast, Peers: []TunnelPeer{{"hv1", hv1IP}}}, t0)
	if n := len(a.Status()); n != 1 {
		t.Fatalf("a has %d sessions; want 1 (none with itself)", n)
	}
	now := t0
	var sawFrame bool
	for i := 0; i < 100; i++ {
		outA, _, _ := a.Advance(now)
		outB, _, _ := b.Advance(now)
		for _, po := range outA {
			if !sawFrame {
				sawFrame = true
				checkTunnelFrame(t, po, hv2IP, 7)
			}
			if err := b.Receive(tunnelIn(po, hv1IP), now); err != nil {
				t.Fatalf("b refused a's packet: %v", err)
			}
		}
		for _, po := range outB {
			if err := a.Receive(tunnelIn(po, hv2IP), now); err != nil {
				t.Fatalf("a refused b's packet: %v", err)
			}
		}
		now = now.Add(10 * time.Millisecond)
	}
	if s := a.Status()["hv2"]; s.State != BFDUp || s.RemoteState != BFDUp {
		t.Fatalf("a's session with hv2: %+v; want up, remote up", s)
	}
	if s := b.Status()["hv1"]; s.State != BFDUp {
		t.Fatalf("b's session with hv1: %+v; want up", s)
	}
	// hv2 goes silent: a's session goes down (3 × 50 ms) and says so.
	var changed bool
	for i := 0; i < 30; i++ {
		_, c, _ := a.Advance(now)
		changed = changed || c
		now = now.Add(10 * time.Millisecond)
	}
	if s := a.Status()["hv2"]; s.State != BFDDown || s.Diag != BFDDiagDetectExpired || !changed {
		t.Fatalf("after 300 ms of silence: %+v, changed %v; want down, diag 1, changed", s, changed)
	}
	if !strings.Contains(a.String(), "hv2 192.168.0.2: state down, diag 1") {
		t.Errorf("bfd/show:\n%s", a.String())
	}
	// Removing the peer ends its session.
	a.Configure(TunnelBFDConfig{Port: 7, LocalIP: hv1IP, Session: fast}, now)
	if n := len(a.Status()); n != 0 {
		t.Errorf("%d sessions after the peer went", n)
	}
}

// checkTunnelFrame checks a packet-out against what Open vSwitch sends on
// a BFD tunnel.
func checkTunnelFrame(t *testing.T, po dp.PacketOut, to netip.Addr, port uint32) {
	t.Helper()
	if got, want := flow.ActionsString(po.Actions), "load:0x0->tun_id,set_field:"+to.String()+"->tun_dst,output:"+strconv.Itoa(int(port)); got != want {
		t.Errorf("actions %q; want %q", got, want)
	}
	b := po.Frame
	if len(b) != 14+20+8+24 {
		t.Fatalf("frame of %d bytes; want 66", len(b))
	}
	if net.HardwareAddr(b[0:6]).String() != "00:23:20:00:00:01" || binary.BigEndian.Uint16(b[12:]) != 0x0800 {
		t.Errorf("ethernet %x", b[:14])
	}
	ip := b[14:34]
	if ip[8] != 255 || ip[9] != 17 || netip.AddrFrom4([4]byte(ip[12:16])) != bfdTunnelSrcIP || netip.AddrFrom4([4]byte(ip[16:20])) != bfdTunnelDstIP {
		t.Errorf("ip header %x: want TTL 255, UDP, 169.254.1.1 → 169.254.1.0", ip)
	}
	if fold(onesSum(0, ip)) != 0 {
		t.Errorf("bad ip checksum")
	}
	udp := b[34:42]
	if sp, dp := binary.BigEndian.Uint16(udp), binary.BigEndian.Uint16(udp[2:]); sp < BFDSrcPortMin || dp != BFDPort {
		t.Errorf("udp ports %d → %d", sp, dp)
	}
	if _, err := ParseBFDControl(b[42:]); err != nil {
		t.Errorf("control packet: %v", err)
	}
}

func TestTunnelBFDDropsBadPackets(t *testing.T) {
	a := NewTunnelBFD()
	a.Configure(TunnelBFDConfig{Port: 7, LocalIP: hv1IP, Peers: []TunnelPeer{{"hv2", hv2IP}}}, t0)
	good := bfdFrame(bfdTunnelDstMAC, localBFDMAC(hv2IP), bfdTunnelSrcIP, bfdTunnelDstIP, 50000,
		&BFDControl{State: BFDDown, DetectMult: 3, MyDisc: 5, DesiredMinTx: time.Second, RequiredMinRx: time.Second})
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"empty", nil},
		{"truncated ethernet", good[:10]},
		{"truncated udp", good[:38]},
		{"short control packet", good[:60]},
		{"arp", append(append([]byte(nil), good[:12]...), 0x08, 0x06, 0, 1)},
	} {
		if err := a.Receive(&dp.PacketIn{Frame: tc.frame}, t0); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if st := a.Stats(); st.Malformed != 5 {
		t.Errorf("malformed %d; want 5", st.Malformed)
	}
	// From a chassis without a session.
	pi := &dp.PacketIn{Frame: good}
	pi.Key.Set(flow.TunSrc, flow.IPv4(netip.MustParseAddr("192.168.0.9")))
	if err := a.Receive(pi, t0); err == nil || a.Stats().NoSession != 1 {
		t.Errorf("packet from an unknown chassis: %v, %+v", err, a.Stats())
	}
	pi.Key.Set(flow.TunSrc, flow.IPv4(hv2IP))
	if err := a.Receive(pi, t0); err != nil {
		t.Errorf("good packet: %v", err)
	}
	if s := a.Status()["hv2"]; s.State != BFDInit {
		t.Errorf("after a Down packet: %v; want init", s.State)
	}
}
