package dp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/govn/govn/datapath/conntrack"
	"github.com/govn/govn/datapath/conntrack/ipfrag"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/megaflow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/datapath/xlate"
)

// SlowPath translates a packet's key through the flow tables: the upcall.
// Pipeline (flow tables plus package xlate) implements it.
type SlowPath interface {
	// Translate returns the datapath actions for the packet with key k,
	// the mask of the key bits the translation examined (every packet that
	// agrees with k on the mask gets the same actions) and the generation
	// of the tables it saw.
	Translate(k *flow.Key, opts xlate.Options) xlate.Result
	// Generation is the version of the flow tables; every change bumps it.
	Generation() uint64
}

// Injector is a slow path that can also translate a packet the
// controller injects (Pipeline implements it); Execute needs it.
type Injector interface {
	TranslateFrom(k *flow.Key, s xlate.Start, opts xlate.Options) xlate.Result
}

// Conntrack is the connection tracker behind the ct() action; package
// conntrack's Tracker implements it. The datapath passes its own clock
// (time since New) as now, and calls Expire a few times a second while it
// runs.
type Conntrack interface {
	Process(pkt []byte, l3off int, p conntrack.Params, now time.Duration) conntrack.Result
	Expire(now time.Duration) int
}

// Config configures a Datapath.
type Config struct {
	// Flows is the slow path; required.
	Flows SlowPath
	// Conntrack serves ct() actions. Without it, packets reaching a ct()
	// action are dropped and counted.
	Conntrack Conntrack
	// IdleTimeout removes megaflows unused for this long (default 10 s).
	IdleTimeout time.Duration
	// FlowLimit caps the megaflows of all receive queues together
	// (default megaflow.DefaultFlowLimit, 200,000, as Open vSwitch's
	// other_config:flow-limit). At the cap an upcall forwards its packet
	// without installing a megaflow and counts it (Stats.FlowLimitHits);
	// SetFlowLimit changes it while the datapath runs.
	FlowLimit int
	// PacketInQueue is the depth of the packet-in channel (default 1024);
	// packet-ins that find it full are dropped and counted.
	PacketInQueue int
	// Logger receives errors of ports; default slog.Default().
	Logger *slog.Logger
}

// PacketIn is a packet sent to the controller by a controller() action.
type PacketIn struct {
	InPort   uint32
	Key      flow.Key // the key when the action ran, with its metadata and registers
	Table    uint8    // the table of the rule whose action it was
	UserData []byte
	Frame    []byte // a copy of the frame
	// Cont is set if the action paused the pipeline: Resume continues it.
	Cont *flow.Continuation
}

// PacketOut is a frame the controller sends through the flow tables.
type PacketOut struct {
	Frame []byte
	// Key holds the packet's metadata: in_port (the port it is deemed to
	// come from), tunnel fields, and the pipeline's metadata and
	// registers. Its header fields are ignored: Execute parses Frame.
	Key flow.Key
	// Start says where it enters: with Actions, it runs them in the
	// context of Table; without, it is looked up in Table.
	Table   uint8
	Actions []flow.Action
	Stack   []flow.U128
}

// Resume returns the packet-out that continues the pipeline pi paused,
// with frame (pi.Frame, or the packet the controller rewrote) and the
// metadata and registers of key (pi.Key with the action's result set).
func (pi *PacketIn) Resume(frame []byte, key flow.Key) PacketOut {
	po := PacketOut{Frame: frame, Key: key}
	if pi.Cont != nil {
		po.Table = pi.Cont.Table
		po.Actions = pi.Cont.Actions
		po.Stack = pi.Cont.Stack
		if po.Actions == nil {
			po.Actions = []flow.Action{} // nothing left: not a table lookup
		}
	}
	return po
}

