package port

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// gsoFrame builds a GSO TCP frame as a VM's stack hands one to its
// device: Ethernet, IPv4 (ID 0x1000, DF) or IPv6, TCP with a
// timestamp option and the given flags, a payload of n bytes, the TCP
// checksum left partial (the pseudo-header sum), split into mss-byte
// segments.
func gsoFrame(v6 bool, n, mss int, flags byte) *Packet {
	l3, l4 := 14, 34
	if v6 {
		l4 = 54
	}
	hdr := l4 + 32
	f := make([]byte, hdr+n)
	for i := range f[:12] {
		f[i] = byte(0xa0 + i)
	}
	if v6 {
		binary.BigEndian.PutUint16(f[12:], etherTypeIPv6)
		ip := f[l3:]
		ip[0], ip[1], ip[2], ip[3] = 0x60, 0x01, 0x23, 0x45 // class 0, flow label 0x12345
		binary.BigEndian.PutUint16(ip[4:], uint16(32+n))
		ip[6], ip[7] = protoTCP, 63
		copy(ip[8:], []byte{0xfd, 0, 15: 1, 16: 0xfd, 31: 2})
	} else {
		binary.BigEndian.PutUint16(f[12:], etherTypeIPv4)
		ip := f[l3:]
		ip[0], ip[1] = 0x45, 0x02 // ECT(0)
		binary.BigEndian.PutUint16(ip[2:], uint16(20+32+n))
		binary.BigEndian.PutUint16(ip[4:], 0x1000)
		ip[6] = 0x40 // DF
		ip[8], ip[9] = 63, protoTCP
		copy(ip[12:], []byte{10, 0, 0, 11, 10, 0, 0, 12})
		binary.BigEndian.PutUint16(ip[10:], ^Checksum(ip[:20], 0))
	}
	tcp := f[l4:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], 0xfffff000) // wraps within a frame
	binary.BigEndian.PutUint32(tcp[8:], 777)
	tcp[12], tcp[13] = 8<<4, flags
	binary.BigEndian.PutUint16(tcp[14:], 502)
	copy(tcp[20:], []byte{1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7}) // NOP NOP timestamps
	for i := range f[hdr:] {
		f[hdr+i] = byte(i*31 + i>>8)
	}
	binary.BigEndian.PutUint16(tcp[16:], fold(pseudoHeaderSum(f, l3, len(f)-l4, !v6, protoTCP)))
	gso := GSOTCPv4
	if v6 {
		gso = GSOTCPv6
	}
	p := NewPacket(MaxFrame)
	p.SetFrame(f)
	p.Offload = Offload{NeedsCsum: true, CsumStart: uint16(l4), CsumOffset: 16, GSOType: gso, HdrLen: uint16(hdr), GSOSize: uint16(mss)}
	return p
}

