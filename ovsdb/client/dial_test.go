package client

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/govn/govn/internal/testpki"
	"github.com/govn/govn/ovsdb/server"
)

// TestDialSSL connects the client over SSL to govn's server and to the
// real ovsdb-server, each with a pssl: remote: a client with a
// certificate of the server's CA gets its cache filled; one with a
// foreign certificate, or one that does not trust the server's CA, does
// not.
func TestDialSSL(t *testing.T) {
	dir := t.TempDir()
	ca, rogue := testpki.NewCA(t, dir, "ca"), testpki.NewCA(t, dir, "rogue")
	serverKey, serverCert := ca.Issue(t, dir, "server")
	clientKey, clientCert := ca.Issue(t, dir, "client")
	rogueKey, rogueCert := rogue.Issue(t, dir, "rogue")

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
				TLS:     server.TLSOptions{PrivateKey: serverKey, Certificate: serverCert, CACert: ca.File},
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
				"--private-key="+serverKey, "--certificate="+serverCert, "--ca-cert="+ca.File,
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
			if err := connect(clientKey, clientCert, ca.File, 10*time.Second); err != nil {
				t.Errorf("client with a certificate of the CA: %v", err)
			}
			if err := connect(rogueKey, rogueCert, ca.File, 500*time.Millisecond); err == nil {
				t.Error("client with a foreign certificate got connected")
			}
			if err := connect(clientKey, clientCert, rogue.File, 500*time.Millisecond); err == nil {
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