// Datapath is a userspace switch: ports, a per-receive-queue exact-match
// and megaflow cache (package megaflow), the slow path on a miss, and the
// action executor.
type Datapath struct {
	cfg      Config
	start    time.Time
	packetIn chan PacketIn
	frags    *ipfrag.Reassembler // fragments before ct(), per zone
	meters   meters              // meter() actions' token buckets
	ctBatch  ConntrackBatcher    // Config.Conntrack if it has a batch method
	limit    *megaflow.Limit     // the cap on every worker's megaflows together

	mu      sync.Mutex
	ports   atomic.Pointer[map[uint32]*portEntry] // copy on write, under mu
	runCtx  context.Context                       // set while Run runs
	workers sync.WaitGroup

	removed counters // counters of workers whose ports were removed

	// inject runs the controller's packet-outs, with its own caches for
	// the recirculations they make; its mutex serializes them.
	inject *worker
}

// portEntry is an attached port and the goroutine receiving from it.
type portEntry struct {
	no     uint32
	port   port.Port
	tunnel bool // output sets the tunnel header from the tunnel fields
	w      *worker
	done   chan struct{}
}

// New returns a datapath with no ports. Add ports with AddPort and start it
// with Run.
func New(cfg Config) (*Datapath, error) {
	if cfg.Flows == nil {
		return nil, errors.New("datapath: Config.Flows is required")
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Second
	}
	if cfg.PacketInQueue <= 0 {
		cfg.PacketInQueue = 1024
	}
	if cfg.FlowLimit <= 0 {
		cfg.FlowLimit = megaflow.DefaultFlowLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Datapath{cfg: cfg, start: time.Now(), packetIn: make(chan PacketIn, cfg.PacketInQueue), frags: ipfrag.New(ipfrag.Config{})}
	d.ctBatch, _ = cfg.Conntrack.(ConntrackBatcher)
	d.limit = megaflow.NewLimit(cfg.FlowLimit)
	d.ports.Store(&map[uint32]*portEntry{})
	d.inject = newWorker(d, &portEntry{done: make(chan struct{})})
	return d, nil
}

// now is the datapath's monotonic clock.
func (d *Datapath) now() time.Duration { return time.Since(d.start) }

// PacketIns delivers the packets controller() actions send.
func (d *Datapath) PacketIns() <-chan PacketIn { return d.packetIn }

// AddPort attaches p as port number no (the in_port of its packets and the
// target of output:no). If the datapath is running, p starts receiving at
// once. The datapath closes p when it is removed or Run ends.
func (d *Datapath) AddPort(no uint32, p port.Port) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := *d.ports.Load()
	if _, ok := old[no]; ok {
		return fmt.Errorf("datapath: add port %d (%s): number in use", no, p.Name())
	}
	_, isTunnel := p.(*port.UDPTunnel)
	if t, ok := p.(interface{ IsTunnel() bool }); ok && t.IsTunnel() {
		isTunnel = true // a channel standing for one (port.NewTunnelChannel)
	}
	pe := &portEntry{no: no, port: p, tunnel: isTunnel, done: make(chan struct{})}
	pe.w = newWorker(d, pe)
	m := make(map[uint32]*portEntry, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[no] = pe
	d.ports.Store(&m)
	if d.runCtx != nil {
		d.startWorker(pe)
	}
	return nil
}

// RemovePort detaches and closes port no.
func (d *Datapath) RemovePort(no uint32) error {
	d.mu.Lock()
	old := *d.ports.Load()
	pe, ok := old[no]
	if !ok {
		d.mu.Unlock()
		return fmt.Errorf("datapath: remove port %d: no such port", no)
	}
	m := make(map[uint32]*portEntry, len(old))
	for k, v := range old {
		if k != no {
			m[k] = v
		}
	}
	d.ports.Store(&m)
	running := d.runCtx != nil
	d.mu.Unlock()
	err := pe.port.Close()
	if running {
		<-pe.done
	}
	// The worker is gone: its megaflows credit their rules and free
	// their recirculation states, and its cache's hits join the totals
	// (Stats reads them from the cache of the ports still there).
	pe.w.mu.Lock()
	pe.w.cache.Flush()
	cs := pe.w.cache.Stats()
	pe.w.mu.Unlock()
	pe.w.st.emcHits.Add(cs.EMCHits)
	pe.w.st.megaflowHits.Add(cs.MegaflowHits)
	pe.w.st.addTo(&d.removed)
	return err
}

// Run receives and forwards packets until ctx ends, then closes every port.
func (d *Datapath) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.runCtx != nil {
		d.mu.Unlock()
		return errors.New("datapath: already running")
	}
	d.runCtx = ctx
	for _, pe := range *d.ports.Load() {
		d.startWorker(pe)
	}
	d.mu.Unlock()

	// Workers expire their own megaflows when packets arrive; this catches
	// the megaflows of quiet ports, and ages conntrack entries.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ctx.Err() == nil; n++ {
		select {
		case <-ctx.Done():
		case <-tick.C:
			if d.cfg.Conntrack != nil {
				d.cfg.Conntrack.Expire(d.now())
			}
			d.frags.Expire(d.now())
			if n%5 == 0 {
				d.ExpireIdle()
			}
			if d.limit.Over() > 0 {
				d.evictOverLimit()
			}
		}
	}
	d.mu.Lock()
	for _, pe := range *d.ports.Load() {
		pe.port.Close()
	}
	d.mu.Unlock()
	d.workers.Wait()
	d.mu.Lock()
	d.runCtx = nil
	d.mu.Unlock()
	return nil
}

