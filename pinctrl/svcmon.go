package pinctrl

// Service monitors: the health checks of load-balancer backends.
// ovn-northd writes a Service_Monitor row per checked backend; the
// chassis where its logical_port is bound probes it every interval and
// writes the status it finds. Replies come back as packet-ins of
// handle_svc_check(inport), the flow for frames to the monitor MAC.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/sb"
)

// ServiceMonitor is one Service_Monitor row whose logical port is bound
// here: what to probe and from where, and where the probe enters.
type ServiceMonitor struct {
	UUID     ovsdb.UUID
	Port     string // the backend's logical port
	Switch   uint32 // its switch's tunnel key
	PortKey  uint32 // its tunnel key
	Proto    string // "tcp" or "udp"
	IP       netip.Addr
	L4Port   uint16
	MAC      net.HardwareAddr // the backend's (from the Port_Binding)
	SrcMAC   net.HardwareAddr
	SrcIP    netip.Addr
	Timing   svcTiming
	Status   string // as in the Southbound ("" if not set)
	Problems string // why the row cannot be probed, "" if it can
}

// svcKey names the service a reply is from.
type svcKey struct {
	port  string
	ip    netip.Addr
	l4    uint16
	proto string
}

func (m ServiceMonitor) key() svcKey { return svcKey{m.Port, m.IP, m.L4Port, m.Proto} }

// svcTiming is a monitor's options, with ovn-controller's defaults.
type svcTiming struct {
	Interval, Timeout   time.Duration
	Successes, Failures int
}

func parseSvcTiming(o map[string]string) (svcTiming, error) {
	num := func(name string, def int) (int, error) {
		s, ok := o[name]
		if !ok {
			return def, nil
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			return 0, fmt.Errorf("bad %s %q", name, s)
		}
		return v, nil
	}
	iv, err1 := num("interval", 5)
	to, err2 := num("timeout", 20)
	sc, err3 := num("success_count", 3)
	fc, err4 := num("failure_count", 3)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return svcTiming{}, err
	}
	return svcTiming{time.Duration(iv) * time.Second, time.Duration(to) * time.Second, sc, fc}, nil
}

// localServiceMonitors picks the Service_Monitor rows whose logical port
// is bound to chassis me. A row that cannot be probed (bad address,
// options) is kept with Problems set: its status is "error".
func localServiceMonitors(rows []sb.ServiceMonitor, me ovsdb.UUID, ports map[string]*sb.PortBinding, dps map[ovsdb.UUID]*Datapath) []ServiceMonitor {
	if me == (ovsdb.UUID{}) {
		return nil
	}
	var out []ServiceMonitor
	for _, r := range rows {
		pb := ports[r.LogicalPort]
		if pb == nil || pb.Chassis == nil || *pb.Chassis != me || dps[pb.Datapath] == nil {
			continue
		}
		m := ServiceMonitor{UUID: r.UUID, Port: r.LogicalPort, Switch: dps[pb.Datapath].Key, PortKey: uint32(pb.TunnelKey), Proto: "tcp"}
		if r.Protocol != nil && *r.Protocol != "" {
			m.Proto = *r.Protocol
		}
		if r.Status != nil {
			m.Status = *r.Status
		}
		var problems []string
		var err error
		if m.IP, err = netip.ParseAddr(r.IP); err != nil {
			problems = append(problems, fmt.Sprintf("bad ip %q", r.IP))
		}
		if m.SrcIP, err = netip.ParseAddr(r.SrcIP); err != nil || m.SrcIP.Is4() != m.IP.Is4() {
			problems = append(problems, fmt.Sprintf("bad src_ip %q", r.SrcIP))
		}
		if m.SrcMAC, err = net.ParseMAC(r.SrcMAC); err != nil || len(m.SrcMAC) != 6 {
			problems = append(problems, fmt.Sprintf("bad src_mac %q", r.SrcMAC))
		}
		if r.Port < 1 || r.Port > 65535 {
			problems = append(problems, fmt.Sprintf("bad port %d", r.Port))
		}
		m.L4Port = uint16(r.Port)
		if m.Proto != "tcp" && m.Proto != "udp" {
			problems = append(problems, fmt.Sprintf("bad protocol %q", m.Proto))
		}
		if m.Timing, err = parseSvcTiming(r.Options); err != nil {
			problems = append(problems, err.Error())
		}
		if m.MAC = portMAC(pb.MAC, m.IP); m.MAC == nil {
			problems = append(problems, "no MAC for "+r.IP+" on "+r.LogicalPort)
		}
		m.Problems = strings.Join(problems, "; ")
		out = append(out, m)
	}
	return out
}

