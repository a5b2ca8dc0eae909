package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb/server"
)

// testCA signs certificates for the SSL tests.
type testCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	file string // the CA certificate's PEM file
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{key: key, cert: cert, file: filepath.Join(dir, name+"-cacert.pem")}
	writeTestPEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue writes a key and a certificate the CA signed; it returns their
// file names.
func (ca *testCA) issue(t *testing.T, dir, name string) (keyFile, certFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	keyFile, certFile = filepath.Join(dir, name+"-privkey.pem"), filepath.Join(dir, name+"-cert.pem")
	writeTestPEM(t, keyFile, "PRIVATE KEY", kder)
	writeTestPEM(t, certFile, "CERTIFICATE", der)
	return keyFile, certFile
}

func writeTestPEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDialSSL connects the client over SSL to govn's server and to the
// real ovsdb-server, each with a pssl: remote: a client with a
// certificate of the server's CA gets its cache filled; one with a
// foreign certificate, or one that does not trust the server's CA, does
// not.
func TestDialSSL(t *testing.T) {
	dir := t.TempDir()
	ca, rogue := newTestCA(t, dir, "ca"), newTestCA(t, dir, "rogue")
	serverKey, serverCert := ca.issue(t, dir, "server")
	clientKey, clientCert := ca.issue(t, dir, "client")
	rogueKey, rogueCert := rogue.issue(t, dir, "rogue")

	servers := map[string]func(t *testing.T) string{
		"govn": func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "test.db")
			if err := server.CreateFile(path, []byte(testSchema)); err != nil {
				t.Fatal(err)
			}
			logger := slog.New(slog.DiscardHandler)
			db, log, err := server.OpenFile(path, logger)
			if err != nil {
				t.Fatal(err)
			}
			srv := server.New(server.Options{Logger: logger})
			if err := srv.AddDatabase(db, log); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			rem, err := srv.StartRemotes(ctx, server.RemoteOptions{
				Remotes: []string{"pssl:0:127.0.0.1"},
				TLS:     server.TLSOptions{PrivateKey: serverKey, Certificate: serverCert, CACert: ca.file},
			})
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			t.Cleanup(func() { cancel(); rem.Wait(); log.Close() })
			return "ssl:" + rem.Listening()["pssl:0:127.0.0.1"].String()
		},
		"ovsdb-server": func(t *testing.T) string {
			for _, bin := range []string{"ovsdb-server", "ovsdb-tool"} {
				if _, err := exec.LookPath(bin); err != nil {
					t.Skipf("%s not installed", bin)
				}
			}
			d := t.TempDir()
			schemaFile, db := filepath.Join(d, "test.ovsschema"), filepath.Join(d, "test.db")
			if err := os.WriteFile(schemaFile, []byte(testSchema), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("ovsdb-tool", "create", db, schemaFile).CombinedOutput(); err != nil {
				t.Fatalf("ovsdb-tool create: %v\n%s", err, out)
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			cmd := exec.Command("ovsdb-server", fmt.Sprintf("--remote=pssl:%d:127.0.0.1", port),
				"--private-key="+serverKey, "--certificate="+serverCert, "--ca-cert="+ca.file,
				"--unixctl="+filepath.Join(d, "ctl"), "--log-file="+filepath.Join(d, "log"), db)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if c, err := net.Dial("tcp", addr); err == nil {
					c.Close()
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("ovsdb-server is not listening")
				}
			}
			return "ssl:" + addr
		},
	}
	for name, start := range servers {
		t.Run(name, func(t *testing.T) {
			endpoint := start(t)
			connect := func(key, cert, caFile string, wait time.Duration) error {
				conf, err := LoadTLS(key, cert, caFile)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				c, err := Connect(ctx, Options{Endpoints: []string{endpoint}, Database: "Test", TLS: conf, Logger: slog.New(slog.DiscardHandler)})
				if err == nil {
					c.Close()
				}
				return err
			}
			if err := connect(clientKey, clientCert, ca.file, 10*time.Second); err != nil {
				t.Errorf("client with a certificate of the CA: %v", err)
			}
			if err := connect(rogueKey, rogueCert, ca.file, 500*time.Millisecond); err == nil {
				t.Error("client with a foreign certificate got connected")
			}
			if err := connect(clientKey, clientCert, rogue.file, 500*time.Millisecond); err == nil {
				t.Error("client that does not trust the server's CA got connected")
			}
		})
	}
}

// TestSSLEndpointNeedsTLS checks that an ssl: endpoint without a TLS
// configuration is refused up front, and bad endpoints too.
func TestSSLEndpointNeedsTLS(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		ok       bool
	}{
		{"ssl:127.0.0.1:6641", false},
		{"tcp:127.0.0.1:6641", true},
		{"unix:/x", true},
		{"ssl:", false},
		{"pssl:6641", false},
	} {
		_, err := New(Options{Endpoints: []string{tc.endpoint}, Database: "Test"})
		if (err == nil) != tc.ok {
			t.Errorf("New with %q: err %v, want ok=%v", tc.endpoint, err, tc.ok)
		}
	}
}
