package pinctrl

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/sb"
)

// BFD for routes (the Southbound's BFD table, handle_bfd_msg).
//
// ovn-northd writes a BFD row for each Northbound BFD row (a router port
// and a peer address, with the session's min_tx, min_rx, detect_mult, a
// discriminator and a UDP source port). The chassis where the router
// port resides runs the session: the port's l3gateway chassis, or the
// chassis that holds its chassisredirect port cr-PORT (a port that is
// neither runs nowhere, as in ovn-controller). PortBFD keeps one
// BFDSession per row run here:
//
//   - it sends from the port's MAC and its address of the peer's family
//     (the one whose network holds the peer, else the first), UDP from
//     src_port to 3784, TTL 255, to the peer's MAC_Binding (broadcast
//     while there is none), into the router's pipeline as if routed out
//     of the port (the egress pipeline, then the port's switch);
//   - handle_bfd_msg (ovn-northd's flow for UDP 3784 to the port's
//     addresses) hands it the peer's packets: the session is the one of
//     the packet's datapath and source address;
//   - it writes the session's state to the row's status when the two
//     differ; ovn-northd copies it to the Northbound row and stops using
//     the routes whose session is down.

// PortBFDSpec is one Southbound BFD row this chassis runs.
type PortBFDSpec struct {
	Row      ovsdb.UUID
	Port     string // the router port (logical_port)
	Datapath uint32 // its router's tunnel key
	PortKey  uint32 // its tunnel key
	SrcMAC   net.HardwareAddr
	SrcIP    netip.Addr
	DstIP    netip.Addr
	DstMAC   net.HardwareAddr // broadcast while no MAC_Binding says
	SrcPort  uint16
	Disc     uint32
	Config   BFDConfig
	Status   string // the row's status now
}

// PortBFDSpecs returns the BFD rows that chassis me runs, from the
// Southbound's rows; rows it cannot use (a bad address, an unknown port)
// are skipped and listed in problems.
func PortBFDSpecs(me string, bfds []sb.BFD, ports []sb.PortBinding, dps []sb.DatapathBinding,
	chassis []sb.Chassis, macs []sb.MACBinding) (specs []PortBFDSpec, problems []string) {
	var meID ovsdb.UUID
	for _, ch := range chassis {
		if ch.Name == me {
			meID = ch.UUID
		}
	}
	if meID == (ovsdb.UUID{}) {
		return nil, nil
	}
	byName := make(map[string]*sb.PortBinding, len(ports))
	for i := range ports {
		byName[ports[i].LogicalPort] = &ports[i]
	}
	dpKey := make(map[ovsdb.UUID]int64, len(dps))
	for _, d := range dps {
		dpKey[d.UUID] = d.TunnelKey
	}
	mac := map[string]string{}
	for _, m := range macs {
		mac[m.LogicalPort+"/"+m.IP] = m.MAC
	}
	for _, b := range bfds {
		p := byName[b.LogicalPort]
		if p == nil {
			continue // not a port of a local datapath, or not yet
		}
		here := p.Type == "l3gateway" && p.Chassis != nil && *p.Chassis == meID
		if cr := byName["cr-"+b.LogicalPort]; cr != nil && cr.Chassis != nil && *cr.Chassis == meID {
			here = true
		}
		if !here {
			continue
		}
		dst, err := netip.ParseAddr(b.DstIP)
		if err != nil {
			problems = append(problems, fmt.Sprintf("BFD %s: bad dst_ip %q", b.LogicalPort, b.DstIP))
			continue
		}
		srcMAC, srcIP, ok := portAddress(p, dst)
		if !ok {
			problems = append(problems, fmt.Sprintf("BFD %s: the port has no %s address", b.LogicalPort, family(dst)))
			continue
		}
		dk, ok := dpKey[p.Datapath]
		if !ok {
			continue
		}
		if b.SrcPort < BFDSrcPortMin || b.SrcPort > BFDSrcPortMax || b.Disc <= 0 || b.Disc > 0xffffffff {
			problems = append(problems, fmt.Sprintf("BFD %s %s: bad src_port %d or disc %d", b.LogicalPort, b.DstIP, b.SrcPort, b.Disc))
			continue
		}
		dstMAC := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		if m, err := net.ParseMAC(mac[b.LogicalPort+"/"+dst.String()]); err == nil && len(m) == 6 {
			dstMAC = m
		}
		cfg := BFDConfig{MinTx: time.Duration(b.MinTx) * time.Millisecond, MinRx: time.Duration(b.MinRx) * time.Millisecond}
		if b.MinRx == 0 {
			cfg.MinRx = -1 // the peer is to send nothing
		}
		if b.DetectMult >= 1 && b.DetectMult <= 255 {
			cfg.DetectMult = uint8(b.DetectMult)
		}
		specs = append(specs, PortBFDSpec{Row: b.UUID, Port: b.LogicalPort, Datapath: uint32(dk), PortKey: uint32(p.TunnelKey),
			SrcMAC: srcMAC, SrcIP: srcIP, DstIP: dst, DstMAC: dstMAC, SrcPort: uint16(b.SrcPort), Disc: uint32(b.Disc),
			Config: cfg, Status: b.Status})
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Row.String() < specs[j].Row.String() })
	return specs, problems
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// portAddress returns a router port's MAC and its address for talking to
// dst (Port_Binding.mac: "MAC IP/LEN ...").
func portAddress(p *sb.PortBinding, dst netip.Addr) (net.HardwareAddr, netip.Addr, bool) {
	for _, m := range p.MAC {
		f := strings.Fields(m)
		if len(f) < 2 {
			continue
		}
		hw, err := net.ParseMAC(f[0])
		if err != nil || len(hw) != 6 {
			continue
		}
		var first netip.Addr
		for _, s := range f[1:] {
			pfx, err := netip.ParsePrefix(s)
			if err != nil {
				continue
			}
			if pfx.Addr().Is4() != dst.Is4() {
				continue
			}
			if pfx.Contains(dst) {
				return hw, pfx.Addr(), true
			}
			if !first.IsValid() {
				first = pfx.Addr()
			}
		}
		if first.IsValid() {
			return hw, first, true
		}
	}
	return nil, netip.Addr{}, false
}

