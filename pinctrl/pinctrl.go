package pinctrl

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/sb"
)

// Switch is what pinctrl needs of the datapath: its packet-ins and
// packet-out (dp.Datapath implements it).
type Switch interface {
	PacketIns() <-chan dp.PacketIn
	Execute(dp.PacketOut) error
}

// Limit is a rate limit: Rate packets a second on average, bursts of
// Burst.
type Limit struct {
	Rate  float64
	Burst float64
}

// DefaultLimit is each action kind's limit unless Config.Limits says
// otherwise: far above what a host's VMs need, far below a flood.
var defaultLimit = Limit{Rate: 1000, Burst: 1000}

// Config configures a Pinctrl.
type Config struct {
	Switch Switch
	// SB returns the Southbound client, or nil while there is none; it
	// may change over time.
	SB func() *client.Client
	// Chassis returns this chassis' name (system-id), "" if unknown.
	Chassis func() string
	Logger  *slog.Logger
	// Limits overrides the default limit (1000 a second, bursts of 1000)
	// per action kind ("put_arp", "arp", "put_dhcp_opts", ...).
	Limits map[string]Limit
	// MACBindingQueue bounds the MAC bindings waiting to be written
	// (default 4096); more are dropped and counted.
	MACBindingQueue int
}

// Pinctrl answers the packets the datapath sends to the controller and
// writes what they teach into the Southbound, on goroutines of its own:
// the datapath never waits for it, and a flood is cut by rate limits.
type Pinctrl struct {
	cfg    Config
	log    *slog.Logger
	engine *Engine

	mu       sync.Mutex
	counters map[string]*KindStats
	mb       MACBindingStats
	buckets  map[string]*bucket

	state      *State
	stateFrom  *client.Client
	stateGen   uint64
	stateTime  time.Time
	ras        map[string]*raSchedule   // periodic advertisements, by router port
	garps      map[string]*garpSchedule // announcements, by Announcement.Key
	fixedState *State                   // tests: the state, instead of the Southbound's
	recent     map[BindingKey]string    // bindings sent to the writer lately
	bindings   chan MACBinding
	fdbs       chan FDBEntry
	recentFDB  map[FDBKey]uint32
	fdbStats   MACBindingStats
	outErrors  uint64
	svc        *svcProber // the service monitors' state, on the runner's goroutine
	tbfd       *TunnelBFD // BFD over the tunnel (bfd_tunnel.go)
	pbfd       *PortBFD   // the Southbound's BFD sessions (bfd_port.go)
	svcStats   SvcStats

	// IGMP snooping: snoop and igmpDirty belong to the Run goroutine;
	// igmpSync carries the latest membership to the writer.
	snoop      *Snooping
	igmpDirty  bool
	igmpFailed bool
	igmpSync   chan igmpSnapshot
	igmpStats  IGMPStats
	queryNext  map[uint32]time.Time // when each querier switch queries next
	igmpSynced time.Time            // when the membership went to the writer last

	vports       chan VPortBinding          // bind_vport's, to their writer
	recentVPort  map[VPortBinding]time.Time // bindings sent, until recentTTL has passed
	vportStats   MACBindingStats
	events       chan ControllerEvent // trigger_event's, to their writer
	recentEvents map[string]time.Time // by ControllerEvent.Key, until recentTTL has passed
	eventStats   MACBindingStats
}

// KindStats count one kind of controller action.
type KindStats struct {
	Handled     uint64 // packet-ins answered
	RateDropped uint64 // dropped by the kind's rate limit
	Errors      uint64 // not answered: bad packet, unsupported, ...
}

// MACBindingStats count put_arp's and put_nd's work.
type MACBindingStats struct {
	Learned    uint64 // bindings handed to the writer
	Duplicates uint64 // already in the Southbound or just sent
	QueueDrops uint64 // dropped: the writer's queue was full
	Written    uint64 // rows inserted or updated
	WriteFails uint64 // transactions that failed
}

