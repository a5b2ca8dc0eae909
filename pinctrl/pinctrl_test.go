package pinctrl

import (
	"encoding/binary"
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
	pi := packetIn(`put_fdb(inport, eth.src);`, ethFrame(routerMAC, vmMAC, etherIPv4, nil), 2, 10, nil)
	p.handle(pi, time.Unix(1000, 0))
	if got := p.Stats().Kinds["put_fdb"]; got.Errors != 1 || sw.outs != 0 {
		t.Errorf("put_fdb counters %+v, %d packet-outs", got, sw.outs)
	}
}
