package pinctrl

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
)

// countingSwitch counts packet-outs.
type countingSwitch struct {
	mu   sync.Mutex
	outs int
}

func (s *countingSwitch) PacketIns() <-chan dp.PacketIn { return nil }
func (s *countingSwitch) Execute(dp.PacketOut) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outs++
	return nil
}

func newTestPinctrl(t *testing.T, cfg Config) (*Pinctrl, *countingSwitch) {
	t.Helper()
	sw := &countingSwitch{}
	cfg.Switch = sw
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.fixedState = testState()
	return p, sw
}

// TestRateLimit: a flood of one kind is cut to its rate, counted, and
// does not touch another kind's budget.
func TestRateLimit(t *testing.T) {
	p, sw := newTestPinctrl(t, Config{Limits: map[string]Limit{"arp": {Rate: 100, Burst: 50}}})
	ping := ethFrame(routerMAC, vmMAC, etherIPv4, ipPacket(vmIP, farIP, protoICMP, 64, []byte{8, 0, 0, 0, 0, 1, 0, 1}, 2))
	arp := packetIn("arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.spa = reg1; arp.tpa = reg0; arp.op = 1; output; };", ping, 1, 29, nil)
	t0 := time.Unix(1000, 0)
	for range 200 {
		p.handle(arp, t0)
	}
	// Half a second later, 50 more tokens.
	for range 200 {
		p.handle(arp, t0.Add(500*time.Millisecond))
	}
	icmp := packetIn("icmp4 { eth.dst <-> eth.src; ip4.dst <-> ip4.src; output; };", ping, 1, 29, nil)
	p.handle(icmp, t0)
	s := p.Stats()
	if got := s.Kinds["arp"]; got.Handled != 100 || got.RateDropped != 300 || got.Errors != 0 {
		t.Errorf("arp counters %+v, want 100 handled, 300 rate-dropped", got)
	}
	if got := s.Kinds["icmp4"]; got.Handled != 1 {
		t.Errorf("icmp4 counters %+v", got)
	}
	if sw.outs != 101 {
		t.Errorf("%d packet-outs, want 101", sw.outs)
	}
	if !strings.Contains(s.String(), "arp: handled 100, rate-dropped 300, errors 0") {
		t.Errorf("stats:\n%s", s)
	}
}

// TestMACBindingDedup: a binding already in the Southbound, or already
// sent, is not sent again; a full queue drops and counts.
func TestMACBindingDedup(t *testing.T) {
	p, _ := newTestPinctrl(t, Config{MACBindingQueue: 2})
	putARP := func(ip uint32, mac uint64) *dp.PacketIn {
		arp := make([]byte, 28)
		binary.BigEndian.PutUint32(arp[14:], ip)
		pi := packetIn("put_arp(inport, arp.spa, arp.sha);", ethFrame(routerMAC, vmMAC, etherARP, arp), 1, 10, nil)
		pi.Key.Set(flow.ARPSPA, uint64(ip))
		pi.Key.Set(flow.ARPSHA, mac)
		return pi
	}
	now := time.Unix(1000, 0)
	p.fixedState.MACBindings[BindingKey{"lr0-sw0", vmIP}] = "50:54:00:00:00:01"
	p.handle(putARP(0x0a00000b, 0x505400000001), now) // in the Southbound
	for range 5 {
		p.handle(putARP(0x0a00000c, 0x505400000002), now) // sent once
	}
	p.handle(putARP(0x0a00000c, 0x505400000003), now) // moved: sent again
	p.handle(putARP(0x0a00000d, 0x505400000004), now) // queue full
	m := p.Stats().MACBindings
	if m.Learned != 2 || m.Duplicates != 5 || m.QueueDrops != 1 {
		t.Errorf("MAC binding counters %+v, want 2 learned, 5 duplicates, 1 queue drop", m)
	}
	if len(p.bindings) != 2 {
		t.Errorf("%d bindings queued, want 2", len(p.bindings))
	}
}

// TestUnsupportedCounted: a controller action pinctrl does not do yet is
// counted as an error, not answered, and does not stop it.
func TestUnsupportedCounted(t *testing.T) {
	p, sw := newTestPinctrl(t, Config{})
	pi := packetIn(`sctp_abort { output; };`, ethFrame(routerMAC, vmMAC, etherIPv4, nil), 2, 10, nil)
	p.handle(pi, time.Unix(1000, 0))
	if got := p.Stats().Kinds["sctp_abort"]; got.Errors != 1 || sw.outs != 0 {
		t.Errorf("sctp_abort counters %+v, %d packet-outs", got, sw.outs)
	}
}

