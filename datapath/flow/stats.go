package flow

import "sync/atomic"

// PacketCounter counts the packets and bytes credited to a rule, or to a
// table's matches or misses. The fast path never touches it: megaflows
// count their own hits, and each megaflow's packets are credited later,
// in bulk, to the counters of the rules its translation ran (see package
// megaflow); only an upcall credits its one packet at once. Credit also credits the parent, so a rule's counter
// feeds its table's matched count. Safe for concurrent use; the zero value
// counts with no parent. A nil counter counts nothing and reads 0.
type PacketCounter struct {
	packets, bytes atomic.Uint64
	parent         *PacketCounter
	id             uint64
}

// NewPacketCounter returns a counter that also credits parent (if not nil).
// id names the counter for whoever deduplicates lists of counters (the
// megaflow cache hashes them); the tables give each counter its own.
func NewPacketCounter(id uint64, parent *PacketCounter) *PacketCounter {
	return &PacketCounter{id: id, parent: parent}
}

// Credit adds packets and bytes to c and its ancestors.
func (c *PacketCounter) Credit(packets, bytes uint64) {
	for ; c != nil; c = c.parent {
		c.packets.Add(packets)
		c.bytes.Add(bytes)
	}
}

// Packets returns the packets credited so far.
func (c *PacketCounter) Packets() uint64 {
	if c == nil {
		return 0
	}
	return c.packets.Load()
}

// Bytes returns the bytes credited so far.
func (c *PacketCounter) Bytes() uint64 {
	if c == nil {
		return 0
	}
	return c.bytes.Load()
}

// ID returns the id the counter was made with.
func (c *PacketCounter) ID() uint64 {
	if c == nil {
		return 0
	}
	return c.id
}
