package dp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/port"
)

func reg(n int) flow.FieldRange { return flow.Whole(flow.Reg0 + flow.Field(n)) }

// pauseRules are a pipeline with a paused controller action nested in a
// resubmit: table 0 sets reg1 and resubmits to table 1, then outputs to
// port 3; table 1 pauses, then sets reg2 and resubmits to table 2, which
// outputs to port 2 only if the controller set reg0 to 1.
func pauseRules() []flow.Rule {
	var in1, r0 flow.Match
	in1.Set(flow.InPort, 1)
	r0.Set(flow.Reg0, 1)
	r0.Set(flow.Reg1, 0x11)
	r0.Set(flow.Reg2, 0x22)
	return []flow.Rule{
		{Table: 0, Priority: 100, Match: in1, Actions: []flow.Action{
			flow.Load{Dst: reg(1), Value: flow.U128{Lo: 0x11}}, flow.Resubmit{Table: 1}, flow.Output{Port: 3}}},
		{Table: 1, Priority: 100, Actions: []flow.Action{
			flow.Controller{UserData: []byte("put_x"), Pause: true},
			flow.Load{Dst: reg(2), Value: flow.U128{Lo: 0x22}}, flow.Resubmit{Table: 2}}},
		{Table: 2, Priority: 100, Match: r0, Actions: []flow.Action{flow.Output{Port: 2}}},
	}
}

func packetIn(t *testing.T, d *Datapath) PacketIn {
	t.Helper()
	select {
	case pi := <-d.PacketIns():
		return pi
	case <-time.After(5 * time.Second):
		t.Fatal("no packet-in")
		return PacketIn{}
	}
}

// TestPauseAndResume: a paused controller action hands the controller
// its registers and the continuation (the rest of its rule, then the rest
// of the rule that resubmitted to it); resuming with the result register
// set runs them, and without it the pipeline takes the other way.
func TestPauseAndResume(t *testing.T) {
	p := NewPipeline()
	apply(t, p, pauseRules()...)
	r := newRig(t, Config{Flows: p}, 3)
	f := udpFrame(mac2, mac1, 1, 2, 5)
	for _, result := range []uint64{1, 0} {
		r.inject(t, 1, f, port.Offload{})
		pi := packetIn(t, r.d)
		if pi.InPort != 1 || pi.Table != 1 || string(pi.UserData) != "put_x" || pi.Key.Get(flow.Reg1) != 0x11 {
			t.Fatalf("packet-in: in_port %d table %d userdata %q reg1 %#x", pi.InPort, pi.Table, pi.UserData, pi.Key.Get(flow.Reg1))
		}
		if pi.Cont == nil {
			t.Fatal("paused packet-in without continuation")
		}
		if got, want := pi.Cont.String(), "table=1,actions=load:0x22->reg2,resubmit(,2),output:3"; got != want {
			t.Errorf("continuation %s, want %s", got, want)
		}
		r.expectNone(t, 3) // paused: nothing of the pipeline ran after the action
		k := pi.Key
		k.Set(flow.Reg0, result)
		if err := r.d.Execute(pi.Resume(pi.Frame, k)); err != nil {
			t.Fatal(err)
		}
		if result == 1 {
			if got := r.expect(t, 2); string(got.Data) != string(f) {
				t.Errorf("resumed frame differs")
			}
		} else {
			r.expectNone(t, 2)
		}
		r.expect(t, 3)
	}
	if s := r.d.Stats(); s.PacketOuts != 2 || s.PacketIns != 2 {
		t.Errorf("packet-outs %d packet-ins %d, want 2, 2", s.PacketOuts, s.PacketIns)
	}
}

// TestExecute: a packet-out runs given actions with given registers, or
// is looked up in a given table; output to its own in_port is skipped as
// OpenFlow does, unless it says in_port.
func TestExecute(t *testing.T) {
	p := NewPipeline()
	apply(t, p, pauseRules()...)
	r := newRig(t, Config{Flows: p}, 3)
	f := udpFrame(mac2, mac1, 1, 2, 5)
	var k flow.Key
	k.Set(flow.InPort, 1)
	k.Set(flow.Reg0, 1)
	k.Set(flow.Reg1, 0x11)
	k.Set(flow.Reg2, 0x22)
	tests := []struct {
		name string
		po   PacketOut
		want []uint32
	}{
		{"lookup in table 2 with the registers", PacketOut{Frame: f, Key: k, Table: 2}, []uint32{2}},
		{"actions", PacketOut{Frame: f, Key: k, Actions: []flow.Action{flow.Output{Port: 3}, flow.Resubmit{Table: 2}}}, []uint32{3, 2}},
		{"output to the input port", PacketOut{Frame: f, Key: k, Actions: []flow.Action{flow.Output{Port: 1}}}, nil},
		{"output in_port", PacketOut{Frame: f, Key: k, Actions: []flow.Action{flow.Output{Port: flow.PortInPort}}}, []uint32{1}},
		{"no actions", PacketOut{Frame: f, Key: k, Actions: []flow.Action{}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := r.d.Execute(tc.po); err != nil {
				t.Fatal(err)
			}
			for _, no := range tc.want {
				r.expect(t, no)
			}
			for no := uint32(1); no <= 3; no++ {
				r.expectNone(t, no)
			}
		})
	}
	if err := r.d.Execute(PacketOut{Frame: make([]byte, port.MaxFrame+1)}); err == nil {
		t.Error("oversized frame accepted")
	}
	loop := PacketOut{Frame: f, Key: k, Actions: []flow.Action{flow.Resubmit{Table: 5}}}
	apply(t, p, flow.Rule{Table: 5, Priority: 1, Actions: []flow.Action{flow.Resubmit{Table: 5}, flow.Output{Port: 2}}})
	if err := r.d.Execute(loop); err == nil {
		t.Error("a looping packet-out gave no error")
	}
}

