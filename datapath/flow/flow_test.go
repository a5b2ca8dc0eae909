package flow

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

// TestLayoutDisjoint checks that no two fields overlap unless one is a
// declared alias or view of the other, and that every field lies in its
// stage's words.
func TestLayoutDisjoint(t *testing.T) {
	views := map[Field]bool{ARPSPA: true, ARPTPA: true, ICMPType: true, ICMPCode: true}
	for f := XReg0; f <= XXReg3; f++ {
		views[f] = true
	}
	var used Mask
	for _, f := range Fields() {
		i := f.Info()
		if i.Bits == 0 || (i.Bits > 64 && i.Bits != 128) || (i.Bits <= 64 && i.Shift+i.Bits > 64) {
			t.Errorf("%s: bad geometry %+v", f, i)
		}
		if i.Word < StageStart(i.Stage) || i.Word >= StageEnd(i.Stage) {
			t.Errorf("%s: word %d outside stage %d", f, i.Word, i.Stage)
		}
		if views[f] {
			continue
		}
		m := FieldMask(f)
		for w := range m.W {
			if m.W[w]&used.W[w] != 0 {
				t.Errorf("%s overlaps another field in word %d", f, w)
			}
		}
		used.Or(&m)
	}
}

func TestFieldNamesRoundTrip(t *testing.T) {
	for _, f := range Fields() {
		g, ok := FieldByName(f.String())
		if !ok || g != f {
			t.Errorf("FieldByName(%q) = %v, %v", f.String(), g, ok)
		}
	}
	if f, ok := FieldByName("tcp_dst"); !ok || f != TPDst {
		t.Errorf("alias tcp_dst = %v", f)
	}
}

func TestGetSet(t *testing.T) {
	tests := []struct {
		f Field
		v U128
	}{
		{InPort, U128{0, 7}},
		{Reg0, U128{0, 0xdeadbeef}},
		{Reg1, U128{0, 0x12345678}},
		{EthSrc, U128{0, 0x0a0b0c0d0e0f}},
		{NWDst, U128{0, 0x0a000001}},
		{IPv6Src, IPv6(netip.MustParseAddr("fe80::1"))},
		{TPDst, U128{0, 80}},
		{CTLabel, U128{1, 2}},
		{TunMetadata0, U128{0, 0x00010002}},
	}
	for _, tt := range tests {
		var k Key
		for i := range k.W {
			k.W[i] = ^uint64(0)
		}
		k.SetU128(tt.f, tt.v)
		if got := k.GetU128(tt.f); got != tt.v {
			t.Errorf("%s: got %x want %x", tt.f, got, tt.v)
		}
		// Only the field's bits changed.
		m := FieldMask(tt.f)
		for w := range k.W {
			if k.W[w]|m.W[w] != ^uint64(0) {
				t.Errorf("%s: clobbered word %d", tt.f, w)
			}
		}
	}
}

func TestRegisterViews(t *testing.T) {
	var k Key
	k.Set(Reg0, 0x11111111)
	k.Set(Reg1, 0x22222222)
	k.Set(Reg2, 0x33333333)
	k.Set(Reg3, 0x44444444)
	if got := k.Get(XReg0); got != 0x1111111122222222 {
		t.Errorf("xreg0 = %x", got)
	}
	if got := k.GetU128(XXReg0); got != (U128{0x1111111122222222, 0x3333333344444444}) {
		t.Errorf("xxreg0 = %x", got)
	}
}

func TestRanges(t *testing.T) {
	var k Key
	r := FieldRange{Field: Reg3, Ofs: 8, Bits: 8}
	k.SetRange(r, U128{0, 0xab})
	if k.Get(Reg3) != 0xab00 || k.GetRange(r).Lo != 0xab {
		t.Errorf("reg3 = %x", k.Get(Reg3))
	}
	if r.String() != "reg3[8..15]" {
		t.Errorf("String = %q", r.String())
	}
	if err := (FieldRange{Field: Reg3, Ofs: 30, Bits: 8}).Validate(); err == nil {
		t.Error("out-of-range subfield accepted")
	}
}

func TestMatch(t *testing.T) {
	var m Match
	m.Set(EthType, 0x0800)
	m.SetPrefix(NWDst, U128{0, 0x0a000000}, 8)
	m.Set(TPDst, 80)
	var k Key
	k.Set(EthType, 0x0800)
	k.Set(NWDst, 0x0a010203)
	k.Set(TPDst, 80)
	if !m.Matches(&k) {
		t.Fatal("want match")
	}
	k.Set(NWDst, 0x0b010203)
	if m.Matches(&k) {
		t.Fatal("want no match")
	}
	if got, want := m.String(), "eth_type=0x800,nw_dst=10.0.0.0/8,tp_dst=80"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	// Key bits outside the mask stay zero, so equal matches compare equal.
	var a, b Match
	a.SetMasked(Reg0, 0xffff, 0x00ff)
	b.SetMasked(Reg0, 0x00ff, 0x00ff)
	if a != b {
		t.Error("matches differ only outside the mask but compare unequal")
	}
}

