package dp

import (
	"testing"

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
