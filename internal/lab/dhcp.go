package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A minimal DHCPv4 client (RFC 2131) for VMs: no lease renewal, one
// interface, just DISCOVER, OFFER, REQUEST, ACK. Debian's usual clients
// (isc-dhcp-client, busybox udhcpc) are not installed on every machine,
// and this one only needs the test binary. It talks through an AF_PACKET
// socket because the interface has no address yet: the reply may be
// unicast to the offered address, which a UDP socket would not receive.

// DHCP message types (option 53).
const (
	dhcpDiscover = 1
	dhcpOffer    = 2
	dhcpRequest  = 3
	dhcpAck      = 5
	dhcpNak      = 6
)

// DHCP option codes used here.
const (
	optPad         = 0
	optSubnetMask  = 1
	optRouter      = 3
	optDNS         = 6
	optMTU         = 26
	optRequestedIP = 50
	optLeaseTime   = 51
	optMsgType     = 53
	optServerID    = 54
	optParamList   = 55
	optEnd         = 255
)

// dhcpMagic is the cookie that starts the options field.
const dhcpMagic = 0x63825363

// dhcpFixedLen is the length of a DHCP message up to the options, cookie
// included.
const dhcpFixedLen = 240

type dhcpOption struct {
	Code byte
	Data []byte
}

// dhcpMsg is the part of a DHCP message that this client reads or writes.
type dhcpMsg struct {
	Op      byte // 1 request, 2 reply
	XID     uint32
	Flags   uint16
	CIAddr  netip.Addr
	YIAddr  netip.Addr
	CHAddr  net.HardwareAddr
	Options []dhcpOption
}

// option returns the data of the first option with code, or nil.
func (m *dhcpMsg) option(code byte) []byte {
	for _, o := range m.Options {
		if o.Code == code {
			return o.Data
		}
	}
	return nil
}

// msgType returns option 53, or 0 if it is missing or malformed.
func (m *dhcpMsg) msgType() byte {
	if d := m.option(optMsgType); len(d) == 1 {
		return d[0]
	}
	return 0
}

// optionAddr returns an option holding an IPv4 address, or the zero Addr.
func (m *dhcpMsg) optionAddr(code byte) netip.Addr {
	if d := m.option(code); len(d) >= 4 {
		return netip.AddrFrom4([4]byte(d[:4]))
	}
	return netip.Addr{}
}

// marshal encodes the message, padded to the 300 bytes of a BOOTP
// message that some servers insist on.
func (m *dhcpMsg) marshal() []byte {
	b := make([]byte, dhcpFixedLen, 300)
	b[0], b[1], b[2] = m.Op, 1, 6 // Ethernet, 6-byte addresses
	binary.BigEndian.PutUint32(b[4:], m.XID)
	binary.BigEndian.PutUint16(b[10:], m.Flags)
	putAddr(b[12:16], m.CIAddr)
	putAddr(b[16:20], m.YIAddr)
	copy(b[28:44], m.CHAddr)
	binary.BigEndian.PutUint32(b[236:], dhcpMagic)
	for _, o := range m.Options {
		b = append(b, o.Code, byte(len(o.Data)))
		b = append(b, o.Data...)
	}
	b = append(b, optEnd)
	for len(b) < 300 {
		b = append(b, optPad)
	}
	return b
}

func putAddr(dst []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(dst, v[:])
	}
}

