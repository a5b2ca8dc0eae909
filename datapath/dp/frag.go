package dp

import (
	"time"

	"github.com/govn/govn/datapath/conntrack/ipfrag"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/port"
)

// IP fragments meet ct() the way the Linux kernel datapath of OVS has
// them meet it: the fragments are reassembled per zone before the tracker
// sees them (the tracker cannot track a fragment), every fragment but the
// last stops there, and the last one goes on as the whole datagram. On
// output the datagram is split again into fragments no larger than the
// largest fragment received, so that no link on the way sees a packet
// larger than the sender sent. (The userspace datapath of OVS keeps the
// original fragments and forwards them instead; that would need the
// fragments to follow the datagram through recirculation, and the result
// on the wire is the same size.)

// isFragment reports whether the key's packet is an IP fragment.
func isFragment(k *flow.Key) bool { return k.Get(flow.NWFrag)&packet.FragAny != 0 }

// reassemble offers the fragment p, whose IP header is at l3, to the
// datapath's reassembler for zone. It returns false if processing of p
// stops (the fragment is held, or dropped); otherwise p has become the
// reassembled datagram, k is its key, and its output will refragment it.
func (w *worker) reassemble(p *port.Packet, k *flow.Key, l3 int, zone uint16, now time.Duration) bool {
	r := w.d.frags.Add(p.Data, l3, zone, now)
	switch r.Status {
	case ipfrag.NotFragment:
		return true
	case ipfrag.Held:
		w.st.fragsHeld.Add(1)
		return false
	case ipfrag.Dropped:
		w.st.fragDrops.Add(1)
		return false
	}
	tun := p.Tunnel
	p.SetFrame(r.Packet)
	p.Tunnel = tun
	packet.Extract(p.Data, k)
	w.st.reassembled.Add(1)
	if w.fragMTU == nil {
		w.fragMTU = make(map[*port.Packet]int)
	}
	w.fragMTU[p] = r.MaxFragSize
	return true
}

// clone copies p, and its refragmentation size if it is a reassembled
// datagram. The copy is one of the worker's spare packets when there is
// one: a pipeline that outputs to several ports or recirculates a copy
// clones every packet, and a new packet per clone kept the garbage
// collector busy. Clones become spares again at flush, once the ports are
// done with them (Send keeps no packet: the receive packets, reused by
// the next Recv, rely on that too).
func (w *worker) clone(p *port.Packet) *port.Packet {
	var q *port.Packet
	if n := len(w.spares); n > 0 {
		q = w.spares[n-1]
		w.spares[n-1] = nil
		w.spares = w.spares[:n-1]
	} else {
		// Room for an ordinary frame, so that a spare rarely grows.
		q = port.NewPacket(max(len(p.Data), minSpareFrame))
	}
	q.SetFrame(p.Data)
	opts := q.Tunnel.Options // emptied by SetFrame, storage kept
	q.Offload, q.Tunnel = p.Offload, p.Tunnel
	q.Tunnel.Options = append(opts, p.Tunnel.Options...)
	w.clones = append(w.clones, q)
	if mtu, ok := w.fragMTU[p]; ok {
		w.fragMTU[q] = mtu
	}
	return q
}

// refragment returns the packets to send for p: p itself, or, for a
// reassembled datagram larger than its largest fragment, its fragments.
// A datagram that needs splitting but forbids it (DF) is dropped and
// counted.
func (w *worker) refragment(p *port.Packet, queue func(*port.Packet)) {
	mtu, ok := w.fragMTU[p]
	h := findHeaders(p.Data)
	if !ok || h.l3 < 0 {
		queue(p)
		return
	}
	delete(w.fragMTU, p)
	frags, err := ipfrag.Fragment(p.Data, h.l3, mtu, w.fragID)
	w.fragID++
	switch {
	case err != nil:
		w.st.fragDrops.Add(1)
	case len(frags) == 1:
		queue(p)
	default:
		for _, f := range frags {
			q := port.NewPacket(len(f))
			q.SetFrame(f)
			q.Tunnel = p.Tunnel
			queue(q)
		}
	}
}

// maxSpares bounds the spare packets a worker keeps for clones, and
// maxSpareFrame the frame a spare may have room for: a burst of clones of
// GSO frames must not pin megabytes.
const (
	maxSpares     = 2 * port.BatchSize
	maxSpareFrame = 16 << 10
	minSpareFrame = 2048
)

// recycleClones makes the batch's clones spares; the caller has sent them
// or dropped them.
func (w *worker) recycleClones() {
	for _, q := range w.clones {
		if len(w.spares) < maxSpares && cap(q.Data) <= maxSpareFrame {
			w.spares = append(w.spares, q)
		}
	}
	clear(w.clones)
	w.clones = w.clones[:0]
}
