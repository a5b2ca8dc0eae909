package ipfrag

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// udp builds an IPv4 or IPv6 UDP packet with n payload bytes behind a
// 14-byte fake Ethernet header.
func udp(v6 bool, n int) []byte {
	var ip []byte
	payload := make([]byte, 8+n)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	binary.BigEndian.PutUint16(payload[4:], uint16(len(payload)))
	if v6 {
		ip = make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(payload)))
		ip[6], ip[7] = 17, 64
		ip[23], ip[39] = 1, 2
	} else {
		ip = make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(payload)))
		binary.BigEndian.PutUint16(ip[4:], 0x1234)
		ip[8], ip[9] = 64, 17
		copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
		binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	}
	eth := bytes.Repeat([]byte{0xee}, 14)
	return append(append(eth, ip...), payload...)
}

func TestReassemble(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, mtu := range []int{600, 1280, 1500} {
			orig := udp(v6, 4000)
			frags, err := Fragment(orig, 14, mtu, 99)
			if err != nil || len(frags) < 3 {
				t.Fatalf("v6=%v mtu %d: %d fragments, %v", v6, mtu, len(frags), err)
			}
			for _, f := range frags {
				if len(f)-14 > mtu {
					t.Fatalf("fragment of %d bytes over mtu %d", len(f)-14, mtu)
				}
			}
			rand.Shuffle(len(frags), func(i, j int) { frags[i], frags[j] = frags[j], frags[i] })
			r := New(Config{})
			for i, f := range frags {
				// The same fragments, but one, in another zone: they never
				// complete ours, nor ours theirs.
				if i > 0 {
					if res := r.Add(f, 14, 2, 0); res.Status != Held {
						t.Fatalf("zone 2 fragment %d: %v", i, res.Status)
					}
				}
				res := r.Add(f, 14, 1, 0)
				want := Held
				if i == len(frags)-1 {
					want = Complete
				}
				if res.Status != want {
					t.Fatalf("v6=%v fragment %d: status %v (%v), want %v", v6, i, res.Status, res.Err, want)
				}
				if want == Complete {
					if !bytes.Equal(res.Packet, orig) {
						t.Fatalf("v6=%v mtu %d: reassembled packet differs\n%x\n%x", v6, mtu, res.Packet, orig)
					}
					if res.MaxFragSize > mtu || res.MaxFragSize < mtu-60 {
						t.Errorf("MaxFragSize %d for mtu %d", res.MaxFragSize, mtu)
					}
				}
			}
			if r.Pending() != 1 {
				t.Errorf("pending %d, want zone 2's datagram", r.Pending())
			}
			if n := r.Expire(16 * time.Second); n != 1 || r.Pending() != 0 {
				t.Errorf("expire dropped %d, %d left", n, r.Pending())
			}
		}
	}
}

func TestNotFragment(t *testing.T) {
	r := New(Config{})
	for _, v6 := range []bool{false, true} {
		if res := r.Add(udp(v6, 10), 14, 0, 0); res.Status != NotFragment {
			t.Errorf("v6=%v whole packet: %v", v6, res.Status)
		}
	}
	if res := r.Add([]byte{0x45, 0}, 0, 0, 0); res.Status != Dropped || !errors.Is(res.Err, ErrMalformed) {
		t.Errorf("truncated: %v %v", res.Status, res.Err)
	}
}

func TestOverlapAndLimits(t *testing.T) {
	frags, _ := Fragment(udp(false, 3000), 14, 1000, 1)
	r := New(Config{MaxDatagrams: 1, MaxDatagramSize: 2000})
	r.Add(frags[0], 14, 0, 0)
	if res := r.Add(frags[0], 14, 0, 0); res.Status != Dropped || !errors.Is(res.Err, ErrOverlap) {
		t.Errorf("duplicate fragment: %v %v", res.Status, res.Err)
	}
	if r.Pending() != 0 {
		t.Errorf("overlapping datagram kept")
	}
	r.Add(frags[0], 14, 0, 0)
	other, _ := Fragment(udp(true, 3000), 14, 1000, 2)
	if res := r.Add(other[0], 14, 0, 0); !errors.Is(res.Err, ErrFull) {
		t.Errorf("over MaxDatagrams: %v %v", res.Status, res.Err)
	}
	if res := r.Add(frags[2], 14, 0, 0); !errors.Is(res.Err, ErrTooBig) {
		t.Errorf("over MaxDatagramSize: %v %v", res.Status, res.Err)
	}
}

func FuzzAdd(f *testing.F) {
	for _, v6 := range []bool{false, true} {
		frags, _ := Fragment(udp(v6, 2000), 14, 700, 5)
		f.Add(frags[0][14:], frags[1][14:], frags[2][14:]) // Add below sees no L2 header
	}
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		r := New(Config{MaxDatagrams: 4})
		for _, p := range [][]byte{a, b, c, a} {
			res := r.Add(p, 0, 0, 0)
			if res.Status == Complete && len(res.Packet) == 0 {
				t.Fatal("empty reassembled packet")
			}
			if res.Status == Dropped && res.Err == nil {
				t.Fatal("dropped without error")
			}
			if len(p) > 0 {
				Fragment(p, 0, 600, 1)
			}
		}
		r.Expire(time.Hour)
	})
}