// PortBFDStats count the handle_bfd_msg packets that reached no session
// and the status writes.
type PortBFDStats struct {
	Malformed  uint64
	NoSession  uint64
	Refused    uint64
	Written    uint64 // status updates committed
	WriteFails uint64
}

// PortBFD is the BFD sessions of the Southbound's BFD rows run here.
type PortBFD struct {
	mu       sync.Mutex
	sessions map[portBFDKey]*portSession
	stats    PortBFDStats
	wake     chan struct{}
}

type portBFDKey struct {
	dp   uint32
	peer netip.Addr
}

type portSession struct {
	spec PortBFDSpec
	s    *BFDSession
}

// NewPortBFD returns a PortBFD without sessions.
func NewPortBFD() *PortBFD {
	return &PortBFD{sessions: map[portBFDKey]*portSession{}, wake: make(chan struct{}, 1)}
}

// Configure makes the sessions those of specs at now: a new row gets a
// session, a row that went loses its own, the others keep their state
// (a new discriminator restarts the session).
func (b *PortBFD) Configure(specs []PortBFDSpec, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	want := map[portBFDKey]PortBFDSpec{}
	for _, s := range specs {
		want[portBFDKey{s.Datapath, s.DstIP}] = s
	}
	for k, ps := range b.sessions {
		s, ok := want[k]
		switch {
		case !ok || s.Disc != ps.spec.Disc:
			delete(b.sessions, k)
		default:
			if !ps.s.Config().same(s.Config.withDefaults()) {
				ps.s.Configure(s.Config, now)
			}
			ps.spec = s
		}
	}
	for k, s := range want {
		if b.sessions[k] == nil {
			b.sessions[k] = &portSession{spec: s, s: NewBFDSession(s.Disc, s.Config, now)}
		}
	}
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Receive takes a handle_bfd_msg packet-in at now; an error says why it
// was dropped (counted).
func (b *PortBFD) Receive(pi *dp.PacketIn, now time.Time) error {
	f, err := parseFrame(pi.Frame)
	var ctl BFDControl
	if err == nil {
		ctl, err = bfdFromFrame(pi.Frame)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.stats.Malformed++
		return err
	}
	ps := b.sessions[portBFDKey{uint32(pi.Key.Get(flow.Metadata)), f.ipSrc}]
	if ps == nil {
		b.stats.NoSession++
		return fmt.Errorf("bfd: no session with %s on datapath %d", f.ipSrc, pi.Key.Get(flow.Metadata))
	}
	if err := ps.s.Receive(&ctl, now); err != nil {
		b.stats.Refused++
		return err
	}
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return nil
}

// Advance runs the sessions' timers to now and returns the packets to
// send (for layout's router pipeline) and when to call again.
func (b *PortBFD) Advance(now time.Time, ingressOutput uint8) (out []dp.PacketOut, next time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ps := range b.sessions {
		for i := 0; i < 4; i++ {
			ctl, ok := ps.s.Advance(now)
			if !ok {
				break
			}
			sp := &ps.spec
			var k flow.Key
			k.Set(flow.Metadata, uint64(sp.Datapath))
			k.Set(flow.Reg0+15, uint64(sp.PortKey)) // outport
			out = append(out, dp.PacketOut{Frame: bfdFrame(sp.DstMAC, sp.SrcMAC, sp.SrcIP, sp.DstIP, sp.SrcPort, &ctl), Key: k, Table: ingressOutput})
		}
		if e := ps.s.NextEvent(); !e.IsZero() && (next.IsZero() || e.Before(next)) {
			next = e
		}
	}
	return out, next
}

// statusChanges are the rows whose status is not their session's state.
func (b *PortBFD) statusChanges() map[ovsdb.UUID]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out map[ovsdb.UUID]string
	for _, ps := range b.sessions {
		if st := ps.s.State().String(); st != ps.spec.Status {
			if out == nil {
				out = map[ovsdb.UUID]string{}
			}
			out[ps.spec.Row] = st
		}
	}
	return out
}

