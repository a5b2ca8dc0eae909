package server

import (
	"crypto/tls"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// cipherNames turns suite ids into OpenSSL names for messages.
func cipherNames(ids []uint16) []string {
	var out []string
	for _, id := range ids {
		name := fmt.Sprintf("0x%04x", id)
		for _, s := range goCipherSuites {
			if s.id == id {
				name = s.name
			}
		}
		out = append(out, name)
	}
	return out
}

func TestParseCipherList(t *testing.T) {
	const (
		e256gcm = "ECDHE-ECDSA-AES256-GCM-SHA384"
		r256gcm = "ECDHE-RSA-AES256-GCM-SHA384"
		e128gcm = "ECDHE-ECDSA-AES128-GCM-SHA256"
		r128gcm = "ECDHE-RSA-AES128-GCM-SHA256"
		eChacha = "ECDHE-ECDSA-CHACHA20-POLY1305"
		rChacha = "ECDHE-RSA-CHACHA20-POLY1305"
		e128sha = "ECDHE-ECDSA-AES128-SHA"
		r128sha = "ECDHE-RSA-AES128-SHA"
		e256sha = "ECDHE-ECDSA-AES256-SHA"
		r256sha = "ECDHE-RSA-AES256-SHA"
	)
	for _, tc := range []struct {
		list    string
		want    []string // OpenSSL names in order
		wantErr string   // substring
	}{
		{list: "ECDHE-RSA-AES256-GCM-SHA384", want: []string{r256gcm}},
		{list: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", want: []string{r256gcm}},
		{list: "AES128-SHA:ECDHE-RSA-AES128-SHA", want: []string{"AES128-SHA", r128sha}},
		// Separators: colon, comma, space, semicolon; empty elements.
		{list: "AES128-SHA, ECDHE-RSA-AES128-SHA;;AES256-SHA::", want: []string{"AES128-SHA", r128sha, "AES256-SHA"}},
		{list: "kECDHE+AESGCM", want: []string{e256gcm, r256gcm, e128gcm, r128gcm}},
		{list: "ECDHE+AES+SHA1", want: []string{e256sha, r256sha, e128sha, r128sha}},
		{list: "aECDSA+AES128", want: []string{e128gcm, "ECDHE-ECDSA-AES128-SHA256", e128sha}},
		{list: "CHACHA20:AESGCM+ECDHE", want: []string{eChacha, rChacha, e256gcm, r256gcm, e128gcm, r128gcm}},
		// Listed suites keep their place when selected again.
		{list: "ECDHE-RSA-AES128-SHA:CHACHA20", want: []string{r128sha, eChacha, rChacha}},
		// "+" moves to the end; "-" removes for now; "!" for good.
		{list: "CHACHA20:AESGCM+kECDHE:+CHACHA20", want: []string{e256gcm, r256gcm, e128gcm, r128gcm, eChacha, rChacha}},
		{list: "ECDHE+AESGCM:-aRSA:aRSA+AESGCM", want: []string{e256gcm, e128gcm, r256gcm, r128gcm, "AES256-GCM-SHA384", "AES128-GCM-SHA256"}},
		{list: "ECDHE+AESGCM:!aRSA:aRSA+AESGCM", want: []string{e256gcm, e128gcm}}, // kRSA is aRSA too
		{list: "HIGH:!kRSA:!SHA1:!SHA256:!AESGCM", want: []string{eChacha, rChacha}},
		// @STRENGTH: 256-bit first, otherwise in order.
		{list: "ECDHE+SHA1:@STRENGTH", want: []string{e256sha, r256sha, e128sha, r128sha}},
		{list: "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA:@STRENGTH", want: []string{r256sha, r128sha}},
		// @SECLEVEL=4: 192 bits or more, no SHA-1; 3: no RSA key exchange.
		{list: "ALL:@SECLEVEL=4", want: []string{e256gcm, r256gcm, eChacha, rChacha}},
		{list: "@SECLEVEL=3:AES256-SHA:ECDHE-RSA-AES256-SHA", want: []string{r256sha}},
		{list: "DEFAULT:!ECDSA:!kRSA:!SHA1:!SHA256", want: []string{r256gcm, rChacha, r128gcm}},
		// Keywords and names of what Go lacks select nothing but parse.
		{list: "DHE-RSA-AES256-GCM-SHA384:CAMELLIA:PSK:AES128-SHA", want: []string{"AES128-SHA"}},
		{list: "HIGH:!aNULL:!MD5:!RC4:!3DES:!CAMELLIA:!kDHE:!SHA1:!SHA256:!ECDSA:!kRSA", want: []string{r256gcm, rChacha, r128gcm}},
		{list: "TLS_AES_128_GCM_SHA256:AES128-SHA", want: []string{"AES128-SHA"}},
		{list: "TLSv1.2+kRSA", want: []string{"AES256-GCM-SHA384", "AES128-GCM-SHA256", "AES128-SHA256"}},
		{list: "SSLv3", want: []string{"AES256-SHA", "AES128-SHA"}},
		{list: "TLSv1:SSLv3", want: []string{e256sha, r256sha, e128sha, r128sha, "AES256-SHA", "AES128-SHA"}},

		{list: "", wantErr: "selects no cipher suite"},
		{list: " : ", wantErr: "selects no cipher suite"},
		{list: "DHE-RSA-AES256-GCM-SHA384", wantErr: "selects no cipher suite"},
		{list: "TLS_AES_256_GCM_SHA384", wantErr: "selects no cipher suite"},
		{list: "RC4-SHA:DES-CBC3-SHA", wantErr: "selects no cipher suite"},
		{list: "ALL:!ALL", wantErr: "selects no cipher suite"},
		{list: "AES128-SHA+AES256-SHA", wantErr: "selects no cipher suite"},
		{list: "ALL:@SECLEVEL=6", wantErr: "security level"},
		{list: "ALL:@SECLEVEL=x", wantErr: "security level"},
		{list: "ALL:@FOO", wantErr: "unknown command @FOO"},
		{list: "ALL:-@STRENGTH", wantErr: "unknown cipher suite or keyword \"@STRENGTH\""},
		{list: "ECDHE-RSA-AES128-GCM-SHA265:HIGH", wantErr: "unknown cipher suite or keyword \"ECDHE-RSA-AES128-GCM-SHA265\""},
		{list: "high", wantErr: "unknown cipher suite or keyword \"high\""},
		{list: "ALL:!", wantErr: "empty cipher name"},
		{list: "ALL+", wantErr: "empty cipher name"},
		{list: "AES128-SHA:DEFAULT", wantErr: "DEFAULT may only start"},
		{list: "SUITEB128", wantErr: "Suite B"},
	} {
		got, err := ParseCipherList(tc.list)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: %v, %v; want an error with %q", tc.list, cipherNames(got), err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.list, err)
			continue
		}
		if names := cipherNames(got); !slices.Equal(names, tc.want) {
			t.Errorf("%q:\n got %v\nwant %v", tc.list, names, tc.want)
		}
	}
}

// TestParseCipherListMatchesOpenSSL compares the parser with the
// installed openssl: for each list, "openssl ciphers -s -tls1_2" names the
// suites OpenSSL would offer, and those of them Go has must be what
// ParseCipherList returns, in the same order. OpenSSL fails on a list
// selecting nothing it has; the parser fails on a list selecting nothing
// Go has.
func TestParseCipherListMatchesOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	goNames := map[string]bool{}
	for _, s := range goCipherSuites {
		goNames[s.name] = true
	}
	for _, list := range []string{
		"ALL", "DEFAULT", "HIGH", "HIGH:!aNULL:!MD5", "HIGH:!aNULL:!MD5:!RC4:!3DES",
		"ALL:@STRENGTH", "DEFAULT:@STRENGTH", "ALL:@SECLEVEL=3", "@SECLEVEL=4:ALL", "ALL:@SECLEVEL=5", "@SECLEVEL=0:ALL",
		"kRSA", "RSA", "aRSA", "aECDSA", "ECDSA", "ECDHE", "EECDH", "ECDH", "kECDHE", "kEECDH",
		"AES", "AES128", "AES256", "AESGCM", "CHACHA20", "CBC", "SHA", "SHA1", "SHA256", "SHA384",
		"TLSv1.2", "TLSv1", "TLSv1.0", "SSLv3", "TLSv1:TLSv1.2", "TLSv1.2:SSLv3:TLSv1",
		"ALL:+kRSA", "ALL:+AESGCM:+CHACHA20", "ALL:-AESGCM:AESGCM", "ALL:!AESGCM:AESGCM",
		"ALL:-ECDHE:ECDSA", "AES:-ALL:CHACHA20", "ALL:-aRSA:kRSA", "kECDHE:@STRENGTH:+AES256",
		"ALL:-kRSA:+SHA1:AES128-SHA", "AESGCM:AES", "AES:!SHA1", "ECDHE+AES+SHA", "+AES:AES128-SHA",
		"AES128-SHA+HIGH", "HIGH+SHA1", "kECDHE+AES128", "CHACHA20:AES256-GCM-SHA384:ECDHE-RSA-AES128-SHA",
		"AES128-SHA:ECDHE-ECDSA-AES256-SHA:@STRENGTH", "DEFAULT:!ECDSA", "DEFAULT:!kRSA:!SHA1",
		"ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305", "AES128-SHA256", "AES256-SHA",
		"DHE:CAMELLIA:AES128-SHA", "HIGH:MEDIUM:!aNULL:!MD5:!RC4", "COMPLEMENTOFDEFAULT:AES128-SHA",
		"aRSA:!kRSA:-SHA1:+CHACHA20:SHA1", "ALL:!kRSA:!aECDSA:@STRENGTH",
		// Lists OpenSSL or Go find empty.
		"DHE", "CAMELLIA", "eNULL", "aNULL", "!ALL:ALL", "ALL:!ALL", "AES128-SHA+AES256-SHA", "SHA384:AESCCM",
	} {
		out, err := exec.Command("openssl", "ciphers", "-s", "-tls1_2", list).CombinedOutput()
		var want []string
		if err == nil {
			for _, name := range strings.Split(strings.TrimSpace(string(out)), ":") {
				if goNames[name] {
					want = append(want, name)
				}
			}
		}
		got, gotErr := ParseCipherList(list)
		switch {
		case len(want) == 0 && gotErr == nil:
			t.Errorf("%q: OpenSSL selects none of Go's suites (%s), the parser %v", list, strings.TrimSpace(string(out)), cipherNames(got))
		case len(want) > 0 && gotErr != nil:
			t.Errorf("%q: OpenSSL selects %v, the parser fails: %v", list, want, gotErr)
		case !slices.Equal(cipherNames(got), want):
			t.Errorf("%q:\nparser  %v\nopenssl %v", list, cipherNames(got), want)
		}
	}
}

