package port

import (
	"encoding/binary"
	"testing"
)

// tcpFrame builds an Ethernet/IPv4/TCP frame with payload; the checksums
// are left zero.
func tcpFrame(payload []byte) []byte {
	f := make([]byte, 14+20+20+len(payload))
	binary.BigEndian.PutUint16(f[12:], etherTypeIPv4)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+20+len(payload)))
	ip[8], ip[9] = 64, protoTCP
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], 1234)
	binary.BigEndian.PutUint16(tcp[2:], 80)
	binary.BigEndian.PutUint32(tcp[4:], 1000)
	tcp[12] = 5 << 4
	tcp[13] = 0x18 // PSH|ACK
	copy(tcp[20:], payload)
	return f
}

// referenceTCPChecksum computes the TCP checksum of an IPv4 frame from
// scratch, the slow, obvious way.
func referenceTCPChecksum(f []byte) uint16 {
	ip := f[14:]
	tcp := append([]byte(nil), ip[20:]...)
	tcp[16], tcp[17] = 0, 0
	pseudo := append(append([]byte(nil), ip[12:20]...), 0, protoTCP, byte(len(tcp)>>8), byte(len(tcp)))
	var s uint32
	for _, b := range [][]byte{pseudo, tcp} {
		for i := 0; i < len(b); i += 2 {
			w := uint32(b[i]) << 8
			if i+1 < len(b) {
				w |= uint32(b[i+1])
			}
			s += w
		}
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

func TestFinishChecksum(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 100, 1459} {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i*7 + 3)
		}
		f := tcpFrame(payload)
		// What a sender with offload leaves: the pseudo-header sum.
		pseudo := pseudoHeaderSum(f, 14, len(f)-34, true, protoTCP)
		for pseudo>>16 != 0 {
			pseudo = pseudo&0xffff + pseudo>>16
		}
		binary.BigEndian.PutUint16(f[34+16:], uint16(pseudo))
		p := NewPacket(len(f))
		p.SetFrame(f)
		p.Offload = Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 16}
		if err := p.FinishChecksum(); err != nil {
			t.Fatalf("payload %d: %v", n, err)
		}
		got := binary.BigEndian.Uint16(p.Data[34+16:])
		if want := referenceTCPChecksum(p.Data); got != want {
			t.Errorf("payload %d: checksum %#04x, want %#04x", n, got, want)
		}
		if p.Offload.NeedsCsum {
			t.Errorf("payload %d: still NeedsCsum", n)
		}
	}
}