// TestSetFieldNDAndICMP: set-field rewrites ICMP type and code (views of
// tp_src, tp_dst) and an ND message's target and link-layer address
// options, keeping the ICMPv6 checksum right.
func TestSetFieldNDAndICMP(t *testing.T) {
	p := NewPipeline()
	r := newRig(t, Config{Flows: p}, 2)
	src := netip.MustParseAddr("fe80::1")
	dst := netip.MustParseAddr("ff02::1:ff00:2")
	ns := make([]byte, 32)
	ns[0] = 135
	copy(ns[8:], netip.MustParseAddr("fe80::2").AsSlice())
	ns[24], ns[25] = 1, 1 // source link-layer address option
	frame := ipv6Frame(src, dst, 58, ns)
	var k flow.Key
	k.Set(flow.InPort, 1)
	target := flow.U128{Hi: 0xaef0 << 48, Lo: 9}
	acts := []flow.Action{
		flow.Load{Dst: flow.Whole(flow.NDTarget), Value: target},
		flow.Load{Dst: flow.Whole(flow.NDSLL), Value: flow.U128{Lo: 0x0a0000000001}},
		flow.Load{Dst: flow.Whole(flow.NDTLL), Value: flow.U128{Lo: 0x0a0000000002}}, // no such option: unchanged
		flow.Load{Dst: flow.Whole(flow.ICMPCode), Value: flow.U128{Lo: 0}},
		flow.Load{Dst: flow.Whole(flow.ICMPType), Value: flow.U128{Lo: 136}},
		flow.Output{Port: 2},
	}
	if err := r.d.Execute(PacketOut{Frame: frame, Key: k, Actions: acts}); err != nil {
		t.Fatal(err)
	}
	got := r.expect(t, 2).Data
	icmp := got[14+40:]
	want := netip.MustParseAddr("aef0::9").AsSlice()
	if icmp[0] != 136 || string(icmp[8:24]) != string(want) || string(icmp[26:32]) != "\x0a\x00\x00\x00\x00\x01" {
		t.Errorf("ND message % x", icmp)
	}
	var sum uint32
	for _, b := range [][]byte{src.AsSlice(), dst.AsSlice(), {0, 0, 0, byte(len(icmp)), 0, 0, 0, 58}, icmp} {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	if sum != 0xffff {
		t.Errorf("ICMPv6 checksum wrong after the rewrite")
	}
}

// ipv6Frame builds an Ethernet frame holding an IPv6 packet with an
// ICMPv6 (proto 58) payload whose checksum it fills.
func ipv6Frame(src, dst netip.Addr, proto byte, payload []byte) []byte {
	b := make([]byte, 14+40, 14+40+len(payload))
	b[12], b[13] = 0x86, 0xdd
	h := b[14:]
	h[0] = 0x60
	h[4], h[5] = byte(len(payload)>>8), byte(len(payload))
	h[6], h[7] = proto, 255
	copy(h[8:], src.AsSlice())
	copy(h[24:], dst.AsSlice())
	b = append(b, payload...)
	var sum uint32
	for _, p := range [][]byte{src.AsSlice(), dst.AsSlice(), {0, 0, byte(len(payload) >> 8), byte(len(payload)), 0, 0, 0, proto}, payload} {
		for i := 0; i+1 < len(p); i += 2 {
			sum += uint32(p[i])<<8 | uint32(p[i+1])
		}
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	c := ^uint16(sum)
	b[14+40+2], b[14+40+3] = byte(c>>8), byte(c)
	return b
}

// BenchmarkSetField rewrites one field of a UDP frame, alternating between
// two values so that every run changes the frame.
func BenchmarkSetField(b *testing.B) {
	for _, c := range []struct {
		field flow.Field
		v0    uint64
		v1    uint64
	}{
		{flow.EthDst, 0x0a0000000001, 0x0a0000000002},
		{flow.NWTTL, 63, 64},
	} {
		b.Run(c.field.String(), func(b *testing.B) {
			f := udpFrame(mac2, mac1, 1, 2, 18)
			p := port.NewPacket(len(f))
			p.SetFrame(f)
			var k flow.Key
			packet.Extract(p.Data, &k)
			all := flow.U128{Hi: ^uint64(0), Lo: ^uint64(0)}
			a := [2]flow.DPSetField{{Field: c.field, Value: flow.U128{Lo: c.v0}, Mask: all}, {Field: c.field, Value: flow.U128{Lo: c.v1}, Mask: all}}
			i := 0
			for b.Loop() {
				setField(p, &k, a[i&1])
				i++
			}
		})
	}
}
