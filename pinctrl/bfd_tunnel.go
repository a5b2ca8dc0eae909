package pinctrl

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
)

// BFD over the Geneve tunnel (gateway liveness).
//
// ovn-controller enables BFD on its tunnels to the chassis it shares a
// gateway chassis list with (ovn-architecture(7), "High Availability for
// Distributed Gateway Ports"), and ovs-vswitchd runs the sessions on the
// tunnel interfaces. govn chassis does the same in TunnelBFD, with one
// BFDSession per peer chassis. The packets are what Open vSwitch sends
// on a tunnel interface with BFD enabled and its defaults, so that a govn
// chassis and a real one agree: Geneve with VNI 0 (and no OVN option) to
// the peer's encap IP; inside, Ethernet to 00:23:20:00:00:01, IPv4
// 169.254.1.1 → 169.254.1.0 with TTL 255, UDP to 3784 from a port in
// 49152-65535 fixed per session, the control packet. What arrives on the
// tunnel with VNI 0 and UDP destination 3784 is a control packet (the
// controller sends it here with TunnelBFDUserData); its session is the
// one of the outer source IP, whatever the inner addresses.

// TunnelBFDUserData is the userdata of the controller action of the rule
// that sends BFD packets from the tunnel to pinctrl. It is not an OVN
// action: the controller writes the rule, not a logical flow.
const TunnelBFDUserData = "bfd_tunnel"

// The inner addresses Open vSwitch uses by default on a tunnel.
var (
	bfdTunnelDstMAC = net.HardwareAddr{0x00, 0x23, 0x20, 0x00, 0x00, 0x01}
	bfdTunnelSrcIP  = netip.MustParseAddr("169.254.1.1")
	bfdTunnelDstIP  = netip.MustParseAddr("169.254.1.0")
)

// TunnelPeer is a chassis to run BFD with over the tunnel.
type TunnelPeer struct {
	Chassis string
	IP      netip.Addr // its encap IP
}

// TunnelBFDConfig is what TunnelBFD runs: sessions to Peers, out of
// the tunnel at datapath port Port (0: none).
type TunnelBFDConfig struct {
	Port    uint32
	LocalIP netip.Addr
	Peers   []TunnelPeer
	Session BFDConfig
}

// TunnelBFDStats count the packets that reached no session.
type TunnelBFDStats struct {
	Malformed uint64 // not a BFD control packet (ParseBFDControl's checks)
	NoSession uint64 // from an IP with no session
	Refused   uint64 // refused by the session (discriminators)
	TxErrors  uint64 // packet-outs the datapath refused
}

// TunnelBFD is the BFD sessions of one chassis over its tunnel. It is
// safe for concurrent use: the controller configures it and reads its
// status, pinctrl's goroutine feeds it packets and time.
type TunnelBFD struct {
	mu       sync.Mutex
	cfg      TunnelBFDConfig
	sessions map[netip.Addr]*tunnelSession
	stats    TunnelBFDStats
	rng      *rand.Rand
	mac      net.HardwareAddr
	actions  map[netip.Addr][]flow.Action
	onChange func()
	// wake tells the runner that the configuration changed.
	wake chan struct{}
}

type tunnelSession struct {
	peer    TunnelPeer
	s       *BFDSession
	srcPort uint16
	state   BFDState // as last reported through onChange
}

// NewTunnelBFD returns a TunnelBFD without sessions.
func NewTunnelBFD() *TunnelBFD {
	return &TunnelBFD{sessions: map[netip.Addr]*tunnelSession{}, actions: map[netip.Addr][]flow.Action{},
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x6266642d74756e)), wake: make(chan struct{}, 1)}
}

// OnChange sets a function called (on pinctrl's goroutine, without
// locks held) when a session's state changes.
func (t *TunnelBFD) OnChange(f func()) {
	t.mu.Lock()
	t.onChange = f
	t.mu.Unlock()
}

