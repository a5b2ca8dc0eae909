package traffic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr; Go's alignment gives it the C layout.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// batch is the scratch of sendmmsg/recvmmsg over n buffers.
type batch struct {
	msgs []mmsghdr
	iovs []unix.Iovec
}

func newBatch(bufs [][]byte) *batch {
	b := &batch{msgs: make([]mmsghdr, len(bufs)), iovs: make([]unix.Iovec, len(bufs))}
	for i, buf := range bufs {
		b.iovs[i].Base = &buf[0]
		b.iovs[i].SetLen(len(buf))
		b.msgs[i].hdr.Iov = &b.iovs[i]
		b.msgs[i].hdr.SetIovlen(1)
	}
	return b
}

// udpBatchSize is how many datagrams one system call moves: the tools must
// not be the bottleneck of what they measure.
const udpBatchSize = 64

// UDPBlast sends size-byte UDP payloads to dst as fast as it can for d,
// udpBatchSize per sendmmsg. Errors from a full queue or an ICMP
// unreachable are ignored: the sender offers more than the path takes, on
// purpose.
func UDPBlast(dst string, d time.Duration, size int) (Result, error) {
	raddr, err := net.ResolveUDPAddr("udp4", dst)
	if err != nil {
		return Result{}, fmt.Errorf("udp-blast: %w", err)
	}
	c, err := net.DialUDP("udp4", nil, raddr)
	if err != nil {
		return Result{}, fmt.Errorf("udp-blast: %w", err)
	}
	defer c.Close()
	_ = c.SetWriteBuffer(4 << 20)
	raw, err := c.SyscallConn()
	if err != nil {
		return Result{}, fmt.Errorf("udp-blast: %w", err)
	}
	payload := make([]byte, max(size, 1))[:max(size, 1)]
	bufs := make([][]byte, udpBatchSize)
	for i := range bufs {
		bufs[i] = payload
	}
	b := newBatch(bufs)
	start := time.Now()
	end := start.Add(d)
	var n int64
	for i := 0; ; i++ {
		_ = raw.Write(func(fd uintptr) bool {
			r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.msgs[0])), uintptr(len(b.msgs)), 0, 0, 0)
			if e == unix.EAGAIN {
				return false
			}
			if e == 0 {
				n += int64(r)
			}
			return true
		})
		if i%16 == 0 && time.Now().After(end) {
			break
		}
	}
	return Result{Packets: n, Seconds: time.Since(start).Seconds()}, nil
}

// UDPSink counts datagrams arriving on addr for d after the first one (or
// until ctx ends), receiving udpBatchSize per recvmmsg. If nothing arrives
// within 10 s it reports zero packets.
func UDPSink(ctx context.Context, addr string, d time.Duration) (Result, error) {
	laddr, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		return Result{}, fmt.Errorf("udp-sink: %w", err)
	}
	c, err := net.ListenUDP("udp4", laddr)
	if err != nil {
		return Result{}, fmt.Errorf("udp-sink: %w", err)
	}
	defer c.Close()
	_ = c.SetReadBuffer(8 << 20)
	go func() { <-ctx.Done(); c.Close() }()
	raw, err := c.SyscallConn()
	if err != nil {
		return Result{}, fmt.Errorf("udp-sink: %w", err)
	}
	bufs := make([][]byte, udpBatchSize)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	b := newBatch(bufs)
	recv := func() (int, error) {
		var got int
		var serr error
		err := raw.Read(func(fd uintptr) bool {
			r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.msgs[0])), uintptr(len(b.msgs)), 0, 0, 0)
			if e == unix.EAGAIN {
				return false
			}
			if e != 0 {
				serr = e
				return true
			}
			got = int(r)
			return true
		})
		if err != nil {
			return 0, err
		}
		return got, serr
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	first, err := recv()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return Result{Seconds: d.Seconds()}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("udp-sink: waiting for the first datagram: %w", err)
	}
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(d))
	n := int64(first)
	for {
		got, err := recv()
		if err != nil {
			break
		}
		n += int64(got)
	}
	r := Result{Packets: n, Seconds: time.Since(start).Seconds()}
	// Keep the port open, uncounted, while datagrams still come: a closed
	// port would make the receiving host answer each one with an ICMP
	// unreachable through the switch, extra work that slows the sender
	// and the switch at the end of a measurement.
	lingerEnd := time.Now().Add(udpSinkMaxLinger)
	for time.Now().Before(lingerEnd) {
		_ = c.SetReadDeadline(time.Now().Add(udpSinkQuiet))
		if _, err := recv(); err != nil {
			break
		}
	}
	return r, nil
}

// A UDP sink stays open after its window until no datagram came for
// udpSinkQuiet, for at most udpSinkMaxLinger.
const (
	udpSinkQuiet     = 300 * time.Millisecond
	udpSinkMaxLinger = 5 * time.Second
)