func TestFinishChecksumRejectsBadOffsets(t *testing.T) {
	f := tcpFrame(nil)
	for _, o := range []Offload{
		{NeedsCsum: true, CsumStart: 60, CsumOffset: 16},
		{NeedsCsum: true, CsumStart: 34, CsumOffset: 60},
		{NeedsCsum: true, CsumStart: 34, CsumOffset: 16, GSOType: GSOTCPv4, GSOSize: 10},
	} {
		p := NewPacket(len(f))
		p.SetFrame(f)
		p.Offload = o
		if err := p.FinishChecksum(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestSegmentTCP(t *testing.T) {
	payload := make([]byte, 3000)
	for i := range payload {
		payload[i] = byte(i)
	}
	f := tcpFrame(payload)
	f[34+13] |= tcpFlagFIN
	p := NewPacket(len(f))
	p.SetFrame(f)
	p.Offload = Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 16, GSOType: GSOTCPv4, GSOSize: 1400, HdrLen: 54}
	var segs [][]byte
	err := p.Segment(nil, func(s []byte) error {
		segs = append(segs, append([]byte(nil), s...))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantLens := []int{1400, 1400, 200}
	if len(segs) != len(wantLens) {
		t.Fatalf("%d segments, want %d", len(segs), len(wantLens))
	}
	var got []byte
	for i, s := range segs {
		pl := s[54:]
		if len(pl) != wantLens[i] {
			t.Errorf("segment %d: %d payload bytes, want %d", i, len(pl), wantLens[i])
		}
		if l := binary.BigEndian.Uint16(s[16:]); int(l) != len(s)-14 {
			t.Errorf("segment %d: IP total length %d, want %d", i, l, len(s)-14)
		}
		if Checksum(s[14:34], 0) != 0xffff {
			t.Errorf("segment %d: bad IP header checksum", i)
		}
		if c, want := binary.BigEndian.Uint16(s[34+16:]), referenceTCPChecksum(s); c != want {
			t.Errorf("segment %d: TCP checksum %#04x, want %#04x", i, c, want)
		}
		if seq := binary.BigEndian.Uint32(s[34+4:]); seq != 1000+uint32(1400*i) {
			t.Errorf("segment %d: seq %d", i, seq)
		}
		last := i == len(segs)-1
		if fin := s[34+13]&tcpFlagFIN != 0; fin != last {
			t.Errorf("segment %d: FIN %v", i, fin)
		}
		got = append(got, pl...)
	}
	if string(got) != string(payload) {
		t.Error("segments do not add up to the payload")
	}
}

func TestPushPull(t *testing.T) {
	p := NewPacket(64)
	p.SetFrame([]byte("abcdef"))
	copy(p.Push(4), "tag:")
	if string(p.Data) != "tag:abcdef" {
		t.Fatalf("after Push: %q", p.Data)
	}
	copy(p.Push(Headroom), make([]byte, Headroom)) // beyond the headroom: reallocates
	p.Pull(Headroom)
	p.Pull(4)
	if string(p.Data) != "abcdef" {
		t.Fatalf("after Pull: %q", p.Data)
	}
}

func TestVnetHdrRoundTrip(t *testing.T) {
	o := Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 16, GSOType: GSOTCPv6 | GSOECN, HdrLen: 74, GSOSize: 1440}
	var b [vnetHdrLen]byte
	encodeVnetHdr(b[:], o)
	if got := decodeVnetHdr(b[:]); got != o {
		t.Errorf("round trip: %+v, want %+v", got, o)
	}
}

func TestChannel(t *testing.T) {
	c := NewChannel("c0", 4, false)
	defer c.Close()
	if err := c.Inject([]byte("frame-1........"), Offload{}); err != nil {
		t.Fatal(err)
	}
	pkts := []*Packet{NewPacket(64), NewPacket(64)}
	n, err := c.Recv(pkts)
	if err != nil || n != 1 || string(pkts[0].Data) != "frame-1........" {
		t.Fatalf("Recv = %d, %v, %q", n, err, pkts[0].Data)
	}
	pkts[0].Offload.NeedsCsum = true
	if err := c.Send(pkts[:1]); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.TxDropped != 1 || s.RxPackets != 1 {
		t.Errorf("stats %+v: want 1 rx and a tx drop of the partial-checksum frame", s)
	}
	c.Close()
	if _, err := c.Recv(pkts); err != ErrClosed {
		t.Errorf("Recv after Close: %v", err)
	}
}

func FuzzSegmentTCP(f *testing.F) {
	f.Add(tcpFrame(make([]byte, 100)), uint16(34), uint16(16), uint8(GSOTCPv4), uint16(40))
	f.Add(tcpFrame(nil), uint16(34), uint16(16), uint8(0), uint16(0))
	f.Fuzz(func(t *testing.T, frame []byte, start, off uint16, gso uint8, size uint16) {
		p := NewPacket(len(frame))
		p.SetFrame(frame)
		p.Offload = Offload{NeedsCsum: true, CsumStart: start, CsumOffset: off, GSOType: GSOType(gso), GSOSize: size}
		total := 0
		_ = p.Segment(nil, func(s []byte) error {
			total++
			if total > 70000 {
				t.Fatal("too many segments")
			}
			return nil
		})
	})
}

func BenchmarkChecksum1500(b *testing.B) {
	buf := make([]byte, 1500)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		Checksum(buf, 0)
	}
}

// TestPushPopVLAN stacks two tags on a frame with a partial checksum and
// takes them off again: the tags land behind the MACs, outermost first, and
// the offload offsets follow the headers they point at.
func TestPushPopVLAN(t *testing.T) {
	frame := tcpFrame([]byte("payload"))
	frame[0], frame[11] = 0xd0, 0x5a // recognisable MAC ends
	p := NewPacket(len(frame))
	p.SetFrame(frame)
	p.Offload = Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 16, HdrLen: 54}

	p.PushVLAN(etherTypeVLAN, 0x0064)
	p.PushVLAN(etherTypeQinQ, 0x1005) // DEI set: written as given
	d := p.Data
	if len(d) != len(frame)+8 || d[0] != 0xd0 || d[11] != 0x5a {
		t.Fatalf("MACs moved: %x", d[:12])
	}
	for i, want := range []uint16{etherTypeQinQ, 0x1005, etherTypeVLAN, 0x0064, etherTypeIPv4} {
		if got := binary.BigEndian.Uint16(d[12+2*i:]); got != want {
			t.Errorf("word %d behind the MACs: %#04x, want %#04x", i, got, want)
		}
	}
	if o := p.Offload; o.CsumStart != 42 || o.HdrLen != 62 {
		t.Errorf("after two pushes: CsumStart %d HdrLen %d, want 42 and 62", o.CsumStart, o.HdrLen)
	}

	p.PopVLAN()
	p.PopVLAN()
	p.PopVLAN() // no tag left: nothing happens
	if string(p.Data) != string(frame) {
		t.Errorf("after popping both tags:\n%x\nwant\n%x", p.Data, frame)
	}
	if o := p.Offload; o.CsumStart != 34 || o.HdrLen != 54 {
		t.Errorf("after two pops: CsumStart %d HdrLen %d, want 34 and 54", o.CsumStart, o.HdrLen)
	}

	short := NewPacket(16)
	short.SetFrame(make([]byte, 11))
	short.PushVLAN(etherTypeVLAN, 1)
	short.PopVLAN()
	if len(short.Data) != 11 {
		t.Errorf("frame without MACs changed to %d bytes", len(short.Data))
	}
}

// TestChecksumReference checks Checksum against RFC 1071's 16-bit sum,
// the slow way, for every length up to 300 and every alignment of the
// tail, with sums that carry.
func TestChecksumReference(t *testing.T) {
	ref := func(b []byte, initial uint32) uint16 {
		s := uint64(initial)
		for i := 0; i < len(b); i += 2 {
			w := uint64(b[i]) << 8
			if i+1 < len(b) {
				w |= uint64(b[i+1])
			}
			s += w
		}
		for s>>16 != 0 {
			s = s&0xffff + s>>16
		}
		return uint16(s)
	}
	buf := make([]byte, 300)
	for _, fill := range []func(i int) byte{
		func(i int) byte { return 0xff },
		func(i int) byte { return byte(i*131 + i>>3) },
		func(i int) byte { return 0 },
	} {
		for i := range buf {
			buf[i] = fill(i)
		}
		for n := range len(buf) + 1 {
			for _, initial := range []uint32{0, 0xffff, 0x1fffe, 0xffffffff} {
				if got, want := Checksum(buf[:n], initial), ref(buf[:n], initial); got != want {
					t.Fatalf("%d bytes, initial %#x: %#04x, want %#04x", n, initial, got, want)
				}
			}
		}
	}
}
