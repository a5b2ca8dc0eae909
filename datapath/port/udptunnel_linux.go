package port

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/govn/govn/datapath/packet"
)

// IANA ports of the tunnel encapsulations.
const (
	GenevePort = packet.GenevePort
	VXLANPort  = packet.VXLANPort
)

// Encap is a tunnel encapsulation: the header a UDPTunnel puts between
// the UDP header and the inner Ethernet frame.
type Encap uint8

// Encapsulations.
const (
	// EncapGeneve carries a 24-bit VNI and option TLVs (RFC 8926): OVN's
	// default, with the logical ports in an option.
	EncapGeneve Encap = iota + 1
	// EncapVXLAN carries only a 24-bit VNI (RFC 7348); options are not
	// sent. OVN squeezes its metadata into the VNI for it.
	EncapVXLAN
)

// String returns the encapsulation's name as --port and OVN spell it.
func (e Encap) String() string {
	switch e {
	case EncapGeneve:
		return "geneve"
	case EncapVXLAN:
		return "vxlan"
	}
	return fmt.Sprintf("encap(%d)", uint8(e))
}

// Port returns the encapsulation's IANA UDP port.
func (e Encap) Port() uint16 {
	if e == EncapVXLAN {
		return VXLANPort
	}
	return GenevePort
}

// ParseEncap parses "geneve" or "vxlan".
func ParseEncap(s string) (Encap, error) {
	for _, e := range []Encap{EncapGeneve, EncapVXLAN} {
		if s == e.String() {
			return e, nil
		}
	}
	return 0, fmt.Errorf("unknown tunnel encapsulation %q (want geneve or vxlan)", s)
}

// maxTunnelHeader is the largest header a UDPTunnel adds: Geneve with
// all the options it can carry.
const maxTunnelHeader = packet.GeneveHeaderLen + packet.MaxGeneveOptions

// UDPTunnel is a tunnel port: frames travel inside Geneve or VXLAN
// headers in UDP datagrams of an ordinary socket, so the host's stack
// routes the outer packets. A received frame's outer header is in
// Packet.Tunnel (VNI, source and destination address, TOS, TTL, Geneve
// options); a frame is sent to Packet.Tunnel.Dst with Tunnel.ID as VNI and,
// for Geneve, Tunnel.Options as options. Datagrams move in batches with
// recvmmsg and sendmmsg.
type UDPTunnel struct {
	encap      Encap
	local      netip.AddrPort // as bound, with the port the kernel chose
	v6         bool           // an AF_INET6 socket
	remotePort uint16
	file       *os.File
	raw        syscall.RawConn
	closed     atomic.Bool

	rx udpBatch // used only by the Recv goroutine

	txMu sync.Mutex
	tx   udpBatch
	counters
}

// NewGeneve opens a Geneve port listening on local (use port GenevePort
// unless testing) and sending to remotePort on the tunnel's destination.
func NewGeneve(local netip.AddrPort, remotePort uint16) (*UDPTunnel, error) {
	return NewUDPTunnel(EncapGeneve, local, remotePort)
}

// NewVXLAN opens a VXLAN port listening on local (use port VXLANPort
// unless testing) and sending to remotePort on the tunnel's destination.
func NewVXLAN(local netip.AddrPort, remotePort uint16) (*UDPTunnel, error) {
	return NewUDPTunnel(EncapVXLAN, local, remotePort)
}