// Stats is a snapshot of a Pinctrl's counters.
type Stats struct {
	Kinds        map[string]KindStats
	MACBindings  MACBindingStats
	FDB          MACBindingStats // put_fdb's, counted alike
	PacketOutErr uint64          // packet-outs the datapath refused
	Services     SvcStats        // the service monitors probed here
	IGMP         IGMPStats
	VPorts       MACBindingStats // bind_vport's, counted as MAC bindings are
	Events       MACBindingStats // trigger_event's
}

// New returns a Pinctrl; Run starts it.
func New(cfg Config) (*Pinctrl, error) {
	e, err := NewEngine()
	if err != nil {
		return nil, fmt.Errorf("pinctrl: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MACBindingQueue <= 0 {
		cfg.MACBindingQueue = 4096
	}
	return &Pinctrl{cfg: cfg, log: cfg.Logger, engine: e, counters: map[string]*KindStats{},
		buckets: map[string]*bucket{}, recent: map[BindingKey]string{}, ras: map[string]*raSchedule{}, garps: map[string]*garpSchedule{},
		bindings: make(chan MACBinding, cfg.MACBindingQueue),
		fdbs:     make(chan FDBEntry, cfg.MACBindingQueue), recentFDB: map[FDBKey]uint32{}, svc: newSvcProber(),
		snoop: NewSnooping(), igmpDirty: true, igmpSync: make(chan igmpSnapshot, 1),
		vports: make(chan VPortBinding, 256), recentVPort: map[VPortBinding]time.Time{},
		events: make(chan ControllerEvent, 256), recentEvents: map[string]time.Time{}, tbfd: NewTunnelBFD(), pbfd: NewPortBFD()}, nil
}

// Run handles packet-ins until ctx ends.
func (p *Pinctrl) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(8)
	go func() {
		defer wg.Done()
		p.runPortBFD(ctx)
	}()
	go func() {
		defer wg.Done()
		p.writeVPorts(ctx)
	}()
	go func() {
		defer wg.Done()
		p.runTunnelBFD(ctx.Done())
	}()
	go func() {
		defer wg.Done()
		p.writeEvents(ctx)
	}()
	go func() {
		defer wg.Done()
		p.writeBindings(ctx)
	}()
	go func() {
		defer wg.Done()
		p.writeServiceStatus(ctx)
	}()
	go func() {
		defer wg.Done()
		p.writeIGMP(ctx)
	}()
	go func() {
		defer wg.Done()
		p.writeFDBs(ctx)
	}()
	defer wg.Wait()
	ins := p.cfg.Switch.PacketIns()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	svcTicker := time.NewTicker(svcTick)
	defer svcTicker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case pi := <-ins:
			p.handle(&pi, time.Now())
		case now := <-tick.C:
			p.sendRAs(now)
			p.sendGARPs(now)
			p.tickIGMP(now)
		case now := <-svcTicker.C:
			p.probeServices(now)
		}
	}
}

// garpSchedule is when an announcement repeats next; done after the
// last.
type garpSchedule struct {
	next     time.Time
	interval time.Duration
	done     bool
}

// sendGARPs sends the gratuitous ARPs that are due.
func (p *Pinctrl) sendGARPs(now time.Time) {
	st := p.currentState(now)
	if st == nil {
		return
	}
	seen := map[string]bool{}
	for _, a := range st.Announcements {
		key := a.Key()
		seen[key] = true
		s := p.garps[key]
		if s == nil {
			s = &garpSchedule{next: now}
			p.garps[key] = s
		}
		if s.done || now.Before(s.next) {
			continue
		}
		switch {
		case s.interval == 0:
			s.interval = garpFirstInterval
		case s.interval >= garpLastInterval:
			s.done = true
		default:
			s.interval *= 2
		}
		s.next = now.Add(s.interval)
		var failed error
		for _, po := range p.engine.garps(a) {
			if err := p.cfg.Switch.Execute(po); err != nil {
				failed = err
			}
		}
		p.countPeriodic("garp", failed)
	}
	for key := range p.garps {
		if !seen[key] {
			delete(p.garps, key)
		}
	}
}

