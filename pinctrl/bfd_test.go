package pinctrl

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
)

// ovsBFDUp is a control packet as Open vSwitch sends one on a tunnel
// (state Up, detect mult 3, desired min TX 100 ms, required min RX
// 1 s), written out byte by byte from RFC 5880's layout.
var ovsBFDUp = []byte{
	0x20,                   // version 1, diag 0
	0xc0,                   // state up, no flags
	0x03,                   // detect mult
	0x18,                   // length 24
	0x5d, 0x1a, 0x00, 0x07, // my discriminator
	0x00, 0x00, 0x12, 0x34, // your discriminator
	0x00, 0x01, 0x86, 0xa0, // desired min TX 100000 µs
	0x00, 0x0f, 0x42, 0x40, // required min RX 1000000 µs
	0x00, 0x00, 0x00, 0x00, // no echo
}

func TestParseBFDControl(t *testing.T) {
	p, err := ParseBFDControl(ovsBFDUp)
	if err != nil {
		t.Fatal(err)
	}
	want := BFDControl{Version: 1, State: BFDUp, DetectMult: 3, MyDisc: 0x5d1a0007, YourDisc: 0x1234,
		DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: time.Second}
	if p != want {
		t.Fatalf("parsed %+v; want %+v", p, want)
	}
	if got := p.Append(nil); hex.EncodeToString(got) != hex.EncodeToString(ovsBFDUp) {
		t.Fatalf("written back:\n %x\nwant\n %x", got, ovsBFDUp)
	}
	// Each flag in its bit.
	flags := BFDControl{State: BFDInit, Poll: true, CPI: true, Demand: true, Diag: BFDDiagNeighborDown, DetectMult: 1, MyDisc: 1}
	b := flags.Append(nil)
	if b[0] != 0x23 || b[1] != 0x80|0x20|0x08|0x02 {
		t.Fatalf("flags written as %#x %#x", b[0], b[1])
	}
	if back, err := ParseBFDControl(b); err != nil || back.State != BFDInit || !back.Poll || !back.CPI || !back.Demand || back.Final || back.Diag != BFDDiagNeighborDown {
		t.Fatalf("flags read back as %+v, %v", back, err)
	}
}

func TestParseBFDControlRejects(t *testing.T) {
	mod := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), ovsBFDUp...))
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrBFDShort},
		{"23 bytes", ovsBFDUp[:23], ErrBFDShort},
		{"version 0", mod(func(b []byte) []byte { b[0] = 0x00; return b }), ErrBFDVersion},
		{"version 2", mod(func(b []byte) []byte { b[0] = 0x40; return b }), ErrBFDVersion},
		{"length 20", mod(func(b []byte) []byte { b[3] = 20; return b }), ErrBFDLength},
		{"length past the payload", mod(func(b []byte) []byte { b[3] = 30; return b }), ErrBFDLength},
		{"auth", mod(func(b []byte) []byte { b[1] |= 0x04; b[3] = 26; return append(b, 1, 2) }), ErrBFDAuth},
		{"detect mult 0", mod(func(b []byte) []byte { b[2] = 0; return b }), ErrBFDDetectMult},
		{"multipoint", mod(func(b []byte) []byte { b[1] |= 0x01; return b }), ErrBFDMultipoint},
		{"my disc 0", mod(func(b []byte) []byte { copy(b[4:8], []byte{0, 0, 0, 0}); return b }), ErrBFDMyDisc},
		{"poll and final", mod(func(b []byte) []byte { b[1] |= 0x30; return b }), ErrBFDPollFinal},
	} {
		if _, err := ParseBFDControl(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, err, tc.want)
		}
	}
	// Trailing bytes past the length (padding) are allowed.
	if _, err := ParseBFDControl(append(append([]byte(nil), ovsBFDUp...), 0, 0)); err != nil {
		t.Errorf("padded packet: %v", err)
	}
}

func TestBFDIntervalsSaturate(t *testing.T) {
	p := BFDControl{DetectMult: 1, MyDisc: 1, DesiredMinTx: 2 * time.Hour, RequiredMinRx: -time.Second}
	back, err := ParseBFDControl(p.Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	if back.DesiredMinTx != 0xffffffff*time.Microsecond || back.RequiredMinRx != 0 {
		t.Errorf("intervals written as %v, %v; want the 32-bit maximum and 0", back.DesiredMinTx, back.RequiredMinRx)
	}
}

func FuzzParseBFDControl(f *testing.F) {
	f.Add(ovsBFDUp)
	f.Add(ovsBFDUp[:23])
	f.Add((&BFDControl{State: BFDDown, DetectMult: 3, MyDisc: 9, DesiredMinTx: time.Second}).Append(nil))
	f.Add((&BFDControl{State: BFDUp, Poll: true, DetectMult: 3, MyDisc: 9, YourDisc: 0x1111}).Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseBFDControl(b)
		if err != nil {
			return
		}
		back, err := ParseBFDControl(p.Append(nil))
		if err != nil {
			t.Fatalf("%+v written does not parse: %v", p, err)
		}
		back.Version = p.Version
		if back != p {
			t.Fatalf("round trip %+v → %+v", p, back)
		}
		// Whatever a session is fed, it never panics and stays in a
		// state of the four.
		s := NewBFDSession(0x1111, BFDConfig{Jitter: noJitter}, t0)
		_ = s.Receive(&p, t0)
		s.Advance(t0)
		s.Advance(t0.Add(time.Minute))
		if s.State() > BFDUp {
			t.Fatalf("state %d", s.State())
		}
	})
}

// FuzzBFDFrame feeds whole frames to both kinds of sessions: whatever
// arrives is dropped and counted or taken, never a panic.
func FuzzBFDFrame(f *testing.F) {
	ctl := &BFDControl{State: BFDDown, DetectMult: 3, MyDisc: 5, DesiredMinTx: time.Second, RequiredMinRx: time.Second}
	f.Add(bfdFrame(bfdTunnelDstMAC, localBFDMAC(hv2IP), bfdTunnelSrcIP, bfdTunnelDstIP, 50000, ctl))
	f.Add(bfdFrame(bfdTunnelDstMAC, localBFDMAC(hv2IP), netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::2"), 50000, ctl))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		tb := NewTunnelBFD()
		tb.Configure(TunnelBFDConfig{Port: 7, LocalIP: hv1IP, Peers: []TunnelPeer{{"hv2", hv2IP}}}, t0)
		pi := &dp.PacketIn{Frame: b}
		pi.Key.Set(flow.TunSrc, flow.IPv4(hv2IP))
		_ = tb.Receive(pi, t0)
		tb.Advance(t0)
		pb := NewPortBFD()
		pb.Configure([]PortBFDSpec{{Datapath: 7, DstIP: bfdTunnelSrcIP, SrcIP: bfdTunnelDstIP, Disc: 9, SrcPort: 49152,
			SrcMAC: bfdTunnelDstMAC, DstMAC: bfdTunnelDstMAC}}, t0)
		pi.Key.Set(flow.Metadata, 7)
		_ = pb.Receive(pi, t0)
		pb.Advance(t0, 37)
		ts, ps := tb.Stats(), pb.stats
		if ts.Malformed+ts.NoSession+ts.Refused > 1 || ps.Malformed+ps.NoSession+ps.Refused > 1 {
			t.Fatalf("one packet counted twice: %+v %+v", ts, ps)
		}
	})
}
