package port

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/govn/govn/datapath/packet"
)

// Limits of one UDP_SEGMENT send: the kernel takes at most 64 segments
// (more on newer kernels) and a datagram's worth of payload, whose IP
// length has 16 bits.
const (
	maxGSOSegments = 64
	maxGSOBytes    = 65000
)

// txArenaSize is the room for the datagrams of GSO frames between two
// sendmmsg calls: a few 64 KiB frames, each split with its tunnel
// headers.
const txArenaSize = 4 * 68 << 10

// gsoCmsgSpace fits a UDP_SEGMENT control message.
var gsoCmsgSpace = unix.CmsgSpace(2)

// udpTx is the send side of a tunnel port: messages prepared for one
// sendmmsg. A plain frame is gathered from its tunnel header (in hdrs)
// and the packet's own bytes, so the packet is left as it was; a GSO
// frame is split into arena, each segment behind its own copy of the
// header, and goes as one message per run of up to maxGSOSegments
// datagrams of one size with UDP_SEGMENT (or one message a datagram
// where the kernel lacks it).
type udpTx struct {
	msgs  []mmsghdr
	iovs  [][2]unix.Iovec
	names [][unix.SizeofSockaddrInet6]byte
	hdrs  [][maxTunnelHeader]byte
	cmsgs [][]byte
	lens  []int // inner bytes of each message
	segs  []int // datagrams in each message
	sizes []int // the size of each message's datagrams
	n     int   // messages prepared
	arena []byte

	split     []mmsghdr // a GSO message the kernel refused, a datagram each
	splitIovs []unix.Iovec
}

func newUDPTx(n int) udpTx {
	b := udpTx{msgs: make([]mmsghdr, n), iovs: make([][2]unix.Iovec, n),
		names: make([][unix.SizeofSockaddrInet6]byte, n), hdrs: make([][maxTunnelHeader]byte, n),
		cmsgs: make([][]byte, n), lens: make([]int, n), segs: make([]int, n), sizes: make([]int, n),
		arena: make([]byte, 0, txArenaSize)}
	for i := range b.msgs {
		b.msgs[i].hdr.Iov = &b.iovs[i][0]
		b.msgs[i].hdr.Name = &b.names[i][0]
		b.cmsgs[i] = make([]byte, gsoCmsgSpace)
	}
	return b
}

// Send implements Port. A frame without a tunnel destination (or with one
// of the wrong address family, Geneve options that are not whole words,
// or offload metadata that does not fit it) is dropped and counted. A
// partial checksum is finished in the packet. A GSO frame (TCP, or UDP
// with GSOUDPL4) is split into segments of its GSOSize, each its own
// datagram, as a NIC would split it: the VM's segment size survives the
// tunnel. The outer source address, TOS and TTL are the host stack's
// choice. TxPackets counts datagrams.
func (t *UDPTunnel) Send(pkts []*Packet) error {
	t.txMu.Lock()
	defer t.txMu.Unlock()
	if t.closed.Load() {
		return ErrClosed
	}
	for _, p := range pkts {
		ok, err := t.queue(p)
		if err != nil {
			return err
		}
		if !ok {
			t.txDropped.Add(1)
		}
	}
	return t.flush()
}

// header builds p's tunnel header into b, or reports false if p cannot go
// through the tunnel.
func (t *UDPTunnel) header(b []byte, p *Packet) ([]byte, bool) {
	tun := &p.Tunnel
	if !tun.Valid() || len(p.Data) == 0 {
		return nil, false
	}
	switch t.encap {
	case EncapGeneve:
		if len(tun.Options)%4 != 0 || len(tun.Options) > packet.MaxGeneveOptions {
			return nil, false
		}
		return packet.AppendGeneveHeader(b, uint32(tun.ID), false, tun.Options), true
	case EncapVXLAN:
		return packet.AppendVXLANHeader(b, uint32(tun.ID)), true
	}
	return nil, false
}

// queue prepares p's messages, flushing the batch when it is full. It
// reports false for a frame it cannot send.
func (t *UDPTunnel) queue(p *Packet) (bool, error) {
	if p.Offload.IsGSO() {
		return t.queueGSO(p)
	}
	if p.Offload.NeedsCsum && p.FinishChecksum() != nil {
		return false, nil
	}
	b := &t.tx
	if b.n == len(b.msgs) {
		if err := t.flush(); err != nil {
			return false, err
		}
	}
	i := b.n
	hdr, ok := t.header(b.hdrs[i][:0], p)
	if !ok {
		return false, nil
	}
	nl := putSockaddr(&b.names[i], p.Tunnel.Dst, t.remotePort, t.v6)
	if nl == 0 {
		return false, nil
	}
	m := &b.msgs[i]
	m.hdr.Namelen = nl
	iov := &b.iovs[i]
	iov[0].Base = &b.hdrs[i][0]
	iov[0].SetLen(len(hdr))
	iov[1].Base = &p.Data[0]
	iov[1].SetLen(len(p.Data))
	m.hdr.SetIovlen(2)
	m.hdr.Control = nil
	m.hdr.SetControllen(0)
	m.hdr.Flags = 0
	m.n = 0
	b.lens[i], b.segs[i], b.sizes[i] = len(p.Data), 1, len(hdr)+len(p.Data)
	b.n++
	return true, nil
}

