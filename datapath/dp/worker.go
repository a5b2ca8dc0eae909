package dp

import (
	"errors"
	"sync"
	"time"

	"github.com/govn/govn/datapath/conntrack"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/megaflow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/datapath/xlate"
)

// maxRecirculations bounds how often one packet may re-enter the caches; a
// pipeline that loops is a programming error and must not hang the switch.
const maxRecirculations = 8

// worker receives from one port (receive queue) and runs each batch through
// its own caches and the action executor.
type worker struct {
	d    *Datapath
	pe   *portEntry
	pkts []*port.Packet

	// mu is held while a batch is processed; dumps, Revalidate and
	// ExpireIdle take it to reach the cache from other goroutines.
	mu         sync.Mutex
	cache      *megaflow.Cache
	lastExpire time.Duration
	out        []outQueue // outputs pending until the end of the batch
	scratch    []byte     // software segmentation
	st         counters   // this worker's share of the datapath's counters

	// Packets waiting at a shared ct() action (ctbatch.go), and the
	// scratch slices of one tracker batch.
	ctq, ctSpare []ctWait
	ctGroup      []int
	ctPkts       [][]byte
	ctOffs       []int
	ctRes        []conntrack.Result

	// Reassembled datagrams of this batch and the size to refragment them
	// to on output (frag.go); nil until the first fragment.
	fragMTU map[*port.Packet]int
	fragID  uint32 // IPv6 fragment identification for refragmenting

	meters map[flow.DPMeter]*tokenBucket // the meters this worker has used

	// The port the last output looked up, and the port map it was found
	// in: the map is copied on every change, so a new pointer means the
	// cached entry may be stale. Most megaflows output to one port, and
	// this saves a map lookup per packet.
	outPorts *map[uint32]*portEntry
	outNo    uint32
	outPE    *portEntry

	// nats holds the tracker's form of the NAT of the ct() actions this
	// worker ran, converted once per action rather than per packet (the
	// conversion allocates); see trackerNAT.
	nats map[*flow.NAT]*conntrack.NAT

	// clones are this batch's copies of packets, spares the packets of
	// earlier batches' copies, ready for reuse (frag.go's clone).
	clones, spares []*port.Packet
	keys           []*flow.Key // keyCopy's spare keys
}

// maxNATs bounds worker.nats: megaflows come and go, each translation
// with NATs of its own, and the map starts over when full.
const maxNATs = 1024

// outQueue collects the batch's packets for one output port.
type outQueue struct {
	pe   *portEntry
	pkts []*port.Packet
}

func newWorker(d *Datapath, pe *portEntry) *worker {
	w := &worker{d: d, pe: pe, pkts: make([]*port.Packet, port.BatchSize), cache: megaflow.New(true)}
	w.cache.SetLimit(d.limit)
	for i := range w.pkts {
		w.pkts[i] = port.NewPacket(port.MaxFrame)
	}
	return w
}