// NewUDPTunnel opens a tunnel port with encapsulation e, receiving on
// local and sending to remotePort (0: e's IANA port) of each frame's
// tunnel destination. An IPv6 local address (the unspecified one
// included) makes a dual-stack socket; an IPv4 one sends only to IPv4.
func NewUDPTunnel(e Encap, local netip.AddrPort, remotePort uint16) (*UDPTunnel, error) {
	if e != EncapGeneve && e != EncapVXLAN {
		return nil, fmt.Errorf("tunnel port %s: unknown encapsulation %v", local, e)
	}
	if !local.Addr().IsValid() {
		return nil, fmt.Errorf("%s port: no local address", e)
	}
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	t := &UDPTunnel{encap: e, v6: local.Addr().Is6(), remotePort: remotePort,
		rx: newUDPBatch(BatchSize, true), tx: newUDPBatch(BatchSize, false)}
	if t.remotePort == 0 {
		t.remotePort = e.Port()
	}
	fd, err := t.socket(local)
	if err != nil {
		return nil, fmt.Errorf("%s port %s: %w", e, local, err)
	}
	t.file = os.NewFile(uintptr(fd), e.String()+":"+local.String())
	if t.raw, err = t.file.SyscallConn(); err != nil {
		t.file.Close()
		return nil, fmt.Errorf("%s port %s: %w", e, local, err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.file.Close()
		return nil, fmt.Errorf("%s port %s: getsockname: %w", e, local, err)
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		t.local = netip.AddrPortFrom(local.Addr(), uint16(sa.Port))
	case *unix.SockaddrInet6:
		t.local = netip.AddrPortFrom(local.Addr(), uint16(sa.Port))
	}
	return t, nil
}

// socket makes the UDP socket, bound to local, and returns its fd. It
// blocks with timeouts, as AFPacket's does and for the same reasons: a
// reader sleeping in recvmmsg is woken by the kernel directly, and the
// timeout lets Recv notice Close.
func (t *UDPTunnel) socket(local netip.AddrPort) (int, error) {
	family := unix.AF_INET
	if t.v6 {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	type opt struct {
		level, opt, val int
		what            string
	}
	// Ask for the outer header's destination, TOS and TTL with every
	// datagram: they become tun_dst, tun_tos and tun_ttl.
	opts := []opt{
		{unix.IPPROTO_IP, unix.IP_PKTINFO, 1, "IP_PKTINFO"},
		{unix.IPPROTO_IP, unix.IP_RECVTOS, 1, "IP_RECVTOS"},
		{unix.IPPROTO_IP, unix.IP_RECVTTL, 1, "IP_RECVTTL"},
	}
	if t.v6 {
		opts = []opt{
			{unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0, "IPV6_V6ONLY"},
			{unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO"},
			{unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1, "IPV6_RECVTCLASS"},
			{unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1, "IPV6_RECVHOPLIMIT"},
			// Dual stack: IPv4 datagrams come with IPv4 control messages.
			{unix.IPPROTO_IP, unix.IP_PKTINFO, 1, "IP_PKTINFO"},
			{unix.IPPROTO_IP, unix.IP_RECVTOS, 1, "IP_RECVTOS"},
			{unix.IPPROTO_IP, unix.IP_RECVTTL, 1, "IP_RECVTTL"},
		}
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.val); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("%s: %w", o.what, err)
		}
	}
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], 8<<20) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], 8<<20)
		}
	}
	tv := unix.NsecToTimeval(recvTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("SO_RCVTIMEO: %w", err)
	}
	tv = unix.NsecToTimeval(sendTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("SO_SNDTIMEO: %w", err)
	}
	var sa unix.Sockaddr
	if t.v6 {
		sa = &unix.SockaddrInet6{Port: int(local.Port()), Addr: local.Addr().As16()}
	} else {
		sa = &unix.SockaddrInet4{Port: int(local.Port()), Addr: local.Addr().As4()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind: %w", err)
	}
	return fd, nil
}

// Encap returns the port's encapsulation.
func (t *UDPTunnel) Encap() Encap { return t.encap }

// LocalAddr is the address the port receives on.
func (t *UDPTunnel) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(t.local) }

// LocalAddrPort is the address the port receives on.
func (t *UDPTunnel) LocalAddrPort() netip.AddrPort { return t.local }

// Name implements Port.
func (t *UDPTunnel) Name() string { return t.encap.String() + ":" + t.local.String() }

// Offloads implements Port: inner frames must have complete checksums and
// fit the path, since nobody below finishes them.
func (t *UDPTunnel) Offloads() bool { return false }

