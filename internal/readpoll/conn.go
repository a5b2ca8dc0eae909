package readpoll

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is a stream socket served by a Poller. It is a net.Conn and a
// syscall.Conn; Read and Write may be called concurrently with each other
// (one reader, one writer at a time) and with Close. Read deadlines are
// not supported (SetReadDeadline fails); write deadlines are.
type Conn struct {
	p             *Poller
	fd            int
	local, remote net.Addr

	readable, writable chan struct{} // a token: the socket may be ready
	closed             chan struct{} // closed by Close

	wmu      sync.Mutex // one writer at a time
	writeErr error      // the failure of Write's last attempt; guarded by wmu

	mu       sync.Mutex // guards the fields below
	idle     *sync.Cond // signalled when users drops to 0
	users    int        // Read, Write or RawConn calls using fd
	closing  bool
	deadline time.Time // for writes
}

// acquire registers a use of the descriptor, unless the Conn is closing.
func (c *Conn) acquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.users++
	return true
}

func (c *Conn) release() {
	c.mu.Lock()
	c.users--
	if c.users == 0 {
		c.idle.Broadcast()
	}
	c.mu.Unlock()
}

// waitReadable waits for a sign of input, or for Close.
func (c *Conn) waitReadable() error {
	select {
	case <-c.readable:
		return nil
	case <-c.closed:
		return net.ErrClosed
	case <-c.p.broken:
		return c.p.err
	}
}

// waitWritable waits for room to write, Close or the write deadline.
func (c *Conn) waitWritable() error {
	c.mu.Lock()
	deadline := c.deadline
	c.mu.Unlock()
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-c.writable:
		return nil
	case <-c.closed:
		return net.ErrClosed
	case <-c.p.broken:
		return c.p.err
	case <-timeout:
		return os.ErrDeadlineExceeded
	}
}

// Read reads up to len(b) bytes, waiting for input if there is none.
func (c *Conn) Read(b []byte) (int, error) {
	if !c.acquire() {
		return 0, net.ErrClosed
	}
	defer c.release()
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Read(c.fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if err := c.waitReadable(); err != nil {
				return 0, err
			}
			continue
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// Write writes all of b, waiting for room when the socket has none.
func (c *Conn) Write(b []byte) (int, error) {
	if !c.acquire() {
		return 0, net.ErrClosed
	}
	defer c.release()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	written := 0
	err := c.writeWaiting(func() bool {
		for written < len(b) {
			n, err := unix.Write(c.fd, b[written:])
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN {
				return false
			}
			if err != nil {
				c.writeErr = os.NewSyscallError("write", err)
				return true
			}
			written += n
		}
		return true
	})
	if err == nil {
		err, c.writeErr = c.writeErr, nil
	}
	return written, err
}

// writeWaiting calls try until it returns true, watching the socket for
// room between calls (only then, so that a peer's reads do not wake the
// Poller otherwise). Callers hold wmu and a use.
func (c *Conn) writeWaiting(try func() bool) error {
	watching := false
	defer func() {
		if watching {
			_ = c.p.watchOutput(c, false)
		}
	}()
	for !try() {
		if !watching {
			// Drop a stale token, then watch: setting the watch
			// reports room at once if there is some already.
			select {
			case <-c.writable:
			default:
			}
			if err := c.p.watchOutput(c, true); err != nil {
				return err
			}
			watching = true
		}
		if err := c.waitWritable(); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the socket. Blocked Reads and Writes return net.ErrClosed.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return net.ErrClosed
	}
	c.closing = true
	close(c.closed)
	for c.users > 0 {
		c.idle.Wait()
	}
	c.mu.Unlock()
	c.p.remove(c)
	return os.NewSyscallError("close", unix.Close(c.fd))
}

// LocalAddr returns the address given to Poller.Add.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the address given to Poller.Add.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the write deadline; read deadlines are not supported.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// SetReadDeadline fails unless t is zero: nothing here needs one.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	return errReadDeadline
}

// SetWriteDeadline makes waiting writes fail with os.ErrDeadlineExceeded
// from t on (zero: never).
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	// Wake a waiting writer to look at the new deadline.
	signal(c.writable)
	return nil
}

var errReadDeadline = &net.OpError{Op: "set", Net: "unix", Err: errNoReadDeadline{}}

type errNoReadDeadline struct{}

func (errNoReadDeadline) Error() string { return "readpoll: read deadlines are not supported" }

// SyscallConn returns the socket as a syscall.RawConn.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return rawConn{c}, nil }

type rawConn struct{ c *Conn }

func (r rawConn) Control(f func(fd uintptr)) error {
	if !r.c.acquire() {
		return net.ErrClosed
	}
	defer r.c.release()
	f(uintptr(r.c.fd))
	return nil
}

func (r rawConn) Read(f func(fd uintptr) bool) error {
	if !r.c.acquire() {
		return net.ErrClosed
	}
	defer r.c.release()
	for !f(uintptr(r.c.fd)) {
		if err := r.c.waitReadable(); err != nil {
			return err
		}
	}
	return nil
}

func (r rawConn) Write(f func(fd uintptr) bool) error {
	if !r.c.acquire() {
		return net.ErrClosed
	}
	defer r.c.release()
	r.c.wmu.Lock()
	defer r.c.wmu.Unlock()
	return r.c.writeWaiting(func() bool { return f(uintptr(r.c.fd)) })
}