func TestValidateActions(t *testing.T) {
	bad := [][]Action{
		{GotoTable{Table: 3}, Output{Port: 1}},
		{Move{Src: Whole(TPDst), Dst: Whole(Reg0)}},
		{Drop{}, Output{Port: 1}},
		{Conjunction{ID: 1, Clause: 3, NClauses: 2}},
		{Conjunction{ID: 1, Clause: 1, NClauses: 2}, Output{Port: 1}},
		{Load{Dst: FieldRange{Field: Reg0, Bits: 4}, Value: U128{0, 0x10}}},
		{CT{Table: CTNoTable, Exec: []Action{Load{Dst: Whole(Reg0)}}}},
		{Load{Dst: Whole(CTMark), Value: U128{Lo: 1}}},
		{Move{Src: Whole(Reg0), Dst: FieldRange{Field: CTState, Bits: 32}}},
		{Load{Dst: Whole(EthType), Value: U128{Lo: 0x800}}},
	}
	for _, as := range bad {
		if err := ValidateActions(1, as); err == nil {
			t.Errorf("%s: accepted", ActionsString(as))
		}
	}
	good := []Action{
		Move{Src: Whole(TPDst), Dst: FieldRange{Field: Reg0, Bits: 16}},
		Load{Dst: Whole(Reg1), Value: U128{0, 5}},
		CT{Zone: 3, Commit: true, Table: 5, Exec: []Action{Load{Dst: Whole(CTMark), Value: U128{0, 1}}}},
		GotoTable{Table: 2},
	}
	if err := ValidateActions(1, good); err != nil {
		t.Error(err)
	}
}

func TestPipelineOnly(t *testing.T) {
	po := PipelineOnlyMask()
	for _, f := range Fields() {
		m := FieldMask(f)
		in := po.Covers(&m)
		if in != f.PipelineOnly() {
			t.Errorf("%s: PipelineOnly=%v but in mask=%v", f, f.PipelineOnly(), in)
		}
	}
}

func TestParseFieldRange(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want FieldRange
		err  bool
	}{
		{"reg0", FieldRange{Field: Reg0, Bits: 32}, false},
		{"reg0[5]", FieldRange{Field: Reg0, Ofs: 5, Bits: 1}, false},
		{"xxreg1[64..127]", FieldRange{Field: XXReg1, Ofs: 64, Bits: 64}, false},
		{"tcp_dst", FieldRange{Field: TPDst, Bits: 16}, false},
		{"reg0[40]", FieldRange{}, true},
		{"reg0[5..2]", FieldRange{}, true},
		{"reg0[1", FieldRange{}, true},
		{"nosuch", FieldRange{}, true},
		{"reg0[x]", FieldRange{}, true},
	} {
		got, err := ParseFieldRange(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseFieldRange(%q) = %v, %v", tt.in, got, err)
		}
		if err == nil && got.String() != tt.in && tt.in != "tcp_dst" {
			t.Errorf("String() = %q, want %q", got.String(), tt.in)
		}
	}
}

func FuzzParseFieldRange(f *testing.F) {
	f.Add("reg0[8..15]")
	f.Add("xxreg0[127]")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseFieldRange(s)
		if err == nil {
			if r2, err := ParseFieldRange(r.String()); err != nil || r2 != r {
				t.Fatalf("%q → %v → %q → %v, %v", s, r, r.String(), r2, err)
			}
		}
	})
}

// TestHotInlinable keeps the per-word hashing helpers inlinable: a call per
// key word would double the cost of megaflow lookups.
func TestHotInlinable(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil || testing.Short() {
		t.Skip("go tool not available")
	}
	out, err := exec.Command(goBin, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, fn := range []string{"HashWord", "HashFinish", "(*Key).EqualMasked"} {
		if !strings.Contains(string(out), "can inline "+fn) {
			t.Errorf("%s is not inlinable", fn)
		}
	}
}

func TestKeyMaskString(t *testing.T) {
	var k Key
	k.Set(InPort, 1)
	k.Set(EthType, 0x800)
	k.Set(NWSrc, IPv4(netip.MustParseAddr("10.0.0.1")))
	if got, want := k.String(), "in_port=1,eth_type=0x800,nw_src=10.0.0.1"; got != want {
		t.Errorf("Key.String = %q, want %q", got, want)
	}
	var m Mask
	m.SetField(InPort)
	m.SetBits(NWDst, OnesU128(8).Shl(24))
	if got, want := m.String(), "in_port,nw_dst/255.0.0.0"; got != want {
		t.Errorf("Mask.String = %q, want %q", got, want)
	}
}

func TestCTStateFormat(t *testing.T) {
	var m Match
	m.SetMasked(CTState, 0x22, 0x23)
	if got, want := m.String(), "ct_state=-new+est+trk"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

// TestClearCT checks ClearCT against clearing the conntrack fields one by
// one, on a key with every bit set.
func TestClearCT(t *testing.T) {
	var got, want Key
	for i := range got.W {
		got.W[i], want.W[i] = ^uint64(0), ^uint64(0)
	}
	for _, f := range []Field{CTState, CTZone, CTMark, CTNWProto, CTNWSrc, CTNWDst, CTTPSrc, CTTPDst, CTLabel, CTIPv6Src, CTIPv6Dst} {
		want.SetU128(f, U128{})
	}
	// Bits of the conntrack words that no field uses are zero in any
	// key a setter built.
	for _, w := range []int{wCTState, wCTPorts} {
		var used uint64
		for f := FieldInvalid + 1; f < numFields; f++ {
			if i := fieldInfo[f]; i.Word == w {
				used |= fieldOnes(f).Lo << i.Shift
			}
		}
		want.W[w] &= used
	}
	got.ClearCT()
	if got != want {
		for i := range got.W {
			if got.W[i] != want.W[i] {
				t.Errorf("word %d: %#x, want %#x", i, got.W[i], want.W[i])
			}
		}
	}
}
