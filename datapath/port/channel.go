package port

import (
	"sync"
)

// Channel is an in-memory port for tests: frames injected with Inject come
// out of Recv, and frames given to Send come out of Out. It needs no
// privileges and no kernel devices.
type Channel struct {
	name     string
	in       chan *Packet
	out      chan *Packet
	offloads bool
	tunnel   bool
	done     chan struct{}
	once     sync.Once
	counters
}

// NewChannel returns a channel port whose queues hold depth frames each.
// With offloads set, Send passes Offload metadata through to Out as a
// virtio-capable device would; otherwise the switch must finish checksums
// and split GSO frames before sending.
func NewChannel(name string, depth int, offloads bool) *Channel {
	return &Channel{
		name:     name,
		in:       make(chan *Packet, depth),
		out:      make(chan *Packet, depth),
		offloads: offloads,
		done:     make(chan struct{}),
	}
}

// NewTunnelChannel returns a channel port that stands for a tunnel
// port: the datapath gives each frame it sends there the outer header
// (Packet.Tunnel) from the key's tunnel fields, and InjectTunnel makes
// frames arrive with one.
func NewTunnelChannel(name string, depth int) *Channel {
	c := NewChannel(name, depth, false)
	c.tunnel = true
	return c
}

// IsTunnel reports whether c was made by NewTunnelChannel.
func (c *Channel) IsTunnel() bool { return c.tunnel }

// InjectTunnel is Inject for a frame that arrived through a tunnel with
// outer header t.
func (c *Channel) InjectTunnel(frame []byte, t Tunnel) error {
	p := NewPacket(len(frame))
	p.SetFrame(frame)
	p.Tunnel = t
	p.Tunnel.Options = append([]byte(nil), t.Options...)
	select {
	case c.in <- p:
		return nil
	case <-c.done:
		return ErrClosed
	}
}

// Name implements Port.
func (c *Channel) Name() string { return c.name }

// Offloads implements Port.
func (c *Channel) Offloads() bool { return c.offloads }

// Inject queues a copy of frame, with offload metadata off, for Recv. It
// blocks while the queue is full and returns ErrClosed after Close.
func (c *Channel) Inject(frame []byte, off Offload) error {
	p := NewPacket(len(frame))
	p.SetFrame(frame)
	p.Offload = off
	select {
	case c.in <- p:
		return nil
	case <-c.done:
		return ErrClosed
	}
}

// Out delivers the frames the switch sent to this port (copies).
func (c *Channel) Out() <-chan *Packet { return c.out }

// Recv implements Port.
func (c *Channel) Recv(pkts []*Packet) (int, error) {
	if len(pkts) == 0 {
		return 0, nil
	}
	var first *Packet
	select {
	case first = <-c.in:
	case <-c.done:
		return 0, ErrClosed
	}
	n := 0
	for p := first; ; {
		q := pkts[n]
		q.SetFrame(p.Data)
		q.Offload, q.Tunnel = p.Offload, p.Tunnel
		c.rxPackets.Add(1)
		c.rxBytes.Add(uint64(len(p.Data)))
		n++
		if n == len(pkts) {
			return n, nil
		}
		select {
		case p = <-c.in:
		default:
			return n, nil
		}
	}
}

// Send implements Port. A frame that finds the Out queue full is dropped,
// as a full NIC ring would drop it.
func (c *Channel) Send(pkts []*Packet) error {
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	for _, p := range pkts {
		if !c.offloads && (p.Offload.NeedsCsum || p.Offload.IsGSO()) {
			c.txDropped.Add(1)
			continue
		}
		q := p.Clone()
		select {
		case c.out <- q:
			c.txPackets.Add(1)
			c.txBytes.Add(uint64(len(p.Data)))
		default:
			c.txDropped.Add(1)
		}
	}
	return nil
}

// Stats implements Port.
func (c *Channel) Stats() Stats { return c.snapshot() }

// Close implements Port.
func (c *Channel) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}