// FuzzParseCipherList checks that no list crashes the parser and that a
// list it accepts gives Go suites, at least one, each once.
func FuzzParseCipherList(f *testing.F) {
	for _, s := range []string{
		"HIGH:!aNULL:!MD5", "DEFAULT:@STRENGTH", "ECDHE+AESGCM:-aRSA:+CHACHA20", "ALL:@SECLEVEL=3",
		"AES128-SHA, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256;", "!", "+", "@", "ALL+", "DEFAULT:DEFAULT",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		got, err := ParseCipherList(list)
		if err != nil {
			return
		}
		if len(got) == 0 {
			t.Fatalf("%q: no suites and no error", list)
		}
		seen := map[uint16]bool{}
		for _, id := range got {
			if seen[id] {
				t.Fatalf("%q: suite 0x%04x twice", list, id)
			}
			seen[id] = true
			if !slices.ContainsFunc(goCipherSuites[:], func(s cipherSuite) bool { return s.id == id }) {
				t.Fatalf("%q: suite 0x%04x is not one of Go's", list, id)
			}
		}
	})
}

// TestGoCipherSuitesAreGo checks the table against crypto/tls: every
// suite is one Go implements for TLS 1.2, under the IANA name Go knows.
func TestGoCipherSuitesAreGo(t *testing.T) {
	known := map[uint16]*tls.CipherSuite{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		known[s.ID] = s
	}
	for _, s := range goCipherSuites {
		k := known[s.id]
		if k == nil || !slices.Contains(k.SupportedVersions, tls.VersionTLS12) {
			t.Errorf("%s (0x%04x) is not a TLS 1.2 suite of crypto/tls", s.name, s.id)
		}
	}
}

