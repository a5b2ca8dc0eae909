package port

import (
	"errors"
	"sync/atomic"
)

// ErrClosed is returned by Recv and Send on a closed port.
var ErrClosed = errors.New("port closed")

// Port is a source and sink of Ethernet frames.
type Port interface {
	// Name is the port's device or test name.
	Name() string
	// Recv fills pkts[:n] with received frames, resetting each packet
	// first, and returns n. It blocks until at least one frame arrives;
	// after Close it returns ErrClosed.
	Recv(pkts []*Packet) (n int, err error)
	// Send transmits the frames. It is safe to call from several
	// goroutines and concurrently with Recv. A frame the port cannot take
	// is counted as a transmit drop, not returned as an error; errors mean
	// the port is unusable. Send keeps no reference to a packet or its
	// bytes once it returns: the datapath reuses them for the next batch.
	Send(pkts []*Packet) error
	// Offloads reports whether Send accepts frames with a partial checksum
	// or a GSO segment (Packet.Offload) as they are.
	Offloads() bool
	// Stats returns the port's counters.
	Stats() Stats
	// Close stops the port and releases its device or socket.
	Close() error
}

// Stats are a port's counters since it was opened.
type Stats struct {
	RxPackets, RxBytes, RxDropped uint64
	TxPackets, TxBytes, TxDropped uint64
	RxErrors, TxErrors            uint64
	RxBatches, TxBatches          uint64 // receive and send calls that moved frames
}

// counters is the atomically updated form of Stats, embedded in ports.
type counters struct {
	rxPackets, rxBytes, rxDropped atomic.Uint64
	txPackets, txBytes, txDropped atomic.Uint64
	rxErrors, txErrors            atomic.Uint64
	rxBatches, txBatches          atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		RxPackets: c.rxPackets.Load(), RxBytes: c.rxBytes.Load(), RxDropped: c.rxDropped.Load(),
		TxPackets: c.txPackets.Load(), TxBytes: c.txBytes.Load(), TxDropped: c.txDropped.Load(),
		RxErrors: c.rxErrors.Load(), TxErrors: c.txErrors.Load(),
		RxBatches: c.rxBatches.Load(), TxBatches: c.txBatches.Load(),
	}
}