// segments splits p with Segment and returns copies of the segments.
func segments(t testing.TB, p *Packet) [][]byte {
	t.Helper()
	var out [][]byte
	if err := p.Segment(nil, func(s []byte) error {
		out = append(out, append([]byte(nil), s...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// coalesce runs frames through a coalescer as a tunnel port would and
// returns the packets it made, each with room for all the frames.
func coalesce(frames [][]byte) []*Packet {
	var c tcpCoalescer
	var out []*Packet
	room := 0
	for _, f := range frames {
		room += len(f)
	}
	for _, f := range frames {
		if c.add(f) {
			continue
		}
		c.finish()
		p := NewPacket(room)
		p.SetFrame(f)
		out = append(out, p)
		c.start(p)
	}
	c.finish()
	return out
}

func TestSegmentKeepsTCPInvariants(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		p := gsoFrame(v6, 5000, 1448, tcpFlagACK|tcpFlagPSH|tcpFlagFIN|tcpFlagCWR)
		segs := segments(t, p)
		if len(segs) != 4 {
			t.Fatalf("v6 %v: %d segments, want 4", v6, len(segs))
		}
		for i, s := range segs {
			seg, err := parseTCPSeg(s)
			if err != nil {
				t.Fatalf("v6 %v segment %d: %v", v6, i, err)
			}
			if !seg.checksumOK(s) {
				t.Errorf("v6 %v segment %d: bad TCP checksum", v6, i)
			}
			last := i == len(segs)-1
			if got := seg.flags & (tcpFlagPSH | tcpFlagFIN); (got != 0) != last {
				t.Errorf("v6 %v segment %d: PSH/FIN %#x", v6, i, got)
			}
			if cwr := seg.flags&tcpFlagCWR != 0; cwr != (i == 0) {
				t.Errorf("v6 %v segment %d: CWR %v", v6, i, cwr)
			}
			if !v6 && seg.ipID != 0x1000+uint16(i) {
				t.Errorf("segment %d: IP ID %#x", i, seg.ipID)
			}
			if ttl := s[14+8]; !v6 && ttl != 63 {
				t.Errorf("segment %d: TTL %d", i, ttl)
			}
			if want := uint32(0xfffff000) + uint32(1448*i); seg.seq != want {
				t.Errorf("v6 %v segment %d: seq %#x, want %#x", v6, i, seg.seq, want)
			}
		}
	}
}

// TestCoalesceRoundTrip: segments of a GSO frame join back into one
// frame, which splits again into exactly the same segments.
func TestCoalesceRoundTrip(t *testing.T) {
	for _, c := range []struct {
		v6     bool
		n, mss int
		flags  byte
	}{
		{false, 3000, 1000, tcpFlagACK},
		{false, 64000, 1448, tcpFlagACK | tcpFlagPSH},
		{true, 64000, 1428, tcpFlagACK | tcpFlagPSH | tcpFlagCWR},
		{true, 2896, 1448, tcpFlagACK | tcpFlagFIN},
		{false, 8000, 8948, tcpFlagACK}, // one segment: left alone
	} {
		t.Run(fmt.Sprintf("v6=%v/%d/%d", c.v6, c.n, c.mss), func(t *testing.T) {
			segs := segments(t, gsoFrame(c.v6, c.n, c.mss, c.flags))
			out := coalesce(segs)
			if len(out) != 1 {
				t.Fatalf("%d segments joined into %d frames, want 1", len(segs), len(out))
			}
			o := out[0].Offload
			if len(segs) == 1 {
				if o != (Offload{}) || !bytes.Equal(out[0].Data, segs[0]) {
					t.Errorf("a lone segment changed: %+v", o)
				}
				return
			}
			if !o.NeedsCsum || int(o.GSOSize) != c.mss || !o.IsGSO() || (o.GSOType&GSOECN != 0) != (c.flags&tcpFlagCWR != 0) {
				t.Errorf("offload %+v", o)
			}
			again := segments(t, out[0])
			if len(again) != len(segs) {
				t.Fatalf("re-split into %d segments, want %d", len(again), len(segs))
			}
			for i := range segs {
				if !bytes.Equal(again[i], segs[i]) {
					t.Errorf("segment %d differs after the round trip", i)
				}
			}
		})
	}
}

// TestCoalesceRefuses: segments that splitting could not have made stay
// apart (or end the frame), and malformed frames pass through untouched.
func TestCoalesceRefuses(t *testing.T) {
	base := func() [][]byte { return segments(t, gsoFrame(false, 4000, 1000, tcpFlagACK)) } // 4 segments
	v4 := func(s []byte) []byte { return s[14:] }
	fixIP := func(s []byte) {
		ip := v4(s)
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^Checksum(ip[:20], 0))
	}
	fixTCP := func(s []byte) {
		s[34+16], s[34+17] = 0, 0
		binary.BigEndian.PutUint16(s[34+16:], ^Checksum(s[34:], pseudoHeaderSum(s, 14, len(s)-34, true, protoTCP)))
	}
	for _, c := range []struct {
		name   string
		change func(segs [][]byte) [][]byte
		want   []int // segments per frame
	}{
		{"all", func(s [][]byte) [][]byte { return s }, []int{4}},
		{"seq gap", func(s [][]byte) [][]byte { return append(s[:2:2], s[3]) }, []int{2, 1}},
		{"reordered", func(s [][]byte) [][]byte { return [][]byte{s[0], s[2], s[1], s[3]} }, []int{1, 1, 1, 1}},
		{"PSH in the middle", func(s [][]byte) [][]byte {
			s[1][34+13] |= tcpFlagPSH
			fixTCP(s[1])
			return s
		}, []int{2, 2}},
		{"PSH first", func(s [][]byte) [][]byte {
			s[0][34+13] |= tcpFlagPSH
			fixTCP(s[0])
			return s
		}, []int{1, 3}},
		{"CWR on the second", func(s [][]byte) [][]byte {
			s[1][34+13] |= tcpFlagCWR
			fixTCP(s[1])
			return s
		}, []int{1, 3}},
		{"SYN", func(s [][]byte) [][]byte {
			s[2][34+13] |= tcpFlagSYN
			fixTCP(s[2])
			return s
		}, []int{2, 1, 1}},
		{"other ack", func(s [][]byte) [][]byte {
			s[2][34+11]++
			fixTCP(s[2])
			return s
		}, []int{2, 1, 1}},
		{"bad TCP checksum", func(s [][]byte) [][]byte {
			s[2][60]++
			return s
		}, []int{2, 1, 1}},
		{"bad first TCP checksum", func(s [][]byte) [][]byte {
			s[0][60]++
			return s
		}, []int{1, 3}},
		{"bad IP checksum", func(s [][]byte) [][]byte {
			v4(s[1])[10]++
			return s
		}, []int{1, 1, 2}},
		{"IP ID skips", func(s [][]byte) [][]byte {
			v4(s[2])[5]++
			fixIP(s[2])
			return s
		}, []int{2, 1, 1}},
		{"TTL differs", func(s [][]byte) [][]byte {
			v4(s[3])[8]--
			fixIP(s[3])
			fixTCP(s[3])
			return s
		}, []int{3, 1}},
		{"TOS differs", func(s [][]byte) [][]byte {
			v4(s[1])[1] = 3
			fixIP(s[1])
			return s
		}, []int{1, 1, 2}},
		{"other MAC", func(s [][]byte) [][]byte {
			s[1][0]++
			return s
		}, []int{1, 1, 2}},
		{"short then more", func(s [][]byte) [][]byte {
			short := segments(t, gsoFrame(false, 1500, 1000, tcpFlagACK))[1] // 500 bytes after s[0]
			more := segments(t, gsoFrame(false, 2000, 500, tcpFlagACK))[3]   // 500 bytes after short
			binary.BigEndian.PutUint16(v4(more)[4:], 0x1002)
			fixIP(more)
			return [][]byte{s[0], short, more}
		}, []int{2, 1}},
		{"fragment", func(s [][]byte) [][]byte {
			v4(s[1])[6] |= 0x20 // MF
			fixIP(s[1])
			return s
		}, []int{1, 1, 2}},
		{"padding", func(s [][]byte) [][]byte {
			s[1] = append(s[1], 0, 0)
			return s
		}, []int{1, 1, 2}},
		{"truncated", func(s [][]byte) [][]byte { return [][]byte{s[0], s[1][:40], {}, s[2][:14]} }, []int{1, 1, 1, 1}},
		{"not IP", func(s [][]byte) [][]byte {
			s[1][12] = 0x08
			s[1][13] = 0x06
			return s
		}, []int{1, 1, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			segs := c.change(base())
			in := make([][]byte, len(segs))
			for i, s := range segs {
				in[i] = append([]byte(nil), s...)
			}
			out := coalesce(in)
			var got []int
			for _, p := range out {
				n := 1
				if p.Offload.IsGSO() {
					n = len(segments(t, p))
				}
				got = append(got, n)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("segments per frame %v, want %v", got, c.want)
			}
			// Whatever was joined splits back into what came in.
			var again [][]byte
			for _, p := range out {
				if p.Offload.IsGSO() {
					again = append(again, segments(t, p)...)
				} else {
					again = append(again, p.Data)
				}
			}
			for i := range segs {
				if i >= len(again) || !bytes.Equal(again[i], segs[i]) {
					t.Errorf("frame %d did not survive", i)
				}
			}
		})
	}
}

// TestCoalesceLimit: a frame stops growing before its IP length
// overflows.
func TestCoalesceLimit(t *testing.T) {
	a := segments(t, gsoFrame(false, 60000, 1000, tcpFlagACK))
	b := segments(t, gsoFrame(false, 60000, 1000, tcpFlagACK))
	// b continues a: same flow, next sequence number and IP ID.
	next := binary.BigEndian.Uint32(a[len(a)-1][34+4:]) + 1000
	for i, s := range b {
		binary.BigEndian.PutUint32(s[34+4:], next+uint32(1000*i))
		binary.BigEndian.PutUint16(s[14+4:], 0x1000+60+uint16(i))
		s[14+10], s[14+11] = 0, 0
		binary.BigEndian.PutUint16(s[14+10:], ^Checksum(s[14:34], 0))
		s[34+16], s[34+17] = 0, 0
		binary.BigEndian.PutUint16(s[34+16:], ^Checksum(s[34:], pseudoHeaderSum(s, 14, len(s)-34, true, protoTCP)))
	}
	out := coalesce(append(a, b...))
	total := 0
	for _, p := range out {
		if l := len(p.Data) - 14; l > maxCoalesced {
			t.Errorf("frame with a %d-byte IP packet", l)
		}
		total += len(segments(t, p))
	}
	if len(out) != 2 || total != 120 {
		t.Errorf("%d frames of %d segments, want 2 of 120", len(out), total)
	}
}

func TestSegmentUDP(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		// A UDP GSO frame: the TCP frame's headers with UDP instead.
		p := gsoFrame(v6, 3000, 1200, 0)
		d, l4 := p.Data, int(p.Offload.CsumStart)
		if v6 {
			d[14+6] = protoUDP
		} else {
			d[14+9] = protoUDP
			d[14+10], d[14+11] = 0, 0
			binary.BigEndian.PutUint16(d[14+10:], ^Checksum(d[14:34], 0))
		}
		// Drop the TCP header's last 24 bytes: UDP's is 8.
		d = append(d[:l4+8], d[l4+32:]...)
		if v6 {
			binary.BigEndian.PutUint16(d[14+4:], uint16(len(d)-l4))
		} else {
			binary.BigEndian.PutUint16(d[14+2:], uint16(len(d)-14))
		}
		p.SetFrame(d)
		p.Offload = Offload{NeedsCsum: true, CsumStart: uint16(l4), CsumOffset: 6, GSOType: GSOUDPL4, HdrLen: uint16(l4 + 8), GSOSize: 1200}
		segs := segments(t, p)
		if len(segs) != 3 {
			t.Fatalf("v6 %v: %d segments", v6, len(segs))
		}
		for i, s := range segs {
			if ul := binary.BigEndian.Uint16(s[l4+4:]); int(ul) != len(s)-l4 {
				t.Errorf("v6 %v segment %d: UDP length %d", v6, i, ul)
			}
			if Checksum(s[l4:], pseudoHeaderSum(s, 14, len(s)-l4, !v6, protoUDP)) != 0xffff {
				t.Errorf("v6 %v segment %d: bad UDP checksum", v6, i)
			}
		}
	}
}

func TestSegmentRefuses(t *testing.T) {
	good := gsoFrame(false, 3000, 1000, tcpFlagACK)
	for _, c := range []struct {
		name string
		o    func(o *Offload)
		d    func(d []byte) []byte
	}{
		{"UFO", func(o *Offload) { o.GSOType = GSOUDP }, nil},
		{"zero size", func(o *Offload) { o.GSOSize = 0 }, nil},
		{"L4 in the IP header", func(o *Offload) { o.CsumStart = 30 }, nil},
		{"L4 past the end", func(o *Offload) { o.CsumStart = 60000 }, nil},
		{"v6 type on v4", func(o *Offload) { o.GSOType = GSOTCPv6 }, nil},
		{"UDP type on TCP", func(o *Offload) { o.GSOType = GSOUDPL4 }, nil},
		{"not IP", nil, func(d []byte) []byte { d[12] = 0x08; d[13] = 0x06; return d }},
		{"short", nil, func(d []byte) []byte { return d[:40] }},
		{"data offset past the end", nil, func(d []byte) []byte { d[34+12] = 0xf0; return d[:60] }},
	} {
		p := NewPacket(MaxFrame)
		d := append([]byte(nil), good.Data...)
		if c.d != nil {
			d = c.d(d)
		}
		p.SetFrame(d)
		p.Offload = good.Offload
		if c.o != nil {
			c.o(&p.Offload)
		}
		if err := p.Segment(nil, func([]byte) error { return nil }); !errors.Is(err, ErrBadOffload) {
			t.Errorf("%s: %v, want ErrBadOffload", c.name, err)
		}
	}
}

// FuzzCoalesce joins two arbitrary frames: whatever the coalescer makes
// of them splits back into them, with right checksums (a checksum of
// 0xffff comes back as 0x0000, the same one's complement value).
func FuzzCoalesce(f *testing.F) {
	segs := segments(f, gsoFrame(false, 2000, 1000, tcpFlagACK))
	f.Add(segs[0], segs[1])
	segs = segments(f, gsoFrame(true, 1500, 1000, tcpFlagACK|tcpFlagCWR|tcpFlagFIN))
	f.Add(segs[0], segs[1])
	f.Add(tcpFrame(nil), tcpFrame([]byte("x")))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if len(a) > MaxFrame-Headroom || len(b) > MaxFrame-Headroom {
			return
		}
		out := coalesce([][]byte{append([]byte(nil), a...), append([]byte(nil), b...)})
		in := [][]byte{a, b}
		i := 0
		for _, p := range out {
			if !p.Offload.IsGSO() {
				if i >= len(in) || !bytes.Equal(p.Data, in[i]) {
					t.Fatalf("frame %d changed", i)
				}
				i++
				continue
			}
			if err := p.Segment(nil, func(s []byte) error {
				if i >= len(in) || !sameSegment(s, in[i]) {
					t.Fatalf("segment %d does not split back into what came in", i)
				}
				i++
				return nil
			}); err != nil {
				t.Fatalf("a joined frame does not split: %v", err)
			}
		}
		if i != 2 {
			t.Fatalf("2 frames in, %d out", i)
		}
	})
}

// sameSegment reports whether TCP segment got has right IP and TCP
// checksums and is want but for how they are written.
func sameSegment(got, want []byte) bool {
	s, err := parseTCPSeg(got)
	if err != nil || len(got) != len(want) || !s.checksumOK(got) {
		return false
	}
	g, w := append([]byte(nil), got...), append([]byte(nil), want...)
	for _, b := range [][]byte{g, w} {
		b[s.l4+16], b[s.l4+17] = 0, 0
		if s.v4 {
			b[s.l3+10], b[s.l3+11] = 0, 0
		}
	}
	return bytes.Equal(g, w)
}
