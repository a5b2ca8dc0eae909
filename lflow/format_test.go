package lflow

import (
	"fmt"
	"strings"

	"github.com/govn/govn/datapath/flow"
)

// The golden files print compiled rules with this file's formatter rather
// than datapath/flow's String methods, so that they change only when the
// compiled rules do.

func formatRule(r *flow.Rule) string {
	return fmt.Sprintf("table=%d priority=%d %s actions=%s", r.Table, r.Priority, formatMatch(&r.Match), formatActions(r.Actions))
}

func formatMatch(m *flow.Match) string {
	type slot struct {
		word  int
		shift uint
	}
	seen := map[slot]bool{}
	var parts []string
	for _, f := range flow.Fields() {
		mask := m.Mask.Get(f)
		if mask.IsZero() {
			continue
		}
		if strings.HasPrefix(f.String(), "xreg") || strings.HasPrefix(f.String(), "xxreg") {
			continue // overlays of reg0..reg15, printed as those
		}
		info := f.Info()
		s := slot{info.Word, info.Shift}
		if seen[s] {
			continue // an alias of a field already printed
		}
		seen[s] = true
		v := m.Key.GetU128(f)
		text := f.String() + "=" + hex128(v)
		if mask != flow.OnesU128(f.Bits()) {
			text += "/" + hex128(mask)
		}
		parts = append(parts, text)
	}
	return strings.Join(parts, ",")
}

func hex128(v flow.U128) string {
	if v.Hi != 0 {
		return fmt.Sprintf("0x%x%016x", v.Hi, v.Lo)
	}
	return fmt.Sprintf("0x%x", v.Lo)
}

func formatRange(r flow.FieldRange) string {
	return fmt.Sprintf("%s[%d..%d]", r.Field, r.Ofs, r.Ofs+r.Width()-1)
}

func formatActions(as []flow.Action) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, formatAction(a))
	}
	return strings.Join(parts, ",")
}

func formatAction(a flow.Action) string {
	switch a := a.(type) {
	case flow.Load:
		return fmt.Sprintf("load:%s->%s", hex128(a.Value), formatRange(a.Dst))
	case flow.Move:
		return fmt.Sprintf("move:%s->%s", formatRange(a.Src), formatRange(a.Dst))
	case flow.Push:
		return "push:" + formatRange(a.Src)
	case flow.Pop:
		return "pop:" + formatRange(a.Dst)
	case flow.CheckPktLarger:
		return fmt.Sprintf("check_pkt_larger(%d)->%s", a.Len, formatRange(a.Dst))
	case flow.Resubmit:
		return fmt.Sprintf("resubmit(,%d)", a.Table)
	case flow.Conjunction:
		return fmt.Sprintf("conjunction(%d,%d/%d)", a.ID, a.Clause, a.NClauses)
	case flow.Group:
		return fmt.Sprintf("group:%d", a.ID)
	case flow.DecTTL:
		return "dec_ttl"
	case flow.Meter:
		return fmt.Sprintf("meter(rate=%d,burst=%d)", a.RateKbps, a.BurstKbits)
	case flow.Drop:
		return "drop"
	case flow.CTClear:
		return "ct_clear"
	case flow.Clone:
		return "clone(" + formatActions(a.Actions) + ")"
	case flow.Controller:
		return fmt.Sprintf("controller(pause=%v,userdata=%q)", a.Pause, a.UserData)
	case flow.CT:
		s := fmt.Sprintf("ct(commit=%v,zone=%s,table=%d", a.Commit, formatRange(a.ZoneField), a.Table)
		if a.NAT != nil {
			n := a.NAT
			s += fmt.Sprintf(",nat(src=%v,dst=%v", n.Src, n.Dst)
			if n.AddrMin.IsValid() {
				s += fmt.Sprintf(",addr=%s-%s,port=%d-%d", n.AddrMin, n.AddrMax, n.PortMin, n.PortMax)
			}
			s += ")"
		}
		if len(a.Exec) > 0 {
			s += ",exec(" + formatActions(a.Exec) + ")"
		}
		return s + ")"
	}
	return fmt.Sprintf("%T", a)
}
