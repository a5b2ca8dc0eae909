package port

import (
	"bytes"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// udpCmsgSpace fits the control messages of one received datagram:
// packet info, TOS or traffic class, TTL or hop limit, GRO size.
const udpCmsgSpace = 160

// udpRx is the receive side of a tunnel port: the scratch of one
// recvmmsg call, the port's own buffers it fills, and where Recv is in
// them. A message is one datagram or, with UDP_GRO, a run of datagrams of
// one size (the last may be shorter) that the kernel joined; Recv takes
// them one at a time and may stop in the middle of a batch, or of a
// message, when the caller's packets run out.
type udpRx struct {
	msgs  []mmsghdr
	iovs  []unix.Iovec
	names [][unix.SizeofSockaddrInet6]byte
	cmsgs [][udpCmsgSpace]byte
	bufs  []*Packet // what recvmmsg fills: the port's, until a frame takes one whole

	got, msg, off int    // messages received, the one being taken, the offset of its next datagram
	base          Tunnel // the outer header of message msg, options aside
	seg           int    // the size of message msg's datagrams
	tun           Tunnel // scratch: the datagram being looked at
	co            tcpCoalescer
}

func newUDPRx(n int) udpRx {
	r := udpRx{msgs: make([]mmsghdr, n), iovs: make([]unix.Iovec, n),
		names: make([][unix.SizeofSockaddrInet6]byte, n), cmsgs: make([][udpCmsgSpace]byte, n),
		bufs: make([]*Packet, n)}
	for i := range r.msgs {
		r.msgs[i].hdr.Iov = &r.iovs[i]
		r.msgs[i].hdr.Name = &r.names[i][0]
		r.bufs[i] = NewPacket(MaxFrame)
	}
	return r
}

var errTooShort = errors.New("inner frame shorter than an Ethernet header")

// Recv implements Port. Datagrams that are not tunnel frames of the
// port's encapsulation are counted as receive errors and skipped.
// Consecutive TCP segments of one flow through one tunnel are joined
// into one GSO frame (see tcpCoalescer), so pkts[:n] may hold fewer
// frames than datagrams came. A frame that is a datagram alone takes the
// port's buffer it landed in, and the port keeps the caller's packet in
// its place: packets of at least MaxFrame bytes avoid a copy. Tunnel
// options land in storage the packets already have, so a batch of OVN's
// Geneve frames costs no allocation.
func (t *UDPTunnel) Recv(pkts []*Packet) (int, error) {
	if len(pkts) == 0 {
		return 0, nil
	}
	r := &t.rx
	k := 0
	for {
		if r.msg >= r.got {
			if k > 0 {
				break
			}
			if err := t.receive(); err != nil {
				return 0, err
			}
			continue
		}
		if !t.take(pkts, &k) {
			break
		}
	}
	r.co.finish()
	var bytes uint64
	for _, p := range pkts[:k] {
		bytes += uint64(len(p.Data))
	}
	t.rxPackets.Add(uint64(k))
	t.rxBytes.Add(bytes)
	t.rxBatches.Add(1)
	return k, nil
}

// receive fills the port's buffers with one recvmmsg, waiting for the
// first datagram.
func (t *UDPTunnel) receive() error {
	r := &t.rx
	for i, b := range r.bufs {
		b.Reset()
		sp := b.space()
		m := &r.msgs[i]
		r.iovs[i].Base = &sp[0]
		r.iovs[i].SetLen(len(sp))
		m.hdr.SetIovlen(1)
		m.hdr.Namelen = unix.SizeofSockaddrInet6
		m.hdr.Control = &r.cmsgs[i][0]
		m.hdr.SetControllen(udpCmsgSpace)
		m.hdr.Flags = 0
		m.n = 0
	}
	got, err := recvmmsg(t.raw, r.msgs, &t.closed, func(e unix.Errno) bool {
		// An ICMP error for an earlier send.
		return e == unix.ECONNREFUSED || e == unix.EHOSTUNREACH || e == unix.ENETUNREACH
	})
	if err != nil && err != ErrClosed {
		return fmt.Errorf("%s port %s: recvmmsg: %w", t.encap, t.local, err)
	}
	if err != nil {
		return err
	}
	r.got, r.msg, r.off = got, 0, 0
	return nil
}

// take takes the next datagram of the received batch: it joins the open
// frame, or starts a frame in pkts[*k], or is skipped. It reports false,
// leaving the datagram for the next Recv, if it needs a packet and none
// is left.
func (t *UDPTunnel) take(pkts []*Packet, k *int) bool {
	r := &t.rx
	i := r.msg
	m := &r.msgs[i]
	total := int(m.n)
	if m.hdr.Flags&unix.MSG_TRUNC != 0 {
		t.rxDropped.Add(1)
		r.msg++
		return true
	}
	if r.off == 0 {
		r.base = Tunnel{Src: sockaddrAddr(r.names[i][:min(int(m.hdr.Namelen), unix.SizeofSockaddrInet6)]), Dst: t.local.Addr()}
		r.seg = 0
		if cl := int(m.hdr.Controllen); cl > 0 {
			r.seg = readTunnelCmsgs(r.cmsgs[i][:min(cl, udpCmsgSpace)], &r.base)
		}
		if r.seg <= 0 || r.seg > total {
			r.seg = total
		}
	}
	buf := r.bufs[i]
	n := min(r.seg, total-r.off)
	whole := r.off == 0 && n == total
	dgram := buf.space()[r.off : r.off+n]
	advance := func() {
		if r.off += n; r.off >= total {
			r.msg, r.off = r.msg+1, 0
		}
	}
	tun, hdrLen, err := t.decap(dgram, r.tun.Options[:0])
	if err != nil {
		t.rxErrors.Add(1)
		advance()
		return true
	}
	r.tun.Options = tun.Options // keep the grown storage
	tun.Src, tun.Dst, tun.TOS, tun.TTL = r.base.Src, r.base.Dst, r.base.TOS, r.base.TTL
	inner := dgram[hdrLen:]
	if r.co.p != nil && sameTunnel(&r.co.p.Tunnel, &tun) && r.co.add(inner) {
		advance()
		return true
	}
	r.co.finish()
	if *k == len(pkts) {
		return false
	}
	var p *Packet
	if whole {
		// The frame is the whole buffer: take it, and keep the
		// caller's packet for the next receive.
		p = buf
		r.bufs[i] = spareBuffer(pkts[*k])
		p.setLen(total)
		p.Pull(hdrLen)
	} else {
		p = pkts[*k]
		p.Reset()
		if len(p.buf) < Headroom+len(inner) {
			p.buf = make([]byte, Headroom+MaxFrame)
		}
		p.setLen(copy(p.space(), inner))
	}
	opts := p.Tunnel.Options
	p.Tunnel = tun
	p.Tunnel.Options = append(opts[:0], tun.Options...)
	pkts[*k] = p
	*k++
	r.co.start(p)
	advance()
	return true
}

// spareBuffer returns p for the port to receive into, or a new packet if
// p is too small for a datagram.
func spareBuffer(p *Packet) *Packet {
	if len(p.buf) < Headroom+MaxFrame {
		return NewPacket(MaxFrame)
	}
	return p
}

// sameTunnel reports whether a and b are the same outer header.
func sameTunnel(a, b *Tunnel) bool {
	return a.ID == b.ID && a.Src == b.Src && a.Dst == b.Dst && a.TOS == b.TOS && a.TTL == b.TTL &&
		bytes.Equal(a.Options, b.Options)
}