// portMAC is the MAC of a Port_Binding's mac entry ("MAC IP...") that has
// ip, or of its first entry.
func portMAC(entries []string, ip netip.Addr) net.HardwareAddr {
	var first net.HardwareAddr
	for _, e := range entries {
		f := strings.Fields(e)
		if len(f) == 0 {
			continue
		}
		mac, err := net.ParseMAC(f[0])
		if err != nil || len(mac) != 6 {
			continue
		}
		if first == nil {
			first = mac
		}
		for _, a := range f[1:] {
			if p, err := netip.ParsePrefix(a); err == nil && p.Addr() == ip || a == ip.String() {
				return mac
			}
		}
	}
	return first
}

// svcProbe is the frame that probes m: a TCP SYN, or a UDP datagram,
// from sport with sequence number seq (TCP).
func svcProbe(m *ServiceMonitor, sport uint16, seq uint32) []byte {
	return svcSegment(m, sport, seq, 0x02)
}

// svcResetFrame is the RST that closes a probe's half-open connection after
// the backend's SYN-ACK.
func svcResetFrame(m *ServiceMonitor, sport uint16, seq uint32) []byte {
	return svcSegment(m, sport, seq, 0x04)
}

func svcSegment(m *ServiceMonitor, sport uint16, seq uint32, flags byte) []byte {
	et := uint16(etherIPv4)
	if m.IP.Is6() {
		et = etherIPv6
	}
	var l4 []byte
	var proto uint8
	csum := 16
	if m.Proto == "udp" {
		proto, csum = protoUDP, 6
		l4 = udpDatagram(sport, m.L4Port, make([]byte, 8)) // 8 zero bytes, as ovn-controller's
	} else {
		proto = protoTCP
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], m.L4Port)
		binary.BigEndian.PutUint32(l4[4:], seq)
		l4[12] = 5 << 4
		l4[13] = flags
		if flags&0x02 != 0 {
			binary.BigEndian.PutUint16(l4[14:], 65160) // window: a SYN offers one
		}
	}
	// TTL 63 and DF, as ovn-controller's probes (TestServiceMonitorDifferential).
	ip := ipPacket(m.SrcIP, m.IP, proto, 63, l4, csum)
	if m.IP.Is4() {
		setDF(ip)
	}
	f := &frame{}
	return append(f.ethHeader(m.MAC, m.SrcMAC, et), ip...)
}

// svcPacketOut sends frame out of m's switch to m's port, as if the
// switch's ingress pipeline had chosen the port: the egress pipeline
// (which lets the monitor MAC by its ACLs) delivers it.
func (e *Engine) svcPacketOut(m *ServiceMonitor, frame []byte) dp.PacketOut {
	var k flow.Key
	k.Set(flow.Metadata, uint64(m.Switch))
	k.Set(flow.Reg0+15, uint64(m.PortKey)) // outport
	return dp.PacketOut{Frame: frame, Key: k, Table: e.layout.IngressOutput}
}

// svcReplyKind is what a reply says of the service.
type svcReplyKind uint8

const (
	svcSynAck      svcReplyKind = iota + 1 // TCP: listening
	svcReset                               // TCP: refused
	svcUnreachable                         // UDP: ICMP port (or host) unreachable
)

func (k svcReplyKind) String() string {
	switch k {
	case svcSynAck:
		return "syn-ack"
	case svcReset:
		return "rst"
	case svcUnreachable:
		return "unreachable"
	}
	return "?"
}

// SvcReply is a reply to a probe, read from a handle_svc_check packet-in.
type SvcReply struct {
	LogicalPort string // the inport it came from
	IP          netip.Addr
	L4Port      uint16 // the service's port
	Proto       string
	ProbePort   uint16 // the probe's source port it answers
	Ack         uint32 // TCP: the acknowledgment number
	Kind        svcReplyKind
}

func (r *SvcReply) key() svcKey { return svcKey{r.LogicalPort, r.IP, r.L4Port, r.Proto} }