// dialCipher dials addr over TLS 1.2 offering only suite and returns the
// suite the session uses.
func dialCipher(t *testing.T, addr string, p pki, maxVersion uint16, suite uint16) (uint16, error) {
	t.Helper()
	c, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{c}, MaxVersion: maxVersion, CipherSuites: []uint16{suite}}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, conf)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().CipherSuite, nil
}

// TestSSLCiphers checks that --ssl-ciphers limits the suites a TLS 1.2
// client may use, and that TLS 1.3 clients are not affected.
func TestSSLCiphers(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t, dir) // ECDSA keys
	rem := startGovnRemotes(t, dir, "nb", []string{"pssl:0:127.0.0.1"}, TLSOptions{
		PrivateKey: p.serverKey, Certificate: p.serverCert, CACert: p.ca, Ciphers: "ECDHE-ECDSA-AES128-GCM-SHA256",
	})
	addr := rem.Listening()["pssl:0:127.0.0.1"].String()
	if got, err := dialCipher(t, addr, p, tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256); err != nil || got != tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 {
		t.Errorf("client offering the configured suite: %v, suite 0x%04x", err, got)
	}
	for _, other := range []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256} {
		if _, err := dialCipher(t, addr, p, tls.VersionTLS12, other); err == nil {
			t.Errorf("client offering only %s accepted", tls.CipherSuiteName(other))
		}
	}
	// TLS 1.3 suites are Go's to choose: any TLS 1.3 client gets in.
	if _, err := dialCipher(t, addr, p, tls.VersionTLS13, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384); err != nil {
		t.Errorf("TLS 1.3 client refused: %v", err)
	}
}

