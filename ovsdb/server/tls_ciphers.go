package server

import (
	"crypto/tls"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// ParseCipherList turns an --ssl-ciphers list, in OpenSSL's cipher-list
// syntax, into the crypto/tls cipher suites it selects, most preferred
// first, for tls.Config.CipherSuites. It follows what OpenSSL 3 makes of
// the list, restricted to the TLS 1.0-1.2 suites Go implements (see
// goCipherSuites); TLS 1.3 suites are not configurable in Go and the list
// does not affect them, as OpenSSL's cipher list does not either.
//
// The list is made of elements separated by colons, spaces, commas or
// semicolons. An element is a suite name (OpenSSL's, such as
// ECDHE-RSA-AES256-GCM-SHA384, or the IANA name Go uses, such as
// TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384), a keyword (HIGH, ALL, kECDHE,
// aRSA, AESGCM, SHA1, TLSv1.2, ...) or several joined by "+", which selects
// the suites all of them select. Without a prefix an element appends the
// suites it selects that are not yet listed; "-" takes them out of the
// list, "!" takes them out for good, "+" moves them to the end. DEFAULT
// may start the list; @STRENGTH sorts by key length, @SECLEVEL=N applies
// OpenSSL's security level N to the suites (only to them: unlike OpenSSL,
// it does not also refuse keys, curves or signatures below the level).
//
// Names OpenSSL knows but Go does not implement (DHE, PSK, CAMELLIA,
// ARIA, CCM, RC4, 3DES suites and keywords) select nothing. Unlike OpenSSL,
// which skips words it does not know, an unknown word is an error, and so
// is a list that selects no suite Go implements. The Suite B keywords
// (SUITEB128, ...), which also restrict curves and signatures, are not
// supported.
func ParseCipherList(list string) ([]uint16, error) {
	var st cipherState
	st.order = make([]uint8, len(goCipherSuites))
	for i := range st.order {
		st.order[i] = uint8(i)
	}
	level := -1
	words := strings.FieldsFunc(list, func(r rune) bool { return strings.ContainsRune(":, ;", r) })
	for i, w := range words {
		if cmd, ok := strings.CutPrefix(w, "@"); ok {
			switch {
			case cmd == "STRENGTH":
				st.sortByStrength()
			case strings.HasPrefix(cmd, "SECLEVEL="):
				n, err := strconv.Atoi(strings.TrimPrefix(cmd, "SECLEVEL="))
				if err != nil || n < 0 || n > 5 {
					return nil, fmt.Errorf("cipher list %q: %s: the security level must be 0 to 5", list, w)
				}
				level = n
			default:
				return nil, fmt.Errorf("cipher list %q: unknown command %s (want @STRENGTH or @SECLEVEL=N)", list, w)
			}
			continue
		}
		if w == "DEFAULT" {
			if i != 0 {
				return nil, fmt.Errorf("cipher list %q: DEFAULT may only start the list", list)
			}
			st.add(allCiphers) // OpenSSL's default excludes no suite Go has
			continue
		}
		op, rest := byte(0), w
		if strings.ContainsRune("!-+", rune(w[0])) {
			op, rest = w[0], w[1:]
		}
		set, err := cipherSet(rest)
		if err != nil {
			return nil, fmt.Errorf("cipher list %q: %w", list, err)
		}
		switch op {
		case 0:
			st.add(set)
		case '!':
			st.kill(set)
		case '-':
			st.remove(set)
		case '+':
			st.moveToEnd(set)
		}
	}
	if level >= 0 {
		st.active &= securityLevel(level)
	}
	var out []uint16
	for _, i := range st.order {
		if st.active&(1<<i) != 0 {
			out = append(out, goCipherSuites[i].id)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cipher list %q selects no cipher suite Go implements for TLS 1.2 and earlier", list)
	}
	return out, nil
}

// cipherSet is the set of Go's suites (a bit per goCipherSuites index)
// that an element without its prefix selects: keywords or names joined by
// "+", all of which a suite must match.
func cipherSet(element string) (uint32, error) {
	set := allCiphers
	for _, word := range strings.Split(element, "+") {
		if word == "" {
			return 0, fmt.Errorf("%q: empty cipher name", element)
		}
		s, err := cipherWord(word)
		if err != nil {
			return 0, err
		}
		set &= s
	}
	return set, nil
}

// cipherWord is the set a single keyword or suite name selects.
func cipherWord(word string) (uint32, error) {
	for i, s := range goCipherSuites {
		if word == s.name || word == tls.CipherSuiteName(s.id) {
			return 1 << i, nil
		}
	}
	if match, ok := cipherKeyword(word); ok {
		var set uint32
		for i, s := range goCipherSuites {
			if match(s) {
				set |= 1 << i
			}
		}
		return set, nil
	}
	if strings.HasPrefix(word, "SUITEB") {
		return 0, fmt.Errorf("%s: Suite B modes are not supported", word)
	}
	if slices.Contains(strings.Fields(opensslOnlyNames), word) {
		return 0, nil
	}
	for _, s := range tls.CipherSuites() {
		if s.Name == word && slices.Contains(s.SupportedVersions, tls.VersionTLS13) {
			return 0, nil // a TLS 1.3 suite: always on, not configurable
		}
	}
	for _, s := range tls.InsecureCipherSuites() {
		if s.Name == word {
			return 0, nil // RC4 and 3DES: not offered
		}
	}
	return 0, fmt.Errorf("unknown cipher suite or keyword %q", word)
}

// cipherState is a cipher list being built as OpenSSL builds it: all
// suites in a list, in the order of preference, each active (selected),
// inactive or killed (never to be selected again). Adding appends the
// newly active suites to the end of the list; removing moves them,
// inactive, to its head, so that adding them back keeps their order.
type cipherState struct {
	order          []uint8 // indices into goCipherSuites
	active, killed uint32
}

func (st *cipherState) add(set uint32) {
	set &^= st.active | st.killed
	st.move(set, false)
	st.active |= set
}

func (st *cipherState) kill(set uint32) {
	st.active &^= set
	st.killed |= set
}

func (st *cipherState) remove(set uint32) {
	set &= st.active
	st.move(set, true)
	st.active &^= set
}

func (st *cipherState) moveToEnd(set uint32) {
	st.move(set&st.active, false)
}

// move moves the suites of set, keeping their relative order, to the
// head or the end of the list.
func (st *cipherState) move(set uint32, toHead bool) {
	moved := make([]uint8, 0, bits.OnesCount32(set))
	rest := make([]uint8, 0, len(st.order))
	for _, i := range st.order {
		if set&(1<<i) != 0 {
			moved = append(moved, i)
		} else {
			rest = append(rest, i)
		}
	}
	if toHead {
		st.order = append(moved, rest...)
	} else {
		st.order = append(rest, moved...)
	}
}

// sortByStrength orders the active suites by decreasing key length,
// keeping the order of suites of equal length.
func (st *cipherState) sortByStrength() {
	strengths := []int{}
	for _, s := range goCipherSuites {
		if !slices.Contains(strengths, s.bits) {
			strengths = append(strengths, s.bits)
		}
	}
	slices.Sort(strengths)
	for _, b := range slices.Backward(strengths) {
		var set uint32
		for i, s := range goCipherSuites {
			if s.bits == b {
				set |= 1 << i
			}
		}
		st.moveToEnd(set)
	}
}

// securityLevel is the set of suites OpenSSL allows at a security level:
// from 3 only forward-secret key exchanges, from 4 only 192-bit or
// stronger ciphers without SHA-1.
func securityLevel(level int) uint32 {
	var set uint32
	for i, s := range goCipherSuites {
		switch {
		case level >= 3 && s.kx == "RSA":
		case level >= 4 && (s.bits < 192 || s.mac == "SHA1"):
		default:
			set |= 1 << i
		}
	}
	return set
}

// cipherSuite describes one of Go's TLS 1.0-1.2 suites as OpenSSL's
// keywords see it.
type cipherSuite struct {
	id   uint16
	name string // OpenSSL's name
	kx   string // key exchange: RSA, ECDHE
	auth string // RSA, ECDSA
	enc  string // AES128, AES256, AES128GCM, AES256GCM, CHACHA20
	mac  string // SHA1, SHA256, AEAD
	// proto is the oldest protocol the suite works with, as OpenSSL's
	// SSLv3, TLSv1 and TLSv1.2 keywords group them.
	proto string
	bits  int
}

// goCipherSuites are the suites a --ssl-ciphers list chooses from: those
// Go implements for TLS 1.0-1.2 except RC4 and 3DES (which OpenSSL 3 does
// not offer either), in the order OpenSSL 3 lists them for ALL. Go does
// not implement the others OpenSSL has (DHE, CCM, CAMELLIA, ARIA, PSK,
// SRP, NULL, the CBC SHA384 suites, AES256-SHA256).
var goCipherSuites = [...]cipherSuite{
	{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE", "ECDSA", "AES256GCM", "AEAD", "TLSv1.2", 256},
	{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE", "RSA", "AES256GCM", "AEAD", "TLSv1.2", 256},
	{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE", "ECDSA", "CHACHA20", "AEAD", "TLSv1.2", 256},
	{tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, "ECDHE-RSA-CHACHA20-POLY1305", "ECDHE", "RSA", "CHACHA20", "AEAD", "TLSv1.2", 256},
	{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE", "ECDSA", "AES128GCM", "AEAD", "TLSv1.2", 128},
	{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE", "RSA", "AES128GCM", "AEAD", "TLSv1.2", 128},
	{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, "ECDHE-ECDSA-AES128-SHA256", "ECDHE", "ECDSA", "AES128", "SHA256", "TLSv1.2", 128},
	{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256, "ECDHE-RSA-AES128-SHA256", "ECDHE", "RSA", "AES128", "SHA256", "TLSv1.2", 128},
	{tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, "ECDHE-ECDSA-AES256-SHA", "ECDHE", "ECDSA", "AES256", "SHA1", "TLSv1", 256},
	{tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, "ECDHE-RSA-AES256-SHA", "ECDHE", "RSA", "AES256", "SHA1", "TLSv1", 256},
	{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, "ECDHE-ECDSA-AES128-SHA", "ECDHE", "ECDSA", "AES128", "SHA1", "TLSv1", 128},
	{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, "ECDHE-RSA-AES128-SHA", "ECDHE", "RSA", "AES128", "SHA1", "TLSv1", 128},
	{tls.TLS_RSA_WITH_AES_256_GCM_SHA384, "AES256-GCM-SHA384", "RSA", "RSA", "AES256GCM", "AEAD", "TLSv1.2", 256},
	{tls.TLS_RSA_WITH_AES_128_GCM_SHA256, "AES128-GCM-SHA256", "RSA", "RSA", "AES128GCM", "AEAD", "TLSv1.2", 128},
	{tls.TLS_RSA_WITH_AES_128_CBC_SHA256, "AES128-SHA256", "RSA", "RSA", "AES128", "SHA256", "TLSv1.2", 128},
	{tls.TLS_RSA_WITH_AES_256_CBC_SHA, "AES256-SHA", "RSA", "RSA", "AES256", "SHA1", "SSLv3", 256},
	{tls.TLS_RSA_WITH_AES_128_CBC_SHA, "AES128-SHA", "RSA", "RSA", "AES128", "SHA1", "SSLv3", 128},
}

// allCiphers is the set of all of goCipherSuites.
const allCiphers uint32 = 1<<len(goCipherSuites) - 1

// cipherKeyword returns what one of OpenSSL 3's keywords selects among
// Go's suites. Keywords for what Go does not implement (DHE, PSK,
// CAMELLIA, ...) select nothing but are known, so that a list written for
// ovsdb-server parses.
func cipherKeyword(word string) (match func(cipherSuite) bool, ok bool) {
	switch word {
	case "ALL", "HIGH": // every suite of Go's is AES or ChaCha20: HIGH
		return func(cipherSuite) bool { return true }, true
	case "kRSA", "RSA":
		return func(s cipherSuite) bool { return s.kx == "RSA" }, true
	case "aRSA":
		return func(s cipherSuite) bool { return s.auth == "RSA" }, true
	case "kECDHE", "kEECDH", "ECDHE", "EECDH", "ECDH":
		return func(s cipherSuite) bool { return s.kx == "ECDHE" }, true
	case "aECDSA", "ECDSA":
		return func(s cipherSuite) bool { return s.auth == "ECDSA" }, true
	case "AES":
		return func(s cipherSuite) bool { return strings.HasPrefix(s.enc, "AES") }, true
	case "AES128":
		return func(s cipherSuite) bool { return strings.HasPrefix(s.enc, "AES128") }, true
	case "AES256":
		return func(s cipherSuite) bool { return strings.HasPrefix(s.enc, "AES256") }, true
	case "AESGCM":
		return func(s cipherSuite) bool { return strings.HasSuffix(s.enc, "GCM") }, true
	case "CHACHA20":
		return func(s cipherSuite) bool { return s.enc == "CHACHA20" }, true
	case "CBC":
		return func(s cipherSuite) bool { return s.mac != "AEAD" }, true
	case "SHA1", "SHA":
		return func(s cipherSuite) bool { return s.mac == "SHA1" }, true
	case "SHA256":
		return func(s cipherSuite) bool { return s.mac == "SHA256" }, true
	case "TLSv1.2":
		return func(s cipherSuite) bool { return s.proto == "TLSv1.2" }, true
	case "TLSv1", "TLSv1.0":
		return func(s cipherSuite) bool { return s.proto == "TLSv1" }, true
	case "SSLv3":
		return func(s cipherSuite) bool { return s.proto == "SSLv3" }, true
	case "SHA384", // Go has no CBC-SHA384 suite
		"MEDIUM", "LOW", "EXPORT", "EXP", "EXPORT40", "EXPORT56",
		"COMPLEMENTOFALL", "COMPLEMENTOFDEFAULT", "eNULL", "NULL", "aNULL",
		"kDHE", "kEDH", "DH", "DHE", "EDH", "ADH", "AECDH", "kDHr", "kDHd", "kDH", "aDH", "aDSS", "DSS",
		"PSK", "kPSK", "kECDHEPSK", "kDHEPSK", "kRSAPSK", "aPSK", "SRP", "kSRP", "aSRP",
		"kGOST", "kGOST18", "aGOST", "aGOST01", "aGOST12", "GOST94", "GOST89MAC", "GOST12", "GOST2012",
		"AESCCM", "AESCCM8", "ARIA", "ARIA128", "ARIA256", "ARIAGCM", "CAMELLIA", "CAMELLIA128", "CAMELLIA256",
		"3DES", "DES", "RC4", "RC2", "IDEA", "SEED", "MD5":
		return func(cipherSuite) bool { return false }, true
	}
	return nil, false
}

// opensslOnlyNames are OpenSSL's names of the TLS 1.2 and earlier suites
// Go does not implement (as OpenSSL 3 lists them, and the RC4, 3DES, DES,
// SEED and IDEA suites older releases had): they select nothing.
const opensslOnlyNames = `
ADH-AES128-GCM-SHA256 ADH-AES128-SHA ADH-AES128-SHA256 ADH-AES256-GCM-SHA384 ADH-AES256-SHA
ADH-AES256-SHA256 ADH-CAMELLIA128-SHA ADH-CAMELLIA128-SHA256 ADH-CAMELLIA256-SHA
ADH-CAMELLIA256-SHA256 AECDH-AES128-SHA AECDH-AES256-SHA AECDH-NULL-SHA AES128-CCM AES128-CCM8
AES256-CCM AES256-CCM8 AES256-SHA256 ARIA128-GCM-SHA256 ARIA256-GCM-SHA384 CAMELLIA128-SHA
CAMELLIA128-SHA256 CAMELLIA256-SHA CAMELLIA256-SHA256 DHE-DSS-AES128-GCM-SHA256 DHE-DSS-AES128-SHA
DHE-DSS-AES128-SHA256 DHE-DSS-AES256-GCM-SHA384 DHE-DSS-AES256-SHA DHE-DSS-AES256-SHA256
DHE-DSS-ARIA128-GCM-SHA256 DHE-DSS-ARIA256-GCM-SHA384 DHE-DSS-CAMELLIA128-SHA
DHE-DSS-CAMELLIA128-SHA256 DHE-DSS-CAMELLIA256-SHA DHE-DSS-CAMELLIA256-SHA256
DHE-PSK-AES128-CBC-SHA DHE-PSK-AES128-CBC-SHA256 DHE-PSK-AES128-CCM DHE-PSK-AES128-CCM8
DHE-PSK-AES128-GCM-SHA256 DHE-PSK-AES256-CBC-SHA DHE-PSK-AES256-CBC-SHA384 DHE-PSK-AES256-CCM
DHE-PSK-AES256-CCM8 DHE-PSK-AES256-GCM-SHA384 DHE-PSK-ARIA128-GCM-SHA256 DHE-PSK-ARIA256-GCM-SHA384
DHE-PSK-CAMELLIA128-SHA256 DHE-PSK-CAMELLIA256-SHA384 DHE-PSK-CHACHA20-POLY1305 DHE-PSK-NULL-SHA
DHE-PSK-NULL-SHA256 DHE-PSK-NULL-SHA384 DHE-RSA-AES128-CCM DHE-RSA-AES128-CCM8
DHE-RSA-AES128-GCM-SHA256 DHE-RSA-AES128-SHA DHE-RSA-AES128-SHA256 DHE-RSA-AES256-CCM
DHE-RSA-AES256-CCM8 DHE-RSA-AES256-GCM-SHA384 DHE-RSA-AES256-SHA DHE-RSA-AES256-SHA256
DHE-RSA-ARIA128-GCM-SHA256 DHE-RSA-ARIA256-GCM-SHA384 DHE-RSA-CAMELLIA128-SHA
DHE-RSA-CAMELLIA128-SHA256 DHE-RSA-CAMELLIA256-SHA DHE-RSA-CAMELLIA256-SHA256
DHE-RSA-CHACHA20-POLY1305 ECDHE-ARIA128-GCM-SHA256 ECDHE-ARIA256-GCM-SHA384 ECDHE-ECDSA-AES128-CCM
ECDHE-ECDSA-AES128-CCM8 ECDHE-ECDSA-AES256-CCM ECDHE-ECDSA-AES256-CCM8 ECDHE-ECDSA-AES256-SHA384
ECDHE-ECDSA-ARIA128-GCM-SHA256 ECDHE-ECDSA-ARIA256-GCM-SHA384 ECDHE-ECDSA-CAMELLIA128-SHA256
ECDHE-ECDSA-CAMELLIA256-SHA384 ECDHE-ECDSA-NULL-SHA ECDHE-PSK-AES128-CBC-SHA
ECDHE-PSK-AES128-CBC-SHA256 ECDHE-PSK-AES256-CBC-SHA ECDHE-PSK-AES256-CBC-SHA384
ECDHE-PSK-CAMELLIA128-SHA256 ECDHE-PSK-CAMELLIA256-SHA384 ECDHE-PSK-CHACHA20-POLY1305
ECDHE-PSK-NULL-SHA ECDHE-PSK-NULL-SHA256 ECDHE-PSK-NULL-SHA384 ECDHE-RSA-AES256-SHA384
ECDHE-RSA-CAMELLIA128-SHA256 ECDHE-RSA-CAMELLIA256-SHA384 ECDHE-RSA-NULL-SHA NULL-MD5 NULL-SHA
NULL-SHA256 PSK-AES128-CBC-SHA PSK-AES128-CBC-SHA256 PSK-AES128-CCM PSK-AES128-CCM8
PSK-AES128-GCM-SHA256 PSK-AES256-CBC-SHA PSK-AES256-CBC-SHA384 PSK-AES256-CCM PSK-AES256-CCM8
PSK-AES256-GCM-SHA384 PSK-ARIA128-GCM-SHA256 PSK-ARIA256-GCM-SHA384 PSK-CAMELLIA128-SHA256
PSK-CAMELLIA256-SHA384 PSK-CHACHA20-POLY1305 PSK-NULL-SHA PSK-NULL-SHA256 PSK-NULL-SHA384
RSA-PSK-AES128-CBC-SHA RSA-PSK-AES128-CBC-SHA256 RSA-PSK-AES128-GCM-SHA256 RSA-PSK-AES256-CBC-SHA
RSA-PSK-AES256-CBC-SHA384 RSA-PSK-AES256-GCM-SHA384 RSA-PSK-ARIA128-GCM-SHA256
RSA-PSK-ARIA256-GCM-SHA384 RSA-PSK-CAMELLIA128-SHA256 RSA-PSK-CAMELLIA256-SHA384
RSA-PSK-CHACHA20-POLY1305 RSA-PSK-NULL-SHA RSA-PSK-NULL-SHA256 RSA-PSK-NULL-SHA384
SRP-AES-128-CBC-SHA SRP-AES-256-CBC-SHA SRP-DSS-AES-128-CBC-SHA SRP-DSS-AES-256-CBC-SHA
SRP-RSA-AES-128-CBC-SHA SRP-RSA-AES-256-CBC-SHA
RC4-SHA RC4-MD5 ECDHE-RSA-RC4-SHA ECDHE-ECDSA-RC4-SHA DES-CBC3-SHA DES-CBC-SHA
ECDHE-RSA-DES-CBC3-SHA ECDHE-ECDSA-DES-CBC3-SHA EDH-RSA-DES-CBC3-SHA EDH-DSS-DES-CBC3-SHA
DHE-RSA-DES-CBC3-SHA DHE-DSS-DES-CBC3-SHA SEED-SHA DHE-RSA-SEED-SHA DHE-DSS-SEED-SHA IDEA-CBC-SHA
`