func (d *Datapath) startWorker(pe *portEntry) {
	d.workers.Add(1)
	go func() {
		defer d.workers.Done()
		defer close(pe.done)
		if err := pe.w.run(); err != nil {
			d.cfg.Logger.Error("datapath port stopped", "port", pe.port.Name(), "err", err)
		}
	}()
}

// Stats are the datapath's counters.
type Stats struct {
	Packets       uint64 // received from ports, before recirculation
	EMCHits       uint64 // found in the exact-match cache
	MegaflowHits  uint64 // found in the megaflow cache
	Upcalls       uint64 // misses sent to the slow path
	UpcallErrors  uint64 // translations that failed (packet dropped)
	Installed     uint64 // megaflows installed
	Expired       uint64 // megaflows removed for idleness
	Revalidated   uint64 // megaflows checked after a flow-table change
	Invalidated   uint64 // megaflows removed or changed by revalidation
	Recirculated  uint64 // recirculations
	LoopDrops     uint64 // packets dropped for recirculating too often
	NoPortDrops   uint64 // outputs to a port number with no port
	BadOffloads   uint64 // frames dropped: offload metadata that does not fit them
	CTDrops       uint64 // ct() without a tracker
	PacketIns     uint64 // sent to the controller
	PacketInDrops uint64 // dropped: packet-in channel full
	PacketOuts    uint64 // packets the controller injected (Execute)
	FragsHeld     uint64 // IP fragments held for reassembly before ct()
	Reassembled   uint64 // datagrams reassembled (their last fragment went on)
	FragDrops     uint64 // fragments dropped by reassembly, or datagrams not refragmentable
	MeterDrops    uint64 // packets over a meter's rate
	FlowLimitHits uint64 // upcalls that installed no megaflow: the flow limit was reached
	Evicted       uint64 // megaflows removed to get under a lowered flow limit
	Megaflows     int    // megaflows installed now, over all workers
	FlowLimit     int    // the cap on Megaflows (and the packet-outs' recirculations)
}

// counters are a worker's counts. Its cache counts the hits (emcHits
// and megaflowHits stay zero) until RemovePort moves them here.
type counters struct {
	packets, emcHits, megaflowHits, upcalls, upcallErrors atomic.Uint64
	installed, expired, revalidated, invalidated          atomic.Uint64
	recirculated, loopDrops, noPortDrops, badOffloads     atomic.Uint64
	ctDrops, packetIns, packetInDrops, packetOuts         atomic.Uint64
	fragsHeld, reassembled, fragDrops, meterDrops         atomic.Uint64
	flowLimitHits, evicted                                atomic.Uint64
}