// run is the receive loop.
func (w *worker) run() error {
	for {
		n, err := w.pe.port.Recv(w.pkts)
		if errors.Is(err, port.ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		w.mu.Lock()
		now := w.d.now()
		if w.cache.NeedsRevalidation(w.d.cfg.Flows.Generation()) {
			w.revalidate()
		}
		if now-w.lastExpire > time.Second {
			w.expire()
		}
		for _, p := range w.pkts[:n] {
			w.receive(p, now)
		}
		w.drainCT(now)
		w.flush()
		// Counted once a batch, when its packets are done: an atomic add
		// per packet shows in profiles.
		w.st.packets.Add(uint64(n))
		w.mu.Unlock()
	}
}

// receive runs one packet from the wire through the datapath. The caller
// counts it in w.st.packets.
func (w *worker) receive(p *port.Packet, now time.Duration) {
	// A partial checksum is finished here, once, so that conntrack, header
	// rewrites and every output port see a valid packet. A GSO frame keeps
	// its partial checksum: the kernel needs it to split the frame.
	if p.Offload.NeedsCsum && !p.Offload.IsGSO() {
		if err := p.FinishChecksum(); err != nil {
			w.st.badOffloads.Add(1)
			return
		}
	}
	var k flow.Key
	k.Set(flow.InPort, uint64(w.pe.no))
	if t := &p.Tunnel; t.Valid() {
		setTunnelKey(&k, t)
	}
	packet.Extract(p.Data, &k)
	w.process(p, &k, now, 0)
}

// process looks a packet up and executes its megaflow's actions, calling
// the slow path on a miss.
func (w *worker) process(p *port.Packet, k *flow.Key, now time.Duration, depth int) {
	if mf := w.cache.Lookup(k, now); mf != nil {
		mf.Bytes += uint64(len(p.Data))
		if w.deferCT(p, k, mf.Actions, now, depth) {
			return // drainCT runs it with the batch's other packets at that ct()
		}
		w.execute(p, k, mf.Actions, now, depth)
		return
	}
	actions, ok := w.upcall(k, len(p.Data), now)
	if ok {
		w.execute(p, k, actions, now, depth)
	}
}

// upcall translates k in the slow path and installs the megaflow, unless
// the tables changed during the translation or the flow limit is reached
// (then the actions are used for this packet only). The packet, of size bytes, is credited to the
// rules it ran at once; the megaflow credits the packets that hit it.
func (w *worker) upcall(k *flow.Key, bytes int, now time.Duration) ([]flow.DPAction, bool) {
	w.st.upcalls.Add(1)
	sp := w.d.cfg.Flows
	r := translate(sp, k)
	if r.Err != nil {
		w.st.upcallErrors.Add(1)
		return nil, false
	}
	r.Counters.Credit(1, uint64(bytes))
	if r.Generation == w.cache.Generation() {
		if w.cache.Insert(&r, now) != nil {
			w.st.installed.Add(1)
		} else {
			w.st.flowLimitHits.Add(1)
		}
	}
	return r.Actions, true
}

// datapathMask is the slow path's mask made fit for a megaflow: without
// pipeline-only fields, and always exact on in_port and recirc_id, which
// select the pipeline a packet runs.
func datapathMask(m flow.Mask) flow.Mask {
	po := flow.PipelineOnlyMask() // bits no packet carries
	m.ClearMask(&po)
	m.SetField(flow.InPort)
	m.SetField(flow.RecircID)
	return m
}

// translate runs the slow path on a copy of k (only the copy escapes, so
// the fast path's keys stay on the stack) and makes the megaflow fit for
// the datapath.
func translate(sp SlowPath, k *flow.Key) xlate.Result {
	sample := *k
	r := sp.Translate(&sample, xlate.Options{})
	r.Mask = datapathMask(r.Mask)
	r.Key = k.And(&r.Mask)
	return r
}

// revalidate brings the cache to the flow tables' current generation:
// megaflows whose translation changed are deleted, so no stale megaflow
// survives a change.
func (w *worker) revalidate() {
	sp := w.d.cfg.Flows
	tr := func(k *flow.Key) xlate.Result { return translate(sp, k) }
	var kept, deleted int
	// A slow path that knows which tables changed (Pipeline does) lets
	// megaflows that looked only at other tables skip re-translation.
	if cs, ok := sp.(interface {
		ChangedSince(since uint64, tables *flow.TableSet, groups bool) bool
	}); ok {
		kept, deleted = w.cache.Revalidate(sp.Generation(), tr, cs.ChangedSince)
	} else {
		kept, deleted = w.cache.Revalidate(sp.Generation(), tr)
	}
	w.st.revalidated.Add(uint64(kept + deleted))
	w.st.invalidated.Add(uint64(deleted))
}

// expire removes megaflows idle for longer than the idle timeout.
func (w *worker) expire() {
	now := w.d.now()
	w.lastExpire = now
	w.st.expired.Add(uint64(w.cache.Expire(now, w.d.cfg.IdleTimeout)))
}

// execute runs datapath actions on a packet. The packet is consumed: an
// output that is the last action queues p itself, any other output queues a
// copy.
func (w *worker) execute(p *port.Packet, k *flow.Key, actions []flow.DPAction, now time.Duration, depth int) {
	for i, a := range actions {
		last := i == len(actions)-1
		switch a := a.(type) {
		case flow.DPOutput:
			q := p
			if !last {
				q = w.clone(p)
			}
			w.output(a.Port, q, k)
		case flow.DPSetField:
			setField(p, k, a)
		case flow.DPPushVLAN:
			// vlan_tci's CFI bit means "present" and is not written.
			p.PushVLAN(a.TPID, a.TCI&^0x1000)
			packet.Extract(p.Data, k)
		case flow.DPPopVLAN:
			p.PopVLAN()
			packet.Extract(p.Data, k)
		case flow.DPCT:
			if !w.conntrack(p, k, a, now) {
				return
			}
		case flow.DPCTClear:
			clearCT(k)
		case flow.DPMeter:
			if !w.meter(a, len(p.Data), now) {
				return
			}
		case flow.DPRecirc:
			if depth >= maxRecirculations {
				w.st.loopDrops.Add(1)
				return
			}
			w.st.recirculated.Add(1)
			k.Set(flow.RecircID, uint64(a.ID))
			if !last {
				kk := w.keyCopy(k)
				w.process(w.clone(p), kk, now, depth+1)
				w.putKey(kk)
				continue
			}
			w.process(p, k, now, depth+1)
		case flow.DPHashL4:
			k.Set(flow.DPHash, hashL4(k, a.Basis))
		case flow.DPUserspace:
			w.packetIn(p, k, &a)
		case flow.DPClone:
			kk := w.keyCopy(k)
			w.execute(w.clone(p), kk, a.Actions, now, depth)
			w.putKey(kk)
		}
	}
}

// keyCopy returns a copy of k for a copy of the packet, in storage the
// worker reuses: a copy on the stack would move to the heap, because
// execute and process call each other. The caller hands it back with
// putKey when the call it made with it returns; nothing keeps a key's
// address beyond that (a packet waiting at ct() has a copy of its key).
func (w *worker) keyCopy(k *flow.Key) *flow.Key {
	var kk *flow.Key
	if n := len(w.keys); n > 0 {
		kk = w.keys[n-1]
		w.keys = w.keys[:n-1]
	} else {
		kk = new(flow.Key)
	}
	*kk = *k
	return kk
}

// putKey returns a key from keyCopy.
func (w *worker) putKey(kk *flow.Key) { w.keys = append(w.keys, kk) }

// output queues p for port no.
func (w *worker) output(no uint32, p *port.Packet, k *flow.Key) {
	ports := w.d.ports.Load()
	if ports != w.outPorts || no != w.outNo {
		w.outPorts, w.outNo, w.outPE = ports, no, (*ports)[no]
	}
	pe := w.outPE
	if pe == nil {
		w.st.noPortDrops.Add(1)
		return
	}
	if pe.tunnel {
		setPacketTunnel(p, k)
	}
	if len(w.fragMTU) > 0 {
		w.refragment(p, func(q *port.Packet) { w.queue(pe, q) })
		return
	}
	w.queue(pe, p)
}

// queue adds p to the batch's packets for pe.
func (w *worker) queue(pe *portEntry, p *port.Packet) {
	for i := range w.out {
		if w.out[i].pe == pe {
			w.out[i].pkts = append(w.out[i].pkts, p)
			return
		}
	}
	w.out = append(w.out, outQueue{pe: pe, pkts: append(make([]*port.Packet, 0, port.BatchSize), p)})
}

// flush sends the batch's queued packets, one Send per port.
func (w *worker) flush() {
	for i := range w.out {
		q := &w.out[i]
		if len(q.pkts) == 0 {
			continue
		}
		pkts := q.pkts
		if !q.pe.port.Offloads() {
			pkts = w.resolveOffloads(pkts)
		}
		if err := q.pe.port.Send(pkts); err != nil && !errors.Is(err, port.ErrClosed) {
			w.d.cfg.Logger.Warn("datapath output failed", "port", q.pe.port.Name(), "err", err)
		}
		clear(q.pkts)
		q.pkts = q.pkts[:0]
	}
	clear(w.fragMTU) // datagrams not output were dropped
	w.recycleClones()
}

// resolveOffloads makes packets fit for a port without offloads: partial
// checksums are finished and GSO frames split in software.
func (w *worker) resolveOffloads(pkts []*port.Packet) []*port.Packet {
	var out []*port.Packet
	for i, p := range pkts {
		if !p.Offload.IsGSO() {
			if p.Offload.NeedsCsum {
				_ = p.FinishChecksum()
			}
			if out != nil {
				out = append(out, p)
			}
			continue
		}
		if out == nil {
			out = append(make([]*port.Packet, 0, len(pkts)+8), pkts[:i]...)
		}
		err := p.Segment(w.scratch, func(seg []byte) error {
			q := port.NewPacket(len(seg))
			q.SetFrame(seg)
			q.Tunnel = p.Tunnel
			out = append(out, q)
			return nil
		})
		if err != nil {
			w.st.badOffloads.Add(1)
		}
	}
	if out == nil {
		return pkts
	}
	return out
}

// conntrack runs a ct() action and fills the key's conntrack fields. It
// returns false if the packet must be dropped.
func (w *worker) conntrack(p *port.Packet, k *flow.Key, a flow.DPCT, now time.Duration) bool {
	ct := w.d.cfg.Conntrack
	h := findHeaders(p.Data)
	if h.l3 < 0 || (h.ethType != etherTypeIPv4 && h.ethType != etherTypeIPv6) {
		// Not IP: conntrack has nothing to track. Like OVS, go on with the
		// packet untracked.
		return true
	}
	if ct == nil {
		w.st.ctDrops.Add(1)
		return false
	}
	if isFragment(k) {
		if !w.reassemble(p, k, h.l3, a.Zone, now) {
			return false
		}
		h = findHeaders(p.Data)
	}
	r := ct.Process(p.Data, h.l3, ctParams(a, w.trackerNAT(a.NAT), p.Offload.NeedsCsum), now)
	setCTKey(p, k, &r)
	return true
}

// ctParams are the tracker's parameters for the ct() action a, whose NAT
// the tracker's form of a.NAT is.
func ctParams(a flow.DPCT, nat *conntrack.NAT, partialCsum bool) conntrack.Params {
	return conntrack.Params{
		Zone: a.Zone, Commit: a.Commit, Force: a.Force,
		Mark: a.Mark, MarkMask: a.MarkMask,
		Label:           conntrack.Label{Hi: a.Label.Hi, Lo: a.Label.Lo},
		LabelMask:       conntrack.Label{Hi: a.LabelMask.Hi, Lo: a.LabelMask.Lo},
		NAT:             nat,
		PartialChecksum: partialCsum,
	}
}

// setCTKey fills the key's conntrack fields from the tracker's result and
// re-extracts the headers NAT rewrote.
func setCTKey(p *port.Packet, k *flow.Key, r *conntrack.Result) {
	k.Set(flow.CTState, uint64(r.State))
	k.Set(flow.CTZone, uint64(r.Zone))
	k.Set(flow.CTMark, uint64(r.Mark))
	k.SetU128(flow.CTLabel, flow.U128{Hi: r.Label.Hi, Lo: r.Label.Lo})
	o := r.Orig
	k.Set(flow.CTNWProto, uint64(o.Proto))
	k.Set(flow.CTTPSrc, uint64(o.SrcPort))
	k.Set(flow.CTTPDst, uint64(o.DstPort))
	switch {
	case o.Src.Is4():
		k.Set(flow.CTNWSrc, flow.IPv4(o.Src))
		k.Set(flow.CTNWDst, flow.IPv4(o.Dst))
		k.SetU128(flow.CTIPv6Src, flow.U128{})
		k.SetU128(flow.CTIPv6Dst, flow.U128{})
	case o.Src.Is6():
		k.Set(flow.CTNWSrc, 0)
		k.Set(flow.CTNWDst, 0)
		k.SetU128(flow.CTIPv6Src, flow.IPv6(o.Src))
		k.SetU128(flow.CTIPv6Dst, flow.IPv6(o.Dst))
	}
	if r.State&(conntrack.StateSNAT|conntrack.StateDNAT) != 0 {
		packet.Extract(p.Data, k) // NAT rewrote the headers
	}
}

// trackerNAT returns convertNAT(n), converted once per distinct n. A
// megaflow's actions are never modified, so n's contents cannot change
// while it is in the map, and the map's reference keeps n's address from
// being reused by another NAT. The tracker only reads its parameters.
func (w *worker) trackerNAT(n *flow.NAT) *conntrack.NAT {
	if n == nil {
		return nil
	}
	if c, ok := w.nats[n]; ok {
		return c
	}
	if w.nats == nil || len(w.nats) >= maxNATs {
		w.nats = make(map[*flow.NAT]*conntrack.NAT)
	}
	c := convertNAT(n)
	w.nats[n] = c
	return c
}

// convertNAT maps the flow action's NAT onto the tracker's.
func convertNAT(n *flow.NAT) *conntrack.NAT {
	if n == nil {
		return nil
	}
	r := &conntrack.NATRange{MinAddr: n.AddrMin, MaxAddr: n.AddrMax, MinPort: n.PortMin, MaxPort: n.PortMax}
	switch {
	case n.Src:
		return &conntrack.NAT{Src: r}
	case n.Dst:
		return &conntrack.NAT{Dst: r}
	}
	return &conntrack.NAT{}
}

// clearCT zeroes the key's conntrack fields (ct_clear).
func clearCT(k *flow.Key) { k.ClearCT() }

// hashL4 is dp_hash over the packet's 5-tuple: symmetric in neither
// direction (as OVS's), stable for a connection.
func hashL4(k *flow.Key, basis uint32) uint64 {
	h := flow.HashWord(uint64(basis), k.Get(flow.NWProto))
	for _, f := range []flow.Field{flow.NWSrc, flow.NWDst, flow.TPSrc, flow.TPDst} {
		h = flow.HashWord(h, k.Get(f))
	}
	for _, f := range []flow.Field{flow.IPv6Src, flow.IPv6Dst} {
		v := k.GetU128(f)
		h = flow.HashWord(flow.HashWord(h, v.Hi), v.Lo)
	}
	return flow.HashFinish(h) & 0xffffffff
}

// packetIn hands a copy of p to the controller channel, dropping it if the
// channel is full: the fast path never waits for the controller.
func (w *worker) packetIn(p *port.Packet, k *flow.Key, a *flow.DPUserspace) {
	pi := PacketIn{
		InPort:   uint32(k.Get(flow.InPort)),
		Key:      *k,
		Table:    a.Table,
		UserData: a.UserData,
		Frame:    append([]byte(nil), p.Data...),
		Cont:     a.Cont,
	}
	pi.Key.CopyPipeline(&a.Meta)
	select {
	case w.d.packetIn <- pi:
		w.st.packetIns.Add(1)
	default:
		w.st.packetInDrops.Add(1)
	}
}

// setTunnelKey fills the key's tunnel fields from a received tunnel frame's
// outer header.
func setTunnelKey(k *flow.Key, t *port.Tunnel) {
	k.Set(flow.TunID, t.ID)
	if t.Src.Is4() {
		k.Set(flow.TunSrc, flow.IPv4(t.Src))
	}
	if t.Dst.Is4() {
		k.Set(flow.TunDst, flow.IPv4(t.Dst))
	}
	k.Set(flow.TunTOS, uint64(t.TOS))
	k.Set(flow.TunTTL, uint64(t.TTL))
	if md, ok := packet.OVNMetadata(t.Options); ok {
		k.Set(flow.TunMetadata0, uint64(md))
	}
}

// setPacketTunnel sets the outer header a tunnel port will add from the
// key's tunnel fields.
func setPacketTunnel(p *port.Packet, k *flow.Key) {
	p.Tunnel.ID = k.Get(flow.TunID)
	p.Tunnel.Src = ipv4Addr(k.Get(flow.TunSrc))
	p.Tunnel.Dst = ipv4Addr(k.Get(flow.TunDst))
	p.Tunnel.TOS = uint8(k.Get(flow.TunTOS))
	p.Tunnel.TTL = uint8(k.Get(flow.TunTTL))
	p.Tunnel.Options = p.Tunnel.Options[:0]
	if md := k.Get(flow.TunMetadata0); md != 0 {
		p.Tunnel.Options = packet.AppendOVNOption(p.Tunnel.Options, uint32(md))
	}
}
