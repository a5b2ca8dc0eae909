package flow

import (
	"errors"
	"fmt"
)

// Prerequisites, as ovs-fields(7) defines them: a field may be matched or
// written only where the rule's match already pins down the headers that
// contain it (tp_dst needs tcp, udp or sctp; nd_target needs an ICMPv6
// neighbour discovery type). ovs-ofctl silently drops a match field whose
// prerequisites are missing, which installs a rule broader than the one
// written; ParseRule refuses it instead, naming what is missing.

// The ct_state bits that the conntrack tuple fields (ct_nw_src...) need
// matched: tracked and not invalid.
const (
	ctStateTrk = 1 << 5
	ctStateInv = 1 << 4
)

// matchView answers the questions prerequisites ask of a match.
type matchView struct{ m *Match }

// exact returns f's value if m matches all of f.
func (v matchView) exact(f Field) (uint64, bool) {
	if v.m.Mask.Get(f) != fieldOnes(f) {
		return 0, false
	}
	return v.m.Key.Get(f), true
}

func (v matchView) ethType() uint64 { t, _ := v.exact(EthType); return t }

func (v matchView) ipv4() bool { return v.ethType() == 0x0800 }
func (v matchView) ipv6() bool { return v.ethType() == 0x86dd }
func (v matchView) ipAny() bool {
	return v.ipv4() || v.ipv6()
}
func (v matchView) arp() bool { t := v.ethType(); return t == 0x0806 || t == 0x8035 }

func (v matchView) proto(protos ...uint64) bool {
	p, ok := v.exact(NWProto)
	if !ok || !v.ipAny() {
		return false
	}
	for _, q := range protos {
		if p == q {
			return true
		}
	}
	return false
}

func (v matchView) icmp() bool {
	p, ok := v.exact(NWProto)
	return ok && (v.ipv4() && p == 1 || v.ipv6() && p == 58)
}

func (v matchView) ndType(types ...uint64) bool {
	p, ok := v.exact(NWProto)
	if !ok || !v.ipv6() || p != 58 {
		return false
	}
	t, ok := v.exact(ICMPType)
	for _, u := range types {
		if ok && t == u {
			return true
		}
	}
	return false
}

// tracked reports whether m matches ct_state +trk-inv.
func (v matchView) tracked() bool {
	mask, val := v.m.Mask.Get(CTState).Lo, v.m.Key.Get(CTState)
	both := uint64(ctStateTrk | ctStateInv)
	return mask&both == both && val&both == ctStateTrk
}

func (v matchView) ctProto(protos ...uint64) bool {
	p, ok := v.exact(CTNWProto)
	for _, q := range protos {
		if ok && p == q {
			return true
		}
	}
	return false
}

// checkPrerequisites reports an error if match lacks what field f needs
// to be matched or written.
func checkPrerequisites(f Field, match *Match) error {
	v := matchView{match}
	var ok bool
	var need string
	switch f {
	case NWSrc, NWDst:
		ok, need = v.ipv4() || v.arp(), "ip, arp or rarp (eth_type=0x800, 0x806 or 0x8035)"
	case ARPSPA, ARPTPA, ARPSHA, ARPTHA, ARPOp:
		ok, need = v.arp(), "arp or rarp (eth_type=0x806 or 0x8035)"
	case NWProto, NWTOS, NWECN, NWTTL, NWFrag:
		ok, need = v.ipAny(), "ip or ipv6 (eth_type=0x800 or 0x86dd)"
	case IPv6Src, IPv6Dst, IPv6Label:
		ok, need = v.ipv6(), "ipv6 (eth_type=0x86dd)"
	case TPSrc, TPDst:
		ok, need = v.proto(6, 17, 132), "tcp, udp or sctp (ip or ipv6 with nw_proto=6, 17 or 132)"
	case TCPFlags:
		ok, need = v.proto(6), "tcp or tcp6 (nw_proto=6)"
	case ICMPType, ICMPCode:
		ok, need = v.icmp(), "icmp or icmp6 (ip with nw_proto=1, or ipv6 with nw_proto=58)"
	case IGMPGroup:
		ok, need = v.ipv4() && v.proto(2), "igmp (ip with nw_proto=2)"
	case NDTarget:
		ok, need = v.ndType(135, 136), "icmp6 with icmp_type=135 or 136"
	case NDSLL:
		ok, need = v.ndType(135), "icmp6 with icmp_type=135"
	case NDTLL:
		ok, need = v.ndType(136), "icmp6 with icmp_type=136"
	case CTNWSrc, CTNWDst:
		ok, need = v.ipv4() && v.tracked(), "ip and ct_state=+trk-inv"
	case CTIPv6Src, CTIPv6Dst:
		ok, need = v.ipv6() && v.tracked(), "ipv6 and ct_state=+trk-inv"
	case CTNWProto:
		ok, need = v.ipAny() && v.tracked(), "ip or ipv6, and ct_state=+trk-inv"
	case CTTPSrc, CTTPDst:
		ok, need = v.ipAny() && v.tracked() && v.ctProto(6, 17, 132), "ip or ipv6, ct_state=+trk-inv and ct_nw_proto=6, 17 or 132"
	default:
		return nil
	}
	if !ok {
		return &PrerequisiteError{Field: f, Need: need}
	}
	return nil
}

// PrerequisiteError is ParseRule's error for a field matched or written
// without its prerequisites in the match.
type PrerequisiteError struct {
	Field Field
	Need  string // what the match lacks, e.g. "tcp, udp or sctp (...)"
}

func (e *PrerequisiteError) Error() string {
	return fmt.Sprintf("%s needs %s in the match", e.Field, e.Need)
}

// checkMatchPrerequisites checks the prerequisites of every field named.
func checkMatchPrerequisites(named []Field, m *Match) error {
	for _, f := range named {
		if err := checkPrerequisites(f, m); err != nil {
			return err
		}
	}
	return nil
}

// checkActionPrerequisites checks that the fields actions read and write,
// and the ct action, have their prerequisites in m.
func checkActionPrerequisites(m *Match, as []Action) error {
	v := matchView{m}
	for _, a := range as {
		var err error
		switch a := a.(type) {
		case Load:
			err = checkPrerequisites(a.Dst.Field, m)
		case Move:
			if err = checkPrerequisites(a.Src.Field, m); err == nil {
				err = checkPrerequisites(a.Dst.Field, m)
			}
		case Push:
			err = checkPrerequisites(a.Src.Field, m)
		case Pop:
			err = checkPrerequisites(a.Dst.Field, m)
		case Output:
			if a.PortField.Field.Valid() {
				err = checkPrerequisites(a.PortField.Field, m)
			}
		case Clone:
			err = checkActionPrerequisites(m, a.Actions)
		case CT:
			if !v.ipAny() {
				return errors.New("ct needs ip or ipv6 (eth_type=0x800 or 0x86dd) in the match")
			}
			err = checkActionPrerequisites(m, a.Exec)
		}
		if err != nil {
			return fmt.Errorf("action %s: %w", a, err)
		}
	}
	return nil
}
