package lflow

import (
	"strings"
	"testing"
)

func TestLexer(t *testing.T) {
	tests := []struct {
		in   string
		want string // kind:text tokens, space separated
	}{
		{"eth.src == 00:00:20:20:12:20", "identifier:eth.src '==':== number:00:00:20:20:12:20"},
		{"ip6.dst == fe80::200:20ff:fe20:1220", "identifier:ip6.dst '==':== number:fe80::200:20ff:fe20:1220"},
		{"ip4.src == 172.168.0.0/24", "identifier:ip4.src '==':== number:172.168.0.0 '/':/ number:24"},
		{"reg0[0..15]", "identifier:reg0 '[':[ number:0 '..':.. number:15 ']':]"},
		{"backends=10.0.0.11:80,[aef0::1]:80", "identifier:backends '=':= number:10.0.0.11 ':':: number:80 ',':, '[':[ number:aef0::1 ']':] ':':: number:80"},
		{"a <-> b; ip.ttl--;", "identifier:a '<->':<-> identifier:b ';':; identifier:ip.ttl '--':-- ';':;"},
		{"!x && y || $as @pg", "'!':! identifier:x '&&':&& identifier:y '||':|| $address_set:$as @port_group:@pg"},
		{"0x800 != 0xFF <= >= < >", "number:0x800 '!=':!= number:0xFF '<=':<= '>=':>= '<':< '>':>"},
		{`"a\"b" /* c */ x // d`, `string:"a\"b" identifier:x`},
		{"::", "number:::"},
	}
	for _, tt := range tests {
		l := NewLexer(tt.in)
		var got []string
		for {
			tok := l.Next()
			if tok.Kind == TokEOF {
				break
			}
			got = append(got, tok.Kind.String()+":"+tok.Text)
		}
		if err := l.Err(); err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("%q:\n got %s\nwant %s", tt.in, g, tt.want)
		}
	}
}

func TestLexerValues(t *testing.T) {
	tests := []struct {
		in     string
		want   U128
		format Format
	}{
		{"0", U128{}, FmtDecimal},
		{"65535", U128{Lo: 65535}, FmtDecimal},
		{"0x86dd", U128{Lo: 0x86dd}, FmtHex},
		{"255.255.255.0", U128{Lo: 0xffffff00}, FmtIPv4},
		{"ff:ff:ff:ff:ff:fe", U128{Lo: 0xfffffffffffe}, FmtMAC},
		{"fe80::1", U128{Hi: 0xfe80 << 48, Lo: 1}, FmtIPv6},
		{"18446744073709551615", Ones(64), FmtDecimal},
		{"0xffffffffffffffffffffffffffffffff", Ones(128), FmtHex},
	}
	for _, tt := range tests {
		tok := NewLexer(tt.in).Next()
		if tok.Kind != TokInt || tok.Value != tt.want || tok.Format != tt.format {
			t.Errorf("%q: got kind %v value %v format %d, want %v format %d", tt.in, tok.Kind, tok.Value, tok.Format, tt.want, tt.format)
		}
	}
}

func TestLexerErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a & b", "at offset 2: '&' must be doubled"},
		{"a | b", "at offset 2: '|' must be doubled"},
		{`"abc`, "at offset 0: unterminated string"},
		{"/* x", "unterminated comment"},
		{"1.2.3", "invalid IPv4 address"},
		{"256.1.1.1", "invalid IPv4 address"},
		{"1:2:3", "invalid numeric constant"},
		{"12ab", "invalid decimal constant"},
		{"18446744073709551616", "not less than 2**64"},
		{"0x50 / 0xff", "only valid as part of"},
		{"0x50/ 0xff", "expected a number right after"},
		{"80//x", "expected a number right after"},
		{"\"\\x41\"", "bad escape"},
		{"\"\\u0000\"", "NUL"},
		{"0x1" + strings.Repeat("0", 256), "needs more than 1024 bits"},
		{"$", "must be followed by a name"},
		{"#", "unexpected character"},
		{"\xff", "non-ASCII"},
	}
	for _, tt := range tests {
		l := NewLexer(tt.in)
		for l.Next().Kind != TokEOF {
		}
		err := l.Err()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got error %v, want %q", tt.in, err, tt.want)
		}
	}
}