// v4Fragment builds an IPv4 fragment (no L2 header) with an ihl-byte header
// padded with no-op options, at payload offset off.
func v4Fragment(ihl, off int, more bool, payload int) []byte {
	p := make([]byte, ihl+payload)
	p[0] = 0x40 | byte(ihl/4)
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	binary.BigEndian.PutUint16(p[4:], 7)
	fo := uint16(off / 8)
	if more {
		fo |= 0x2000
	}
	binary.BigEndian.PutUint16(p[6:], fo)
	p[8], p[9] = 64, 17
	copy(p[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	for i := 20; i < ihl; i++ {
		p[i] = 1 // no-op option
	}
	return p
}

func TestOddFragments(t *testing.T) {
	r := New(Config{})
	for i := range 3 {
		if res := r.Add(v4Fragment(20, 800, true, 0), 0, 0, 0); res.Status != Dropped || !errors.Is(res.Err, ErrMalformed) {
			t.Errorf("empty fragment %d: %v %v", i, res.Status, res.Err)
		}
	}
	if res := r.Add(v4Fragment(20, 0, true, 12), 0, 0, 0); !errors.Is(res.Err, ErrMalformed) {
		t.Errorf("non-last fragment not a multiple of 8: %v %v", res.Status, res.Err)
	}
	if r.Pending() != 0 {
		t.Errorf("%d datagrams held after odd fragments", r.Pending())
	}

	// Both fragments fit the payload limit, but with a 24-byte header the
	// whole datagram would not fit IPv4's 16-bit total length.
	first := v4Fragment(24, 0, true, 65504)
	last := v4Fragment(24, 65504, false, 31)
	if res := r.Add(first, 0, 0, 0); res.Status != Held {
		t.Fatalf("first fragment: %v %v", res.Status, res.Err)
	}
	if res := r.Add(last, 0, 0, 0); res.Status != Dropped || !errors.Is(res.Err, ErrTooBig) {
		t.Errorf("datagram over 65535 bytes: %v %v", res.Status, res.Err)
	}
	if r.Pending() != 0 {
		t.Errorf("oversized datagram still held")
	}
}

// TestFragmentIPv6HopByHop: a hop-by-hop header is examined by every router,
// so each fragment repeats it in front of the fragment header, and
// reassembly gives back the original packet.
func TestFragmentIPv6HopByHop(t *testing.T) {
	plain := udp(true, 3000)
	ip := plain[14:]
	hbh := []byte{ip[6], 0, 1, 4, 0, 0, 0, 0} // next header, length 0, PadN
	orig := append(append(append([]byte(nil), plain[:14+40]...), hbh...), ip[40:]...)
	orig[14+6] = 0 // base header: hop-by-hop follows
	binary.BigEndian.PutUint16(orig[14+4:], uint16(len(orig)-14-40))

	frags, err := Fragment(orig, 14, 1280, 7)
	if err != nil || len(frags) < 3 {
		t.Fatalf("%d fragments, %v", len(frags), err)
	}
	r := New(Config{})
	for i, f := range frags {
		if len(f)-14 > 1280 {
			t.Errorf("fragment %d: %d bytes over the mtu", i, len(f)-14)
		}
		if f[14+6] != 0 || f[14+40] != 44 {
			t.Fatalf("fragment %d: base header names %d, hop-by-hop names %d; want hop-by-hop, then fragment", i, f[14+6], f[14+40])
		}
		res := r.Add(f, 14, 0, 0)
		if i < len(frags)-1 {
			continue
		}
		if res.Status != Complete || !bytes.Equal(res.Packet, orig) {
			t.Fatalf("reassembly: %v %v; packet equal: %v", res.Status, res.Err, bytes.Equal(res.Packet, orig))
		}
	}
}

// TestFragmentIPv4Options: every fragment keeps a copied option (security,
// type 130); only the first keeps record route (type 7, not copied), the
// others carry no-ops in its place.
func TestFragmentIPv4Options(t *testing.T) {
	recordRoute := []byte{7, 7, 4, 0, 0, 0, 0}
	security := []byte{130, 3, 0}
	opts := append(append(append([]byte(nil), recordRoute...), security...), 0, 0) // EOL padding to 12
	pkt := v4Fragment(20+len(opts), 0, false, 2000)
	copy(pkt[20:], opts)
	frags, err := Fragment(pkt, 0, 576, 1)
	if err != nil || len(frags) < 3 {
		t.Fatalf("%d fragments, %v", len(frags), err)
	}
	for i, f := range frags {
		if f[0] != pkt[0] {
			t.Fatalf("fragment %d: header length changed", i)
		}
		got := f[20:32]
		want := opts
		if i > 0 {
			want = append(bytes.Repeat([]byte{1}, len(recordRoute)), opts[len(recordRoute):]...)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("fragment %d options %v, want %v", i, got, want)
		}
		if checksum(f[:32]) != 0 {
			t.Errorf("fragment %d: header checksum does not verify", i)
		}
	}
}
