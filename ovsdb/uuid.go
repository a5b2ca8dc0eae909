package ovsdb

import (
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
)

// UUID is a 128-bit universally unique identifier, the identity of a row.
// The zero UUID is the all-zero one, the default value of a uuid column.
// UUIDs order as their canonical strings do.
type UUID struct {
	hi, lo uint64
}

// NewUUID returns a random (version 4) UUID.
func NewUUID() UUID {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		// crypto/rand.Read never fails on supported platforms.
		panic(fmt.Sprintf("ovsdb: reading random bytes: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return UUIDFromBytes(b)
}

// UUIDSource generates random (version 4) UUIDs quickly from a ChaCha8
// stream seeded from crypto/rand. It is not safe for concurrent use.
type UUIDSource struct {
	rng *rand.ChaCha8
}

// NewUUIDSource returns a UUIDSource with a fresh random seed.
func NewUUIDSource() *UUIDSource {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		panic(fmt.Sprintf("ovsdb: reading random bytes: %v", err))
	}
	return &UUIDSource{rng: rand.NewChaCha8(seed)}
}

// New returns the next random UUID.
func (s *UUIDSource) New() UUID {
	hi, lo := s.rng.Uint64(), s.rng.Uint64()
	hi = hi&^0xf000 | 0x4000
	lo = lo&^(0xc<<60) | 0x8<<60
	return UUID{hi, lo}
}

// UUIDFromBytes returns the UUID whose big-endian bytes are b.
func UUIDFromBytes(b [16]byte) UUID {
	return UUID{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// Bytes returns u's 16 bytes, big-endian.
func (u UUID) Bytes() [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], u.hi)
	binary.BigEndian.PutUint64(b[8:], u.lo)
	return b
}

// IsZero reports whether u is the all-zero UUID.
func (u UUID) IsZero() bool { return u == UUID{} }

// Compare returns -1, 0 or +1 as u sorts before, equal to or after v.
func (u UUID) Compare(v UUID) int {
	switch {
	case u.hi < v.hi:
		return -1
	case u.hi > v.hi:
		return 1
	case u.lo < v.lo:
		return -1
	case u.lo > v.lo:
		return 1
	}
	return 0
}

// String returns u in the canonical 8-4-4-4-12 lowercase hexadecimal form.
func (u UUID) String() string {
	return string(u.appendString(make([]byte, 0, 36)))
}

// AppendText appends u's canonical form to b.
func (u UUID) AppendText(b []byte) ([]byte, error) {
	return u.appendString(b), nil
}

func (u UUID) appendString(b []byte) []byte {
	raw := u.Bytes()
	var s [36]byte
	hex.Encode(s[0:8], raw[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], raw[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], raw[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], raw[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], raw[10:16])
	return append(b, s[:]...)
}

// MarshalText implements encoding.TextMarshaler.
func (u UUID) MarshalText() ([]byte, error) { return u.AppendText(nil) }

// UnmarshalText implements encoding.TextUnmarshaler.
func (u *UUID) UnmarshalText(b []byte) error {
	v, err := ParseUUID(string(b))
	if err != nil {
		return err
	}
	*u = v
	return nil
}

// ParseUUID parses the canonical 8-4-4-4-12 hexadecimal form (either case).
func ParseUUID(s string) (UUID, error) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return UUID{}, fmt.Errorf("%q is not a UUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", s)
	}
	var b [16]byte
	j := 0
	for i := 0; i < 36; i += 2 {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i--
			continue
		}
		hi, ok1 := fromHex(s[i])
		lo, ok2 := fromHex(s[i+1])
		if !ok1 || !ok2 {
			return UUID{}, fmt.Errorf("%q is not a UUID: bad hexadecimal digit", s)
		}
		b[j] = hi<<4 | lo
		j++
	}
	return UUIDFromBytes(b), nil
}

// MustParseUUID is ParseUUID for constants in tests and tables; it panics on
// a malformed string.
func MustParseUUID(s string) UUID {
	u, err := ParseUUID(s)
	if err != nil {
		panic(err)
	}
	return u
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
