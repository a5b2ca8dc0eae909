package readpoll

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// Listener accepts connections from a unix stream listener as Conns of a
// Poller of its own, which closes once the Listener and its Conns are
// closed.
type Listener struct {
	l *net.UnixListener
	p *Poller
}

// Listen serves l's connections from a new Poller. The Listener owns l.
func Listen(l *net.UnixListener) (*Listener, error) {
	p, err := New()
	if err != nil {
		return nil, err
	}
	return &Listener{l: l, p: p}, nil
}

// Accept waits for a connection. The listener accepts it as usual; its
// descriptor is then duplicated and the original closed, which takes the
// socket out of Go's poller (a listener's RawConn cannot accept).
func (l *Listener) Accept() (net.Conn, error) {
	nc, err := l.l.AcceptUnix()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	raw, err := nc.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd := -1
	var derr error
	if err := raw.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, &net.OpError{Op: "accept", Net: "unix", Addr: l.l.Addr(), Err: os.NewSyscallError("fcntl", derr)}
	}
	c, err := l.p.Add(nfd, l.l.Addr(), peerAddr(nfd))
	if err != nil {
		unix.Close(nfd)
		return nil, &net.OpError{Op: "accept", Net: "unix", Addr: l.l.Addr(), Err: err}
	}
	return c, nil
}

// peerAddr returns the address a unix socket's peer is bound to, usually
// none.
func peerAddr(fd int) net.Addr {
	if sa, err := unix.Getpeername(fd); err == nil {
		if u, ok := sa.(*unix.SockaddrUnix); ok {
			return &net.UnixAddr{Name: u.Name, Net: "unix"}
		}
	}
	return &net.UnixAddr{Net: "unix"}
}

// Close stops accepting; the Conns already accepted go on.
func (l *Listener) Close() error {
	err := l.l.Close()
	l.p.Shutdown()
	if err != nil {
		return fmt.Errorf("readpoll: %w", err)
	}
	return nil
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.l.Addr() }
