package pinctrl

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

var (
	svcMAC   = net.HardwareAddr{0x0a, 0xfe, 0, 0, 0, 1}
	svcSrcIP = netip.MustParseAddr("10.0.0.254")
)

// testMonitor is a TCP monitor of vmIP:80 on switch 2's port sw0-p1.
func testMonitor(proto string) ServiceMonitor {
	return ServiceMonitor{UUID: ovsdb.UUIDFromBytes([16]byte{1}), Port: "sw0-p1", Switch: 2, PortKey: 1, Proto: proto,
		IP: vmIP, L4Port: 80, MAC: vmMAC, SrcMAC: svcMAC, SrcIP: svcSrcIP,
		Timing: svcTiming{Interval: time.Second, Timeout: 2 * time.Second, Successes: 2, Failures: 2}}
}

// fromBackend is a TCP segment from the backend to the monitor.
func fromBackend(sport, dport uint16, seq, ack uint32, flags byte) []byte {
	t := make([]byte, 20)
	binary.BigEndian.PutUint16(t, sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	binary.BigEndian.PutUint32(t[4:], seq)
	binary.BigEndian.PutUint32(t[8:], ack)
	t[12], t[13] = 5<<4, flags
	return ethFrame(svcMAC, vmMAC, etherIPv4, ipPacket(vmIP, svcSrcIP, protoTCP, 64, t, 16))
}

// unreachable is the backend's ICMP port unreachable quoting probe.
func unreachable(probe []byte) []byte {
	icmp := append([]byte{3, 3, 0, 0, 0, 0, 0, 0}, probe[14:]...)
	return ethFrame(svcMAC, vmMAC, etherIPv4, ipPacket(vmIP, svcSrcIP, protoICMP, 64, icmp, 2))
}

// TestSvcProbe: the probes are a SYN and a UDP datagram from the
// monitor's MAC and address to the backend's, with valid checksums,
// sent out of the switch to the backend's port.
func TestSvcProbe(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		proto string
		want  uint8
	}{{"tcp", protoTCP}, {"udp", protoUDP}} {
		m := testMonitor(tc.proto)
		b := svcProbe(&m, 40001, 777)
		f, err := parseFrame(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.proto, err)
		}
		if f.dst.String() != vmMAC.String() || f.src.String() != svcMAC.String() || f.ipSrc != svcSrcIP || f.ipDst != vmIP || f.proto != tc.want {
			t.Errorf("%s: probe %s → %s, %s → %s proto %d", tc.proto, f.src, f.dst, f.ipSrc, f.ipDst, f.proto)
		}
		if binary.BigEndian.Uint16(f.l4) != 40001 || binary.BigEndian.Uint16(f.l4[2:]) != 80 {
			t.Errorf("%s: ports %x", tc.proto, f.l4[:4])
		}
		if fold(onesSum(0, f.ipHdr)) != 0 || fold(onesSum(pseudoSum(f.ipSrc, f.ipDst, f.proto, len(f.l4)), f.l4)) != 0 {
			t.Errorf("%s: bad checksum", tc.proto)
		}
		if f.ttl != 63 || binary.BigEndian.Uint16(f.ipHdr[6:]) != 0x4000 {
			t.Errorf("%s: TTL %d, flags %#x; want 63 and DF, as ovn-controller's", tc.proto, f.ttl, binary.BigEndian.Uint16(f.ipHdr[6:]))
		}
		if tc.proto == "udp" && len(f.l4) != 16 {
			t.Errorf("udp: datagram of %d bytes, want 8 zero bytes of payload", len(f.l4))
		}
		if tc.proto == "tcp" && (f.l4[13] != 0x02 || binary.BigEndian.Uint32(f.l4[4:]) != 777) {
			t.Errorf("tcp: flags %#x seq %d, want a SYN with seq 777", f.l4[13], binary.BigEndian.Uint32(f.l4[4:]))
		}
		po := e.svcPacketOut(&m, b)
		if po.Table != e.layout.IngressOutput || po.Key.Get(flow.Metadata) != 2 || po.Key.Get(flow.Reg0+15) != 1 || po.Actions != nil {
			t.Errorf("%s: packet-out at table %d, metadata %d, outport %d", tc.proto, po.Table, po.Key.Get(flow.Metadata), po.Key.Get(flow.Reg0+15))
		}
	}
	m := testMonitor("tcp")
	f, _ := parseFrame(svcResetFrame(&m, 40001, 778))
	if f.l4[13] != 0x04 || binary.BigEndian.Uint32(f.l4[4:]) != 778 {
		t.Errorf("reset: flags %#x seq %d", f.l4[13], binary.BigEndian.Uint32(f.l4[4:]))
	}
}