// Stats returns the datapath's counters.
func (d *Datapath) Stats() Stats {
	s := d.removed.stats()
	s.add(d.inject.st.stats())
	for _, pe := range *d.ports.Load() {
		s.add(pe.w.st.stats())
		pe.w.mu.Lock()
		cs := pe.w.cache.Stats()
		s.EMCHits += cs.EMCHits
		s.MegaflowHits += cs.MegaflowHits
		s.Megaflows += pe.w.cache.Len()
		pe.w.mu.Unlock()
	}
	s.FlowLimit = d.limit.Max()
	return s
}

func (c *counters) stats() Stats {
	return Stats{
		Packets: c.packets.Load(), EMCHits: c.emcHits.Load(), MegaflowHits: c.megaflowHits.Load(),
		Upcalls: c.upcalls.Load(), UpcallErrors: c.upcallErrors.Load(), Installed: c.installed.Load(),
		Expired: c.expired.Load(), Revalidated: c.revalidated.Load(), Invalidated: c.invalidated.Load(),
		Recirculated: c.recirculated.Load(), LoopDrops: c.loopDrops.Load(), NoPortDrops: c.noPortDrops.Load(),
		BadOffloads: c.badOffloads.Load(), CTDrops: c.ctDrops.Load(), PacketIns: c.packetIns.Load(),
		PacketInDrops: c.packetInDrops.Load(), PacketOuts: c.packetOuts.Load(), FragsHeld: c.fragsHeld.Load(), Reassembled: c.reassembled.Load(),
		FragDrops: c.fragDrops.Load(), MeterDrops: c.meterDrops.Load(),
		FlowLimitHits: c.flowLimitHits.Load(), Evicted: c.evicted.Load(),
	}
}

// add adds o's counts to s.
func (s *Stats) add(o Stats) {
	s.Packets += o.Packets
	s.EMCHits += o.EMCHits
	s.MegaflowHits += o.MegaflowHits
	s.Upcalls += o.Upcalls
	s.UpcallErrors += o.UpcallErrors
	s.Installed += o.Installed
	s.Expired += o.Expired
	s.Revalidated += o.Revalidated
	s.Invalidated += o.Invalidated
	s.Recirculated += o.Recirculated
	s.LoopDrops += o.LoopDrops
	s.NoPortDrops += o.NoPortDrops
	s.BadOffloads += o.BadOffloads
	s.CTDrops += o.CTDrops
	s.PacketIns += o.PacketIns
	s.PacketInDrops += o.PacketInDrops
	s.PacketOuts += o.PacketOuts
	s.FragsHeld += o.FragsHeld
	s.Reassembled += o.Reassembled
	s.FragDrops += o.FragDrops
	s.MeterDrops += o.MeterDrops
	s.FlowLimitHits += o.FlowLimitHits
	s.Evicted += o.Evicted
}

// addTo adds c's counts to the atomic counters of t.
func (c *counters) addTo(t *counters) {
	s := c.stats()
	t.packets.Add(s.Packets)
	t.emcHits.Add(s.EMCHits)
	t.megaflowHits.Add(s.MegaflowHits)
	t.upcalls.Add(s.Upcalls)
	t.upcallErrors.Add(s.UpcallErrors)
	t.installed.Add(s.Installed)
	t.expired.Add(s.Expired)
	t.revalidated.Add(s.Revalidated)
	t.invalidated.Add(s.Invalidated)
	t.recirculated.Add(s.Recirculated)
	t.loopDrops.Add(s.LoopDrops)
	t.noPortDrops.Add(s.NoPortDrops)
	t.badOffloads.Add(s.BadOffloads)
	t.ctDrops.Add(s.CTDrops)
	t.packetIns.Add(s.PacketIns)
	t.packetInDrops.Add(s.PacketInDrops)
	t.packetOuts.Add(s.PacketOuts)
	t.fragsHeld.Add(s.FragsHeld)
	t.reassembled.Add(s.Reassembled)
	t.fragDrops.Add(s.FragDrops)
	t.meterDrops.Add(s.MeterDrops)
	t.flowLimitHits.Add(s.FlowLimitHits)
	t.evicted.Add(s.Evicted)
}

