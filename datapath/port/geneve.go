package port

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// GenevePort is the IANA port of Geneve.
const GenevePort = 6081

// etherTypeTEB is the Geneve protocol type of an Ethernet payload.
const etherTypeTEB = 0x6558

// Geneve is a tunnel port: frames travel inside Geneve headers in UDP
// datagrams of an ordinary socket, so the host's stack routes the outer
// packets. A received frame's outer header is in Packet.Tunnel; a frame is
// sent to Packet.Tunnel.Dst with Tunnel.ID as VNI and Tunnel.Options as
// options.
type Geneve struct {
	conn       *net.UDPConn
	local      netip.AddrPort
	remotePort uint16
	closed     atomic.Bool
	txMu       sync.Mutex
	counters
}

// NewGeneve opens a Geneve port listening on local (use port GenevePort
// unless testing) and sending to remotePort on the tunnel's destination.
func NewGeneve(local netip.AddrPort, remotePort uint16) (*Geneve, error) {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(local))
	if err != nil {
		return nil, fmt.Errorf("geneve port %s: %w", local, err)
	}
	_ = c.SetReadBuffer(8 << 20)
	_ = c.SetWriteBuffer(8 << 20)
	return &Geneve{conn: c, local: local, remotePort: remotePort}, nil
}

// LocalAddr is the address the port receives on.
func (g *Geneve) LocalAddr() net.Addr { return g.conn.LocalAddr() }

// Name implements Port.
func (g *Geneve) Name() string { return "geneve:" + g.local.String() }

// Offloads implements Port: inner frames must have complete checksums and
// fit the path, since nobody below finishes them.
func (g *Geneve) Offloads() bool { return false }

// Recv implements Port. It returns one frame per call.
func (g *Geneve) Recv(pkts []*Packet) (int, error) {
	if len(pkts) == 0 {
		return 0, nil
	}
	p := pkts[0]
	for {
		p.Reset()
		n, from, err := g.conn.ReadFromUDPAddrPort(p.space())
		if err != nil {
			if g.closed.Load() {
				return 0, ErrClosed
			}
			return 0, fmt.Errorf("geneve port %s: %w", g.local, err)
		}
		p.setLen(n)
		if err := decapGeneve(p, from.Addr().Unmap(), g.local.Addr()); err != nil {
			g.rxErrors.Add(1)
			continue
		}
		g.rxPackets.Add(1)
		g.rxBytes.Add(uint64(len(p.Data)))
		return 1, nil
	}
}

var errGeneve = errors.New("not a Geneve Ethernet frame")

// decapGeneve strips the Geneve header from p and records it in p.Tunnel.
func decapGeneve(p *Packet, src, dst netip.Addr) error {
	d := p.Data
	if len(d) < 8 || d[0]>>6 != 0 || binary.BigEndian.Uint16(d[2:]) != etherTypeTEB {
		return errGeneve
	}
	optLen := int(d[0]&0x3f) * 4
	if len(d) < 8+optLen+14 {
		return errGeneve
	}
	p.Tunnel = Tunnel{
		ID:      uint64(binary.BigEndian.Uint32(d[4:]) >> 8),
		Src:     src,
		Dst:     dst,
		Options: append(p.Tunnel.Options[:0], d[8:8+optLen]...),
	}
	p.Pull(8 + optLen)
	return nil
}

// Send implements Port. Frames without a tunnel destination are dropped.
func (g *Geneve) Send(pkts []*Packet) error {
	g.txMu.Lock()
	defer g.txMu.Unlock()
	for _, p := range pkts {
		t := &p.Tunnel
		if !t.Valid() || len(t.Options)%4 != 0 || len(t.Options) > 252 || p.Offload.NeedsCsum || p.Offload.IsGSO() {
			g.txDropped.Add(1)
			continue
		}
		h := p.Push(8 + len(t.Options))
		h[0], h[1] = byte(len(t.Options)/4), 0
		binary.BigEndian.PutUint16(h[2:], etherTypeTEB)
		binary.BigEndian.PutUint32(h[4:], uint32(t.ID)<<8)
		copy(h[8:], t.Options)
		_, err := g.conn.WriteToUDPAddrPort(p.Data, netip.AddrPortFrom(t.Dst, g.remotePort))
		p.Pull(len(h))
		if err != nil {
			if g.closed.Load() {
				return ErrClosed
			}
			g.txErrors.Add(1)
			continue
		}
		g.txPackets.Add(1)
		g.txBytes.Add(uint64(len(p.Data)))
	}
	return nil
}

// Stats implements Port.
func (g *Geneve) Stats() Stats { return g.snapshot() }

// Close implements Port.
func (g *Geneve) Close() error {
	g.closed.Store(true)
	return g.conn.Close()
}
