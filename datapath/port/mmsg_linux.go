package port

import (
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sendmmsg sends msgs (at least one) with one system call and returns how
// many the kernel took. A socket whose buffer stayed full for its send timeout gives
// errTxStuck; other failures are the bare errno, for the caller to wrap.
func sendmmsg(raw syscall.RawConn, msgs []mmsghdr) (int, error) {
	for {
		var sent int
		var e unix.Errno
		err := raw.Control(func(fd uintptr) {
			r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), 0, 0, 0)
			sent, e = int(r), errno
		})
		switch {
		case err != nil:
			return 0, err
		case e == 0 && sent == 0:
			// Not expected for a non-empty batch, but callers loop
			// until everything is sent: never let them spin.
			return 0, errTxStuck
		case e == 0:
			return sent, nil
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN || e == unix.ENOBUFS:
			return 0, errTxStuck
		}
		return 0, e
	}
}

// recvmmsg receives up to len(msgs) messages, waiting for the first, and
// returns how many came. Errnos that passing accepts (a receive timeout,
// an interrupted call, an ICMP error of an earlier send) make it look at
// closed and try again; once the port is closed it returns ErrClosed.
// Other failures are the bare errno, for the caller to wrap.
func recvmmsg(raw syscall.RawConn, msgs []mmsghdr, closed *atomic.Bool, passing func(unix.Errno) bool) (int, error) {
	for {
		var got int
		var e unix.Errno
		err := raw.Control(func(fd uintptr) {
			r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), unix.MSG_WAITFORONE, 0, 0)
			got, e = int(r), errno
		})
		if err != nil || closed.Load() {
			return 0, ErrClosed
		}
		if e == 0 {
			return got, nil
		}
		if e == unix.EAGAIN || e == unix.EINTR || passing(e) {
			continue
		}
		return 0, e
	}
}
