// Package readpoll serves stream sockets that wait for input through an
// epoll set of their own, which watches them for output only while a write
// is waiting for room.
//
// Go's runtime watches every socket of package net for input and output
// at once (edge-triggered). On a unix stream socket the kernel reports
// "writable" each time the peer reads what was sent, so a server whose
// 200 monitoring clients each read an update gets 200 wake-ups of its
// poller for nothing: measured on govn db, about 200 output events per
// commit, in a dozen epoll_wait calls and as many thread wake-ups. (TCP
// reports room only after a write has found none.) ovsdb-server polls
// for output only when it has some queued, and so does this package.
//
// The package's epoll set is itself watched by Go's runtime, for input, so
// waiting costs no thread: one goroutine per Poller collects the events
// and wakes the readers and writers concerned.
package readpoll

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Poller is an epoll set and the goroutine that dispatches its events.
// It closes itself once Shutdown was called and its last Conn is closed.
type Poller struct {
	ep   *os.File // the epoll set, non-blocking, watched by Go's poller
	epfd int      // its descriptor (ep.Fd would make it blocking)
	raw  syscall.RawConn

	mu     sync.Mutex // guards the fields below and epoll_ctl on epfd
	conns  map[int32]*Conn
	shut   bool // no Conn will be added; close when conns is empty
	closed bool // ep is closed
	done   chan struct{}
	// broken is closed if waiting on the set failed for good; Conns then
	// fail instead of waiting (err says why).
	broken chan struct{}
	err    error
}

// New starts a Poller.
func New() (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll set non-blocking: %w", err)
	}
	ep := os.NewFile(uintptr(epfd), "readpoll")
	raw, err := ep.SyscallConn()
	if err != nil {
		ep.Close()
		return nil, err
	}
	p := &Poller{ep: ep, epfd: epfd, raw: raw, conns: map[int32]*Conn{}, done: make(chan struct{}), broken: make(chan struct{})}
	go p.loop()
	return p, nil
}

// Shutdown lets the Poller close once its Conns are closed; Add fails
// from now on.
func (p *Poller) Shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shut = true
	p.closeIfDoneLocked()
}

// closeIfDoneLocked closes the epoll set, which ends loop, once it is
// shut down and empty. Callers hold p.mu.
func (p *Poller) closeIfDoneLocked() {
	if p.shut && len(p.conns) == 0 && !p.closed {
		p.closed = true
		p.ep.Close()
	}
}

// Done is closed when the Poller's goroutine has ended.
func (p *Poller) Done() <-chan struct{} { return p.done }

// loop waits until the epoll set has events and dispatches them, until
// the set is closed.
func (p *Poller) loop() {
	defer close(p.done)
	events := make([]unix.EpollEvent, 128)
	for {
		var n int
		var werr error
		err := p.raw.Read(func(fd uintptr) bool {
			for {
				n, werr = unix.EpollWait(int(fd), events, 0)
				if werr == unix.EINTR {
					continue
				}
				// None: wait until Go's poller sees the set
				// readable, which it does for every new event.
				return n > 0 || werr != nil
			}
		})
		if err == nil && werr != nil {
			// Not expected of a valid set: fail the Conns rather
			// than leave them waiting.
			p.err = fmt.Errorf("readpoll: epoll_wait: %w", werr)
			close(p.broken)
			return
		}
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		for _, ev := range events[:n] {
			c := p.conns[ev.Fd]
			if c == nil {
				continue
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				signal(c.readable)
			}
			if ev.Events&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				signal(c.writable)
			}
		}
		p.mu.Unlock()
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

const inputEvents = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET

// Add takes a connected stream socket, which the returned Conn owns from
// then on (it is made non-blocking and closed by Conn.Close). local and
// remote are the addresses the Conn reports.
func (p *Poller) Add(fd int, local, remote net.Addr) (*Conn, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("socket set non-blocking: %w", err)
	}
	c := &Conn{p: p, fd: fd, local: local, remote: remote,
		readable: make(chan struct{}, 1), writable: make(chan struct{}, 1), closed: make(chan struct{})}
	c.idle = sync.NewCond(&c.mu)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shut {
		return nil, errors.New("readpoll: poller is shut down")
	}
	ev := unix.EpollEvent{Events: inputEvents, Fd: int32(fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return nil, fmt.Errorf("epoll_ctl add: %w", err)
	}
	p.conns[int32(fd)] = c
	return c, nil
}

// remove forgets c's descriptor before it is closed.
func (p *Poller) remove(c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The descriptor would leave the set when closed; deleting it first
	// keeps a reused number from being mistaken for it meanwhile.
	_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	delete(p.conns, int32(c.fd))
	p.closeIfDoneLocked()
}

// watchOutput adds or removes output readiness from what c's descriptor
// is watched for.
func (p *Poller) watchOutput(c *Conn, on bool) error {
	ev := unix.EpollEvent{Events: inputEvents, Fd: int32(c.fd)}
	if on {
		ev.Events |= unix.EPOLLOUT
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl mod: %w", err)
	}
	return nil
}
