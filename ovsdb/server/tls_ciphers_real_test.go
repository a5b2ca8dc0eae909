package server

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govn/govn/schema"
)

// TestSSLCiphersLikeOVSDBServer gives govn db and the real ovsdb-server
// the same --ssl-ciphers and has openssl s_client, offering one TLS 1.2
// suite at a time, check that both accept and refuse the same suites.
func TestSSLCiphersLikeOVSDBServer(t *testing.T) {
	for _, tool := range []string{"openssl", "ovsdb-server", "ovsdb-tool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	p := newPKI(t, dir) // ECDSA keys: the ECDHE-ECDSA suites can work
	offers := []string{
		"ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305",
		"ECDHE-ECDSA-AES128-SHA256", "ECDHE-ECDSA-AES256-SHA", "ECDHE-ECDSA-AES128-SHA",
	}
	accepted, refused := 0, 0
	for i, list := range []string{
		"ECDHE-ECDSA-AES128-GCM-SHA256",
		"HIGH:!AESGCM",
		"ECDSA+SHA1:ECDHE-ECDSA-CHACHA20-POLY1305",
		"DEFAULT:!CHACHA20:-SHA1:@STRENGTH",
		// Level 4 would also refuse the P-256 key, which the parser
		// (choosing suites only) does not judge.
		"ALL:@SECLEVEL=3:!AES256",
	} {
		sub := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		opts := TLSOptions{PrivateKey: p.serverKey, Certificate: p.serverCert, CACert: p.ca, Ciphers: list}
		rem := startGovnRemotes(t, sub, "nb", []string{"pssl:0:127.0.0.1"}, opts)
		govnAddr := rem.Listening()["pssl:0:127.0.0.1"].String()
		realAddr := startRealSSL(t, sub, opts)
		for _, offer := range offers {
			govnOK, govnOut := sClient(t, govnAddr, p, offer)
			realOK, realOut := sClient(t, realAddr, p, offer)
			if realOK {
				accepted++
			} else {
				refused++
			}
			if govnOK != realOK {
				t.Errorf("--ssl-ciphers=%q, client offering %s: govn db accepts %v, ovsdb-server %v\ngovn: %s\novsdb-server: %s",
					list, offer, govnOK, realOK, govnOut, realOut)
			}
		}
	}
	// Both outcomes must occur, or the comparison proved nothing.
	if accepted == 0 || refused == 0 {
		t.Errorf("ovsdb-server accepted %d and refused %d handshakes; want some of each", accepted, refused)
	}
	t.Logf("%d handshakes accepted and %d refused by both servers alike", accepted, refused)
}

// startRealSSL runs the real ovsdb-server with one pssl: remote and the
// SSL options, and returns the address it listens on.
func startRealSSL(t *testing.T, dir string, o TLSOptions) string {
	t.Helper()
	text, err := schema.Lookup("nb")
	if err != nil {
		t.Fatal(err)
	}
	schemaFile, db := filepath.Join(dir, "real.ovsschema"), filepath.Join(dir, "real.db")
	if err := os.WriteFile(schemaFile, text, 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, "ovsdb-tool", "create", db, schemaFile)
	port := freePort(t)
	cmd := exec.Command("ovsdb-server", "--unixctl="+filepath.Join(dir, "real.ctl"), "--log-file="+filepath.Join(dir, "real.log"),
		"-vconsole:off", fmt.Sprintf("--remote=pssl:%d:127.0.0.1", port), "--private-key="+o.PrivateKey,
		"--certificate="+o.Certificate, "--ca-cert="+o.CACert, "--ssl-ciphers="+o.Ciphers, db)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if !waitListening(port, true) {
		log, _ := os.ReadFile(filepath.Join(dir, "real.log"))
		t.Fatalf("ovsdb-server does not listen on %d:\n%s", port, log)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// sClient runs a TLS 1.2 handshake with openssl s_client offering only
// cipher, and reports whether it succeeded, with s_client's output.
func sClient(t *testing.T, addr string, p pki, cipher string) (bool, string) {
	t.Helper()
	cmd := exec.Command("openssl", "s_client", "-connect", addr, "-tls1_2", "-cipher", cipher,
		"-cert", p.clientCert, "-key", p.clientKey, "-CAfile", p.ca, "-brief")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	text := string(out)
	ok := err == nil && strings.Contains(text, "Ciphersuite: "+cipher)
	return ok, strings.TrimSpace(text)
}
