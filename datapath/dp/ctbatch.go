package dp

import (
	"slices"
	"time"

	"github.com/govn/govn/datapath/conntrack"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
)

// BenchmarkCTEstablished (batches of 32 packets of random established UDP
// connections through ct(), recirculation and output, 2-core EPYC shared
// with other work): over 500,000 connections about 950-1000 ns/packet
// batched against 1550-1760 per packet; over 1,000 connections (all in
// cache) both about 410. No allocations either way.

// ConntrackBatcher is a Conntrack that can also run a batch of packets
// sharing one ct() action at once (package conntrack's Tracker does: it
// overlaps the batch's memory misses). results[i] must equal what
// Process(pkts[i], ...) would return with the packets taken in order.
type ConntrackBatcher interface {
	Conntrack
	ProcessBatch(pkts [][]byte, l3offs []int, p conntrack.Params, now time.Duration, results []conntrack.Result)
}

// ctWait is a packet of the current batch stopped at the ct() action
// actions[at] of the megaflow it hit, waiting for the other packets that
// reach the same action.
type ctWait struct {
	p       *port.Packet
	k       flow.Key
	actions []flow.DPAction
	at      int
	depth   int
	l3      int
}

// deferCT queues a packet that hit a megaflow whose first ct() action can
// be shared with the batch's other packets, after running the actions
// before it (only header and key rewrites qualify). It returns false if
// the packet must be executed at once instead.
func (w *worker) deferCT(p *port.Packet, k *flow.Key, actions []flow.DPAction, now time.Duration, depth int) bool {
	if w.d.ctBatch == nil {
		return false // without a batch method, ct() runs packet by packet
	}
	if isFragment(k) {
		return false // reassembly comes first, in the per-packet path
	}
	at := -1
scan:
	for i, a := range actions {
		switch a.(type) {
		case flow.DPCT:
			at = i
			break scan
		case flow.DPSetField, flow.DPCTClear, flow.DPHashL4, flow.DPPushVLAN, flow.DPPopVLAN:
		default:
			return false
		}
	}
	if at < 0 {
		return false
	}
	w.execute(p, k, actions[:at], now, depth) // rewrites only: p is not consumed
	h := findHeaders(p.Data)
	if h.l3 < 0 || (h.ethType != etherTypeIPv4 && h.ethType != etherTypeIPv6) {
		w.execute(p, k, actions[at:], now, depth) // not IP: ct() lets it pass untracked
		return true
	}
	w.ctq = append(w.ctq, ctWait{p: p, k: *k, actions: actions, at: at, depth: depth, l3: h.l3})
	return true
}

// drainCT runs the packets waiting at ct() actions: those at the same
// action (same megaflow, same ct() within it, same checksum state) go to
// the tracker as one batch, then each continues with the actions after
// its ct(). Packets that recirculate into another megaflow hit wait again,
// so every round of recirculation is batched too. As in OVS, packets of
// different megaflows may be reordered with respect to each other; the
// packets of one megaflow keep their order. Also as in OVS, a whole round
// runs its ct() before any packet recirculates: a reply in the same batch
// as its connection's first packet meets the connection before the
// recirculated first packet commits it.
func (w *worker) drainCT(now time.Duration) {
	for len(w.ctq) > 0 {
		cur := w.ctq
		w.ctq = w.ctSpare[:0]
		for i := range cur {
			if cur[i].p == nil {
				continue
			}
			w.runCTGroup(cur[i:], now)
		}
		clear(cur)
		w.ctSpare = cur[:0]
	}
}

// runCTGroup runs q[0] and every later packet of q at the same ct() action
// through the tracker together, and marks them done (p = nil).
func (w *worker) runCTGroup(q []ctWait, now time.Duration) {
	first := &q[0]
	w.ctGroup = w.ctGroup[:0]
	w.ctPkts, w.ctOffs = w.ctPkts[:0], w.ctOffs[:0]
	for i := range q {
		c := &q[i]
		if c.p == nil || c.at != first.at || &c.actions[0] != &first.actions[0] ||
			c.p.Offload.NeedsCsum != first.p.Offload.NeedsCsum {
			continue
		}
		w.ctGroup = append(w.ctGroup, i)
		w.ctPkts = append(w.ctPkts, c.p.Data)
		w.ctOffs = append(w.ctOffs, c.l3)
	}
	a := first.actions[first.at].(flow.DPCT)
	params := ctParams(a, w.trackerNAT(a.NAT), first.p.Offload.NeedsCsum)
	w.ctRes = slices.Grow(w.ctRes[:0], len(w.ctGroup))[:len(w.ctGroup)]
	w.d.ctBatch.ProcessBatch(w.ctPkts, w.ctOffs, params, now, w.ctRes)
	for j, i := range w.ctGroup {
		c := &q[i]
		p := c.p
		c.p = nil
		setCTKey(p, &c.k, &w.ctRes[j])
		w.execute(p, &c.k, c.actions[c.at+1:], now, c.depth)
	}
}
