package packet

import (
	"bytes"
	"testing"
)

func TestParseGeneve(t *testing.T) {
	ovn := AppendOVNOption(nil, 0x00050007)
	other := []byte{0x01, 0x02, 0x03, 1, 1, 2, 3, 4}
	for _, c := range []struct {
		name    string
		in      []byte
		ok      bool
		vni     uint32
		opts    []byte
		md      uint32
		hasMD   bool
		crit    bool
		payload string
	}{
		{"no options", append(AppendGeneveHeader(nil, 0xabcdef, false, nil), "frame"...), true, 0xabcdef, nil, 0, false, false, "frame"},
		{"ovn option", append(AppendGeneveHeader(nil, 5, false, ovn), "x"...), true, 5, ovn, 0x00050007, true, true, "x"},
		{"ovn option second", AppendGeneveHeader(nil, 5, false, append(append([]byte{}, other...), ovn...)), true, 5, append(append([]byte{}, other...), ovn...), 0x00050007, true, true, ""},
		{"other option only", AppendGeneveHeader(nil, 1, false, other), true, 1, other, 0, false, false, ""},
		{"short", []byte{0, 0, 0x65, 0x58, 0, 0, 1}, false, 0, nil, 0, false, false, ""},
		{"version 1", []byte{0x40, 0, 0x65, 0x58, 0, 0, 1, 0}, false, 0, nil, 0, false, false, ""},
		{"not ethernet", []byte{0, 0, 0x08, 0x00, 0, 0, 1, 0}, false, 0, nil, 0, false, false, ""},
		{"options past the end", []byte{1, 0, 0x65, 0x58, 0, 0, 1, 0}, false, 0, nil, 0, false, false, ""},
		{"option longer than the list", []byte{1, 0, 0x65, 0x58, 0, 0, 1, 0, 1, 2, 3, 1, 0, 0, 0, 0}, false, 0, nil, 0, false, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, inner, err := ParseGeneve(c.in)
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			if !c.ok {
				return
			}
			if h.VNI != c.vni || !bytes.Equal(h.Options, c.opts) || string(inner) != c.payload || h.Critical != c.crit {
				t.Errorf("got %+v inner %q", h, inner)
			}
			md, ok := OVNMetadata(h.Options)
			if md != c.md || ok != c.hasMD {
				t.Errorf("OVN metadata %#x %v, want %#x %v", md, ok, c.md, c.hasMD)
			}
		})
	}
}

func TestParseVXLAN(t *testing.T) {
	vni, inner, err := ParseVXLAN(append(AppendVXLANHeader(nil, 0x1abcdef), "frame"...))
	if err != nil || vni != 0xabcdef || string(inner) != "frame" {
		t.Errorf("got %#x %q %v", vni, inner, err)
	}
	for _, b := range [][]byte{{0x08, 0, 0, 0, 0, 0, 1}, {0, 0, 0, 0, 0, 0, 1, 0}} {
		if _, _, err := ParseVXLAN(b); err == nil {
			t.Errorf("accepted % x", b)
		}
	}
}

// FuzzParseGeneve checks that a header ParseGeneve accepts is rebuilt
// byte for byte (but for reserved bits) by AppendGeneveHeader, and that
// OVNMetadata never reads outside the options.
func FuzzParseGeneve(f *testing.F) {
	f.Add(AppendGeneveHeader(nil, 5, false, AppendOVNOption(nil, 7)))
	f.Add([]byte{4, 0, 0x65, 0x58, 0x12, 0x34, 0x56, 0, 0x01, 0x02, 0x03, 1, 1, 2, 3, 4, 0x01, 0x02, 0x80, 1, 0, 5, 0, 7})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, inner, err := ParseGeneve(b)
		if err != nil {
			return
		}
		OVNMetadata(h.Options)
		re := AppendGeneveHeader(nil, h.VNI, h.OAM, h.Options)
		hdr := b[:len(b)-len(inner)]
		if len(re) != len(hdr) || !bytes.Equal(re[2:7], hdr[2:7]) || !bytes.Equal(re[8:], hdr[8:]) || re[0] != hdr[0] {
			t.Fatalf("rebuilt % x from % x", re, hdr)
		}
		h2, inner2, err := ParseGeneve(append(re, inner...))
		if err != nil || h2.VNI != h.VNI || h2.OAM != h.OAM || !bytes.Equal(h2.Options, h.Options) || !bytes.Equal(inner2, inner) {
			t.Fatalf("round trip: %+v %v, want %+v", h2, err, h)
		}
	})
}

// FuzzParseVXLAN checks VXLAN parsing round-trips through AppendVXLANHeader.
func FuzzParseVXLAN(f *testing.F) {
	f.Add(AppendVXLANHeader(nil, 42))
	f.Fuzz(func(t *testing.T, b []byte) {
		vni, inner, err := ParseVXLAN(b)
		if err != nil {
			return
		}
		if vni >= 1<<24 || len(inner) != len(b)-VXLANHeaderLen {
			t.Fatalf("vni %#x inner %d of %d", vni, len(inner), len(b))
		}
		v2, inner2, err := ParseVXLAN(append(AppendVXLANHeader(nil, vni), inner...))
		if err != nil || v2 != vni || !bytes.Equal(inner2, inner) {
			t.Fatalf("round trip %#x %v", v2, err)
		}
	})
}