// queueGSO splits GSO frame p into the arena and prepares its messages.
func (t *UDPTunnel) queueGSO(p *Packet) (bool, error) {
	b := &t.tx
	s, err := newSegmenter(p.Data, p.Offload)
	if err != nil {
		return false, nil
	}
	var hb [maxTunnelHeader]byte
	hdr, ok := t.header(hb[:0], p)
	if !ok {
		return false, nil
	}
	var name [unix.SizeofSockaddrInet6]byte
	nl := putSockaddr(&name, p.Tunnel.Dst, t.remotePort, t.v6)
	if nl == 0 {
		return false, nil
	}
	size := len(hdr) + s.hdrLen + s.mss // every datagram's size but the last's
	perMsg := 1
	if t.gso {
		perMsg = max(1, min(maxGSOSegments, maxGSOBytes/size))
	}
	left := s.count()
	for s.more() {
		segs := min(perMsg, left)
		if b.n == len(b.msgs) || len(b.arena)+segs*size > cap(b.arena) {
			if err := t.flush(); err != nil {
				return false, err
			}
		}
		if segs*size > cap(b.arena) {
			return false, nil // a segment larger than the arena
		}
		i := b.n
		start := len(b.arena)
		for range segs {
			b.arena = append(b.arena, hdr...)
			b.arena = s.next(b.arena)
		}
		left -= segs
		m := &b.msgs[i]
		b.names[i] = name
		m.hdr.Namelen = nl
		b.iovs[i][0].Base = &b.arena[start]
		b.iovs[i][0].SetLen(len(b.arena) - start)
		m.hdr.SetIovlen(1)
		if segs > 1 {
			c := b.cmsgs[i]
			h := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
			h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
			h.SetLen(unix.CmsgLen(2))
			binary.NativeEndian.PutUint16(c[unix.CmsgLen(0):], uint16(size))
			m.hdr.Control = &c[0]
			m.hdr.SetControllen(len(c))
		} else {
			m.hdr.Control = nil
			m.hdr.SetControllen(0)
		}
		m.hdr.Flags = 0
		m.n = 0
		b.lens[i], b.segs[i], b.sizes[i] = len(b.arena)-start-segs*len(hdr), segs, size
		b.n++
	}
	return true, nil
}

// flush sends the prepared messages and empties the batch.
func (t *UDPTunnel) flush() error {
	b := &t.tx
	defer func() { b.n, b.arena = 0, b.arena[:0] }()
	for off := 0; off < b.n; {
		sent, err := t.sendmmsg(b.msgs[off:b.n])
		switch {
		case t.closed.Load():
			return ErrClosed
		case errors.Is(err, errTxStuck):
			for _, s := range b.segs[off:b.n] {
				t.txDropped.Add(uint64(s))
			}
			off = b.n
			continue
		case err != nil && b.segs[off] > 1:
			// The kernel refused to segment (no checksum offload on
			// the way out, a datagram bigger than the path): send
			// them one by one.
			if errors.Is(err, unix.EIO) {
				t.gso = false
			}
			if err := t.sendSplit(off); err != nil {
				return err
			}
			off++
			continue
		case err != nil:
			// The first datagram was refused (no route, too big):
			// skip it.
			t.txErrors.Add(1)
			off++
			continue
		}
		t.countSent(off, sent)
		off += sent
	}
	return nil
}

// countSent counts messages off..off+n as sent.
func (t *UDPTunnel) countSent(off, n int) {
	b := &t.tx
	for i := off; i < off+n; i++ {
		t.txBytes.Add(uint64(b.lens[i]))
		t.txPackets.Add(uint64(b.segs[i]))
	}
	t.txBatches.Add(1)
}

// sendSplit sends the datagrams of GSO message i one per message.
func (t *UDPTunnel) sendSplit(i int) error {
	b := &t.tx
	m := &b.msgs[i]
	data := unsafe.Slice(b.iovs[i][0].Base, b.iovs[i][0].Len)
	if cap(b.split) < maxGSOSegments {
		b.split = make([]mmsghdr, maxGSOSegments)
		b.splitIovs = make([]unix.Iovec, maxGSOSegments)
	}
	n := 0
	for off := 0; off < len(data); off += b.sizes[i] {
		d := data[off:min(off+b.sizes[i], len(data))]
		b.splitIovs[n].Base = &d[0]
		b.splitIovs[n].SetLen(len(d))
		sm := &b.split[n]
		sm.hdr = unix.Msghdr{Name: m.hdr.Name, Namelen: m.hdr.Namelen, Iov: &b.splitIovs[n]}
		sm.hdr.SetIovlen(1)
		sm.n = 0
		n++
	}
	for off := 0; off < n; {
		sent, err := t.sendmmsg(b.split[off:n])
		switch {
		case t.closed.Load():
			return ErrClosed
		case errors.Is(err, errTxStuck):
			t.txDropped.Add(uint64(n - off))
			return nil
		case err != nil:
			t.txErrors.Add(1)
			t.txDropped.Add(1)
			off++
			continue
		}
		t.txPackets.Add(uint64(sent))
		t.txBatches.Add(1)
		off += sent
	}
	t.txBytes.Add(uint64(b.lens[i]))
	return nil
}

// sendmmsg sends msgs and returns how many the kernel took. It waits at
// most sendTimeout for room in the socket buffer.
func (t *UDPTunnel) sendmmsg(msgs []mmsghdr) (int, error) {
	sent, err := sendmmsg(t.raw, msgs)
	if err != nil && !errors.Is(err, errTxStuck) {
		return 0, fmt.Errorf("%s port %s: sendmmsg: %w", t.encap, t.local, err)
	}
	return sent, err
}