// countPeriodic counts a packet pinctrl sent by itself under kind.
func (p *Pinctrl) countPeriodic(kind string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ks := p.counters[kind]
	if ks == nil {
		ks = &KindStats{}
		p.counters[kind] = ks
	}
	if err != nil {
		ks.Errors++
	} else {
		ks.Handled++
	}
}

// raSchedule is when a router port advertises next.
type raSchedule struct {
	next time.Time
	sent uint64
}

// sendRAs sends the periodic router advertisements that are due: a new
// port's at once, then one every raInterval.
func (p *Pinctrl) sendRAs(now time.Time) {
	st := p.currentState(now)
	if st == nil {
		return
	}
	seen := map[string]bool{}
	for _, port := range st.RAPorts {
		seen[port.Name] = true
		s := p.ras[port.Name]
		if s == nil {
			s = &raSchedule{next: now}
			p.ras[port.Name] = s
		}
		if now.Before(s.next) {
			continue
		}
		iv, err := raInterval(port, s.sent)
		if err != nil {
			iv = 600 * time.Second
		}
		s.next, s.sent = now.Add(iv), s.sent+1
		po, err := p.engine.periodicRA(port)
		if err == nil {
			err = p.cfg.Switch.Execute(po)
		}
		p.countPeriodic("periodic_ra", err)
		if err != nil {
			p.log.Debug("pinctrl: periodic router advertisement", "port", port.Name, "err", err)
		}
	}
	for name := range p.ras {
		if !seen[name] {
			delete(p.ras, name)
		}
	}
}

