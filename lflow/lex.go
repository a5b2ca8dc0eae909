package lflow

import (
	"fmt"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf16"
)

// TokenKind says what a Token is.
type TokenKind uint8

// Token kinds. Punctuation kinds are named after what they look like.
const (
	TokEOF       TokenKind = iota
	TokIdent               // eth.src, next, ct_lb_mark
	TokInt                 // 80, 0x800, 10.0.0.1, fe80::1, 00:00:00:00:00:01
	TokString              // "sw0-port1" (Str holds the decoded value)
	TokAddrSet             // $name
	TokPortGroup           // @name
	TokLParen              // (
	TokRParen              // )
	TokLCurly              // {
	TokRCurly              // }
	TokLSquare             // [
	TokRSquare             // ]
	TokComma               // ,
	TokSemicolon           // ;
	TokEquals              // =
	TokEq                  // ==
	TokNe                  // !=
	TokLt                  // <
	TokLe                  // <=
	TokGt                  // >
	TokGe                  // >=
	TokNot                 // !
	TokAnd                 // &&
	TokOr                  // ||
	TokEllipsis            // ..
	TokExchange            // <->
	TokDecrement           // --
	TokColon               // :
	TokSlash               // /
	TokMinus               // -
)

var tokenNames = [...]string{
	TokEOF: "end of input", TokIdent: "identifier", TokInt: "number",
	TokString: "string", TokAddrSet: "$address_set", TokPortGroup: "@port_group",
	TokLParen: "'('", TokRParen: "')'", TokLCurly: "'{'", TokRCurly: "'}'",
	TokLSquare: "'['", TokRSquare: "']'", TokComma: "','", TokSemicolon: "';'",
	TokEquals: "'='", TokEq: "'=='", TokNe: "'!='", TokLt: "'<'", TokLe: "'<='",
	TokGt: "'>'", TokGe: "'>='", TokNot: "'!'", TokAnd: "'&&'", TokOr: "'||'",
	TokEllipsis: "'..'", TokExchange: "'<->'", TokDecrement: "'--'",
	TokColon: "':'", TokSlash: "'/'", TokMinus: "'-'",
}

func (k TokenKind) String() string {
	if int(k) < len(tokenNames) && tokenNames[k] != "" {
		return tokenNames[k]
	}
	return fmt.Sprintf("token(%d)", k)
}

// Format records how a number was written, so that printing it again gives
// the same form.
type Format uint8

// Number formats.
const (
	FmtDecimal Format = iota
	FmtHex
	FmtIPv4
	FmtIPv6
	FmtMAC
)

// Token is one lexical element. Text is a slice of the input (no copy).
type Token struct {
	Kind   TokenKind
	Pos    int    // byte offset in the input
	Text   string // the source text of the token
	Str    string // decoded value of a string token; name of $set or @group
	Value  U128   // value of a number
	Format Format // how a number was written
	// Wide is the number of bits a hexadecimal number needs when that is
	// more than 128 (OVN keeps up to 1024); Value then holds its low 128
	// bits, and Wide is 0 otherwise.
	Wide int
}

// SyntaxError is a lexical or grammatical error at a byte offset.
type SyntaxError struct {
	Pos int
	Msg string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("at offset %d: %s", e.Pos, e.Msg)
}

// Lexer splits logical-flow text into tokens. It is hand written: no
// regexps, no allocation except for strings that contain escapes.
type Lexer struct {
	src string
	pos int
	err *SyntaxError
	// As in OVN, a mask is part of its number: "/" right after a number
	// starts one and the mask's number must follow at once. numEnd is one
	// more than where the last number ended, maskAt one more than where a
	// mask must start (0: none).
	numEnd, maskAt int
}

// NewLexer returns a lexer over src.
func NewLexer(src string) *Lexer { return &Lexer{src: src} }

// Reset makes the lexer start over on src.
func (l *Lexer) Reset(src string) { *l = Lexer{src: src} }

// Err returns the first lexical error, if any. After an error Next returns
// TokEOF.
func (l *Lexer) Err() error {
	if l.err == nil {
		return nil
	}
	return l.err
}