// TestParseSvcReply: SYN-ACK, RST and ICMP unreachable are read for the
// service and the probe they answer; anything else is an error.
func TestParseSvcReply(t *testing.T) {
	udp := testMonitor("udp")
	udpProbe := svcProbe(&udp, 40002, 0)
	icmp6 := func() []byte {
		m := testMonitor("udp")
		m.IP, m.SrcIP = vmIP6, routerIP6
		p := svcProbe(&m, 40003, 0)
		icmp := append([]byte{1, 4, 0, 0, 0, 0, 0, 0}, p[14:]...)
		return ethFrame(svcMAC, vmMAC, etherIPv6, ipPacket(vmIP6, routerIP6, protoICMPv6, 64, icmp, 2))
	}()
	for _, tc := range []struct {
		name  string
		frame []byte
		want  SvcReply
		err   bool
	}{
		{"syn-ack", fromBackend(80, 40001, 9, 778, 0x12), SvcReply{IP: vmIP, L4Port: 80, Proto: "tcp", ProbePort: 40001, Ack: 778, Kind: svcSynAck}, false},
		{"rst", fromBackend(80, 40001, 0, 778, 0x14), SvcReply{IP: vmIP, L4Port: 80, Proto: "tcp", ProbePort: 40001, Ack: 778, Kind: svcReset}, false},
		{"udp unreachable", unreachable(udpProbe), SvcReply{IP: vmIP, L4Port: 80, Proto: "udp", ProbePort: 40002, Kind: svcUnreachable}, false},
		{"udp unreachable, quote cut", unreachable(udpProbe[:14+20+4]), SvcReply{IP: vmIP, L4Port: 80, Proto: "udp", ProbePort: 40002, Kind: svcUnreachable}, false},
		{"icmpv6 unreachable", icmp6, SvcReply{IP: vmIP6, L4Port: 80, Proto: "udp", ProbePort: 40003, Kind: svcUnreachable}, false},
		{"bare ack", fromBackend(80, 40001, 9, 778, 0x10), SvcReply{}, true},
		{"truncated", fromBackend(80, 40001, 9, 778, 0x12)[:40], SvcReply{}, true},
		{"arp", ethFrame(svcMAC, vmMAC, etherARP, make([]byte, 28)), SvcReply{}, true},
		{"echo reply", ethFrame(svcMAC, vmMAC, etherIPv4, ipPacket(vmIP, svcSrcIP, protoICMP, 64, []byte{0, 0, 0, 0, 0, 1, 0, 1}, 2)), SvcReply{}, true},
		{"unreachable quoting tcp", unreachable(fromBackend(80, 1, 0, 0, 2)), SvcReply{}, true},
		{"unreachable quoting garbage", unreachable(make([]byte, 20)), SvcReply{}, true},
	} {
		got, err := parseSvcReply(tc.frame)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v (error %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}

// TestSvcCheck: the state machine counts outcomes in a row and changes
// status only after success_count or failure_count of them; no answer is
// a failure for TCP and a success for UDP.
func TestSvcCheck(t *testing.T) {
	t0 := time.Unix(1000, 0)
	synAck := func(c *svcCheck) *SvcReply {
		return &SvcReply{ProbePort: c.sport, Ack: c.seq + 1, Kind: svcSynAck}
	}
	rst := func(c *svcCheck) *SvcReply { return &SvcReply{ProbePort: c.sport, Kind: svcReset} }
	icmp := func(c *svcCheck) *SvcReply { return &SvcReply{ProbePort: c.sport, Kind: svcUnreachable} }
	for _, tc := range []struct {
		name   string
		udp    bool
		events string // per probe: a SYN-ACK, r RST, u unreachable, - no answer
		want   []string
	}{
		{"tcp up", false, "aaa", []string{"", "online", "online"}},
		{"tcp refused", false, "rr", []string{"", "offline"}},
		{"tcp silent", false, "--", []string{"", "offline"}},
		{"tcp flapping never decides", false, "arar", []string{"", "", "", ""}},
		{"tcp down then up", false, "rraa", []string{"", "offline", "offline", "online"}},
		{"udp silent is up", true, "--", []string{"", "online"}},
		{"udp unreachable", true, "uu-", []string{"", "offline", "offline"}},
	} {
		c := &svcCheck{timing: svcTiming{Interval: time.Second, Timeout: 3 * time.Second, Successes: 2, Failures: 2}, udp: tc.udp, next: t0}
		now := t0
		for i, ev := range tc.events {
			for !c.due(now) {
				now = now.Add(100 * time.Millisecond)
				c.expire(now)
			}
			sport, seq := probeID(&ServiceMonitor{}, c.sent)
			c.probed(now, sport, seq)
			now = now.Add(100 * time.Millisecond)
			var r *SvcReply
			switch ev {
			case 'a':
				r = synAck(c)
			case 'r':
				r = rst(c)
			case 'u':
				r = icmp(c)
			}
			if r != nil {
				late := *r
				late.ProbePort++
				if c.answer(&late, now) {
					t.Errorf("%s: a reply to another probe was taken", tc.name)
				}
				if !c.answer(r, now) {
					t.Errorf("%s: probe %d: reply not taken", tc.name, i)
				}
			} else {
				for c.waiting {
					now = now.Add(100 * time.Millisecond)
					c.expire(now)
				}
				if got := now.Sub(c.sentAt); got != c.timing.Timeout {
					t.Errorf("%s: probe %d timed out after %v", tc.name, i, got)
				}
			}
			if c.status != tc.want[i] {
				t.Errorf("%s: after probe %d status %q, want %q", tc.name, i, c.status, tc.want[i])
			}
		}
	}
	// A SYN-ACK that acknowledges another sequence number is not ours.
	c := &svcCheck{timing: svcTiming{Interval: time.Second, Timeout: time.Second, Successes: 1, Failures: 1}, next: t0}
	c.probed(t0, 40000, 5)
	if c.answer(&SvcReply{ProbePort: 40000, Ack: 7, Kind: svcSynAck}, t0) {
		t.Error("a SYN-ACK for another sequence number was taken")
	}
}

// TestHandleSvcCheck: a handle_svc_check packet-in gives its reply, with
// the port it came from, to the prober.
func TestHandleSvcCheck(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	pi := packetIn("handle_svc_check(inport);", fromBackend(80, 40001, 9, 778, 0x12), 2, 27, nil)
	out, err := e.Handle(pi, testState())
	if err != nil {
		t.Fatal(err)
	}
	want := SvcReply{LogicalPort: "sw0-p1", IP: vmIP, L4Port: 80, Proto: "tcp", ProbePort: 40001, Ack: 778, Kind: svcSynAck}
	if len(out.SvcReplies) != 1 || out.SvcReplies[0] != want || len(out.Packets) != 0 {
		t.Errorf("got %+v, want %+v", out, want)
	}
	pi.Key.Set(flow.Reg0+14, 9)
	if _, err := e.Handle(pi, testState()); err == nil {
		t.Error("a reply from an unknown port was taken")
	}
}

// TestProbeServices: the runner probes a monitor of the state, closes a
// SYN-ACK's connection with a RST, and hands the status to the writer
// once it is decided, not again while it is pending, and not when the
// Southbound has it; a row it cannot probe is written "error".
func TestProbeServices(t *testing.T) {
	sw := &recordingSwitch{}
	p, err := New(Config{Switch: sw})
	if err != nil {
		t.Fatal(err)
	}
	p.fixedState = testState()
	m := testMonitor("tcp")
	p.fixedState.ServiceMonitors = []ServiceMonitor{m}
	t0 := time.Unix(1000, 0)
	now := t0
	answer := func() {
		t.Helper()
		last := sw.pos[len(sw.pos)-1]
		f, err := parseFrame(last.Frame)
		if err != nil || f.l4[13] != 0x02 {
			t.Fatalf("last packet-out is not a SYN (%v)", err)
		}
		sport, seq := binary.BigEndian.Uint16(f.l4), binary.BigEndian.Uint32(f.l4[4:])
		pi := packetIn("handle_svc_check(inport);", fromBackend(80, sport, 1, seq+1, 0x12), 2, 27, nil)
		p.handle(pi, now)
		rst, err := parseFrame(sw.pos[len(sw.pos)-1].Frame)
		if err != nil || rst.l4[13] != 0x04 || binary.BigEndian.Uint32(rst.l4[4:]) != seq+1 || binary.BigEndian.Uint16(rst.l4) != sport {
			t.Fatalf("no RST after the SYN-ACK (%v)", err)
		}
	}
	for i := range 2 {
		p.probeServices(now)
		if len(sw.pos) != 2*i+1 {
			t.Fatalf("probe %d: %d packet-outs", i, len(sw.pos))
		}
		answer()
		now = now.Add(time.Second)
	}
	p.probeServices(now) // decided online: handed to the writer, and the third probe
	select {
	case s := <-p.svc.writes:
		if s.id != m.UUID || s.status != sb.ServiceMonitorStatusOnline {
			t.Errorf("wrote %+v", s)
		}
	default:
		t.Fatal("online status not written")
	}
	answer()
	now = now.Add(time.Second)
	p.probeServices(now)
	if len(p.svc.writes) != 0 {
		t.Error("a pending status was written again")
	}
	if got := p.Stats().Services; got != (SvcStats{Online: 1}) {
		t.Errorf("service stats %+v, want one online", got)
	}
	if !strings.Contains(p.Stats().String(), "service monitors: online 1, offline 0, undecided 0, error 0") {
		t.Errorf("pinctrl/show:\n%s", p.Stats())
	}
	p.fixedState.ServiceMonitors[0].Status = sb.ServiceMonitorStatusOnline
	p.probeServices(now.Add(time.Second))
	if len(p.svc.writes) != 0 || len(p.svc.pending) != 0 {
		t.Error("a status the Southbound has was written")
	}
	bad := testMonitor("tcp")
	bad.UUID, bad.Problems = ovsdb.UUIDFromBytes([16]byte{2}), "bad ip"
	p.fixedState.ServiceMonitors = []ServiceMonitor{bad}
	n := len(sw.pos)
	p.probeServices(now.Add(2 * time.Second))
	if s := <-p.svc.writes; s.status != sb.ServiceMonitorStatusError || len(sw.pos) != n || len(p.svc.checks) != 0 {
		t.Errorf("unprobeable row: wrote %+v, %d probes, %d checks left", s, len(sw.pos)-n, len(p.svc.checks))
	}
	if got := p.Stats().Services; got != (SvcStats{Error: 1}) {
		t.Errorf("service stats %+v, want one error", got)
	}
}

// TestParseSvcTiming: options with ovn-controller's defaults; bad
// numbers are errors.
func TestParseSvcTiming(t *testing.T) {
	got, err := parseSvcTiming(nil)
	if err != nil || got != (svcTiming{5 * time.Second, 20 * time.Second, 3, 3}) {
		t.Errorf("defaults %+v, %v", got, err)
	}
	got, err = parseSvcTiming(map[string]string{"interval": "1", "timeout": "2", "success_count": "1", "failure_count": "4"})
	if err != nil || got != (svcTiming{time.Second, 2 * time.Second, 1, 4}) {
		t.Errorf("set %+v, %v", got, err)
	}
	for _, bad := range []string{"0", "-1", "x", ""} {
		if _, err := parseSvcTiming(map[string]string{"interval": bad}); err == nil {
			t.Errorf("interval %q taken", bad)
		}
	}
}

// TestPortMAC: the MAC of the entry with the address, else the first.
func TestPortMAC(t *testing.T) {
	entries := []string{"0a:00:00:00:00:01 10.0.0.5", "0a:00:00:00:00:02 10.0.0.11 aef0::11"}
	for _, tc := range []struct {
		ip   string
		want string
	}{{"10.0.0.11", "0a:00:00:00:00:02"}, {"10.0.0.5", "0a:00:00:00:00:01"}, {"10.0.0.99", "0a:00:00:00:00:01"}} {
		if got := portMAC(entries, netip.MustParseAddr(tc.ip)); got.String() != tc.want {
			t.Errorf("%s: %s, want %s", tc.ip, got, tc.want)
		}
	}
	if got := portMAC([]string{"unknown", ""}, vmIP); got != nil {
		t.Errorf("no MAC: %s", got)
	}
}

// FuzzParseSvcReply: no frame crashes the reply parser.
func FuzzParseSvcReply(f *testing.F) {
	m := testMonitor("udp")
	f.Add(fromBackend(80, 40001, 9, 778, 0x12))
	f.Add(unreachable(svcProbe(&m, 40002, 0)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseSvcReply(b)
		if err == nil && (r.Kind == 0 || !r.IP.IsValid()) {
			t.Errorf("accepted %+v", r)
		}
	})
}

// TestLocalServiceMonitors: only rows of ports bound here are probed,
// with the port's MAC and place; a row with bad columns is kept with its
// problems (to be written "error").
func TestLocalServiceMonitors(t *testing.T) {
	me, other := ovsdb.UUIDFromBytes([16]byte{9}), ovsdb.UUIDFromBytes([16]byte{8})
	dpID := ovsdb.UUIDFromBytes([16]byte{7})
	dps := map[ovsdb.UUID]*Datapath{dpID: {UUID: dpID, Key: 2}}
	ports := map[string]*sb.PortBinding{
		"vm2": {LogicalPort: "vm2", Datapath: dpID, TunnelKey: 3, Chassis: &me, MAC: []string{"0a:00:00:00:00:02 10.0.0.12"}},
		"vm3": {LogicalPort: "vm3", Datapath: dpID, TunnelKey: 4, Chassis: &other, MAC: []string{"0a:00:00:00:00:03 10.0.0.13"}},
	}
	udp, offline := "udp", "offline"
	rows := []sb.ServiceMonitor{
		{UUID: ovsdb.UUIDFromBytes([16]byte{1}), LogicalPort: "vm2", IP: "10.0.0.12", Port: 80, SrcIP: "10.0.0.254", SrcMAC: "0a:fe:00:00:00:01",
			Options: map[string]string{"interval": "2"}},
		{UUID: ovsdb.UUIDFromBytes([16]byte{2}), LogicalPort: "vm2", IP: "10.0.0.12", Port: 53, Protocol: &udp, Status: &offline,
			SrcIP: "10.0.0.254", SrcMAC: "0a:fe:00:00:00:01"},
		{UUID: ovsdb.UUIDFromBytes([16]byte{3}), LogicalPort: "vm3", IP: "10.0.0.13", Port: 80, SrcIP: "10.0.0.254", SrcMAC: "0a:fe:00:00:00:01"},
		{UUID: ovsdb.UUIDFromBytes([16]byte{4}), LogicalPort: "vm2", IP: "10.0.0.x", Port: 0, SrcIP: "10.0.0.254", SrcMAC: "bad",
			Options: map[string]string{"timeout": "0"}},
		{UUID: ovsdb.UUIDFromBytes([16]byte{5}), LogicalPort: "gone", IP: "10.0.0.14", Port: 80},
	}
	got := localServiceMonitors(rows, me, ports, dps)
	if len(got) != 3 {
		t.Fatalf("%d monitors, want 3 (vm2's): %+v", len(got), got)
	}
	tcp := got[0]
	if tcp.Proto != "tcp" || tcp.Switch != 2 || tcp.PortKey != 3 || tcp.MAC.String() != "0a:00:00:00:00:02" || tcp.L4Port != 80 ||
		tcp.Timing != (svcTiming{2 * time.Second, 20 * time.Second, 3, 3}) || tcp.Problems != "" || tcp.Status != "" {
		t.Errorf("tcp monitor %+v", tcp)
	}
	if u := got[1]; u.Proto != "udp" || u.Status != "offline" || u.Problems != "" {
		t.Errorf("udp monitor %+v", u)
	}
	if b := got[2]; b.Problems == "" || !strings.Contains(b.Problems, "bad ip") || !strings.Contains(b.Problems, "bad src_mac") ||
		!strings.Contains(b.Problems, "bad port") || !strings.Contains(b.Problems, "bad timeout") {
		t.Errorf("bad row's problems %q", b.Problems)
	}
	if got := localServiceMonitors(rows, ovsdb.UUID{}, ports, dps); got != nil {
		t.Errorf("without a chassis: %+v", got)
	}
}

// BenchmarkProbeServices: one prober tick over 1,000 monitors, each
// probed every second (so a tenth of ticks send each one's probe).
func BenchmarkProbeServices(b *testing.B) {
	p, err := New(Config{Switch: &countingSwitch{}})
	if err != nil {
		b.Fatal(err)
	}
	p.fixedState = testState()
	for i := range 1000 {
		m := testMonitor("tcp")
		m.UUID = ovsdb.UUIDFromBytes([16]byte{byte(i >> 8), byte(i), 1})
		m.L4Port = uint16(1000 + i)
		p.fixedState.ServiceMonitors = append(p.fixedState.ServiceMonitors, m)
	}
	now := time.Unix(1000, 0)
	b.ResetTimer()
	for range b.N {
		p.probeServices(now)
		now = now.Add(svcTick)
	}
}