// handle answers one packet-in.
func (p *Pinctrl) handle(pi *dp.PacketIn, now time.Time) {
	kind := Kind(pi.UserData)
	p.mu.Lock()
	ks := p.counters[kind]
	if ks == nil {
		if len(p.counters) >= 64 {
			kind = "other" // bounded: userdata comes from flows, not packets, but stay safe
		}
		if ks = p.counters[kind]; ks == nil {
			ks = &KindStats{}
			p.counters[kind] = ks
		}
	}
	if !p.allow(kind, now) {
		ks.RateDropped++
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	switch kind {
	case TunnelBFDUserData:
		err := p.tbfd.Receive(pi, now)
		p.count(ks, err == nil)
		return
	case "handle_bfd_msg":
		err := p.pbfd.Receive(pi, now)
		p.count(ks, err == nil)
		return
	}
	st := p.currentState(now)
	if st == nil {
		p.count(ks, false)
		return
	}
	out, err := p.engine.Handle(pi, st)
	if err != nil {
		p.log.Debug("pinctrl: packet not answered", "action", kind, "err", err)
	}
	for _, po := range out.Packets {
		if xerr := p.cfg.Switch.Execute(po); xerr != nil {
			p.mu.Lock()
			p.outErrors++
			p.mu.Unlock()
			p.log.Debug("pinctrl: packet-out", "action", kind, "err", xerr)
		}
	}
	for _, b := range out.MACBindings {
		p.learn(b, st)
	}
	for _, f := range out.FDBs {
		p.learnFDB(f, st)
	}
	for _, v := range out.VPorts {
		p.learnVPort(v, st, now)
	}
	for _, e := range out.Events {
		p.raiseEvent(e, st, now)
	}
	p.svcReplies(out.SvcReplies, now)
	if len(out.IGMP) > 0 {
		p.applyIGMP(out.IGMP, st, now)
	}
	p.count(ks, err == nil)
}

func (p *Pinctrl) count(ks *KindStats, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ok {
		ks.Handled++
	} else {
		ks.Errors++
	}
}

// allow takes a token from kind's bucket; p.mu is held.
func (p *Pinctrl) allow(kind string, now time.Time) bool {
	b := p.buckets[kind]
	if b == nil {
		l, ok := p.cfg.Limits[kind]
		if !ok {
			l = defaultLimit
		}
		b = &bucket{limit: l, tokens: l.Burst, last: now}
		p.buckets[kind] = b
	}
	return b.take(now)
}

// bucket is a token bucket.
type bucket struct {
	limit  Limit
	tokens float64
	last   time.Time
}

func (b *bucket) take(now time.Time) bool {
	b.tokens = min(b.limit.Burst, b.tokens+now.Sub(b.last).Seconds()*b.limit.Rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// stateRefresh is how stale the Southbound state may be when the
// Southbound changes all the time (MAC bindings being written, say).
const stateRefresh = 100 * time.Millisecond

// currentState returns the Southbound state, rebuilt if the Southbound
// changed (at most every stateRefresh), or nil without a Southbound.
func (p *Pinctrl) currentState(now time.Time) *State {
	if p.fixedState != nil {
		return p.fixedState
	}
	c := p.cfg.SB()
	if c == nil || c.Cache().Schema() == nil {
		return nil
	}
	gen := c.Cache().Generation()
	if p.state == nil || c != p.stateFrom || gen != p.stateGen && now.Sub(p.stateTime) >= stateRefresh {
		name := ""
		if p.cfg.Chassis != nil {
			name = p.cfg.Chassis()
		}
		p.state, p.stateFrom, p.stateGen, p.stateTime = NewState(c.Cache(), name), c, gen, now
	}
	return p.state
}

// maxRecent bounds the bindings remembered as just sent.
const maxRecent = 65536

// learn hands a binding to the writer unless the Southbound has it or it
// was just sent.
func (p *Pinctrl) learn(b MACBinding, st *State) {
	mac := b.MAC.String()
	p.mu.Lock()
	defer p.mu.Unlock()
	if st.MACBindings[b.BindingKey] == mac || p.recent[b.BindingKey] == mac {
		p.mb.Duplicates++
		return
	}
	if len(p.recent) >= maxRecent {
		clear(p.recent)
	}
	select {
	case p.bindings <- b:
		p.recent[b.BindingKey] = mac
		p.mb.Learned++
	default:
		p.mb.QueueDrops++
	}
}

// writeBindings writes the learned MAC bindings into the Southbound, as
// many as are waiting in each transaction.
func (p *Pinctrl) writeBindings(ctx context.Context) {
	writeLearned(ctx, p, "MAC bindings", p.bindings, &p.mb,
		func(b MACBinding) BindingKey { return b.BindingKey }, p.commitBindings,
		func(batch map[BindingKey]MACBinding) {
			for k := range batch {
				delete(p.recent, k) // let the next packet try again
			}
		})
}

// maxLearnedBatch bounds the rows a learned-row writer puts in one
// transaction.
const maxLearnedBatch = 512

// writeLearned is the loop of a writer of learned rows (MAC bindings,
// FDB entries, virtual port bindings, controller events) until ctx ends:
// it waits for one item on ch, takes those queued behind it into one
// batch (by key: a later item replaces an earlier one), commits the batch
// in one transaction and counts the outcome in stats; after a failed
// commit forget lets the next packet try the batch's items again. stats
// and forget are used under p.mu.
func writeLearned[K comparable, T any](ctx context.Context, p *Pinctrl, what string, ch <-chan T, stats *MACBindingStats,
	key func(T) K, commit func(context.Context, map[K]T) (int, error), forget func(map[K]T)) {
	for {
		var first T
		select {
		case <-ctx.Done():
			return
		case first = <-ch:
		}
		batch := map[K]T{key(first): first}
	drain:
		for len(batch) < maxLearnedBatch {
			select {
			case v := <-ch:
				batch[key(v)] = v
			default:
				break drain
			}
		}
		n, err := commit(ctx, batch)
		p.mu.Lock()
		if err != nil {
			stats.WriteFails++
			forget(batch)
		} else {
			stats.Written += uint64(n)
		}
		p.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			p.log.Warn("pinctrl: writing "+what, "err", err)
		}
	}
}

// commitBindings inserts or updates the MAC_Binding rows of batch in one
// transaction and returns how many it wrote.
func (p *Pinctrl) commitBindings(ctx context.Context, batch map[BindingKey]MACBinding) (int, error) {
	c := p.cfg.SB()
	if c == nil {
		return 0, fmt.Errorf("no southbound")
	}
	keys := make([]BindingKey, 0, len(batch))
	for k := range batch {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].LogicalPort != keys[j].LogicalPort {
			return keys[i].LogicalPort < keys[j].LogicalPort
		}
		return keys[i].IP.Less(keys[j].IP)
	})
	n := 0
	_, err := c.Do(ctx, func(t *client.Txn) error {
		n = 0
		existing := map[BindingKey]sb.MACBinding{}
		for _, m := range client.List[sb.MACBinding](c.Cache()) {
			if ip, err := netip.ParseAddr(m.IP); err == nil {
				existing[BindingKey{m.LogicalPort, ip}] = m
			}
		}
		for _, k := range keys {
			b := batch[k]
			mac := b.MAC.String()
			row := sb.MACBinding{Datapath: b.Datapath.UUID, LogicalPort: k.LogicalPort, IP: k.IP.String(), MAC: mac, Timestamp: b.Timestamp}
			old, ok := existing[k]
			switch {
			case ok && strings.EqualFold(old.MAC, mac):
				continue
			case ok:
				t.UpdateModel(&row, old.UUID, "mac", "timestamp")
			default:
				t.InsertModel(&row)
			}
			n++
		}
		return nil
	})
	return n, err
}

