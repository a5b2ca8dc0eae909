package dp

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/govn/govn/datapath/conntrack"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/port"
)

// FuzzExecute runs header-rewriting actions on arbitrary frames: whatever
// the bytes, the executor must not panic or write outside the frame.
func FuzzExecute(f *testing.F) {
	f.Add(udpFrame(mac2, mac1, 1, 2, 10), uint8(flow.NWDst), uint64(0x0a000009), true)
	f.Add(udpFrame(mac2, mac1, 1, 2, 0)[:40], uint8(flow.TPDst), uint64(80), false)
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x81, 0, 0, 1, 0x86, 0xdd}, uint8(flow.IPv6Src), uint64(1), true)
	fields := flow.Fields()
	f.Fuzz(func(t *testing.T, frame []byte, fi uint8, v uint64, vlan bool) {
		fld := fields[int(fi)%len(fields)]
		p := port.NewPacket(len(frame) + 8)
		p.SetFrame(frame)
		var k flow.Key
		packet.Extract(p.Data, &k)
		acts := []flow.DPAction{
			flow.DPSetField{Field: fld, Value: flow.U128{Hi: v, Lo: v}, Mask: flow.U128{Hi: ^uint64(0), Lo: ^uint64(0)}},
		}
		if vlan {
			acts = append(acts, flow.DPPushVLAN{TPID: 0x8100, TCI: uint16(v)}, flow.DPPopVLAN{}, flow.DPPopVLAN{})
		}
		d, err := New(Config{Flows: &fakeFlows{translate: macTable(nil)}})
		if err != nil {
			t.Fatal(err)
		}
		w := newWorker(d, &portEntry{no: 1, port: &nullPort{}})
		w.execute(p, &k, acts, 0, 0)
		w.flush()
	})
}

// FuzzExecuteActions runs an arbitrary program of datapath actions, decoded
// from prog, on an arbitrary frame: set-field of any field (with a partial
// checksum or not), VLAN push and pop, ct() with NAT through the real
// tracker (and so IP reassembly and refragmentation), meters, hashing,
// clone, and output to a plain and a Geneve port. Nothing may panic.
func FuzzExecuteActions(f *testing.F) {
	udp := udpFrame(mac2, mac1, 1, 2, 10)
	f.Add(udp, []byte{0, 7, 1, 2, 3, 4, 5, 6, 7, 8, 3, 1, 4, 0, 9, 9}, false)
	f.Add(udp, []byte{3, 5, 0, 0, 0, 0, 0, 0, 0, 80, 3, 7, 5, 2}, true)
	f.Add(udp[:30], []byte{1, 2, 2, 6, 7}, false)
	fields := flow.Fields()
	// One datapath for all inputs: building one per input (its caches, a
	// tracker) would be most of the work. Its state carries over between
	// inputs, which only widens what is exercised.
	ct := conntrack.New(conntrack.Config{MaxEntries: 1024})
	f.Cleanup(ct.Close)
	d, err := New(Config{Flows: &fakeFlows{translate: macTable(nil)}, Conntrack: ct})
	if err != nil {
		f.Fatal(err)
	}
	m := map[uint32]*portEntry{
		1: {no: 1, port: &nullPort{}},
		2: {no: 2, port: &nullPort{}, tunnel: true},
	}
	d.ports.Store(&m)
	w := newWorker(d, m[1])
	f.Fuzz(func(t *testing.T, frame, prog []byte, partial bool) {
		next := func() byte {
			if len(prog) == 0 {
				return 0
			}
			b := prog[0]
			prog = prog[1:]
			return b
		}
		next64 := func() uint64 {
			var v uint64
			for range 8 {
				v = v<<8 | uint64(next())
			}
			return v
		}
		var acts []flow.DPAction
		clones := 0
		for len(prog) > 0 && len(acts) < 32 {
			switch next() % 10 {
			case 0, 3:
				v := next64()
				acts = append(acts, flow.DPSetField{Field: fields[int(next())%len(fields)],
					Value: flow.U128{Hi: v, Lo: v}, Mask: flow.U128{Hi: ^uint64(0), Lo: ^uint64(0)}})
			case 1:
				acts = append(acts, flow.DPPushVLAN{TPID: 0x8100, TCI: uint16(next())<<8 | uint16(next())})
			case 2:
				acts = append(acts, flow.DPPopVLAN{})
			case 4:
				acts = append(acts, flow.DPOutput{Port: uint32(next() % 3)})
			case 5:
				ct := flow.DPCT{Zone: uint16(next() % 4), Commit: next()&1 == 1}
				if b := next(); b&1 == 1 {
					a := netip.AddrFrom4([4]byte{10, 0, 0, b})
					ct.NAT = &flow.NAT{Dst: b&2 != 0, Src: b&2 == 0, AddrMin: a, AddrMax: a,
						PortMin: uint16(next()), PortMax: uint16(next()) + 255}
				}
				acts = append(acts, ct)
			case 6:
				acts = append(acts, flow.DPCTClear{})
			case 7:
				acts = append(acts, flow.DPMeter{RateKbps: uint32(next()), BurstKbits: uint32(next())})
			case 8:
				acts = append(acts, flow.DPHashL4{Basis: uint32(next())})
			case 9:
				// Clones of clones would make the work exponential in the
				// program's length: a clone takes the last few actions only.
				if clones < 3 {
					clones++
					acts = append(acts, flow.DPClone{Actions: slices.Clone(acts[max(0, len(acts)-4):])})
				}
			}
		}
		p := port.NewPacket(len(frame) + 8)
		p.SetFrame(frame)
		if partial {
			p.Offload = port.Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 6}
		}
		var k flow.Key
		k.Set(flow.InPort, 1)
		packet.Extract(p.Data, &k)
		w.execute(p, &k, acts, time.Second, 0)
		w.flush()
	})
}
