package lflow

import (
	"fmt"
	"math/bits"
)

// U128 is an unsigned 128-bit integer, wide enough for every field of the
// logical flow language (the widest are IPv6 addresses, xxreg and ct_label).
// The zero value is 0.
type U128 struct {
	Hi, Lo uint64
}

// Ones returns a value whose low w bits are 1 (w in 0..128).
func Ones(w int) U128 {
	switch {
	case w <= 0:
		return U128{}
	case w < 64:
		return U128{Lo: 1<<uint(w) - 1}
	case w == 64:
		return U128{Lo: ^uint64(0)}
	case w < 128:
		return U128{Hi: 1<<uint(w-64) - 1, Lo: ^uint64(0)}
	default:
		return U128{Hi: ^uint64(0), Lo: ^uint64(0)}
	}
}

// And returns x & y.
func (x U128) And(y U128) U128 { return U128{x.Hi & y.Hi, x.Lo & y.Lo} }

// Or returns x | y.
func (x U128) Or(y U128) U128 { return U128{x.Hi | y.Hi, x.Lo | y.Lo} }

// Xor returns x ^ y.
func (x U128) Xor(y U128) U128 { return U128{x.Hi ^ y.Hi, x.Lo ^ y.Lo} }

// Not returns ^x.
func (x U128) Not() U128 { return U128{^x.Hi, ^x.Lo} }

// IsZero reports whether x == 0.
func (x U128) IsZero() bool { return x.Hi == 0 && x.Lo == 0 }

// Lsh returns x << n.
func (x U128) Lsh(n int) U128 {
	switch {
	case n <= 0:
		return x
	case n >= 128:
		return U128{}
	case n >= 64:
		return U128{Hi: x.Lo << uint(n-64)}
	default:
		return U128{Hi: x.Hi<<uint(n) | x.Lo>>uint(64-n), Lo: x.Lo << uint(n)}
	}
}

// Rsh returns x >> n.
func (x U128) Rsh(n int) U128 {
	switch {
	case n <= 0:
		return x
	case n >= 128:
		return U128{}
	case n >= 64:
		return U128{Lo: x.Hi >> uint(n-64)}
	default:
		return U128{Hi: x.Hi >> uint(n), Lo: x.Lo>>uint(n) | x.Hi<<uint(64-n)}
	}
}

// Bit reports bit i of x.
func (x U128) Bit(i int) bool {
	if i < 64 {
		return x.Lo>>uint(i)&1 == 1
	}
	return x.Hi>>uint(i-64)&1 == 1
}

// Bit1 returns a value with only bit i set.
func Bit1(i int) U128 { return U128{Lo: 1}.Lsh(i) }

// BitLen returns the number of bits needed to represent x.
func (x U128) BitLen() int {
	if x.Hi != 0 {
		return 64 + bits.Len64(x.Hi)
	}
	return bits.Len64(x.Lo)
}

// OnesCount returns the number of 1 bits in x.
func (x U128) OnesCount() int { return bits.OnesCount64(x.Hi) + bits.OnesCount64(x.Lo) }

// TrailingZeros returns the number of trailing zero bits (128 for 0).
func (x U128) TrailingZeros() int {
	if x.Lo != 0 {
		return bits.TrailingZeros64(x.Lo)
	}
	return 64 + bits.TrailingZeros64(x.Hi)
}

// Add returns x + y, wrapping.
func (x U128) Add(y U128) U128 {
	lo, c := bits.Add64(x.Lo, y.Lo, 0)
	hi, _ := bits.Add64(x.Hi, y.Hi, c)
	return U128{hi, lo}
}

// Sub returns x - y, wrapping.
func (x U128) Sub(y U128) U128 {
	lo, b := bits.Sub64(x.Lo, y.Lo, 0)
	hi, _ := bits.Sub64(x.Hi, y.Hi, b)
	return U128{hi, lo}
}

// Less reports whether x < y.
func (x U128) Less(y U128) bool { return x.Hi < y.Hi || x.Hi == y.Hi && x.Lo < y.Lo }

// mul10Add returns x*10+d and whether it overflowed.
func (x U128) mulAdd(m, d uint64) (U128, bool) {
	hh, hl := bits.Mul64(x.Hi, m)
	lh, ll := bits.Mul64(x.Lo, m)
	hi, c := bits.Add64(hl, lh, 0)
	lo, c2 := bits.Add64(ll, d, 0)
	hi, c3 := bits.Add64(hi, 0, c2)
	return U128{hi, lo}, hh != 0 || c != 0 || c3 != 0
}

// String formats x in hexadecimal with a 0x prefix.
func (x U128) String() string {
	if x.Hi == 0 {
		return fmt.Sprintf("0x%x", x.Lo)
	}
	return fmt.Sprintf("0x%x%016x", x.Hi, x.Lo)
}
