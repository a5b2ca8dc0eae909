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
// datagram.
func (w *worker) clone(p *port.Packet) *port.Packet {
	q := p.Clone()
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
