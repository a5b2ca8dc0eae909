package flow

import (
	"fmt"
	"math/bits"
	"strings"
)

// NumWords is the number of 64-bit words in a Key.
const NumWords = 40

// Key.Hash mixes four words at a time.
const _ uint = -(NumWords % 4)

// Stage boundaries: word ranges [StageStart[s], StageStart[s+1]).
const (
	// StageMeta holds metadata: in_port, recirc_id, registers, tunnel and
	// conntrack fields.
	StageMeta = iota
	// StageL2 holds Ethernet and VLAN fields.
	StageL2
	// StageL3 holds IPv4, IPv6 and ARP fields.
	StageL3
	// StageL4 holds TCP/UDP/SCTP/ICMP/ND/IGMP fields.
	StageL4
	// NumStages is the number of lookup stages.
	NumStages
)

// StageEnd gives the first word after each stage; stage s covers words
// [StageEnd[s-1], StageEnd[s]) with StageEnd[-1] = 0.
var stageEnd = [NumStages]int{24, 27, 35, NumWords}

// StageEnd returns the word index just past stage s.
func StageEnd(s int) int { return stageEnd[s] }

// StageStart returns the first word index of stage s.
func StageStart(s int) int {
	if s == 0 {
		return 0
	}
	return stageEnd[s-1]
}

// Key is a packet's flow key: every header and metadata field, at fixed
// positions. The zero Key has every field zero.
type Key struct {
	W [NumWords]uint64
}

// Mask has the shape of a Key; a 1 bit means "this bit matters".
type Mask struct {
	W [NumWords]uint64
}

// U128 is a 128-bit value, used for IPv6 addresses, ct_label and xxreg.
type U128 struct {
	Hi, Lo uint64
}

// IsZero reports whether v is zero.
func (v U128) IsZero() bool { return v.Hi == 0 && v.Lo == 0 }

// And returns v & m.
func (v U128) And(m U128) U128 { return U128{v.Hi & m.Hi, v.Lo & m.Lo} }

// Or returns v | m.
func (v U128) Or(m U128) U128 { return U128{v.Hi | m.Hi, v.Lo | m.Lo} }

// AndNot returns v &^ m.
func (v U128) AndNot(m U128) U128 { return U128{v.Hi &^ m.Hi, v.Lo &^ m.Lo} }

// Shl returns v << n.
func (v U128) Shl(n uint) U128 {
	switch {
	case n == 0:
		return v
	case n >= 128:
		return U128{}
	case n >= 64:
		return U128{v.Lo << (n - 64), 0}
	}
	return U128{v.Hi<<n | v.Lo>>(64-n), v.Lo << n}
}

// Shr returns v >> n.
func (v U128) Shr(n uint) U128 {
	switch {
	case n == 0:
		return v
	case n >= 128:
		return U128{}
	case n >= 64:
		return U128{0, v.Hi >> (n - 64)}
	}
	return U128{v.Hi >> n, v.Lo>>n | v.Hi<<(64-n)}
}

// OnesU128 returns a value whose low n bits are set.
func OnesU128(n uint) U128 {
	switch {
	case n == 0:
		return U128{}
	case n >= 128:
		return U128{^uint64(0), ^uint64(0)}
	case n > 64:
		return U128{^uint64(0) >> (128 - n), ^uint64(0)}
	}
	return U128{0, ^uint64(0) >> (64 - n)}
}

// And returns k masked by m.
func (k *Key) And(m *Mask) Key {
	var r Key
	for i := range k.W {
		r.W[i] = k.W[i] & m.W[i]
	}
	return r
}

// EqualMasked reports whether k and o agree on every bit set in m.
func (k *Key) EqualMasked(o *Key, m *Mask) bool {
	for i := range k.W {
		if (k.W[i]^o.W[i])&m.W[i] != 0 {
			return false
		}
	}
	return true
}