// parseDHCP decodes a DHCP message; it rejects anything truncated or
// without the magic cookie.
func parseDHCP(b []byte) (*dhcpMsg, error) {
	if len(b) < dhcpFixedLen {
		return nil, fmt.Errorf("dhcp: message of %d bytes, want at least %d", len(b), dhcpFixedLen)
	}
	if b[1] != 1 || b[2] != 6 {
		return nil, fmt.Errorf("dhcp: hardware type %d length %d, want Ethernet", b[1], b[2])
	}
	if binary.BigEndian.Uint32(b[236:]) != dhcpMagic {
		return nil, errors.New("dhcp: no magic cookie")
	}
	m := &dhcpMsg{
		Op:     b[0],
		XID:    binary.BigEndian.Uint32(b[4:]),
		Flags:  binary.BigEndian.Uint16(b[10:]),
		CIAddr: netip.AddrFrom4([4]byte(b[12:16])),
		YIAddr: netip.AddrFrom4([4]byte(b[16:20])),
		CHAddr: net.HardwareAddr(append([]byte(nil), b[28:34]...)),
	}
	for opts := b[dhcpFixedLen:]; len(opts) > 0; {
		code := opts[0]
		if code == optEnd {
			break
		}
		if code == optPad {
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || len(opts) < 2+int(opts[1]) {
			return nil, fmt.Errorf("dhcp: option %d truncated", code)
		}
		n := int(opts[1])
		m.Options = append(m.Options, dhcpOption{Code: code, Data: append([]byte(nil), opts[2:2+n]...)})
		opts = opts[2+n:]
	}
	return m, nil
}

// ipv4UDP wraps payload in IPv4 and UDP headers, checksums filled in.
func ipv4UDP(src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	udpLen := 8 + len(payload)
	b := make([]byte, 20+udpLen)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	b[8], b[9] = 64, unix.IPPROTO_UDP
	putAddr(b[12:16], src)
	putAddr(b[16:20], dst)
	binary.BigEndian.PutUint16(b[10:], ^onesSum(0, b[:20]))
	u := b[20:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	copy(u[8:], payload)
	// The UDP checksum covers a pseudo-header of addresses, protocol and
	// length.
	pseudo := make([]byte, 12)
	copy(pseudo[0:8], b[12:20])
	pseudo[9] = unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(pseudo[10:], uint16(udpLen))
	sum := ^onesSum(onesSum(0, pseudo), u)
	if sum == 0 {
		sum = 0xffff // 0 means "no checksum"
	}
	binary.BigEndian.PutUint16(u[6:], sum)
	return b
}

// onesSum adds b as big-endian 16-bit words to sum in ones' complement.
func onesSum(sum uint16, b []byte) uint16 {
	s := uint32(sum)
	for len(b) >= 2 {
		s += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// parseIPv4UDP returns the UDP payload of an IPv4 packet and its ports, or
// ok false if it is not an unfragmented UDP datagram.
func parseIPv4UDP(b []byte) (dport uint16, payload []byte, ok bool) {
	if len(b) < 20 || b[0]>>4 != 4 || b[9] != unix.IPPROTO_UDP {
		return 0, nil, false
	}
	ihl := int(b[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(b[2:]))
	if ihl < 20 || total < ihl+8 || total > len(b) || binary.BigEndian.Uint16(b[6:])&0x3fff != 0 {
		return 0, nil, false
	}
	u := b[ihl:total]
	ulen := int(binary.BigEndian.Uint16(u[4:]))
	if ulen < 8 || ulen > len(u) {
		return 0, nil, false
	}
	return binary.BigEndian.Uint16(u[2:]), u[8:ulen], true
}

// lease is what a DHCP server granted.
type lease struct {
	Addr   netip.Prefix
	Router netip.Addr // zero if none was offered
	DNS    netip.Addr // the first DNS server; zero if none
	MTU    int        // 0 if none
}

// dhcp4 gets a lease on the interface dev, retransmitting every second
// until ctx ends.
func dhcp4(ctx context.Context, dev string) (lease, error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return lease{}, fmt.Errorf("dhcp: %w", err)
	}
	proto := htons(unix.ETH_P_IP)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return lease{}, fmt.Errorf("dhcp: packet socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		return lease{}, fmt.Errorf("dhcp: bind to %s: %w", dev, err)
	}
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return lease{}, fmt.Errorf("dhcp: %w", err)
	}
	bcast := &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index, Halen: 6,
		Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	// Any xid unique on the link will do; the pid is, and is repeatable.
	xid := uint32(os.Getpid())<<8 | 1
	params := dhcpOption{optParamList, []byte{optSubnetMask, optRouter, optLeaseTime}}

	exchange := func(req *dhcpMsg, want byte) (*dhcpMsg, error) {
		frame := ipv4UDP(netip.IPv4Unspecified(), netip.AddrFrom4([4]byte{255, 255, 255, 255}), 68, 67, req.marshal())
		buf := make([]byte, 2048)
		for {
			if err := unix.Sendto(fd, frame, 0, bcast); err != nil {
				return nil, fmt.Errorf("dhcp: send: %w", err)
			}
			resend := time.Now().Add(time.Second)
			for time.Now().Before(resend) {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("dhcp: no reply of type %d: %w", want, err)
				}
				n, _, err := unix.Recvfrom(fd, buf, 0)
				if err != nil {
					continue // timeout or EINTR: check the clocks again
				}
				dport, payload, ok := parseIPv4UDP(buf[:n])
				if !ok || dport != 68 {
					continue
				}
				m, err := parseDHCP(payload)
				if err != nil || m.Op != 2 || m.XID != req.XID {
					continue
				}
				switch m.msgType() {
				case want:
					return m, nil
				case dhcpNak:
					return nil, errors.New("dhcp: server sent NAK")
				}
			}
		}
	}

	offer, err := exchange(&dhcpMsg{Op: 1, XID: xid, CHAddr: ifi.HardwareAddr,
		Options: []dhcpOption{{optMsgType, []byte{dhcpDiscover}}, params}}, dhcpOffer)
	if err != nil {
		return lease{}, err
	}
	ip := offer.YIAddr.As4()
	opts := []dhcpOption{{optMsgType, []byte{dhcpRequest}}, {optRequestedIP, ip[:]}, params}
	if sid := offer.option(optServerID); sid != nil {
		opts = append(opts, dhcpOption{optServerID, sid})
	}
	ack, err := exchange(&dhcpMsg{Op: 1, XID: xid, CHAddr: ifi.HardwareAddr, Options: opts}, dhcpAck)
	if err != nil {
		return lease{}, err
	}
	bits := 32
	if mask := ack.option(optSubnetMask); len(mask) == 4 {
		bits, _ = net.IPMask(mask).Size()
	}
	l := lease{Addr: netip.PrefixFrom(ack.YIAddr, bits), Router: ack.optionAddr(optRouter), DNS: ack.optionAddr(optDNS)}
	if mtu := ack.option(optMTU); len(mtu) == 2 {
		l.MTU = int(mtu[0])<<8 | int(mtu[1])
	}
	return l, nil
}

// htons returns the number whose bytes in memory are v in network byte
// order, as the packet socket calls want their protocol.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