// PortStats returns the counters of every port by number.
func (d *Datapath) PortStats() map[uint32]port.Stats {
	m := map[uint32]port.Stats{}
	for no, pe := range *d.ports.Load() {
		m[no] = pe.port.Stats()
	}
	return m
}

// PortCounters are one port's number, name and counters.
type PortCounters struct {
	No    uint32
	Name  string
	Stats port.Stats
}

// Ports returns every port's counters, by port number.
func (d *Datapath) Ports() []PortCounters {
	ports := *d.ports.Load()
	out := make([]PortCounters, 0, len(ports))
	for no, pe := range ports {
		out = append(out, PortCounters{No: no, Name: pe.port.Name(), Stats: pe.port.Stats()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].No < out[j].No })
	return out
}

// Megaflow describes an installed megaflow for dumps.
type Megaflow struct {
	Match   flow.Match // key and mask
	Actions []flow.DPAction
	Hits    uint64
	Bytes   uint64 // of the packets Hits counts, as received
	Idle    time.Duration
	InPort  uint32         // the receive queue (port) whose cache holds it
	Reasons []xlate.Reason // for each matched field, the rule or action that examined it
}

// String formats m like ovs-appctl dpctl/dump-flows, with its reasons on
// the following lines.
func (m Megaflow) String() string {
	s := fmt.Sprintf("%s, packets:%d, bytes:%d, used:%.3fs, actions:%s", m.Match.String(), m.Hits, m.Bytes, m.Idle.Seconds(), flow.DPActionsString(m.Actions))
	for _, r := range m.Reasons {
		s += "\n    " + r.String()
	}
	return s
}

// Megaflows returns every installed megaflow.
func (d *Datapath) Megaflows() []Megaflow {
	now := d.now()
	var out []Megaflow
	for no, pe := range *d.ports.Load() {
		pe.w.mu.Lock()
		pe.w.cache.Flows(func(f *megaflow.Flow) {
			out = append(out, Megaflow{
				Match:   flow.Match{Key: f.Key, Mask: *f.Mask()},
				Actions: f.Actions, Hits: f.Hits, Bytes: f.Bytes, Idle: now - f.Used, InPort: no,
				Reasons: f.Reasons,
			})
		})
		pe.w.mu.Unlock()
	}
	return out
}

// Revalidate brings every worker's megaflows up to date with the flow
// tables now, without waiting for each worker's next packet. Workers also
// revalidate by themselves before using their cache after a change.
func (d *Datapath) Revalidate() {
	for _, pe := range *d.ports.Load() {
		pe.w.mu.Lock()
		pe.w.revalidate()
		pe.w.mu.Unlock()
	}
}

// Trace translates a packet with key k through the flow tables and returns
// its path and the megaflow it would get (like ofproto/trace): Mask and
// Key are as an upcall installs them.
func (d *Datapath) Trace(k flow.Key) xlate.Result {
	r := d.cfg.Flows.Translate(&k, xlate.Options{Trace: true})
	r.Mask = datapathMask(r.Mask)
	r.Key = k.And(&r.Mask)
	return r
}

// FlushMegaflows deletes every megaflow of every worker and returns how
// many there were; the packets that follow make upcalls.
func (d *Datapath) FlushMegaflows() int {
	n := 0
	for _, pe := range *d.ports.Load() {
		pe.w.mu.Lock()
		n += pe.w.cache.Len()
		pe.w.cache.Flush()
		pe.w.mu.Unlock()
	}
	return n
}

// PushStats credits the packets every megaflow counted since the last
// push to the rules (and table misses) of its translation, so the flow
// tables' counters (flow.Rule.Stats, classifier.Tables.TableStats) are up
// to date; dumps call it first. Expiry and revalidation push as well, but
// a worker sweeps for expiry only after a receive (about once a second
// while its port has traffic), so without PushStats the last hits before
// a port goes quiet wait for the next packet.
func (d *Datapath) PushStats() {
	for _, pe := range *d.ports.Load() {
		pe.w.mu.Lock()
		pe.w.cache.PushStats()
		pe.w.mu.Unlock()
	}
}