// Configure sets the peers and parameters at now: a new peer gets a
// session, a peer no longer listed loses its own, the others keep their
// state under the new parameters.
func (t *TunnelBFD) Configure(cfg TunnelBFDConfig, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cfg.LocalIP != t.cfg.LocalIP {
		t.mac = localBFDMAC(cfg.LocalIP)
	}
	if cfg.Port != t.cfg.Port {
		clear(t.actions)
	}
	want := map[netip.Addr]TunnelPeer{}
	for _, p := range cfg.Peers {
		if p.IP.Is4() && p.IP != cfg.LocalIP {
			want[p.IP] = p
		}
	}
	if cfg.Port == 0 {
		clear(want)
	}
	for ip, ts := range t.sessions {
		if _, ok := want[ip]; !ok {
			delete(t.sessions, ip)
			delete(t.actions, ip)
		} else if !ts.s.Config().same(cfg.Session.withDefaults()) {
			ts.s.Configure(cfg.Session, now)
		}
	}
	for ip, p := range want {
		if ts := t.sessions[ip]; ts != nil {
			ts.peer = p
			continue
		}
		disc := t.rng.Uint32() | 1
		sport := uint16(BFDSrcPortMin + t.rng.IntN(BFDSrcPortMax-BFDSrcPortMin+1))
		t.sessions[ip] = &tunnelSession{peer: p, s: NewBFDSession(disc, cfg.Session, now), srcPort: sport, state: BFDDown}
	}
	t.cfg = cfg
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// localBFDMAC is the inner source MAC of our packets: a locally
// administered address made of the encap IP.
func localBFDMAC(ip netip.Addr) net.HardwareAddr {
	b := ip.As4()
	return net.HardwareAddr{0x0a, 0x00, b[0], b[1], b[2], b[3]}
}

// TunnelBFDStatus is one session's state.
type TunnelBFDStatus struct {
	Chassis     string
	IP          netip.Addr
	State       BFDState
	Diag        BFDDiag
	RemoteState BFDState
	Stats       BFDSessionStats
}

// Status returns every session's state, by chassis name.
func (t *TunnelBFD) Status() map[string]TunnelBFDStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]TunnelBFDStatus, len(t.sessions))
	for ip, ts := range t.sessions {
		out[ts.peer.Chassis] = TunnelBFDStatus{Chassis: ts.peer.Chassis, IP: ip, State: ts.s.State(), Diag: ts.s.Diag(),
			RemoteState: ts.s.RemoteState(), Stats: ts.s.Stats()}
	}
	return out
}

// Stats returns the counters of packets that reached no session.
func (t *TunnelBFD) Stats() TunnelBFDStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// Receive takes a packet-in of the tunnel rule at now. An error says
// why it was dropped (counted).
func (t *TunnelBFD) Receive(pi *dp.PacketIn, now time.Time) error {
	ctl, err := bfdFromFrame(pi.Frame)
	t.mu.Lock()
	if err != nil {
		t.stats.Malformed++
		t.mu.Unlock()
		return err
	}
	src := ipv4FromField(pi.Key.Get(flow.TunSrc))
	ts := t.sessions[src]
	if ts == nil {
		t.stats.NoSession++
		t.mu.Unlock()
		return fmt.Errorf("bfd: no session with %s", src)
	}
	if err := ts.s.Receive(&ctl, now); err != nil {
		t.stats.Refused++
		t.mu.Unlock()
		return err
	}
	t.mu.Unlock()
	select { // an F or a state change may be due at once
	case t.wake <- struct{}{}:
	default:
	}
	return nil
}

// ipv4FromField is the address of a 32-bit flow field's value.
func ipv4FromField(v uint64) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// bfdFromFrame reads the control packet of an Ethernet frame (IPv4 or
// IPv6, UDP to 3784).
func bfdFromFrame(b []byte) (BFDControl, error) {
	f, err := parseFrame(b)
	if err != nil {
		return BFDControl{}, fmt.Errorf("bfd: %w", err)
	}
	_, dport, payload, err := f.udp()
	if err != nil {
		return BFDControl{}, fmt.Errorf("bfd: %w", err)
	}
	if dport != BFDPort {
		return BFDControl{}, fmt.Errorf("bfd: UDP port %d, not %d", dport, BFDPort)
	}
	return ParseBFDControl(payload)
}

