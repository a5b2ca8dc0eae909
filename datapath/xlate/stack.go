package xlate

import (
	"encoding/binary"
	"fmt"

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
		c.step(Step{Table: c.table, Note: fmt.Sprintf("pop:%s: stack empty, nothing popped", a.Dst)})
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