// udpCmsgSpace fits the control messages of one received datagram:
// packet info, TOS or traffic class, TTL or hop limit.
const udpCmsgSpace = 128

// udpBatch is the scratch of one recvmmsg or sendmmsg call. A received
// datagram lands whole in its packet's buffer; a sent one is gathered from
// the tunnel header here and the packet's frame, so the packet is left as
// it was.
type udpBatch struct {
	msgs  []mmsghdr
	iovs  [][2]unix.Iovec
	names [][unix.SizeofSockaddrInet6]byte
	cmsgs [][udpCmsgSpace]byte    // receive only
	hdrs  [][maxTunnelHeader]byte // send only
	lens  []int                   // send only: inner frame sizes
}

func newUDPBatch(n int, rx bool) udpBatch {
	b := udpBatch{msgs: make([]mmsghdr, n), iovs: make([][2]unix.Iovec, n), names: make([][unix.SizeofSockaddrInet6]byte, n)}
	if rx {
		b.cmsgs = make([][udpCmsgSpace]byte, n)
	} else {
		b.hdrs = make([][maxTunnelHeader]byte, n)
		b.lens = make([]int, n)
	}
	for i := range b.msgs {
		b.msgs[i].hdr.Iov = &b.iovs[i][0]
		b.msgs[i].hdr.Name = &b.names[i][0]
	}
	return b
}

// Recv implements Port. Datagrams that are not tunnel frames of the
// port's encapsulation are counted as receive errors and skipped. A
// packet's Tunnel.Options storage (which Reset keeps) is reused for the
// options it receives, so a batch of OVN's Geneve frames costs no
// allocation.
func (t *UDPTunnel) Recv(pkts []*Packet) (int, error) {
	n := min(len(pkts), len(t.rx.msgs))
	if n == 0 {
		return 0, nil
	}
	for {
		for i := range n {
			pkts[i].Reset()
			b := pkts[i].space()
			m := &t.rx.msgs[i]
			t.rx.iovs[i][0].Base = &b[0]
			t.rx.iovs[i][0].SetLen(len(b))
			m.hdr.SetIovlen(1)
			m.hdr.Namelen = unix.SizeofSockaddrInet6
			m.hdr.Control = &t.rx.cmsgs[i][0]
			m.hdr.SetControllen(udpCmsgSpace)
			m.hdr.Flags = 0
			m.n = 0
		}
		got, err := t.recvmmsg(n)
		if err != nil {
			return 0, err
		}
		// Keep the good frames at the front of pkts.
		k := 0
		for i := range got {
			if !t.takeMsg(i, pkts[i]) {
				continue
			}
			if k != i {
				pkts[k], pkts[i] = pkts[i], pkts[k]
			}
			k++
		}
		if k > 0 {
			t.rxPackets.Add(uint64(k))
			t.rxBatches.Add(1)
			return k, nil
		}
	}
}

// recvmmsg receives up to n datagrams, waiting for the first.
func (t *UDPTunnel) recvmmsg(n int) (int, error) {
	got, err := recvmmsg(t.raw, t.rx.msgs[:n], &t.closed, func(e unix.Errno) bool {
		// An ICMP error for an earlier send.
		return e == unix.ECONNREFUSED || e == unix.EHOSTUNREACH || e == unix.ENETUNREACH
	})
	if err != nil && err != ErrClosed {
		return 0, fmt.Errorf("%s port %s: recvmmsg: %w", t.encap, t.local, err)
	}
	return got, err
}

var errTooShort = errors.New("inner frame shorter than an Ethernet header")

