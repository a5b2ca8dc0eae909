package pinctrl

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

func uid(n byte) ovsdb.UUID {
	return ovsdb.MustParseUUID(fmt.Sprintf("00000000-0000-4000-8000-0000000000%02x", n))
}

// bfdRows: router lr (key 7) with ports lr-pub (key 2, a distributed
// gateway port whose cr-lr-pub hv1 holds) and lr-gw (key 3, an
// l3gateway port of hv2); BFD rows for peers of both, and one for a port
// that does not exist.
func bfdRows() ([]sb.BFD, []sb.PortBinding, []sb.DatapathBinding, []sb.Chassis, []sb.MACBinding) {
	hv1, hv2, lr := uid(1), uid(2), uid(3)
	bfds := []sb.BFD{
		{UUID: uid(10), LogicalPort: "lr-pub", DstIP: "192.168.50.1", SrcPort: 49152, Disc: 77, MinTx: 100, MinRx: 200, DetectMult: 3},
		{UUID: uid(11), LogicalPort: "lr-gw", DstIP: "172.16.0.9", SrcPort: 49153, Disc: 78, MinTx: 1000, MinRx: 1000, DetectMult: 5},
		{UUID: uid(12), LogicalPort: "nope", DstIP: "10.9.9.9", SrcPort: 49154, Disc: 79},
		{UUID: uid(13), LogicalPort: "lr-pub", DstIP: "not-an-ip", SrcPort: 49155, Disc: 80},
		{UUID: uid(14), LogicalPort: "lr-pub", DstIP: "10.200.0.5", SrcPort: 49156, Disc: 81, MinTx: 100, MinRx: 0, DetectMult: 3},
	}
	ports := []sb.PortBinding{
		{UUID: uid(20), LogicalPort: "lr-pub", Type: "patch", Datapath: lr, TunnelKey: 2, MAC: []string{"0a:00:00:00:ff:01 192.168.50.254/24 10.100.0.1/16"}},
		{UUID: uid(21), LogicalPort: "cr-lr-pub", Type: "chassisredirect", Datapath: lr, TunnelKey: 4, Chassis: &hv1},
		{UUID: uid(22), LogicalPort: "lr-gw", Type: "l3gateway", Datapath: lr, TunnelKey: 3, Chassis: &hv2, MAC: []string{"0a:00:00:00:ff:02 172.16.0.1/24"}},
	}
	dps := []sb.DatapathBinding{{UUID: lr, TunnelKey: 7}}
	chassis := []sb.Chassis{{UUID: hv1, Name: "hv1"}, {UUID: hv2, Name: "hv2"}}
	macs := []sb.MACBinding{{LogicalPort: "lr-pub", IP: "192.168.50.1", MAC: "0a:00:00:00:03:01"}}
	return bfds, ports, dps, chassis, macs
}

func TestPortBFDSpecs(t *testing.T) {
	bfds, ports, dps, chassis, macs := bfdRows()
	specs, problems := PortBFDSpecs("hv1", bfds, ports, dps, chassis, macs)
	if len(specs) != 2 {
		t.Fatalf("hv1 runs %d sessions: %+v; want lr-pub's two good rows", len(specs), specs)
	}
	s := specs[0]
	if s.Port != "lr-pub" || s.Datapath != 7 || s.PortKey != 2 || s.SrcIP.String() != "192.168.50.254" ||
		s.SrcMAC.String() != "0a:00:00:00:ff:01" || s.DstMAC.String() != "0a:00:00:00:03:01" || s.SrcPort != 49152 || s.Disc != 77 ||
		s.Config.MinTx != 100*time.Millisecond || s.Config.MinRx != 200*time.Millisecond || s.Config.DetectMult != 3 {
		t.Errorf("lr-pub's session: %+v", s)
	}
	// A peer outside the port's networks: its first address of the
	// family; no MAC binding: broadcast; min_rx 0: the peer sends nothing.
	if s := specs[1]; s.SrcIP.String() != "192.168.50.254" || s.DstMAC.String() != "ff:ff:ff:ff:ff:ff" || s.Config.MinRx >= 0 {
		t.Errorf("second session %+v", s)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "not-an-ip") {
		t.Errorf("problems %q; want the bad dst_ip", problems)
	}
	specs, _ = PortBFDSpecs("hv2", bfds, ports, dps, chassis, macs)
	if len(specs) != 1 || specs[0].Port != "lr-gw" || specs[0].SrcIP.String() != "172.16.0.1" {
		t.Errorf("hv2 runs %+v; want lr-gw's session from 172.16.0.1", specs)
	}
	if specs, _ := PortBFDSpecs("hv3", bfds, ports, dps, chassis, macs); len(specs) != 0 {
		t.Errorf("an unregistered chassis runs %+v", specs)
	}
}