// parseSvcReply reads a frame sent to the monitor MAC: a TCP SYN-ACK or
// RST from the service, or an ICMP destination unreachable quoting a UDP
// probe.
func parseSvcReply(b []byte) (SvcReply, error) {
	f, err := parseFrame(b)
	if err != nil {
		return SvcReply{}, err
	}
	if !f.ipSrc.IsValid() || f.fragment {
		return SvcReply{}, errors.New("service monitor reply: not an IP packet")
	}
	switch {
	case f.proto == protoTCP:
		if len(f.l4) < 20 {
			return SvcReply{}, errTruncated
		}
		r := SvcReply{IP: f.ipSrc, L4Port: binary.BigEndian.Uint16(f.l4), Proto: "tcp",
			ProbePort: binary.BigEndian.Uint16(f.l4[2:]), Ack: binary.BigEndian.Uint32(f.l4[8:])}
		switch flags := f.l4[13]; {
		case flags&0x04 != 0:
			r.Kind = svcReset
		case flags&0x12 == 0x12:
			r.Kind = svcSynAck
		default:
			return SvcReply{}, fmt.Errorf("service monitor reply: TCP flags %#x", flags)
		}
		return r, nil
	case f.proto == protoICMP && f.etype == etherIPv4 && len(f.l4) >= 8 && f.l4[0] == 3,
		f.proto == protoICMPv6 && f.etype == etherIPv6 && len(f.l4) >= 8 && f.l4[0] == 1:
		// The quoted datagram: our probe, from the monitor to the service.
		inner := &frame{l3: f.l4[8:]}
		var err error
		if f.etype == etherIPv4 {
			err = inner.parseQuotedIPv4()
		} else {
			err = inner.parseQuotedIPv6()
		}
		if err != nil {
			return SvcReply{}, fmt.Errorf("service monitor reply: quoted datagram: %w", err)
		}
		if inner.proto != protoUDP || len(inner.l4) < 4 {
			return SvcReply{}, errors.New("service monitor reply: quoted datagram is not UDP")
		}
		return SvcReply{IP: inner.ipDst, L4Port: binary.BigEndian.Uint16(inner.l4[2:]), Proto: "udp",
			ProbePort: binary.BigEndian.Uint16(inner.l4), Kind: svcUnreachable}, nil
	}
	return SvcReply{}, errors.New("service monitor reply: neither TCP nor ICMP unreachable")
}

// parseQuotedIPv4 reads the IPv4 header an ICMP error quotes, whose
// datagram is cut short: only the header's own length is checked.
func (f *frame) parseQuotedIPv4() error {
	h := f.l3
	if len(h) < 20 || h[0]>>4 != 4 {
		return errors.New("bad IPv4 header")
	}
	hl := int(h[0]&0xf) * 4
	if hl < 20 || len(h) < hl {
		return errTruncated
	}
	f.proto = h[9]
	f.ipSrc = netip.AddrFrom4([4]byte(h[12:16]))
	f.ipDst = netip.AddrFrom4([4]byte(h[16:20]))
	f.l4 = h[hl:]
	return nil
}

// parseQuotedIPv6 reads the IPv6 header an ICMPv6 error quotes (no
// extension headers: the probes have none).
func (f *frame) parseQuotedIPv6() error {
	h := f.l3
	if len(h) < 40 || h[0]>>4 != 6 {
		return errors.New("bad IPv6 header")
	}
	f.proto = h[6]
	f.ipSrc = netip.AddrFrom16([16]byte(h[8:24]))
	f.ipDst = netip.AddrFrom16([16]byte(h[24:40]))
	f.l4 = h[40:]
	return nil
}

// handleSvcCheck runs handle_svc_check(inport): the reply is handed to
// the prober, which knows the probes sent.
func (h *handling) handleSvcCheck(port flow.U128) error {
	name, ok := h.dp.PortNames[uint32(port.Lo)]
	if !ok {
		return fmt.Errorf("handle_svc_check: unknown logical port %d", port.Lo)
	}
	r, err := parseSvcReply(h.pi.Frame)
	if err != nil {
		return err
	}
	r.LogicalPort = name
	h.out.SvcReplies = append(h.out.SvcReplies, r)
	return nil
}

// svcCheck is one monitor's state machine: a probe every interval, an
// outcome per probe (its reply, or none by the timeout), and the status
// after enough outcomes in a row.
type svcCheck struct {
	timing  svcTiming
	udp     bool
	status  string // "online", "offline"; "" until decided
	waiting bool   // a probe is out
	sentAt  time.Time
	next    time.Time // when the next probe is due
	sport   uint16
	seq     uint32
	sent    uint64
	okRun   int // outcomes in a row
	failRun int
}

