package ovsdbbench

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/govn/govn/ovsdb/jsonrpc"
)

// fanReader watches every monitor connection of a fan-out rig from one
// goroutine waiting in epoll, and reports when each update notification
// arrived. It takes the time a monitor's socket became readable as the time
// that monitor has the update, and reads the sockets only once every one of
// them has something to read, so reading one does not delay noticing the
// next: 200 monitoring clients would be 200 processes on as many machines,
// each reading its own, and one reader doing 200 reads in turn (each a few
// microseconds here) would add its own serial cost to the last monitor's
// figure for either server. What was read is then framed and checked: a
// socket woken by something else than an update (an inactivity probe) is
// watched again. A goroutine and a jsonrpc.Conn per monitor would be worse
// still: 200 goroutines of the bench on the same CPUs as the server.
type fanReader struct {
	epfd  int
	conns map[int32]*monConn
	// onUpdate is called, on the reader's goroutine, for each update
	// notification with the time its socket became readable, in the order
	// the sockets did.
	onUpdate func(at time.Time)
	// arrived lists the connections readable since they were last read,
	// in the order they became so; updated counts the connections that
	// have delivered an update since every one last did. They are read
	// when the two make up all connections.
	arrived []*monConn
	updated int

	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	err  error // why the loop stopped early
}

// monConn is one monitor's socket and its unparsed input.
type monConn struct {
	fd  int
	buf []byte // bytes read but not yet consumed as messages
	fr  framer
	// readyAt is when the socket became readable after it was last
	// drained; zero while it is not.
	readyAt time.Time
	updated bool // delivered an update in the fanReader's current cycle
}

// framer finds where JSON values end in a stream, as jsonrpc.Reader does,
// but fed by the caller so that it works on non-blocking sockets.
type framer struct {
	scan     int // next byte of buf to look at
	depth    int
	inString bool
	escaped  bool
}

// next returns the length of the first complete value in buf (0 if none
// yet), remembering how far it has looked between calls.
func (f *framer) next(buf []byte) (int, error) {
	for i := f.scan; i < len(buf); i++ {
		c := buf[i]
		if f.inString {
			switch {
			case f.escaped:
				f.escaped = false
			case c == '\\':
				f.escaped = true
			case c == '"':
				f.inString = false
			}
			continue
		}
		switch c {
		case '"':
			f.inString = true
		case '{', '[':
			f.depth++
		case '}', ']':
			f.depth--
			if f.depth < 0 {
				return 0, errors.New("unbalanced brackets from the server")
			}
			if f.depth == 0 {
				f.scan = 0
				return i + 1, nil
			}
		}
	}
	f.scan = len(buf)
	return 0, nil
}

// dialMonitor connects to the unix socket sock, sends request as a
// monitor_cond call and waits for its reply, all blocking; the returned
// connection is then switched to non-blocking. Bytes that arrived after
// the reply stay in its buffer.
func dialMonitor(sock string, request []byte) (*monConn, error) {
	fd, err := connectUnix(sock)
	if err != nil {
		return nil, err
	}
	c := &monConn{fd: fd}
	fail := func(err error) (*monConn, error) {
		unix.Close(fd)
		return nil, err
	}
	// A receive timeout keeps a silent server from hanging the bench.
	tv := unix.NsecToTimeval(int64(30 * time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail(err)
	}
	msg := append([]byte(`{"id":0,"method":"monitor_cond","params":`), request...)
	msg = append(msg, '}')
	if err := writeAll(fd, msg); err != nil {
		return fail(fmt.Errorf("sending monitor_cond: %w", err))
	}
	for {
		m, err := c.readBlocking()
		if err != nil {
			return fail(fmt.Errorf("reading the monitor_cond reply: %w", err))
		}
		if m.Kind() == jsonrpc.KindResponse && string(m.ID) == "0" {
			if m.Error != nil && string(m.Error) != "null" {
				return fail(fmt.Errorf("monitor_cond: %s", m.Error))
			}
			break
		}
		if err := c.answerProbe(m); err != nil {
			return fail(err)
		}
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return fail(err)
	}
	return c, nil
}

// connectUnix returns a blocking socket connected to the unix socket sock.
func connectUnix(sock string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connect %s: %w", sock, err)
	}
	return fd, nil
}

// readBlocking returns the next message of a blocking connection.
func (c *monConn) readBlocking() (*jsonrpc.Message, error) {
	for {
		n, err := c.fr.next(c.buf)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			m, err := jsonrpc.ParseMessage(c.buf[:n])
			c.buf = c.buf[:copy(c.buf, c.buf[n:])]
			return m, err
		}
		if err := c.fill(); err != nil {
			return nil, err
		}
	}
}

// fill reads once into the buffer; io errors and a hang-up are errors.
func (c *monConn) fill() error {
	if cap(c.buf)-len(c.buf) < 4096 {
		nb := make([]byte, len(c.buf), 2*cap(c.buf)+8192)
		copy(nb, c.buf)
		c.buf = nb
	}
	n, err := unix.Read(c.fd, c.buf[len(c.buf):cap(c.buf)])
	for err == unix.EINTR {
		// A blocking read with SO_RCVTIMEO is not restarted after the
		// runtime's preemption signals.
		n, err = unix.Read(c.fd, c.buf[len(c.buf):cap(c.buf)])
	}
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("the server closed the connection")
	}
	c.buf = c.buf[:len(c.buf)+n]
	return nil
}