func (l *Lexer) fail(pos int, format string, args ...any) Token {
	if l.err == nil {
		l.err = &SyntaxError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
	}
	l.pos = len(l.src)
	return Token{Kind: TokEOF, Pos: pos}
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9' || c == '.'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// Next returns the next token.
func (l *Lexer) Next() Token {
	if l.numEnd == l.pos+1 && l.pos < len(l.src) && l.src[l.pos] == '/' {
		// Even "//" and "/*" (OVN: "80//x" is a bad mask, not a comment).
		l.numEnd, l.maskAt = 0, l.pos+2
		l.pos++
		return Token{Kind: TokSlash, Pos: l.pos - 1, Text: "/"}
	}
	if l.maskAt != 0 {
		at := l.maskAt - 1
		l.maskAt = 0
		if tok := l.next(); tok.Kind == TokInt && tok.Pos == at {
			return tok
		}
		l.err = nil // what was there instead does not matter
		return l.fail(at, "expected a number right after '/'")
	}
	return l.next()
}

func (l *Lexer) next() Token {
	src := l.src
	// Skip white space and comments.
	for l.pos < len(src) {
		c := src[l.pos]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			l.pos++
			continue
		}
		if c == '/' && l.pos+1 < len(src) {
			if src[l.pos+1] == '*' {
				end := strings.Index(src[l.pos+2:], "*/")
				if end < 0 {
					return l.fail(l.pos, "unterminated comment")
				}
				l.pos += 2 + end + 2
				continue
			}
			if src[l.pos+1] == '/' {
				end := strings.IndexByte(src[l.pos:], '\n')
				if end < 0 {
					l.pos = len(src)
				} else {
					l.pos += end
				}
				continue
			}
		}
		break
	}
	start := l.pos
	if start >= len(src) {
		return Token{Kind: TokEOF, Pos: start}
	}
	c := src[start]
	punct := func(k TokenKind, n int) Token {
		l.pos += n
		return Token{Kind: k, Pos: start, Text: src[start:l.pos]}
	}
	next := byte(0)
	if start+1 < len(src) {
		next = src[start+1]
	}
	switch c {
	case '(':
		return punct(TokLParen, 1)
	case ')':
		return punct(TokRParen, 1)
	case '{':
		return punct(TokLCurly, 1)
	case '}':
		return punct(TokRCurly, 1)
	case '[':
		return punct(TokLSquare, 1)
	case ']':
		return punct(TokRSquare, 1)
	case ',':
		return punct(TokComma, 1)
	case ';':
		return punct(TokSemicolon, 1)
	case '/':
		return l.fail(start, "'/' is only valid as part of '//' or '/*' or right after a number")
	case '=':
		if next == '=' {
			return punct(TokEq, 2)
		}
		return punct(TokEquals, 1)
	case '!':
		if next == '=' {
			return punct(TokNe, 2)
		}
		return punct(TokNot, 1)
	case '<':
		if next == '=' {
			return punct(TokLe, 2)
		}
		if next == '-' && start+2 < len(src) && src[start+2] == '>' {
			return punct(TokExchange, 3)
		}
		return punct(TokLt, 1)
	case '>':
		if next == '=' {
			return punct(TokGe, 2)
		}
		return punct(TokGt, 1)
	case '&':
		if next == '&' {
			return punct(TokAnd, 2)
		}
		return l.fail(start, "'&' must be doubled as '&&'")
	case '|':
		if next == '|' {
			return punct(TokOr, 2)
		}
		return l.fail(start, "'|' must be doubled as '||'")
	case '-':
		if next == '-' {
			return punct(TokDecrement, 2)
		}
		return punct(TokMinus, 1)
	case '.':
		if next == '.' {
			return punct(TokEllipsis, 2)
		}
		return l.fail(start, "unexpected '.'")
	case '"':
		return l.lexString()
	case '$', '@':
		end := start + 1
		for end < len(src) && (isIdentStart(src[end]) || src[end] >= '0' && src[end] <= '9') {
			end++
		}
		if end == start+1 {
			return l.fail(start, "%q must be followed by a name", c)
		}
		l.pos = end
		k := TokAddrSet
		if c == '@' {
			k = TokPortGroup
		}
		return Token{Kind: k, Pos: start, Text: src[start:end], Str: src[start+1 : end]}
	case ':':
		if next == ':' {
			return l.lexNumber()
		}
		return punct(TokColon, 1)
	}
	if c >= '0' && c <= '9' {
		return l.lexNumber()
	}
	if isIdentStart(c) {
		end := start + 1
		for end < len(src) && isIdentChar(src[end]) {
			// ".." ends an identifier (as in reg0[0..15] it never starts one,
			// but keep identifiers from swallowing a range operator).
			if src[end] == '.' && end+1 < len(src) && src[end+1] == '.' {
				break
			}
			end++
		}
		text := src[start:end]
		// Hex-looking identifiers such as "fe80::1" or "aef0::" are IPv6
		// addresses and "ff:ff:..." MACs: a letter-led run followed by ':'.
		if end < len(src) && src[end] == ':' && allHex(text) {
			return l.lexNumber()
		}
		l.pos = end
		return Token{Kind: TokIdent, Pos: start, Text: text}
	}
	if c >= 0x80 {
		return l.fail(start, "unexpected non-ASCII byte 0x%02x", c)
	}
	return l.fail(start, "unexpected character %q", c)
}

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return s != ""
}