// Hash returns a hash of the whole key, for exact-match caches. It mixes
// four independent lanes so the multiplies overlap.
func (k *Key) Hash() uint64 {
	const m = 0x9e3779b97f4a7c15
	a, b, c, d := uint64(1), uint64(2), uint64(3), uint64(4)
	for i := 0; i < NumWords; i += 4 {
		a = bits.RotateLeft64((a^k.W[i])*m, 29)
		b = bits.RotateLeft64((b^k.W[i+1])*m, 29)
		c = bits.RotateLeft64((c^k.W[i+2])*m, 29)
		d = bits.RotateLeft64((d^k.W[i+3])*m, 29)
	}
	return HashFinish(a ^ bits.RotateLeft64(b, 16) ^ bits.RotateLeft64(c, 32) ^ bits.RotateLeft64(d, 48))
}

// HashWord mixes one 64-bit word into a running hash. It is the building
// block of masked and staged hashing; callers finish with HashFinish.
func HashWord(h, w uint64) uint64 {
	return bits.RotateLeft64((h^w)*0x9e3779b97f4a7c15, 29)
}

// HashFinish finalizes a running hash (murmur3's fmix64).
func HashFinish(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Or sets in m every bit set in o.
func (m *Mask) Or(o *Mask) {
	for i := range m.W {
		m.W[i] |= o.W[i]
	}
}

// AndMask clears in m every bit clear in o.
func (m *Mask) AndMask(o *Mask) {
	for i := range m.W {
		m.W[i] &= o.W[i]
	}
}

// ClearMask clears in m every bit set in o.
func (m *Mask) ClearMask(o *Mask) {
	for i := range m.W {
		m.W[i] &^= o.W[i]
	}
}

// IsZero reports whether no bit of m is set.
func (m *Mask) IsZero() bool {
	for _, w := range m.W {
		if w != 0 {
			return false
		}
	}
	return true
}

// Covers reports whether every bit set in o is also set in m.
func (m *Mask) Covers(o *Mask) bool {
	for i := range m.W {
		if o.W[i]&^m.W[i] != 0 {
			return false
		}
	}
	return true
}

// StageMask returns m restricted to the words of stages 0..s.
func (m *Mask) StageMask(s int) Mask {
	var r Mask
	copy(r.W[:stageEnd[s]], m.W[:stageEnd[s]])
	return r
}

// PipelineOnlyMask returns the bits of the pipeline-only fields (metadata,
// registers, conj_id): they are never part of a datapath (megaflow) match.
func PipelineOnlyMask() Mask {
	var m Mask
	for _, f := range []Field{Metadata, XReg0, XReg1, XReg2, XReg3, XReg4, XReg5, XReg6, XReg7, ConjID} {
		m.SetField(f)
	}
	return m
}

// CopyPipeline sets k's pipeline-only words (metadata and registers) to
// those of from.
func (k *Key) CopyPipeline(from *Key) {
	copy(k.W[wMetadata:wTunID], from.W[wMetadata:wTunID])
}

// PipelineString formats the non-zero metadata and registers of k
// ("metadata=0x1,reg14=0x2"), or "" if all are zero.
func (k *Key) PipelineString() string {
	var parts []string
	for _, f := range append([]Field{Metadata}, regFields()...) {
		if v := k.Get(f); v != 0 {
			parts = append(parts, fmt.Sprintf("%s=0x%x", f, v))
		}
	}
	return strings.Join(parts, ",")
}

func regFields() []Field {
	fs := make([]Field, 16)
	for i := range fs {
		fs[i] = Reg0 + Field(i)
	}
	return fs
}

// ClearCT zeroes k's conntrack fields (ct_state, ct_zone, ct_mark,
// ct_label and the ct_nw_*, ct_ipv6_* and ct_tp_* of the original
// direction), as ct_clear does, leaving conj_id, which shares ct_mark's
// word, alone. It writes whole words: the fast path runs it per packet.
func (k *Key) ClearCT() {
	k.W[wCTState] = 0
	k.W[wCTMark] &= 1<<32 - 1 // conj_id
	clear(k.W[wCTAddr:wEthSrc])
}