// TestPutFDB: put_fdb learns the input port of a MAC on the switch,
// once; a MAC that moved is learned again.
func TestPutFDB(t *testing.T) {
	p, _ := newTestPinctrl(t, Config{})
	pi := packetIn(`put_fdb(inport, eth.src);`, ethFrame(routerMAC, vmMAC, etherIPv4, nil), 2, 11, nil)
	pi.Key.Set(flow.EthSrc, 0x505400000001)
	now := time.Unix(1000, 0)
	for range 3 {
		p.handle(pi, now)
	}
	p.fixedState.Datapaths[2].PortNames[2] = "sw0-p2"
	pi.Key.Set(flow.Reg0+14, 2)
	p.handle(pi, now)
	s := p.Stats()
	if s.FDB.Learned != 2 || s.FDB.Duplicates != 2 || s.Kinds["put_fdb"].Handled != 4 {
		t.Errorf("fdb counters %+v, kind %+v", s.FDB, s.Kinds["put_fdb"])
	}
	first := <-p.fdbs
	if first.Switch != 2 || first.MAC != "50:54:00:00:00:01" || first.PortKey != 1 {
		t.Errorf("FDB entry %+v", first)
	}
}

// recordingSwitch keeps the packet-outs.
type recordingSwitch struct {
	countingSwitch
	pos []dp.PacketOut
}

func (s *recordingSwitch) Execute(po dp.PacketOut) error {
	s.pos = append(s.pos, po)
	return nil
}

// TestPeriodicRA: a router port with ipv6_ra_send_periodic advertises at
// once, then between its intervals, into its peer switch from the peer
// port, with its prefixes and MTU; a port gone stops.
func TestPeriodicRA(t *testing.T) {
	sw := &recordingSwitch{}
	p, err := New(Config{Switch: sw})
	if err != nil {
		t.Fatal(err)
	}
	p.fixedState = testState()
	p.fixedState.RAPorts = []RAPort{{Name: "lr0-sw0", Switch: 2, PeerKey: 3, Options: map[string]string{
		"ipv6_ra_send_periodic": "true", "ipv6_ra_address_mode": "slaac", "ipv6_ra_min_interval": "3",
		"ipv6_ra_max_interval": "4", "ipv6_ra_src_eth": "00:00:00:00:ff:01", "ipv6_ra_src_addr": "fe80::200:ff:fe00:ff01",
		"ipv6_ra_prefixes": "aef0::/64", "ipv6_ra_prf": "MEDIUM", "ipv6_ra_mtu": "1400"}}}
	t0 := time.Unix(1000, 0)
	for s := range 12 { // 12 seconds, one tick a second
		p.sendRAs(t0.Add(time.Duration(s) * time.Second))
	}
	if n := len(sw.pos); n < 3 || n > 4 {
		t.Fatalf("%d advertisements in 12 s at intervals of 3-4 s, want 3 or 4", n)
	}
	po := sw.pos[0]
	if po.Table != 8 || po.Actions != nil || po.Key.Get(flow.Metadata) != 2 || po.Key.Get(flow.Reg0+14) != 3 {
		t.Errorf("advertisement enters table %d, datapath %d, inport %d", po.Table, po.Key.Get(flow.Metadata), po.Key.Get(flow.Reg0+14))
	}
	f := checkSums(t, po.Frame)
	if f.ipDst != allNodes || f.ipSrc.String() != "fe80::200:ff:fe00:ff01" || f.l4[0] != icmp6RouterAdvert || f.ttl != 255 ||
		f.dst.String() != "33:33:00:00:00:01" || f.src.String() != "00:00:00:00:ff:01" {
		t.Errorf("advertisement % x", po.Frame)
	}
	var prefix, mtu bool
	for q := 16; q+8 <= len(f.l4); q += int(f.l4[q+1]) * 8 {
		switch f.l4[q] {
		case ndOptPrefix:
			prefix = f.l4[q+2] == 64 && f.l4[q+3] == 0xc0
		case ndOptMTU:
			mtu = binary.BigEndian.Uint32(f.l4[q+4:]) == 1400
		}
		if f.l4[q+1] == 0 {
			break
		}
	}
	if !prefix || !mtu {
		t.Errorf("advertisement lacks the prefix or MTU: % x", f.l4)
	}
	p.fixedState.RAPorts = nil
	n := len(sw.pos)
	p.sendRAs(t0.Add(time.Minute))
	if len(sw.pos) != n || len(p.ras) != 0 {
		t.Error("a port gone still advertises")
	}
	if got := p.Stats().Kinds["periodic_ra"]; got.Handled != uint64(n) {
		t.Errorf("periodic_ra counters %+v, want %d handled", got, n)
	}
}