// due says whether a probe should go out now.
func (c *svcCheck) due(now time.Time) bool { return !c.waiting && !now.Before(c.next) }

// probed records a probe sent at now.
func (c *svcCheck) probed(now time.Time, sport uint16, seq uint32) {
	c.waiting, c.sentAt, c.sport, c.seq = true, now, sport, seq
	c.sent++
}

// expire decides a probe with no reply by its timeout: a TCP service is
// failing, a UDP service (which need not answer) is fine.
func (c *svcCheck) expire(now time.Time) {
	if c.waiting && !now.Before(c.sentAt.Add(c.timing.Timeout)) {
		c.outcome(c.udp, now)
	}
}

// answer takes a reply to the probe out; it returns false for a reply to
// no probe of ours (late, or another's).
func (c *svcCheck) answer(r *SvcReply, now time.Time) bool {
	if !c.waiting || r.ProbePort != c.sport || r.Kind == svcSynAck && r.Ack != c.seq+1 {
		return false
	}
	c.outcome(r.Kind == svcSynAck, now)
	return true
}

func (c *svcCheck) outcome(ok bool, now time.Time) {
	c.waiting = false
	c.next = c.sentAt.Add(c.timing.Interval)
	if c.next.Before(now) {
		c.next = now
	}
	if ok {
		c.okRun, c.failRun = c.okRun+1, 0
		if c.okRun >= c.timing.Successes {
			c.status = sb.ServiceMonitorStatusOnline
		}
	} else {
		c.okRun, c.failRun = 0, c.failRun+1
		if c.failRun >= c.timing.Failures {
			c.status = sb.ServiceMonitorStatusOffline
		}
	}
}

// probeID derives a probe's source port (in the ephemeral range) and
// sequence number from the monitor and the count sent: different for
// every probe, the same in every run.
func probeID(m *ServiceMonitor, n uint64) (uint16, uint32) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", m.UUID, n)
	v := h.Sum64()
	return uint16(32768 + v%28232), uint32(v >> 32)
}

// svcProber runs the state machines of this chassis' monitors, on the
// runner's goroutine.
type svcProber struct {
	checks  map[ovsdb.UUID]*svcCheck
	mons    map[ovsdb.UUID]ServiceMonitor // as last seen
	byKey   map[svcKey]ovsdb.UUID         // the monitor a reply is for
	writes  chan svcStatus
	pending map[ovsdb.UUID]pendingStatus // statuses handed to the writer
}

// pendingStatus is a status handed to the writer at a time: until the
// Southbound shows it, it is not sent again, unless the write seems lost.
type pendingStatus struct {
	status string
	at     time.Time
}

// svcRewrite is how long a status written stays unsent again while the
// Southbound does not show it (the write failed, or is slow).
const svcRewrite = 5 * time.Second

// svcStatus is a status to write.
type svcStatus struct {
	id     ovsdb.UUID
	status string
}

func newSvcProber() *svcProber {
	return &svcProber{checks: map[ovsdb.UUID]*svcCheck{}, mons: map[ovsdb.UUID]ServiceMonitor{}, byKey: map[svcKey]ovsdb.UUID{},
		writes: make(chan svcStatus, 256), pending: map[ovsdb.UUID]pendingStatus{}}
}

// SvcStats count this chassis' service monitors by the status it found.
type SvcStats struct {
	Online, Offline, Undecided, Error int
}

// svcTick is how often the prober looks for probes due and timed out.
const svcTick = 100 * time.Millisecond

