package port

import (
	"encoding/binary"
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

	gso bool // the kernel takes UDP_SEGMENT: many datagrams per message
	gro bool // the kernel joins received datagrams (UDP_GRO)

	rx udpRx // used only by the Recv goroutine

	txMu sync.Mutex
	tx   udpTx
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
		rx: newUDPRx(BatchSize), tx: newUDPTx(BatchSize)}
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
	// Segmentation offload for the datagrams, where the kernel has it
	// (Linux 4.18 and 5.0): UDP_SEGMENT set to 0 only asks whether it
	// exists, each send saying its own size.
	t.gso = unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT, 0) == nil
	t.gro = unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_GRO, 1) == nil
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

// Offloads implements Port: the port finishes partial checksums and
// splits GSO frames itself, handing the kernel a whole frame's datagrams
// at once where it can (UDP_SEGMENT).
func (t *UDPTunnel) Offloads() bool { return true }

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
// TTL (hop limit) from a received datagram's control messages, and
// returns the size of its datagrams if the kernel joined several
// (UDP_GRO), else 0.
func readTunnelCmsgs(b []byte, tun *Tunnel) (gro int) {
	for len(b) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(b) {
			return gro
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
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(d) >= 4:
			gro = int(binary.NativeEndian.Uint32(d))
		}
		l = (l + unix.SizeofPtr - 1) &^ (unix.SizeofPtr - 1)
		if l >= len(b) {
			return gro
		}
		b = b[l:]
	}
	return gro
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