// answerProbe answers an "echo" request (an inactivity probe); other
// messages are ignored.
func (c *monConn) answerProbe(m *jsonrpc.Message) error {
	if m.Method != "echo" || m.Kind() != jsonrpc.KindRequest {
		return nil
	}
	params := m.Params
	if params == nil {
		params = []byte("[]")
	}
	reply := append([]byte(`{"id":`), m.ID...)
	reply = append(reply, `,"result":`...)
	reply = append(reply, params...)
	reply = append(reply, `,"error":null}`...)
	// Blocking writes are fine: a probe answer is tiny.
	if err := unix.SetNonblock(c.fd, false); err != nil {
		return err
	}
	defer unix.SetNonblock(c.fd, true)
	return writeAll(c.fd, reply)
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// methodOf returns the "method" member of a compact JSON-RPC message
// without decoding it, or nil when it has none that is easy to find.
func methodOf(msg []byte) []byte {
	i := bytes.Index(msg, []byte(`"method":`))
	if i < 0 {
		return nil
	}
	rest := bytes.TrimLeft(msg[i+len(`"method":`):], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' {
		return nil
	}
	end := bytes.IndexByte(rest[1:], '"')
	if end < 0 {
		return nil
	}
	return rest[1 : 1+end]
}

// newFanReader starts reading conns, which it then owns.
func newFanReader(conns []*monConn, onUpdate func(time.Time)) (*fanReader, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create: %w", err)
	}
	r := &fanReader{epfd: epfd, conns: map[int32]*monConn{}, onUpdate: onUpdate, stop: make(chan struct{}), done: make(chan struct{})}
	for _, c := range conns {
		// Edge-triggered: a socket is reported once per arrival, and
		// left unread until every socket has something.
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(c.fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
			unix.Close(epfd)
			return nil, fmt.Errorf("epoll_ctl: %w", err)
		}
		r.conns[int32(c.fd)] = c
	}
	go r.loop()
	return r, nil
}

// loop notes when monitors become readable and, once all have, reads
// them, until close. It starts with what dialMonitor left in the buffers
// past the monitor_cond replies.
func (r *fanReader) loop() {
	defer close(r.done)
	for _, c := range r.conns {
		// What dialMonitor read past the monitor_cond reply came before
		// any timed commit: probes are answered, updates not reported.
		// (Registering a socket that already has data reports it.)
		if _, err := r.handle(c, time.Time{}); err != nil {
			r.fail(fmt.Errorf("monitor connection %d: %w", c.fd, err))
			return
		}
	}
	events := make([]unix.EpollEvent, len(r.conns)+1)
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		n, err := unix.EpollWait(r.epfd, events, 100)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			r.fail(fmt.Errorf("epoll_wait: %w", err))
			return
		}
		now := time.Now()
		for _, ev := range events[:n] {
			c := r.conns[ev.Fd]
			if c.readyAt.IsZero() {
				c.readyAt = now
				r.arrived = append(r.arrived, c)
			}
		}
		if len(r.arrived)+r.updated < len(r.conns) {
			continue
		}
		for _, c := range r.arrived {
			at := c.readyAt
			c.readyAt = time.Time{}
			updated, err := r.consume(c, at)
			if err != nil {
				r.fail(fmt.Errorf("monitor connection %d: %w", c.fd, err))
				return
			}
			if updated && !c.updated {
				c.updated = true
				r.updated++
			}
		}
		r.arrived = r.arrived[:0]
		if r.updated == len(r.conns) {
			for _, c := range r.conns {
				c.updated = false
			}
			r.updated = 0
		}
	}
}

// consume reads everything c has and handles each complete message; at is
// when the socket became readable. It reports whether an update was among
// them: a socket that had none (only a probe, or part of a message) is
// waited for again.
func (r *fanReader) consume(c *monConn, at time.Time) (updated bool, err error) {
	for {
		err := c.fill()
		if err == unix.EAGAIN {
			break
		}
		if err != nil {
			return false, err
		}
	}
	return r.handle(c, at)
}

// handle handles the complete messages in c's buffer: updates are reported
// as arrived at at, unless at is zero; probes are answered.
func (r *fanReader) handle(c *monConn, at time.Time) (updated bool, err error) {
	for {
		n, err := c.fr.next(c.buf)
		if err != nil {
			return false, err
		}
		if n == 0 {
			return updated, nil
		}
		msg := c.buf[:n]
		switch string(methodOf(msg)) {
		case "update", "update2", "update3":
			if !at.IsZero() {
				updated = true
				r.onUpdate(at)
			}
		case "echo":
			m, err := jsonrpc.ParseMessage(msg)
			if err != nil {
				return false, err
			}
			if err := c.answerProbe(m); err != nil {
				return false, err
			}
		}
		c.buf = c.buf[:copy(c.buf, c.buf[n:])]
	}
}

func (r *fanReader) fail(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

// Err returns why the reader stopped early, or nil.
func (r *fanReader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// close stops the loop and closes every connection.
func (r *fanReader) close() {
	close(r.stop)
	<-r.done
	for _, c := range r.conns {
		unix.Close(c.fd)
	}
	unix.Close(r.epfd)
}