func (l *Lexer) lexString() Token {
	src := l.src
	start := l.pos
	i := start + 1
	escaped := false
	for ; i < len(src); i++ {
		if src[i] == '\\' {
			escaped = true
			i++
			continue
		}
		if src[i] == '"' {
			break
		}
		if src[i] == 0 {
			// No C string (OVN's) can hold it.
			return l.fail(i, "NUL is not allowed in a string")
		}
	}
	if i >= len(src) {
		return l.fail(start, "unterminated string")
	}
	text := src[start : i+1]
	l.pos = i + 1
	val := text[1 : len(text)-1]
	if escaped {
		s, err := unescape(val)
		if err != nil {
			return l.fail(start, "bad string %s: %v", text, err)
		}
		val = s
	}
	return Token{Kind: TokString, Pos: start, Text: text, Str: val}
}

// unescape decodes the escapes of a string as OVN does (JSON's): \" \\
// \/ \b \f \n \r \t and \uXXXX, with a surrogate pair for a character
// beyond U+FFFF. NUL is refused.
func unescape(s string) (string, error) {
	var sb strings.Builder
	hex4 := func(i int) (rune, bool) {
		if i+4 > len(s) {
			return 0, false
		}
		v, err := strconv.ParseUint(s[i:i+4], 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			sb.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case '"', '\\', '/':
			sb.WriteByte(s[i])
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, ok := hex4(i + 1)
			if !ok {
				return "", fmt.Errorf("malformed \\u escape")
			}
			i += 4
			if r == 0 {
				return "", fmt.Errorf("NUL is not allowed in a string")
			}
			if utf16.IsSurrogate(r) && r < 0xdc00 {
				if i+2 >= len(s) || s[i+1] != '\\' || s[i+2] != 'u' {
					return "", fmt.Errorf("malformed escaped surrogate pair")
				}
				r2, ok := hex4(i + 3)
				if !ok || r2 < 0xdc00 || r2 > 0xdfff {
					return "", fmt.Errorf("second half of escaped surrogate pair is not a trailing surrogate")
				}
				i += 6
				r = utf16.DecodeRune(r, r2)
			}
			sb.WriteRune(r)
		default:
			return "", fmt.Errorf("bad escape \\%c", s[i])
		}
	}
	return sb.String(), nil
}