func TestSSLCiphersBadAtStartup(t *testing.T) {
	srv := New(Options{Logger: quietLogger()})
	for _, list := range []string{"NOPE", "DHE-RSA-AES128-SHA", "ALL:!ALL"} {
		_, err := srv.StartRemotes(t.Context(), RemoteOptions{Remotes: []string{"ptcp:0:127.0.0.1"}, TLS: TLSOptions{Ciphers: list}})
		if err == nil || !strings.Contains(err.Error(), "--ssl-ciphers") {
			t.Errorf("--ssl-ciphers=%q: %v, want a startup error", list, err)
		}
	}
}

// TestSSLCiphersFromDB follows the SSL table's ssl_ciphers as ovn-nbctl
// set-ssl changes it; a list that selects nothing is logged and the
// previous one kept.
func TestSSLCiphersFromDB(t *testing.T) {
	if _, err := exec.LookPath("ovn-nbctl"); err != nil {
		t.Skip("ovn-nbctl not installed")
	}
	dir := t.TempDir()
	p := newPKI(t, dir)
	sock := dir + "/db.sock"
	rem := startGovnRemotes(t, dir, "nb", []string{"punix:" + sock, "pssl:0:127.0.0.1"}, TLSOptions{
		PrivateKey: "db:OVN_Northbound,SSL,private_key", Certificate: "db:OVN_Northbound,SSL,certificate",
		CACert: "db:OVN_Northbound,SSL,ca_cert", Ciphers: "db:OVN_Northbound,SSL,ssl_ciphers",
	})
	addr := rem.Listening()["pssl:0:127.0.0.1"].String()
	unix := "--db=unix:" + sock
	if out, ok := nbctl(unix, "init"); !ok {
		t.Fatalf("init: %s", out)
	}
	aes128, chacha := tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
	accepts := func(suite uint16) bool {
		_, err := dialCipher(t, addr, p, tls.VersionTLS12, suite)
		return err == nil
	}
	for _, step := range []struct {
		ciphers         string
		aes128OK, chaOK bool
	}{
		{"ECDHE-ECDSA-AES128-GCM-SHA256", true, false},
		{"CHACHA20", false, true},
		{"DHE-RSA-AES128-SHA", false, true}, // selects nothing: CHACHA20 stays
		{"HIGH", true, true},
	} {
		if out, ok := nbctl(unix, "set-ssl", p.serverKey, p.serverCert, p.ca, "TLSv1.2", step.ciphers); !ok {
			t.Fatalf("set-ssl: %s", out)
		}
		if a, c := accepts(aes128), accepts(chacha); a != step.aes128OK || c != step.chaOK {
			t.Errorf("ssl_ciphers %q: AES128-GCM accepted %v, ChaCha20 %v; want %v, %v", step.ciphers, a, c, step.aes128OK, step.chaOK)
		}
	}
}