func TestPortBFDSession(t *testing.T) {
	bfds, ports, dps, chassis, macs := bfdRows()
	specs, _ := PortBFDSpecs("hv1", bfds[:1], ports, dps, chassis, macs)
	b := NewPortBFD()
	b.Configure(specs, t0)
	// The peer: a bare session at 192.168.50.1.
	peer := NewBFDSession(0x5151, BFDConfig{MinTx: 100 * time.Millisecond, MinRx: 100 * time.Millisecond, Jitter: noJitter}, t0)
	peerIP, routerIP := netip.MustParseAddr("192.168.50.1"), netip.MustParseAddr("192.168.50.254")
	peerMAC := net.HardwareAddr{0x0a, 0, 0, 0, 3, 1}
	now := t0
	var first dp.PacketOut
	for i := 0; i < 50; i++ {
		out, _ := b.Advance(now, 37)
		for _, po := range out {
			if first.Frame == nil {
				first = po
			}
			ctl, err := bfdFromFrame(po.Frame)
			if err != nil {
				t.Fatal(err)
			}
			if err := peer.Receive(&ctl, now); err != nil {
				t.Fatalf("peer refused %+v: %v", ctl, err)
			}
		}
		for {
			ctl, ok := peer.Advance(now)
			if !ok {
				break
			}
			pi := &dp.PacketIn{UserData: []byte("handle_bfd_msg();"), Frame: bfdFrame(net.HardwareAddr{0x0a, 0, 0, 0, 0xff, 1}, peerMAC, peerIP, routerIP, 50000, &ctl)}
			pi.Key.Set(flow.Metadata, 7)
			if err := b.Receive(pi, now); err != nil {
				t.Fatalf("router refused %+v: %v", ctl, err)
			}
		}
		now = now.Add(20 * time.Millisecond)
	}
	if peer.State() != BFDUp || !strings.Contains(b.String(), "lr-pub 192.168.50.1: state up") {
		t.Fatalf("peer %v; router:\n%s", peer.State(), b)
	}
	if first.Table != 37 || first.Key.Get(flow.Metadata) != 7 || first.Key.Get(flow.Reg0+15) != 2 {
		t.Errorf("packet-out at table %d, metadata %d, outport %d; want 37, 7, 2", first.Table, first.Key.Get(flow.Metadata), first.Key.Get(flow.Reg0+15))
	}
	f, err := parseFrame(first.Frame)
	if err != nil {
		t.Fatal(err)
	}
	sport, dport, _, _ := f.udp()
	if f.src.String() != "0a:00:00:00:ff:01" || f.dst.String() != "0a:00:00:00:03:01" || f.ipSrc != routerIP || f.ipDst != peerIP || f.ttl != 255 || sport != 49152 || dport != 3784 {
		t.Errorf("frame %s → %s, %s → %s ttl %d, udp %d → %d", f.src, f.dst, f.ipSrc, f.ipDst, f.ttl, sport, dport)
	}
	if ch := b.statusChanges(); ch[uid(10)] != "up" {
		t.Errorf("status to write %v; want the row up", ch)
	}
	b.markWritten(map[ovsdb.UUID]string{uid(10): "up"}, nil)
	if ch := b.statusChanges(); len(ch) != 0 {
		t.Errorf("status to write after writing: %v", ch)
	}
	// Bad packets are counted, from an unknown peer too.
	if err := b.Receive(&dp.PacketIn{Frame: []byte{1, 2, 3}}, now); err == nil {
		t.Errorf("garbage accepted")
	}
	ctl, _ := peer.Advance(now.Add(time.Second))
	pi := &dp.PacketIn{Frame: bfdFrame(peerMAC, peerMAC, netip.MustParseAddr("192.168.50.9"), routerIP, 50000, &ctl)}
	pi.Key.Set(flow.Metadata, 7)
	if err := b.Receive(pi, now); err == nil {
		t.Errorf("packet from a peer without a session accepted")
	}
	if st := b.stats; st.Malformed != 1 || st.NoSession != 1 {
		t.Errorf("stats %+v", st)
	}
	// The row goes: so does the session.
	b.Configure(nil, now)
	if len(b.sessions) != 0 {
		t.Errorf("%d sessions left", len(b.sessions))
	}
}

func TestPortBFDIPv6(t *testing.T) {
	_, ports, dps, chassis, macs := bfdRows()
	ports[0].MAC = []string{"0a:00:00:00:ff:01 192.168.50.254/24 fd00:50::fe/64"}
	six := sb.BFD{UUID: uid(15), LogicalPort: "lr-pub", DstIP: "fd00:50::1", SrcPort: 49160, Disc: 90, MinTx: 100, MinRx: 100, DetectMult: 3}
	specs, problems := PortBFDSpecs("hv1", []sb.BFD{six}, ports, dps, chassis, macs)
	if len(specs) != 1 || specs[0].SrcIP.String() != "fd00:50::fe" || len(problems) != 0 {
		t.Fatalf("specs %+v, problems %q; want one from fd00:50::fe", specs, problems)
	}
	b := NewPortBFD()
	b.Configure(specs, t0)
	out, _ := b.Advance(t0, 37)
	if len(out) != 1 {
		t.Fatalf("%d packets at start; want 1", len(out))
	}
	f, err := parseFrame(out[0].Frame)
	if err != nil {
		t.Fatal(err)
	}
	_, dport, payload, err := f.udp()
	if err != nil || f.etype != 0x86dd || f.ipDst.String() != "fd00:50::1" || f.ttl != 255 || dport != BFDPort {
		t.Fatalf("frame: etype %#x, dst %s, hop limit %d, udp %d, %v", f.etype, f.ipDst, f.ttl, dport, err)
	}
	if fold(onesSum(pseudoSum(f.ipSrc, f.ipDst, protoUDP, len(f.l4)), f.l4)) != 0 {
		t.Errorf("bad UDP checksum")
	}
	if _, err := ParseBFDControl(payload); err != nil {
		t.Error(err)
	}
	// A port without an address of the peer's family cannot run it.
	ports[0].MAC = []string{"0a:00:00:00:ff:01 192.168.50.254/24"}
	if specs, problems := PortBFDSpecs("hv1", []sb.BFD{six}, ports, dps, chassis, macs); len(specs) != 0 || len(problems) != 1 {
		t.Errorf("IPv4-only port: specs %+v, problems %q", specs, problems)
	}
}