// quote returns s in double quotes with the escapes unescape reads:
// quotes, backslashes and control characters are escaped, other bytes
// are kept as they are.
func quote(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\t':
			sb.WriteString(`\t`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c < 0x20:
			fmt.Fprintf(&sb, `\u%04x`, c)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// lexNumber scans the longest run of characters that can form a number
// (hex digits, ':' and '.') and decides what it is: MAC, IPv6, IPv4,
// hexadecimal or decimal integer.
func (l *Lexer) lexNumber() Token {
	src := l.src
	start := l.pos
	end := start
	sawColon, sawDot := false, false
	for end < len(src) {
		c := src[end]
		if c == '.' {
			if end+1 < len(src) && src[end+1] == '.' {
				break // a range "a..b"
			}
			sawDot = true
		} else if c == ':' {
			sawColon = true
		} else if !isHex(c) && c != 'x' && c != 'X' {
			break
		}
		end++
	}
	run := src[start:end]
	tok := Token{Kind: TokInt, Pos: start}
	switch {
	case sawColon:
		if v, ok := parseMAC(run); ok {
			tok.Value, tok.Format = v, FmtMAC
			break
		}
		if !sawDot || strings.Count(run, ":") > 1 {
			if a, err := netip.ParseAddr(run); err == nil && a.Is6() && a.Zone() == "" {
				tok.Value, tok.Format = addr6(a), FmtIPv6
				break
			}
		}
		// "10.0.0.1:80" (a backend): the number is the address before
		// the first colon, as in OVN ("10.0.0.1::80" is 10.0.0.1 and
		// then ::80).
		if i := strings.IndexByte(run, ':'); i > 0 && sawDot {
			if v, ok := parseIPv4(run[:i]); ok {
				end = start + i
				run = run[:i]
				tok.Value, tok.Format = v, FmtIPv4
				break
			}
		}
		// An IPv6 address followed by ":port" cannot be written without
		// brackets; report the run.
		return l.fail(start, "invalid numeric constant %q", run)
	case sawDot:
		v, ok := parseIPv4(run)
		if !ok {
			return l.fail(start, "invalid IPv4 address %q", run)
		}
		tok.Value, tok.Format = v, FmtIPv4
	case len(run) > 2 && run[0] == '0' && (run[1] == 'x' || run[1] == 'X'):
		digits := run[2:]
		var v U128
		for i := 0; i < len(digits); i++ {
			d := hexVal(digits[i])
			if d < 0 {
				return l.fail(start, "invalid hexadecimal constant %q", run)
			}
			v = v.Lsh(4).Or(U128{Lo: uint64(d)}) // the low 128 bits
		}
		if sig := strings.TrimLeft(digits, "0"); len(sig) > 32 {
			tok.Wide = 4*(len(sig)-1) + bits.Len(uint(hexVal(sig[0])))
			if tok.Wide > 1024 {
				return l.fail(start, "hexadecimal constant %q needs more than 1024 bits", run)
			}
		}
		tok.Value, tok.Format = v, FmtHex
	default:
		if len(run) > 1 && run[0] == '0' {
			return l.fail(start, "decimal constant %q has a leading zero", run)
		}
		var v U128
		for i := 0; i < len(run); i++ {
			c := run[i]
			if c < '0' || c > '9' {
				return l.fail(start, "invalid decimal constant %q", run)
			}
			var over bool
			v, over = v.mulAdd(10, uint64(c-'0'))
			if over || v.Hi != 0 {
				return l.fail(start, "decimal constant %q is not less than 2**64", run)
			}
		}
		tok.Value, tok.Format = v, FmtDecimal
	}
	// As in OVN, a number must end where a name cannot go on: "64abc"
	// and "/64router" are errors, not a number and a name.
	if end < len(src) && (src[end] == '_' || src[end] >= 'a' && src[end] <= 'z' || src[end] >= 'A' && src[end] <= 'Z') {
		return l.fail(start, "invalid numeric constant %q", src[start:end+1])
	}
	l.pos = end
	l.numEnd = end + 1
	tok.Text = src[start:end]
	return tok
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// parseMAC parses xx:xx:xx:xx:xx:xx.
func parseMAC(s string) (U128, bool) {
	if len(s) != 17 {
		return U128{}, false
	}
	var v uint64
	for i := 0; i < 6; i++ {
		hi, lo := hexVal(s[i*3]), hexVal(s[i*3+1])
		if hi < 0 || lo < 0 || i < 5 && s[i*3+2] != ':' {
			return U128{}, false
		}
		v = v<<8 | uint64(hi<<4|lo)
	}
	return U128{Lo: v}, true
}

// parseIPv4 parses a dotted quad.
func parseIPv4(s string) (U128, bool) {
	var v uint64
	parts := 0
	i := 0
	for parts < 4 {
		n, digits := 0, 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			n = n*10 + int(s[i]-'0')
			digits++
			i++
			if digits > 3 {
				return U128{}, false
			}
		}
		if digits == 0 || n > 255 || digits > 1 && s[i-digits] == '0' {
			return U128{}, false // as OVN: no leading zeros (010.0.0.1)
		}
		v = v<<8 | uint64(n)
		parts++
		if parts < 4 {
			if i >= len(s) || s[i] != '.' {
				return U128{}, false
			}
			i++
		}
	}
	return U128{Lo: v}, i == len(s)
}

func addr6(a netip.Addr) U128 {
	b := a.As16()
	var v U128
	for i := 0; i < 8; i++ {
		v.Hi = v.Hi<<8 | uint64(b[i])
		v.Lo = v.Lo<<8 | uint64(b[i+8])
	}
	return v
}

// formatValue writes v in format f.
func formatValue(sb *strings.Builder, v U128, f Format) {
	switch f {
	case FmtIPv4:
		x := v.Lo
		fmt.Fprintf(sb, "%d.%d.%d.%d", x>>24&0xff, x>>16&0xff, x>>8&0xff, x&0xff)
	case FmtIPv6:
		var b [16]byte
		for i := 0; i < 8; i++ {
			b[7-i] = byte(v.Hi >> (8 * i))
			b[15-i] = byte(v.Lo >> (8 * i))
		}
		sb.WriteString(netip.AddrFrom16(b).String())
	case FmtMAC:
		x := v.Lo
		fmt.Fprintf(sb, "%02x:%02x:%02x:%02x:%02x:%02x", x>>40&0xff, x>>32&0xff, x>>24&0xff, x>>16&0xff, x>>8&0xff, x&0xff)
	case FmtHex:
		sb.WriteString(v.String())
	default:
		if v.Hi == 0 {
			sb.WriteString(strconv.FormatUint(v.Lo, 10))
		} else {
			sb.WriteString(v.String())
		}
	}
}
