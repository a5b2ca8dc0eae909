package xlate

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/govn/govn/datapath/flow"
)

// MaxStack is the deepest the push/pop stack may grow; a translation that
// pushes more is dropped.
const MaxStack = 1024

// push saves Src's bits. A packet field's bits are un-wildcarded as a
// move's source is: what is popped later is a function of them.
func (c *ctx) push(a flow.Push) {
	if len(c.stack) >= MaxStack {
		c.err = fmt.Errorf("push:%s: stack deeper than %d", a.Src, MaxStack)
		return
	}
	c.stack = append(c.stack, c.readField(a.Src, "push"))
}

// pop writes the top of the stack into Dst. It reads no packet field, so
// it un-wildcards nothing; writing a packet field emits a set action.
func (c *ctx) pop(a flow.Pop) {
	if len(c.stack) == 0 {
		if c.opts.Trace {
			c.step(Step{Table: c.table, Note: fmt.Sprintf("pop:%s: stack empty, nothing popped", a.Dst)})
		}
		return
	}
	v := c.stack[len(c.stack)-1]
	c.stack = c.stack[:len(c.stack)-1]
	c.writeField(a.Dst, v.And(flow.OnesU128(a.Dst.Width())))
}

// encodeStack turns a stack into a comparable string for a frozen state.
func encodeStack(s []flow.U128) string {
	if len(s) == 0 {
		return ""
	}
	b := make([]byte, 0, 16*len(s))
	for _, v := range s {
		b = binary.BigEndian.AppendUint64(b, v.Hi)
		b = binary.BigEndian.AppendUint64(b, v.Lo)
	}
	return string(b)
}

func decodeStack(s string) []flow.U128 {
	var st []flow.U128
	for ; len(s) >= 16; s = s[16:] {
		st = append(st, flow.U128{Hi: binary.BigEndian.Uint64([]byte(s[:8])), Lo: binary.BigEndian.Uint64([]byte(s[8:16]))})
	}
	return st
}

// checkPktLarger compares the packet's length with a.Len. The megaflow
// matches pkt_len's bits from the top down to the first bit in which the
// length and the threshold differ (all of them if equal): every packet
// that agrees on those bits compares the same way, so a threshold costs
// at most one megaflow per bit of pkt_len, not one per length.
func (c *ctx) checkPktLarger(a flow.CheckPktLarger) {
	length := int64(c.k.Get(flow.PktLen))
	threshold := int64(a.Len) - c.lenDelta // length+delta > Len ⇔ length > Len-delta
	larger := length > threshold
	var examined uint64
	if threshold >= 0 {
		diff := uint64(length) ^ uint64(threshold)
		examined = 0xffffffff // equal: every bit
		if diff != 0 {
			examined = ^(uint64(1)<<(63-bits.LeadingZeros64(diff)) - 1) & 0xffffffff
		}
	}
	if examined != 0 {
		var m flow.Mask
		m.SetBits(flow.PktLen, flow.U128{Lo: examined})
		c.note(&m, c.table, c.rule, "check_pkt_larger")
		c.wc.Or(&m)
	}
	v := uint64(0)
	if larger {
		v = 1
	}
	if c.opts.Trace {
		c.step(Step{Table: c.table, Note: fmt.Sprintf("check_pkt_larger(%d): length %d: %d->%s", a.Len, length+c.lenDelta, v, a.Dst)})
	}
	c.writeField(a.Dst, flow.U128{Lo: v})
}