// TunnelBFD returns the BFD sessions over the tunnel, for the
// controller to configure and read.
func (p *Pinctrl) TunnelBFD() *TunnelBFD { return p.tbfd }

// PortBFD returns the sessions of the Southbound's BFD rows run here.
func (p *Pinctrl) PortBFD() *PortBFD { return p.pbfd }

// Stats returns a snapshot of the counters.
func (p *Pinctrl) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Kinds: map[string]KindStats{}, MACBindings: p.mb, FDB: p.fdbStats, PacketOutErr: p.outErrors, Services: p.svcStats, IGMP: p.igmpStats,
		VPorts: p.vportStats, Events: p.eventStats}
	for k, v := range p.counters {
		s.Kinds[k] = *v
	}
	return s
}

// String formats s for the pinctrl/show command, one kind a line.
func (s Stats) String() string {
	var b strings.Builder
	kinds := make([]string, 0, len(s.Kinds))
	for k := range s.Kinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		v := s.Kinds[k]
		fmt.Fprintf(&b, "%s: handled %d, rate-dropped %d, errors %d\n", k, v.Handled, v.RateDropped, v.Errors)
	}
	m := s.MACBindings
	fmt.Fprintf(&b, "mac bindings: learned %d, duplicates %d, queue drops %d, written %d, failed transactions %d\n",
		m.Learned, m.Duplicates, m.QueueDrops, m.Written, m.WriteFails)
	m = s.FDB
	fmt.Fprintf(&b, "fdb: learned %d, duplicates %d, queue drops %d, written %d, failed transactions %d\n",
		m.Learned, m.Duplicates, m.QueueDrops, m.Written, m.WriteFails)
	m = s.VPorts
	fmt.Fprintf(&b, "virtual ports: bound %d, duplicates %d, queue drops %d, written %d, failed transactions %d\n",
		m.Learned, m.Duplicates, m.QueueDrops, m.Written, m.WriteFails)
	m = s.Events
	fmt.Fprintf(&b, "controller events: raised %d, duplicates %d, queue drops %d, written %d, failed transactions %d\n",
		m.Learned, m.Duplicates, m.QueueDrops, m.Written, m.WriteFails)
	v := s.Services
	fmt.Fprintf(&b, "service monitors: online %d, offline %d, undecided %d, error %d\n", v.Online, v.Offline, v.Undecided, v.Error)
	g := s.IGMP
	fmt.Fprintf(&b, "igmp: reports %d, ignored %d, groups %d, rows written %d, failed transactions %d\n",
		g.Reports, g.Ignored, g.Groups, g.Written, g.WriteFails)
	fmt.Fprintf(&b, "packet-out errors: %d\n", s.PacketOutErr)
	return b.String()
}