// Advance runs the sessions' timers to now and returns the packets to
// send, whether a session changed state, and when to call again (zero:
// no session).
func (t *TunnelBFD) Advance(now time.Time) (out []dp.PacketOut, changed bool, next time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ip, ts := range t.sessions {
		for i := 0; i < 4; i++ {
			ctl, ok := ts.s.Advance(now)
			if !ok {
				break
			}
			out = append(out, t.packetOut(ip, ts, &ctl))
		}
		if st := ts.s.State(); st != ts.state {
			ts.state = st
			changed = true
		}
		if e := ts.s.NextEvent(); !e.IsZero() && (next.IsZero() || e.Before(next)) {
			next = e
		}
	}
	return out, changed, next
}

// packetOut is ctl in a frame out of the tunnel to ip.
func (t *TunnelBFD) packetOut(ip netip.Addr, ts *tunnelSession, ctl *BFDControl) dp.PacketOut {
	acts := t.actions[ip]
	if acts == nil {
		var err error
		acts, err = flow.ParseActions(fmt.Sprintf("set_field:0->tun_id,set_field:%s->tun_dst,output:%d", ip, t.cfg.Port))
		if err != nil {
			panic(fmt.Sprintf("pinctrl: BFD tunnel actions: %v", err)) // a constant format
		}
		t.actions[ip] = acts
	}
	return dp.PacketOut{Frame: bfdFrame(bfdTunnelDstMAC, t.mac, bfdTunnelSrcIP, bfdTunnelDstIP, ts.srcPort, ctl), Actions: acts}
}

// bfdFrame is a control packet in Ethernet, IP (TTL 255, as RFC 5881
// wants) and UDP.
func bfdFrame(dst, src net.HardwareAddr, sip, dip netip.Addr, sport uint16, ctl *BFDControl) []byte {
	udp := udpDatagram(sport, BFDPort, ctl.Append(make([]byte, 0, bfdControlLen)))
	ip := ipPacket(sip, dip, protoUDP, 255, udp, 6)
	et := uint16(0x0800)
	if sip.Is4() {
		setDF(ip)
		ip[1] = 0xc0 // DSCP CS6, network control, as BFD implementations mark it
		ip[10], ip[11] = 0, 0
		c := fold(onesSum(0, ip[:20]))
		ip[10], ip[11] = byte(c>>8), byte(c)
	} else {
		et = 0x86dd
	}
	f := &frame{}
	return append(f.ethHeader(dst, src, et), ip...)
}

// String formats the sessions for the bfd/show command, one a line.
func (t *TunnelBFD) String() string {
	st := t.Status()
	names := make([]string, 0, len(st))
	for n := range st {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		s := st[n]
		fmt.Fprintf(&b, "%s %s: state %s, diag %d, remote %s, rx %d, refused %d, tx %d, changes %d\n",
			n, s.IP, s.State, s.Diag, s.RemoteState, s.Stats.RxPackets, s.Stats.RxDropped, s.Stats.TxPackets, s.Stats.Changes)
	}
	ts := t.Stats()
	fmt.Fprintf(&b, "malformed %d, no session %d, refused %d, tx errors %d\n", ts.Malformed, ts.NoSession, ts.Refused, ts.TxErrors)
	return b.String()
}

// runTunnelBFD sends the sessions' packets when they are due and
// reports state changes, until ctx ends.
func (p *Pinctrl) runTunnelBFD(done <-chan struct{}) {
	t := p.tbfd
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		out, changed, next := t.Advance(now)
		for _, po := range out {
			if err := p.cfg.Switch.Execute(po); err != nil {
				t.mu.Lock()
				t.stats.TxErrors++
				t.mu.Unlock()
			}
		}
		if changed {
			t.mu.Lock()
			f := t.onChange
			t.mu.Unlock()
			if f != nil {
				f()
			}
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(time.Now()), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-done:
			return
		case <-t.wake:
		case <-timer.C:
		}
	}
}