// markWritten records that rows now have the statuses of changes.
func (b *PortBFD) markWritten(changes map[ovsdb.UUID]string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.stats.WriteFails++
		return
	}
	b.stats.Written += uint64(len(changes))
	for _, ps := range b.sessions {
		if st, ok := changes[ps.spec.Row]; ok {
			ps.spec.Status = st
		}
	}
}

// String formats the sessions for bfd/show.
func (b *PortBFD) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := make([]string, 0, len(b.sessions)+1)
	for _, ps := range b.sessions {
		st := ps.s.Stats()
		lines = append(lines, fmt.Sprintf("%s %s: state %s, diag %d, remote %s, rx %d, refused %d, tx %d, changes %d",
			ps.spec.Port, ps.spec.DstIP, ps.s.State(), ps.s.Diag(), ps.s.RemoteState(), st.RxPackets, st.RxDropped, st.TxPackets, st.Changes))
	}
	sort.Strings(lines)
	s := b.stats
	lines = append(lines, fmt.Sprintf("route sessions: malformed %d, no session %d, refused %d, status written %d, failed transactions %d",
		s.Malformed, s.NoSession, s.Refused, s.Written, s.WriteFails))
	return strings.Join(lines, "\n") + "\n"
}

// portBFDPoll is how often the runner looks at the Southbound for BFD
// rows and status to write.
const portBFDPoll = 250 * time.Millisecond

// runPortBFD runs the Southbound's BFD sessions until done: it
// configures them from the Southbound when it changes, sends their
// packets when due and writes their status.
func (p *Pinctrl) runPortBFD(ctx context.Context) {
	b := p.pbfd
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	poll := time.NewTicker(portBFDPoll)
	defer poll.Stop()
	var gen uint64
	var from *client.Client
	reported := map[string]bool{}
	for {
		now := time.Now()
		out, next := b.Advance(now, p.engine.layout.IngressOutput)
		for _, po := range out {
			if err := p.cfg.Switch.Execute(po); err != nil {
				p.countPeriodic("bfd", err)
			}
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(time.Now()), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-b.wake:
		case <-timer.C:
		case <-poll.C:
			if p.cfg.SB == nil {
				continue // tests without a Southbound
			}
			c := p.cfg.SB()
			if c == nil || c.Cache().Schema() == nil {
				continue
			}
			if g := c.Cache().Generation(); c != from || g != gen {
				from, gen = c, g
				name := ""
				if p.cfg.Chassis != nil {
					name = p.cfg.Chassis()
				}
				cache := c.Cache()
				specs, problems := PortBFDSpecs(name, client.List[sb.BFD](cache), client.List[sb.PortBinding](cache),
					client.List[sb.DatapathBinding](cache), client.List[sb.Chassis](cache), client.List[sb.MACBinding](cache))
				for _, pr := range problems {
					if !reported[pr] && len(reported) < 1024 {
						reported[pr] = true
						p.log.Warn("pinctrl: BFD row skipped", "why", pr)
					}
				}
				b.Configure(specs, time.Now())
			}
			if changes := b.statusChanges(); len(changes) > 0 {
				_, err := c.Do(ctx, func(t *client.Txn) error {
					for id, st := range changes {
						if _, ok := client.Get[sb.BFD](c.Cache(), id); ok {
							t.UpdateModel(&sb.BFD{Status: st}, id, "status")
						}
					}
					return nil
				})
				b.markWritten(changes, err)
				if err != nil && ctx.Err() == nil {
					p.log.Debug("pinctrl: writing BFD status", "err", err)
				}
			}
		}
	}
}
