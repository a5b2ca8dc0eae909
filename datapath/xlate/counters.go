package xlate

import "github.com/govn/govn/datapath/flow"

// Counters are the packet counters a translation passed through: one per
// table lookup, so a rule run twice by a packet counts it twice, as in
// Open vSwitch. The megaflow cache keeps them with the megaflow and
// credits them with its packets.
type Counters []*flow.PacketCounter

func (cs *Counters) add(c *flow.PacketCounter) {
	if c != nil {
		*cs = append(*cs, c)
	}
}

// Credit credits every counter with packets and bytes.
func (cs Counters) Credit(packets, bytes uint64) {
	if packets == 0 && bytes == 0 {
		return
	}
	for _, c := range cs {
		c.Credit(packets, bytes)
	}
}

// Hash hashes the counters' ids in order, for deduplicating lists.
func (cs Counters) Hash() uint64 {
	h := uint64(len(cs))
	for _, c := range cs {
		h = flow.HashWord(h, c.ID())
	}
	return flow.HashFinish(h)
}

// Equal reports whether cs and o are the same counters in the same order.
func (cs Counters) Equal(o Counters) bool {
	if len(cs) != len(o) {
		return false
	}
	for i := range cs {
		if cs[i] != o[i] {
			return false
		}
	}
	return true
}
