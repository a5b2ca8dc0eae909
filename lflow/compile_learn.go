package lflow

import (
	"fmt"
	"net/netip"

	"github.com/govn/govn/datapath/flow"
)

// lbAffinityPriority is the priority of the rules commit_lb_aff learns.
const lbAffinityPriority = 100

// commitLBAff compiles commit_lb_aff(vip = "IP:PORT", backend = "IP:PORT",
// proto = tcp|udp|sctp, timeout = SECONDS) into a learn action, as OVN
// does: the learned rule, in chk_lb_aff's table, matches the logical
// datapath, the client's address, the VIP and its port and the protocol,
// and loads the backend's address (reg4, or xxreg1 for IPv6) and port
// (reg8[0..15]) and sets chk_lb_aff's answer bit in flags. It idles out
// after timeout seconds.
func (ac *actionCompiler) commitLBAff(out []flow.Action, a *CallAction) ([]flow.Action, error) {
	lk, ok := ac.c.layout.Lookups["chk_lb_aff"]
	if !ok || lk.Flag < 0 {
		return nil, &UnsupportedError{Action: a.Name}
	}
	var vip, backend netip.AddrPort
	var proto, timeout uint64
	var haveVIP, haveBackend, haveProto bool
	for _, arg := range a.Args {
		val := arg.Value
		switch arg.Key {
		case "vip", "backend":
			if len(val) != 1 || val[0].Kind != TokString {
				return nil, fmt.Errorf("commit_lb_aff: %s must be a string \"IP:PORT\"", arg.Key)
			}
			ap, err := parseAddrPort(val[0].Str)
			if err != nil {
				return nil, fmt.Errorf("commit_lb_aff: %s: %w", arg.Key, err)
			}
			if arg.Key == "vip" {
				vip, haveVIP = ap, true
			} else {
				backend, haveBackend = ap, true
			}
		case "proto":
			if len(val) != 1 || val[0].Kind != TokIdent {
				return nil, fmt.Errorf("commit_lb_aff: proto must be tcp, udp or sctp")
			}
			switch val[0].Text {
			case "tcp":
				proto = 6
			case "udp":
				proto = 17
			case "sctp":
				proto = 132
			default:
				return nil, fmt.Errorf("commit_lb_aff: unknown proto %q", val[0].Text)
			}
			haveProto = true
		case "timeout":
			if len(val) != 1 || val[0].Kind != TokInt || val[0].Value.Hi != 0 || val[0].Value.Lo > 65535 {
				return nil, fmt.Errorf("commit_lb_aff: timeout must be 0..65535 seconds")
			}
			timeout = val[0].Value.Lo
		default:
			return nil, fmt.Errorf("commit_lb_aff: unknown argument %q", arg.Key)
		}
	}
	if !haveVIP || !haveBackend || !haveProto {
		return nil, fmt.Errorf("commit_lb_aff: needs vip, backend and proto")
	}
	v6 := vip.Addr().Is6()
	if backend.Addr().Is6() != v6 {
		return nil, fmt.Errorf("commit_lb_aff: vip and backend are of different IP versions")
	}
	meta, _ := flow.FieldByName(DPLogicalDatapath)
	l := flow.Learn{Table: lk.Table, Priority: lbAffinityPriority, IdleTimeout: uint16(timeout), Cookie: ac.ctx.Cookie}
	match := func(dst flow.Field, v uint64) {
		l.Specs = append(l.Specs, flow.LearnSpec{Match: true, Dst: flow.Whole(dst), Value: flow.U128{Lo: v}})
	}
	l.Specs = append(l.Specs, flow.LearnSpec{Match: true, Dst: flow.Whole(meta), Src: flow.Whole(meta)})
	src, dst, backendReg := flow.NWSrc, flow.NWDst, ac.c.fieldRange("reg4")
	if v6 {
		match(flow.EthType, 0x86dd)
		src, dst, backendReg = flow.IPv6Src, flow.IPv6Dst, ac.c.fieldRange("xxreg1")
	} else {
		match(flow.EthType, 0x800)
	}
	l.Specs = append(l.Specs,
		flow.LearnSpec{Match: true, Dst: flow.Whole(src), Src: flow.Whole(src)},
		flow.LearnSpec{Match: true, Dst: flow.Whole(dst), Value: addrU128(vip.Addr())})
	match(flow.NWProto, proto)
	if vip.Port() != 0 {
		match(flow.TPDst, uint64(vip.Port()))
	}
	l.Specs = append(l.Specs, flow.LearnSpec{Dst: backendReg, Value: addrU128(backend.Addr())})
	if backend.Port() != 0 {
		port := ac.c.fieldRange("reg8")
		port.Bits = 16
		l.Specs = append(l.Specs, flow.LearnSpec{Dst: port, Value: flow.U128{Lo: uint64(backend.Port())}})
	}
	flags := ac.c.fieldRange("flags")
	l.Specs = append(l.Specs, flow.LearnSpec{
		Dst: flow.FieldRange{Field: flags.Field, Ofs: flags.Ofs + uint(lk.Flag), Bits: 1}, Value: flow.U128{Lo: 1}})
	return append(out, l), nil
}

// parseAddrPort reads "IP", "IP:PORT" or "[IPv6]:PORT".
func parseAddrPort(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not IP or IP:PORT", s)
	}
	return netip.AddrPortFrom(a, 0), nil
}

func addrU128(a netip.Addr) flow.U128 {
	if a.Is4() {
		b := a.As4()
		return flow.U128{Lo: uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])}
	}
	b := a.As16()
	var v flow.U128
	for i := 0; i < 8; i++ {
		v.Hi = v.Hi<<8 | uint64(b[i])
		v.Lo = v.Lo<<8 | uint64(b[8+i])
	}
	return v
}