// takeMsg decapsulates received message i into p. It reports false for a
// datagram to skip, which it counts.
func (t *UDPTunnel) takeMsg(i int, p *Packet) bool {
	m := &t.rx.msgs[i]
	if m.hdr.Flags&unix.MSG_TRUNC != 0 {
		t.rxDropped.Add(1)
		return false
	}
	p.setLen(int(m.n))
	tun, hdrLen, err := t.decap(p.Data, p.Tunnel.Options[:0])
	if err != nil {
		t.rxErrors.Add(1)
		return false
	}
	tun.Src = sockaddrAddr(t.rx.names[i][:min(int(m.hdr.Namelen), unix.SizeofSockaddrInet6)])
	tun.Dst = t.local.Addr()
	if cl := int(m.hdr.Controllen); cl > 0 {
		readTunnelCmsgs(t.rx.cmsgs[i][:min(cl, udpCmsgSpace)], &tun)
	}
	p.Tunnel = tun
	p.Pull(hdrLen)
	t.rxBytes.Add(uint64(len(p.Data)))
	return true
}

// decap parses the tunnel header at the start of a UDP payload with
// package packet's parsers and returns what it says and its length.
// Geneve options are copied into opts' storage, which the returned
// Tunnel keeps even with no options.
func (t *UDPTunnel) decap(b, opts []byte) (Tunnel, int, error) {
	tun := Tunnel{Options: opts[:0]}
	var inner []byte
	switch t.encap {
	case EncapGeneve:
		h, in, err := packet.ParseGeneve(b)
		if err != nil {
			return Tunnel{}, 0, err
		}
		tun.ID, inner = uint64(h.VNI), in
		tun.Options = append(tun.Options, h.Options...)
	case EncapVXLAN:
		vni, in, err := packet.ParseVXLAN(b)
		if err != nil {
			return Tunnel{}, 0, err
		}
		tun.ID, inner = uint64(vni), in
	}
	if len(inner) < 14 {
		return Tunnel{}, 0, errTooShort
	}
	return tun, len(b) - len(inner), nil
}

// sockaddrAddr returns the address of a struct sockaddr_in or
// sockaddr_in6, IPv4-mapped addresses unmapped.
func sockaddrAddr(b []byte) netip.Addr {
	if len(b) < 2 {
		return netip.Addr{}
	}
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) >= 8 {
			return netip.AddrFrom4([4]byte(b[4:8]))
		}
	case unix.AF_INET6:
		if len(b) >= 24 {
			return netip.AddrFrom16([16]byte(b[8:24])).Unmap()
		}
	}
	return netip.Addr{}
}

// putSockaddr writes addr:port as a struct sockaddr_in (or sockaddr_in6
// if v6, IPv4 addresses mapped) into b and returns its length, or 0 if
// the address does not fit the socket's family.
func putSockaddr(b *[unix.SizeofSockaddrInet6]byte, addr netip.Addr, port uint16, v6 bool) uint32 {
	clear(b[:])
	if !v6 {
		if !addr.Unmap().Is4() {
			return 0
		}
		binary.NativeEndian.PutUint16(b[0:], unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:], port)
		a := addr.Unmap().As4()
		copy(b[4:8], a[:])
		return unix.SizeofSockaddrInet4
	}
	binary.NativeEndian.PutUint16(b[0:], unix.AF_INET6)
	binary.BigEndian.PutUint16(b[2:], port)
	a := addr.As16()
	copy(b[8:24], a[:])
	return unix.SizeofSockaddrInet6
}

// readTunnelCmsgs takes the outer destination, TOS (traffic class) and
// TTL (hop limit) from a received datagram's control messages.
func readTunnelCmsgs(b []byte, tun *Tunnel) {
	for len(b) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(b) {
			return
		}
		d := b[unix.SizeofCmsghdr:l]
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(d) >= unix.SizeofInet4Pktinfo:
			// struct in_pktinfo: ifindex, local address, header destination.
			tun.Dst = netip.AddrFrom4([4]byte(d[8:12]))
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(d) >= 1:
			tun.TOS = d[0]
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TTL && len(d) >= 4:
			tun.TTL = uint8(binary.NativeEndian.Uint32(d))
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(d) >= unix.SizeofInet6Pktinfo:
			tun.Dst = netip.AddrFrom16([16]byte(d[0:16])).Unmap()
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(d) >= 4:
			tun.TOS = uint8(binary.NativeEndian.Uint32(d))
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_HOPLIMIT && len(d) >= 4:
			tun.TTL = uint8(binary.NativeEndian.Uint32(d))
		}
		l = (l + unix.SizeofPtr - 1) &^ (unix.SizeofPtr - 1)
		if l >= len(b) {
			return
		}
		b = b[l:]
	}
}