// FlowLimit returns the cap on the megaflows of all workers together.
func (d *Datapath) FlowLimit() int { return d.limit.Max() }

// SetFlowLimit changes the cap on the megaflows of all workers together
// (as ovs-appctl upcall/set-flow-limit) and, if they hold more, evicts
// the excess, least recently hit first. It returns how many it evicted.
func (d *Datapath) SetFlowLimit(n int) (evicted int, err error) {
	if n < 0 {
		return 0, fmt.Errorf("datapath: flow limit %d: must not be negative", n)
	}
	d.limit.Set(n)
	return d.evictOverLimit(), nil
}

// allWorkers returns every worker: the ports' and the packet-outs'.
func (d *Datapath) allWorkers() []*worker {
	ports := *d.ports.Load()
	ws := make([]*worker, 0, len(ports)+1)
	for _, pe := range ports {
		ws = append(ws, pe.w)
	}
	return append(ws, d.inject)
}

// evictOverLimit removes the megaflows above the flow limit, least
// recently hit first over all workers: it takes every megaflow's last-hit
// time, picks the time by which enough of them were last hit, and has
// each worker evict its megaflows idle since then, until under the limit.
// Megaflows hit meanwhile are spared; what is left over goes on Run's
// next tick. It returns how many it evicted.
func (d *Datapath) evictOverLimit() int {
	over := d.limit.Over()
	if over == 0 {
		return 0
	}
	ws := d.allWorkers()
	var used []time.Duration
	for _, w := range ws {
		w.mu.Lock()
		used = w.cache.AppendUsed(used)
		w.mu.Unlock()
	}
	if len(used) == 0 {
		return 0
	}
	slices.Sort(used)
	by := used[min(over, len(used))-1]
	n := 0
	for _, w := range ws {
		if over = d.limit.Over(); over == 0 {
			break
		}
		w.mu.Lock()
		k := w.cache.Evict(by, over)
		w.mu.Unlock()
		w.st.evicted.Add(uint64(k))
		n += k
	}
	return n
}

// ExpireIdle removes megaflows idle for longer than the idle timeout. Run
// calls it periodically.
func (d *Datapath) ExpireIdle() {
	for _, pe := range *d.ports.Load() {
		pe.w.mu.Lock()
		pe.w.expire()
		pe.w.mu.Unlock()
	}
}

// Execute runs a frame the controller built or resumes through the flow
// tables from po's start, and sends it where they say, as an OpenFlow
// packet-out does. It does not wait for the packet-in channel or the
// receive goroutines; packet-outs run one at a time.
func (d *Datapath) Execute(po PacketOut) error {
	inj, ok := d.cfg.Flows.(Injector)
	if !ok {
		return errors.New("datapath: execute: the slow path cannot inject packets")
	}
	if len(po.Frame) > port.MaxFrame {
		return fmt.Errorf("datapath: execute: frame of %d bytes exceeds %d", len(po.Frame), port.MaxFrame)
	}
	w := d.inject
	w.mu.Lock()
	defer w.mu.Unlock()
	now := d.now()
	if w.cache.NeedsRevalidation(d.cfg.Flows.Generation()) {
		w.revalidate()
	}
	if now-w.lastExpire > time.Second {
		w.expire()
	}
	k := po.Key
	packet.Extract(po.Frame, &k)
	r := inj.TranslateFrom(&k, xlate.Start{Table: po.Table, Actions: po.Actions, Meta: po.Key, Stack: po.Stack}, xlate.Options{})
	if r.Err != nil {
		w.st.upcallErrors.Add(1)
		return fmt.Errorf("datapath: execute: %w", r.Err)
	}
	if err := r.Learned.Install(); err != nil {
		d.cfg.Logger.Warn("datapath: execute: learned rules", "err", err)
	}
	w.st.packetOuts.Add(1)
	p := port.NewPacket(len(po.Frame))
	p.SetFrame(po.Frame)
	w.execute(p, &k, r.Actions, now, 0)
	w.drainCT(now)
	w.flush()
	return nil
}