func TestParseNATAddresses(t *testing.T) {
	tests := []struct {
		in, mac, ips, where string
		bad                 bool
	}{
		{in: "0a:00:00:00:ff:01 192.168.60.254 192.168.60.100", mac: "0a:00:00:00:ff:01", ips: "[192.168.60.254 192.168.60.100]"},
		{in: `80:fa:5b:06:72:b7 158.36.44.22 aef0::1 is_chassis_resident("cr-lrp")`, mac: "80:fa:5b:06:72:b7", ips: "[158.36.44.22]", where: "cr-lrp"},
		{in: "0a:00:00:00:ff:01", bad: true},
		{in: "nonsense 1.2.3.4", bad: true},
		{in: "0a:00:00:00:ff:01 1.2.3.4 is_chassis_resident(cr", bad: true},
	}
	for _, tc := range tests {
		a, where, err := parseNATAddresses(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("%q: error %v", tc.in, err)
			continue
		}
		if !tc.bad && (a.MAC.String() != tc.mac || fmt.Sprint(a.IPs) != tc.ips || where != tc.where) {
			t.Errorf("%q: %s %v %q", tc.in, a.MAC, a.IPs, where)
		}
	}
}

// TestGARPSchedule: an announcement goes out at once and after 1, 2, 4,
// 8 and 16 s, on every localnet port, then stops until it changes.
func TestGARPSchedule(t *testing.T) {
	sw := &recordingSwitch{}
	p, err := New(Config{Switch: sw})
	if err != nil {
		t.Fatal(err)
	}
	p.fixedState = testState()
	a, _, _ := parseNATAddresses("0a:00:00:00:ff:01 192.168.60.254 192.168.60.100")
	a.Port, a.Switch, a.Localnet = "pub-gw", 2, []uint32{5}
	p.fixedState.Announcements = []Announcement{a}
	t0 := time.Unix(1000, 0)
	var at []int
	for s := range 60 {
		n := len(sw.pos)
		p.sendGARPs(t0.Add(time.Duration(s) * time.Second))
		if len(sw.pos) != n {
			at = append(at, s)
			if len(sw.pos)-n != 2 {
				t.Errorf("%d packets at %d s, want one per address", len(sw.pos)-n, s)
			}
		}
	}
	if fmt.Sprint(at) != "[0 1 3 7 15 31]" {
		t.Errorf("announced at %v s, want [0 1 3 7 15 31]", at)
	}
	po := sw.pos[1]
	f := checkSums(t, po.Frame)
	arp := f.l3
	if f.etype != etherARP || f.dst.String() != "ff:ff:ff:ff:ff:ff" || f.src.String() != "0a:00:00:00:ff:01" ||
		binary.BigEndian.Uint16(arp[6:]) != 1 || netip.AddrFrom4([4]byte(arp[14:18])).String() != "192.168.60.100" ||
		netip.AddrFrom4([4]byte(arp[24:28])).String() != "192.168.60.100" {
		t.Errorf("gratuitous ARP % x", po.Frame)
	}
	if po.Table != 37 || po.Key.Get(flow.Metadata) != 2 || po.Key.Get(flow.Reg0+15) != 5 {
		t.Errorf("enters table %d datapath %d outport %d", po.Table, po.Key.Get(flow.Metadata), po.Key.Get(flow.Reg0+15))
	}
	// A new address starts over.
	a.IPs = append(a.IPs, netip.MustParseAddr("192.168.60.101"))
	p.fixedState.Announcements = []Announcement{a}
	n := len(sw.pos)
	p.sendGARPs(t0.Add(time.Hour))
	if len(sw.pos)-n != 3 || len(p.garps) != 1 {
		t.Errorf("after a change: %d packets, %d schedules", len(sw.pos)-n, len(p.garps))
	}
	if got := p.Stats().Kinds["garp"]; got.Handled != 7 {
		t.Errorf("garp counters %+v", got)
	}
}