// Send implements Port. A frame without a tunnel destination (or with one
// of the wrong address family, Geneve options that are not whole words,
// or offloads left to finish) is dropped and counted. The outer source
// address, TOS and TTL are the host stack's choice.
func (t *UDPTunnel) Send(pkts []*Packet) error {
	t.txMu.Lock()
	defer t.txMu.Unlock()
	if t.closed.Load() {
		return ErrClosed
	}
	for len(pkts) > 0 {
		n, used := 0, 0
		for ; used < len(pkts) && n < len(t.tx.msgs); used++ {
			if t.prepareTx(n, pkts[used]) {
				n++
			} else {
				t.txDropped.Add(1)
			}
		}
		pkts = pkts[used:]
		for off := 0; off < n; {
			sent, err := t.sendmmsg(off, n-off)
			switch {
			case t.closed.Load():
				return ErrClosed
			case errors.Is(err, errTxStuck):
				t.txDropped.Add(uint64(n - off))
				off = n
				continue
			case err != nil:
				// The first datagram was refused (no route, too big):
				// skip it.
				t.txErrors.Add(1)
				off++
				continue
			}
			for _, l := range t.tx.lens[off : off+sent] {
				t.txBytes.Add(uint64(l))
			}
			t.txPackets.Add(uint64(sent))
			t.txBatches.Add(1)
			off += sent
		}
	}
	return nil
}

// prepareTx makes message i of the send batch carry p, reporting false if
// p cannot be sent.
func (t *UDPTunnel) prepareTx(i int, p *Packet) bool {
	tun := &p.Tunnel
	if !tun.Valid() || len(p.Data) == 0 || p.Offload.NeedsCsum || p.Offload.IsGSO() {
		return false
	}
	nl := putSockaddr(&t.tx.names[i], tun.Dst, t.remotePort, t.v6)
	if nl == 0 {
		return false
	}
	var hdr []byte
	switch t.encap {
	case EncapGeneve:
		if len(tun.Options)%4 != 0 || len(tun.Options) > packet.MaxGeneveOptions {
			return false
		}
		hdr = packet.AppendGeneveHeader(t.tx.hdrs[i][:0], uint32(tun.ID), false, tun.Options)
	case EncapVXLAN:
		hdr = packet.AppendVXLANHeader(t.tx.hdrs[i][:0], uint32(tun.ID))
	}
	m := &t.tx.msgs[i]
	m.hdr.Namelen = nl
	iov := &t.tx.iovs[i]
	iov[0].Base = &t.tx.hdrs[i][0]
	iov[0].SetLen(len(hdr))
	iov[1].Base = &p.Data[0]
	iov[1].SetLen(len(p.Data))
	m.hdr.SetIovlen(2)
	m.hdr.Flags = 0
	m.n = 0
	t.tx.lens[i] = len(p.Data)
	return true
}

// sendmmsg sends prepared messages off..off+n and returns how many the
// kernel took. It waits at most sendTimeout for room in the socket buffer.
func (t *UDPTunnel) sendmmsg(off, n int) (int, error) {
	sent, err := sendmmsg(t.raw, t.tx.msgs[off:off+n])
	if err != nil && !errors.Is(err, errTxStuck) {
		return 0, fmt.Errorf("%s port %s: sendmmsg: %w", t.encap, t.local, err)
	}
	return sent, err
}

// Stats implements Port.
func (t *UDPTunnel) Stats() Stats { return t.snapshot() }

// Close implements Port.
func (t *UDPTunnel) Close() error {
	t.closed.Store(true)
	t.txMu.Lock()
	defer t.txMu.Unlock()
	return t.file.Close()
}
