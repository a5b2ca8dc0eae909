package port

import (
	"fmt"
	"net"
	"sync"
)

// AFPacketOpener opens AF_PACKET ports with sockets it prepared in the
// background, so that plugging in a port does not wait for the kernel:
// setting up a socket's rings waits for an RCU grace period
// (afSockets), two per port, which on a loaded machine took a new
// port's open from about 20 ms to 100 ms and more (a chassis under a
// flood of ARP misses, whose first packets the port could only take
// once it was open). The opener keeps one port's sockets ready (512
// KiB of rings at first) and prepares the next as soon as Open takes them. Its
// methods are safe to call from any goroutine.
type AFPacketOpener struct {
	ring   bool
	spares chan spareResult // the prepared sockets, one at a time
	done   chan struct{}    // closed by Close: the preparer stops
	dead   chan struct{}    // closed when the preparer has stopped
	once   sync.Once
}

// spareResult is what the preparer made: sockets, or why it could not.
type spareResult struct {
	s   *afSockets
	err error
}

// NewAFPacketOpener starts preparing sockets for the next port. Close
// stops it.
func NewAFPacketOpener() *AFPacketOpener { return newAFPacketOpener(true) }

func newAFPacketOpener(ring bool) *AFPacketOpener {
	o := &AFPacketOpener{ring: ring, spares: make(chan spareResult), done: make(chan struct{}), dead: make(chan struct{})}
	go o.prepare()
	return o
}

// prepare makes sockets and hands them to Open, one set at a time, until
// Close; it stops at the first failure (Open then prepares its own, and
// reports the error).
func (o *AFPacketOpener) prepare() {
	defer close(o.dead)
	for {
		s, err := prepareSockets(o.ring)
		select {
		case o.spares <- spareResult{s, err}:
			if err != nil {
				return
			}
		case <-o.done:
			if s != nil {
				s.close()
			}
			return
		}
	}
}

// Open opens an AF_PACKET port on the device called name, as NewAFPacket
// does, with the sockets prepared ahead (waiting for those in progress,
// which is never longer than making new ones).
func (o *AFPacketOpener) Open(name string) (*AFPacket, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("af_packet port %s: %w", name, err)
	}
	var s *afSockets
	select {
	case r := <-o.spares:
		s = r.s
	case <-o.dead:
	}
	if s == nil {
		if s, err = prepareSockets(o.ring); err != nil {
			return nil, fmt.Errorf("af_packet port %s: %w", name, err)
		}
	}
	return s.attach(name, ifi.Index)
}

// Close stops preparing and releases the sockets not taken. Ports
// already opened stay open.
func (o *AFPacketOpener) Close() error {
	o.once.Do(func() { close(o.done) })
	<-o.dead
	return nil
}
