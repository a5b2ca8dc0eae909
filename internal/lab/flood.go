package lab

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// MissFrame is a UDP datagram (to port 9, discard) from src, whose MAC is
// smac, to dst through the router whose MAC is rmac: to a dst nobody has
// yet, one ARP miss at the router.
func MissFrame(rmac, smac net.HardwareAddr, src, dst netip.Addr) []byte {
	f := make([]byte, 14+20+8+4)
	copy(f[0:6], rmac)
	copy(f[6:12], smac)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], 12) // checksum 0: none
	return f
}

// FloodDst is the i-th destination of a flood into prefix: its host
// addresses in turn (from the second, skipping the router's usual first
// address), starting over after 65,000 or the prefix's size.
func FloodDst(prefix netip.Prefix, i int) netip.Addr {
	p := prefix.Masked()
	hosts := 1 << (32 - p.Bits())
	n := min(65000, hosts-3) // not the network, the first address, the broadcast
	if n < 1 {
		n = 1
	}
	base := binary.BigEndian.Uint32(p.Addr().AsSlice())
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], base+2+uint32(i%n))
	return netip.AddrFrom4(b)
}

// Flood sends rate frames a second from fd (an AF_PACKET socket) until
// ctx ends or d has passed (d ≤ 0: until ctx ends), frame(i) being the
// i-th, and returns how many it sent and how many the kernel refused (a
// full queue).
func Flood(ctx context.Context, fd int, rate int, d time.Duration, frame func(i int) []byte) (sent, refused int) {
	start := time.Now()
	for ctx.Err() == nil {
		el := time.Since(start)
		if d > 0 && el >= d {
			break
		}
		for want := int(el.Seconds() * float64(rate)); sent+refused < want; {
			if _, err := unix.Write(fd, frame(sent+refused)); err != nil {
				refused++
			} else {
				sent++
			}
		}
		time.Sleep(time.Millisecond)
	}
	return sent, refused
}

// missFlood is the miss-flood tool: from device dev (its MAC and first
// IPv4 address), rate datagrams a second for d (0: until stopped) to
// router MAC rmac, each to the next address of prefix.
func missFlood(ctx context.Context, dev string, rate int, d time.Duration, rmac net.HardwareAddr, prefix netip.Prefix) (sent, refused int, err error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return 0, 0, fmt.Errorf("miss-flood: %w", err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return 0, 0, fmt.Errorf("miss-flood: %s: %w", dev, err)
	}
	var src netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP.To4()); ok && n.IP.To4() != nil {
				src = ip
				break
			}
		}
	}
	if !src.IsValid() {
		return 0, 0, fmt.Errorf("miss-flood: %s has no IPv4 address", dev)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("miss-flood: socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index}); err != nil {
		return 0, 0, fmt.Errorf("miss-flood: bind %s: %w", dev, err)
	}
	sent, refused = Flood(ctx, fd, rate, d, func(i int) []byte {
		return MissFrame(rmac, ifi.HardwareAddr, src, FloodDst(prefix, i))
	})
	return sent, refused, nil
}
