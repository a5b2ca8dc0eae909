package ovsdbbench

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/govn/govn/ovsdb/jsonrpc"
)

// insertLoad is the insert-throughput client: clients connections to the
// unix socket sock, all driven by one goroutine waiting in epoll, each
// sending its next single-row insert as soon as the previous one is
// answered. One goroutine and a jsonrpc.Conn per connection cost about as
// much CPU per transaction as ovsdb-server itself (measured: 21–31 µs),
// on the same two CPUs as the server, so the figure was as much the
// client's as the server's; this loop costs one write and one read per
// transaction and the same for either server.
type insertLoad struct {
	epfd    int
	conns   map[int32]*insertConn
	durable bool
	// limit is the number of transactions to start in all; deadline
	// stops starting new ones earlier.
	limit    int
	deadline time.Time

	started, finished int
	outstanding       int
	// latencies, when not nil, collects each transaction's time from
	// sending it until its reply was read.
	latencies *[]time.Duration
}

// insertConn is one client connection and its unparsed input.
type insertConn struct {
	monConn
	id   int // client number, part of every row name
	sent int // transactions sent on this connection
	// sentAt is when the transaction in flight was sent.
	sentAt time.Time
}

// runInserts makes up to txns single-row insert transactions from
// clients connections to sock, stopping early at d, and returns the rate
// of answered transactions and how many there were.
func runInserts(sock string, clients, txns int, d time.Duration, durable bool) (perSecond float64, total int, err error) {
	return runInsertsTimed(sock, clients, txns, d, durable, nil)
}

// runInsertsTimed is runInserts that also appends each transaction's
// latency (from sending it until its reply was read) to latencies, unless
// that is nil.
func runInsertsTimed(sock string, clients, txns int, d time.Duration, durable bool, latencies *[]time.Duration) (perSecond float64, total int, err error) {
	l := &insertLoad{conns: map[int32]*insertConn{}, durable: durable, limit: txns, latencies: latencies}
	l.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return 0, 0, fmt.Errorf("epoll_create: %w", err)
	}
	defer l.close()
	for i := range clients {
		c, err := dialInserter(sock, i)
		if err != nil {
			return 0, 0, err
		}
		l.conns[int32(c.fd)] = c
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(c.fd)}
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
			return 0, 0, fmt.Errorf("epoll_ctl: %w", err)
		}
	}
	start := time.Now()
	l.deadline = start.Add(d)
	for _, c := range l.conns {
		if err := l.next(c); err != nil {
			return 0, 0, err
		}
	}
	events := make([]unix.EpollEvent, len(l.conns))
	for l.outstanding > 0 {
		n, err := unix.EpollWait(l.epfd, events, 30_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("epoll_wait: %w", err)
		}
		if n == 0 {
			return 0, 0, errors.New("no reply from the server within 30s")
		}
		for _, ev := range events[:n] {
			if err := l.consume(l.conns[ev.Fd]); err != nil {
				return 0, 0, err
			}
		}
	}
	elapsed := time.Since(start)
	return float64(l.finished) / elapsed.Seconds(), l.finished, nil
}

// dialInserter connects client number id to sock, blocking, then
// switches the socket to non-blocking.
func dialInserter(sock string, id int) (*insertConn, error) {
	fd, err := connectUnix(sock)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &insertConn{monConn: monConn{fd: fd}, id: id}, nil
}

// next sends c's next transaction, unless the run is over.
func (l *insertLoad) next(c *insertConn) error {
	if l.started >= l.limit || time.Now().After(l.deadline) {
		return nil
	}
	l.started++
	l.outstanding++
	n := c.sent
	c.sent++
	name := "c" + strconv.Itoa(c.id) + "-" + strconv.Itoa(n)
	msg := make([]byte, 0, 192)
	msg = append(msg, `{"id":`...)
	msg = strconv.AppendInt(msg, int64(n), 10)
	msg = append(msg, `,"method":"transact","params":["Bench",{"op":"insert","table":"Item","row":{"name":"`...)
	msg = append(msg, name...)
	msg = append(msg, `","n":`...)
	msg = strconv.AppendInt(msg, int64(n), 10)
	msg = append(msg, `}}`...)
	if l.durable {
		msg = append(msg, `,{"op":"commit","durable":true}`...)
	}
	msg = append(msg, `]}`...)
	// A request this small fits in an empty socket buffer: with one
	// transaction in flight per connection, the write never blocks.
	if l.latencies != nil {
		c.sentAt = time.Now()
	}
	if err := writeAll(c.fd, msg); err != nil {
		return fmt.Errorf("client %d: sending a transaction: %w", c.id, err)
	}
	return nil
}

// consume reads what c has, checks each reply and sends the next
// transaction.
func (l *insertLoad) consume(c *insertConn) error {
	if err := c.fill(); err != nil && err != unix.EAGAIN {
		return fmt.Errorf("client %d: %w", c.id, err)
	}
	for {
		n, err := c.fr.next(c.buf)
		if err != nil {
			return fmt.Errorf("client %d: %w", c.id, err)
		}
		if n == 0 {
			return nil
		}
		msg := c.buf[:n]
		if m := methodOf(msg); m != nil {
			// A request from the server: only inactivity probes are
			// expected.
			if string(m) == "echo" {
				req, err := jsonrpc.ParseMessage(msg)
				if err != nil {
					return fmt.Errorf("client %d: %w", c.id, err)
				}
				if err := c.answerProbe(req); err != nil {
					return fmt.Errorf("client %d: answering a probe: %w", c.id, err)
				}
			}
		} else {
			// A reply: a failed operation shows as an "error" member
			// with a string value, a failed request as one with an
			// object; a good reply has only "error":null.
			if bytes.Contains(msg, []byte(`"error":"`)) || bytes.Contains(msg, []byte(`"error":{`)) {
				return fmt.Errorf("client %d: transaction failed: %.300s", c.id, msg)
			}
			l.finished++
			l.outstanding--
			if l.latencies != nil {
				*l.latencies = append(*l.latencies, time.Since(c.sentAt))
			}
			if err := l.next(c); err != nil {
				return err
			}
		}
		c.buf = c.buf[:copy(c.buf, c.buf[n:])]
	}
}

func (l *insertLoad) close() {
	for _, c := range l.conns {
		unix.Close(c.fd)
	}
	unix.Close(l.epfd)
}
