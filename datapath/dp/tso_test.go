package dp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
)

// tcpGSOFrame is a TCP segment of n payload bytes from mac1 to mac2 as a
// VM with TSO hands it over: the checksum partial, to be split into
// mss-byte segments.
func tcpGSOFrame(n, mss int) ([]byte, port.Offload) {
	f := make([]byte, 54+n)
	dst, src := uint64(mac2), uint64(mac1)
	binary.BigEndian.PutUint16(f[0:], uint16(dst>>32))
	binary.BigEndian.PutUint32(f[2:], uint32(dst))
	binary.BigEndian.PutUint16(f[6:], uint16(src>>32))
	binary.BigEndian.PutUint32(f[8:], uint32(src))
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[6], ip[8], ip[9] = 0x45, 0x40, 64, 6
	binary.BigEndian.PutUint16(ip[2:], uint16(40+n))
	binary.BigEndian.PutUint16(ip[4:], 77)
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ^port.Checksum(ip[:20], 0))
	tcp := f[34:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], 1)
	tcp[12], tcp[13] = 5<<4, 0x18 // ACK|PSH
	for i := range f[54:] {
		f[54+i] = byte(i * 7)
	}
	// The pseudo-header sum, as the sender leaves it.
	pseudo := port.Checksum(append(append([]byte{}, ip[12:20]...), 0, 6, byte((20+n)>>8), byte(20+n)), 0)
	binary.BigEndian.PutUint16(tcp[16:], pseudo)
	return f, port.Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 16, GSOType: port.GSOTCPv4, HdrLen: 54, GSOSize: uint16(mss)}
}

// segmentsOf splits a frame as the kernel would put it on the wire.
func segmentsOf(t *testing.T, frame []byte, o port.Offload) [][]byte {
	t.Helper()
	p := port.NewPacket(len(frame))
	p.SetFrame(frame)
	p.Offload = o
	var out [][]byte
	if err := p.Segment(nil, func(s []byte) error {
		out = append(out, append([]byte(nil), s...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGeneveTunnelGSO sends a VM's 20 KB TSO frame between two
// datapaths over Geneve, each of which recirculates it once (as OVN's
// pipelines do around conntrack): the tunnel fields survive the
// recirculation on both sides, the frame crosses the tunnel as segments
// of the VM's size, and the receiving port with offloads gets one GSO
// frame that splits into exactly the segments the sender's would have.
func TestGeneveTunnelGSO(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	all := flow.U128{Hi: ^uint64(0), Lo: ^uint64(0)}
	f1 := &fakeFlows{translate: func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		switch {
		case k.Get(flow.InPort) == 1 && k.Get(flow.RecircID) == 0:
			return flow.Mask{}, []flow.DPAction{
				flow.DPSetField{Field: flow.TunID, Value: flow.U128{Lo: 5}, Mask: all},
				flow.DPSetField{Field: flow.TunDst, Value: flow.U128{Lo: flow.IPv4(lo)}, Mask: all},
				flow.DPSetField{Field: flow.TunMetadata0, Value: flow.U128{Lo: 0x10002}, Mask: all},
				flow.DPRecirc{ID: 1},
			}
		case k.Get(flow.InPort) == 1 && k.Get(flow.RecircID) == 1:
			return flow.Mask{}, []flow.DPAction{flow.DPOutput{Port: 9}}
		}
		return flow.Mask{}, nil
	}}
	f2 := &fakeFlows{translate: func(k *flow.Key) (flow.Mask, []flow.DPAction) {
		var m flow.Mask
		m.SetField(flow.TunID)
		m.SetField(flow.TunMetadata0)
		m.SetField(flow.TunSrc)
		if k.Get(flow.TunID) != 5 || k.Get(flow.TunMetadata0) != 0x10002 || k.Get(flow.TunSrc) != flow.IPv4(lo) {
			return m, nil
		}
		if k.Get(flow.RecircID) == 0 {
			return m, []flow.DPAction{flow.DPRecirc{ID: 2}}
		}
		return m, []flow.DPAction{flow.DPOutput{Port: 2}}
	}}
	in, out, g1 := geneveRig(t, f1, f2, true)

	frame, off := tcpGSOFrame(20000, 1448)
	want := segmentsOf(t, frame, off)
	if err := in.Inject(frame, off); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	frames := 0
	deadline := time.After(5 * time.Second)
	for len(got) < len(want) {
		select {
		case p := <-out.Out():
			frames++
			got = append(got, segmentsOf(t, p.Data, p.Offload)...)
		case <-deadline:
			t.Fatalf("%d of %d segments arrived", len(got), len(want))
		}
	}
	for i := range want {
		if i >= len(got) || !bytes.Equal(got[i], want[i]) {
			t.Fatalf("segment %d differs", i)
		}
	}
	if frames != 1 {
		t.Logf("%d segments arrived in %d frames", len(want), frames)
	}
	// The sender counts its datagrams after sendmmsg returns, which can
	// be after loopback has delivered them and the receiver has passed
	// them on: wait for the count to settle.
	var sent uint64
	for wait := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if sent = g1.Stats().TxPackets; sent >= uint64(len(want)) || time.Now().After(wait) {
			break
		}
	}
	if sent != uint64(len(want)) {
		t.Errorf("the sending tunnel sent %d datagrams, want %d (one a segment)", sent, len(want))
	}
}