// probeServices sends the probes due, decides those timed out, and
// hands status changes to the writer.
func (p *Pinctrl) probeServices(now time.Time) {
	st := p.svcState(now)
	if st == nil {
		return
	}
	sp := p.svc
	seen := map[ovsdb.UUID]bool{}
	for i := range st.ServiceMonitors {
		m := &st.ServiceMonitors[i]
		seen[m.UUID] = true
		want := ""
		if m.Problems != "" {
			want = sb.ServiceMonitorStatusError
		} else {
			c := sp.checks[m.UUID]
			if c == nil || c.timing != m.Timing || sp.mons[m.UUID].key() != m.key() {
				c = &svcCheck{timing: m.Timing, udp: m.Proto == "udp", next: now, status: m.Status}
				if c.status != sb.ServiceMonitorStatusOnline && c.status != sb.ServiceMonitorStatusOffline {
					c.status = ""
				}
				sp.checks[m.UUID] = c
			}
			if old, ok := sp.mons[m.UUID]; ok && sp.byKey[old.key()] == m.UUID {
				delete(sp.byKey, old.key())
			}
			sp.mons[m.UUID] = *m
			sp.byKey[m.key()] = m.UUID
			c.expire(now)
			if c.due(now) {
				sport, seq := probeID(m, c.sent)
				err := p.cfg.Switch.Execute(p.engine.svcPacketOut(m, svcProbe(m, sport, seq)))
				c.probed(now, sport, seq)
				p.countPeriodic("svc_monitor_probe", err)
			}
			want = c.status
		}
		if want == "" || want == m.Status {
			delete(sp.pending, m.UUID)
			continue
		}
		if ps, ok := sp.pending[m.UUID]; ok && ps.status == want && now.Sub(ps.at) < svcRewrite {
			continue
		}
		select {
		case sp.writes <- svcStatus{m.UUID, want}:
			sp.pending[m.UUID] = pendingStatus{want, now}
		default: // the writer is behind: the next tick tries again
		}
	}
	var counts SvcStats
	for i := range st.ServiceMonitors {
		m := &st.ServiceMonitors[i]
		switch c := sp.checks[m.UUID]; {
		case m.Problems != "":
			counts.Error++
		case c == nil || c.status == "":
			counts.Undecided++
		case c.status == sb.ServiceMonitorStatusOnline:
			counts.Online++
		default:
			counts.Offline++
		}
	}
	p.mu.Lock()
	p.svcStats = counts
	p.mu.Unlock()
	for id := range sp.checks {
		if !seen[id] {
			if sp.byKey[sp.mons[id].key()] == id {
				delete(sp.byKey, sp.mons[id].key())
			}
			delete(sp.checks, id)
			delete(sp.mons, id)
			delete(sp.pending, id)
		}
	}
}

// svcState is the state for the prober: the one last built while it is
// under a second old, since the prober ticks ten times a second and
// need not rebuild a busy Southbound's state that often.
func (p *Pinctrl) svcState(now time.Time) *State {
	if p.fixedState == nil && p.state != nil && p.cfg.SB() == p.stateFrom && now.Sub(p.stateTime) < time.Second {
		return p.state
	}
	return p.currentState(now)
}

// svcReplies gives replies to their monitors' state machines and closes
// the half-open connection of a SYN-ACK with a RST.
func (p *Pinctrl) svcReplies(rs []SvcReply, now time.Time) {
	sp := p.svc
	for i := range rs {
		r := &rs[i]
		id, ok := sp.byKey[r.key()]
		c := sp.checks[id]
		if !ok || c == nil || !c.answer(r, now) {
			continue // not ours, or late
		}
		if r.Kind == svcSynAck {
			m := sp.mons[id]
			if err := p.cfg.Switch.Execute(p.engine.svcPacketOut(&m, svcResetFrame(&m, c.sport, r.Ack))); err != nil {
				p.log.Debug("pinctrl: service monitor reset", "port", m.Port, "err", err)
			}
		}
	}
}

// writeServiceStatus writes the statuses the prober decided, each in a
// transaction of its own (they change seldom).
func (p *Pinctrl) writeServiceStatus(ctx context.Context) {
	for {
		var s svcStatus
		select {
		case <-ctx.Done():
			return
		case s = <-p.svc.writes:
		}
		err := p.commitServiceStatus(ctx, s)
		if err != nil && ctx.Err() == nil {
			p.log.Warn("pinctrl: writing Service_Monitor status", "row", s.id, "status", s.status, "err", err)
		}
		p.countPeriodic("svc_monitor_status", err)
	}
}

func (p *Pinctrl) commitServiceStatus(ctx context.Context, s svcStatus) error {
	c := p.cfg.SB()
	if c == nil {
		return errors.New("no southbound")
	}
	_, err := c.Do(ctx, func(t *client.Txn) error {
		for _, r := range client.List[sb.ServiceMonitor](c.Cache()) {
			if r.UUID != s.id {
				continue
			}
			if r.Status != nil && *r.Status == s.status {
				return nil
			}
			status := s.status
			t.UpdateModel(&sb.ServiceMonitor{Status: &status}, s.id, "status")
		}
		return nil
	})
	return err
}
