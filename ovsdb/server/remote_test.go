package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/internal/testpki"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema"
)

// pki is a CA and certificates signed by it, written as PEM files.
type pki struct {
	ca                    string // CA certificate
	serverKey, serverCert string
	clientKey, clientCert string
	// rogueKey and rogueCert are signed by another CA.
	rogueKey, rogueCert string
}

// newPKI writes a fresh PKI to dir.
func newPKI(t *testing.T, dir string) pki {
	t.Helper()
	ca, rogueCA := testpki.NewCA(t, dir, "test-ca"), testpki.NewCA(t, dir, "rogue-ca")
	p := pki{ca: ca.File}
	p.serverKey, p.serverCert = ca.Issue(t, dir, "server")
	p.clientKey, p.clientCert = ca.Issue(t, dir, "client")
	p.rogueKey, p.rogueCert = rogueCA.Issue(t, dir, "rogue")
	return p
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitListening waits until a TCP connection to port succeeds (want) or
// is refused (!want), reporting whether that happened within 5 s.
func waitListening(port int, want bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			c.Close()
		}
		if (err == nil) == want {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// startGovnRemotes serves a new database of govn's schema name ("nb",
// "sb") with remotes and SSL options (a subset of ovsdb-server's command
// line).
func startGovnRemotes(t *testing.T, dir, name string, remotes []string, tlsOpts TLSOptions) *Remotes {
	t.Helper()
	text, err := schema.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".db")
	if err := CreateFile(path, text); err != nil {
		t.Fatal(err)
	}
	db, log, err := OpenFile(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Logger: quietLogger()})
	if err := srv.AddDatabase(db, log); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rem, err := srv.StartRemotes(ctx, RemoteOptions{Remotes: remotes, TLS: tlsOpts, Poll: 20 * time.Millisecond})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); rem.Wait(); log.Close() })
	return rem
}

// startRealRemotes does the same with the real ovsdb-server, and waits
// for its punix: sockets to appear.
func startRealRemotes(t *testing.T, dir, name string, remotes []string, tlsOpts TLSOptions) {
	t.Helper()
	text, err := schema.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	schemaFile := filepath.Join(dir, name+".ovsschema")
	if err := os.WriteFile(schemaFile, text, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".db")
	runTool(t, "ovsdb-tool", "create", path, schemaFile)
	args := []string{"--unixctl=" + filepath.Join(dir, "ovsdb.ctl"), "--log-file=" + filepath.Join(dir, "ovsdb.log"), "-vconsole:off"}
	for _, r := range remotes {
		args = append(args, "--remote="+r)
	}
	for flag, v := range map[string]string{"private-key": tlsOpts.PrivateKey, "certificate": tlsOpts.Certificate, "ca-cert": tlsOpts.CACert} {
		if v != "" {
			args = append(args, "--"+flag+"="+v)
		}
	}
	cmd := exec.Command("ovsdb-server", append(args, path)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for _, r := range remotes {
		if sock, ok := strings.CutPrefix(r, "punix:"); ok {
			waitUnixSocket(t, sock)
		}
	}
}

// waitUnixSocket waits until a server accepts connections on sock: the
// socket file exists a moment before the server listens on it, and a
// loaded machine makes a server slow to start.
func waitUnixSocket(t *testing.T, sock string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after 20s: %v", sock, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nbctl runs ovn-nbctl and returns its output and whether it succeeded.
func nbctl(args ...string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ovn-nbctl", append([]string{"--timeout=5"}, args...)...).CombinedOutput()
	return string(out), err == nil
}

// remoteScript drives a server started by start through the life of its
// remotes with the real ovn-nbctl and returns what it observed, one line
// per step, for comparing servers. Failures of steps are observations,
// not test failures.
func remoteScript(t *testing.T, start func(*testing.T, string, []string, TLSOptions)) []string {
	dir := t.TempDir()
	p := newPKI(t, dir)
	sock := filepath.Join(dir, "db.sock")
	p1, p2, p3 := freePort(t), freePort(t), freePort(t)
	for p2 == p1 || p3 == p1 || p3 == p2 {
		p2, p3 = freePort(t), freePort(t)
	}
	start(t, dir, []string{
		fmt.Sprintf("pssl:%d:127.0.0.1", p1),
		"db:OVN_Northbound,NB_Global,connections",
		"punix:" + sock,
	}, TLSOptions{PrivateKey: p.serverKey, Certificate: p.serverCert, CACert: p.ca})
	var obs []string
	note := func(format string, args ...any) { obs = append(obs, fmt.Sprintf(format, args...)) }
	note("pssl listening: %v", waitListening(p1, true))
	ssl := func(port int, key, cert string, args ...string) (string, bool) {
		return nbctl(append([]string{fmt.Sprintf("--db=ssl:127.0.0.1:%d", port), "-p", key, "-c", cert, "-C", p.ca}, args...)...)
	}
	_, ok := ssl(p1, p.clientKey, p.clientCert, "init")
	note("init over ssl: %v", ok)
	_, ok = ssl(p1, p.clientKey, p.clientCert, "ls-add", "sw0")
	note("ls-add over ssl: %v", ok)
	out, ok := ssl(p1, p.clientKey, p.clientCert, "show")
	note("show over ssl: %v %v", ok, strings.Contains(out, "(sw0)"))
	_, ok = nbctl("--timeout=1", fmt.Sprintf("--db=ssl:127.0.0.1:%d", p1), "-p", p.rogueKey, "-c", p.rogueCert, "-C", p.ca, "show")
	note("rogue certificate accepted: %v", ok)

	_, ok = nbctl("--db=unix:"+sock, "set-connection", fmt.Sprintf("ptcp:%d:127.0.0.1", p2))
	note("set-connection ptcp: %v", ok)
	note("ptcp opened: %v", waitListening(p2, true))
	out, ok = nbctl(fmt.Sprintf("--db=tcp:127.0.0.1:%d", p2), "show")
	note("show over new ptcp: %v %v", ok, strings.Contains(out, "(sw0)"))

	_, ok = nbctl("--db=unix:"+sock, "set-connection", fmt.Sprintf("pssl:%d:127.0.0.1", p3), "--", "set", "connection", ".", "inactivity_probe=30000")
	note("set-connection pssl: %v", ok)
	note("ptcp closed: %v", waitListening(p2, false))
	note("pssl opened: %v", waitListening(p3, true))
	out, ok = ssl(p3, p.clientKey, p.clientCert, "show")
	note("show over new pssl: %v %v", ok, strings.Contains(out, "(sw0)"))

	_, ok = nbctl("--db=unix:"+sock, "del-connection")
	note("del-connection: %v", ok)
	note("pssl closed: %v", waitListening(p3, false))
	note("fixed pssl still listening: %v", waitListening(p1, true))
	return obs
}

// TestRealNbctlRemotes runs remoteScript against govn and, where
// installed, the real ovsdb-server, and compares what they did.
func TestRealNbctlRemotes(t *testing.T) {
	if _, err := exec.LookPath("ovn-nbctl"); err != nil {
		t.Skip("ovn-nbctl not installed")
	}
	want := []string{
		"pssl listening: true",
		"init over ssl: true",
		"ls-add over ssl: true",
		"show over ssl: true true",
		"rogue certificate accepted: false",
		"set-connection ptcp: true",
		"ptcp opened: true",
		"show over new ptcp: true true",
		"set-connection pssl: true",
		"ptcp closed: true",
		"pssl opened: true",
		"show over new pssl: true true",
		"del-connection: true",
		"pssl closed: true",
		"fixed pssl still listening: true",
	}
	var got []string
	defer func() { t.Logf("observed:\n%s", strings.Join(got, "\n")) }()
	got = remoteScript(t, func(t *testing.T, dir string, remotes []string, o TLSOptions) {
		startGovnRemotes(t, dir, "nb", remotes, o)
	})
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("govn db:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, tool := range []string{"ovsdb-server", "ovsdb-tool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	real := remoteScript(t, func(t *testing.T, dir string, remotes []string, o TLSOptions) {
		startRealRemotes(t, dir, "nb", remotes, o)
	})
	t.Logf("ovsdb-server:\n%s", strings.Join(real, "\n"))
	if strings.Join(got, "\n") != strings.Join(real, "\n") {
		t.Errorf("govn db:\n%s\novsdb-server:\n%s", strings.Join(got, "\n"), strings.Join(real, "\n"))
	}
}

// TestRealNbctlSSLFromDB takes the key, certificate and CA from the SSL
// table, as ovn-ctl runs ovsdb-server, set by ovn-nbctl set-ssl.
func TestRealNbctlSSLFromDB(t *testing.T) {
	if _, err := exec.LookPath("ovn-nbctl"); err != nil {
		t.Skip("ovn-nbctl not installed")
	}
	dir := t.TempDir()
	p := newPKI(t, dir)
	sock := filepath.Join(dir, "db.sock")
	port := freePort(t)
	startGovnRemotes(t, dir, "nb", []string{"punix:" + sock, "db:OVN_Northbound,NB_Global,connections"}, TLSOptions{
		PrivateKey:  "db:OVN_Northbound,SSL,private_key",
		Certificate: "db:OVN_Northbound,SSL,certificate",
		CACert:      "db:OVN_Northbound,SSL,ca_cert",
		Protocols:   "db:OVN_Northbound,SSL,ssl_protocols",
		Ciphers:     "db:OVN_Northbound,SSL,ssl_ciphers",
	})
	unix := "--db=unix:" + sock
	if _, ok := nbctl(unix, "init"); !ok {
		t.Fatal("init failed")
	}
	if out, ok := nbctl(unix, "set-ssl", p.serverKey, p.serverCert, p.ca, "TLSv1.2", "HIGH:!aNULL"); !ok {
		t.Fatalf("set-ssl: %s", out)
	}
	if out, ok := nbctl(unix, "set-connection", fmt.Sprintf("pssl:%d:127.0.0.1", port)); !ok {
		t.Fatalf("set-connection: %s", out)
	}
	if !waitListening(port, true) {
		t.Fatal("pssl remote from the database not opened")
	}
	out, ok := nbctl(fmt.Sprintf("--db=ssl:127.0.0.1:%d", port), "-p", p.clientKey, "-c", p.clientCert, "-C", p.ca, "ls-add", "sw1", "--", "show")
	if !ok || !strings.Contains(out, "(sw1)") {
		t.Errorf("ovn-nbctl over ssl with the SSL table's files: ok=%v\n%s", ok, out)
	}
	// The table's ssl_protocols apply: TLS 1.3 alone is refused.
	c, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS13}
	if conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), conf); err == nil {
		conn.Close()
		t.Error("TLS 1.3 accepted although ssl_protocols says TLSv1.2")
	}
}

// TestTLSReload replaces the CA and certificate files under a running
// listener: the next handshakes use the new ones, and peers without a
// certificate the CA signed are refused.
func TestTLSReload(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t, dir)
	rem := startGovnRemotes(t, dir, "nb", []string{"pssl:0:127.0.0.1"}, TLSOptions{PrivateKey: p.serverKey, Certificate: p.serverCert, CACert: p.ca})
	addr := rem.Listening()["pssl:0:127.0.0.1"]
	if addr == nil {
		t.Fatalf("not listening: %v", rem.Listening())
	}
	a := addr.String()
	if err := handshake(t, a, p.clientKey, p.clientCert, p.ca); err != nil {
		t.Errorf("valid client refused: %v", err)
	}
	if err := handshake(t, a, "", "", ""); err == nil {
		t.Error("client without a certificate accepted")
	}
	if err := handshake(t, a, p.rogueKey, p.rogueCert, ""); err == nil {
		t.Error("client with a certificate of another CA accepted")
	}
	// A new PKI in place of the files: the old client certificate is now
	// foreign, and the server presents a certificate of the new CA.
	q := newPKI(t, t.TempDir())
	for from, to := range map[string]string{q.ca: p.ca, q.serverKey: p.serverKey, q.serverCert: p.serverCert} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := handshake(t, a, p.clientKey, p.clientCert, ""); err == nil {
		t.Error("client of the replaced CA still accepted")
	}
	if err := handshake(t, a, q.clientKey, q.clientCert, q.ca); err != nil {
		t.Errorf("client of the new CA refused: %v", err)
	}
}

// handshake dials addr with the given client files (none: no
// certificate) and reports whether a TLS session came up and the server
// answered an echo.
func handshake(t *testing.T, addr string, key, cert, ca string) error {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true}
	if key != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	if ca != "" {
		roots, err := loadCAs(ca)
		if err != nil {
			t.Fatal(err)
		}
		cfg.VerifyPeerCertificate = verifyChain(roots)
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	// In TLS 1.3 the server checks the client's certificate after the
	// client's handshake finished: a refusal shows on the first read.
	if _, err := c.Write([]byte(`{"method":"echo","params":[],"id":1}`)); err != nil {
		return err
	}
	buf := make([]byte, 100)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if !strings.Contains(string(buf[:n]), `"result"`) {
		return fmt.Errorf("unexpected answer %q", buf[:n])
	}
	return nil
}

func TestParseTLSProtocols(t *testing.T) {
	for _, tc := range []struct {
		in     string
		lo, hi uint16
		ok     bool
	}{
		{"TLSv1.2", tls.VersionTLS12, tls.VersionTLS12, true},
		{"TLSv1,TLSv1.1,TLSv1.2", tls.VersionTLS10, tls.VersionTLS12, true},
		{"TLSv1.3, TLSv1.2", tls.VersionTLS12, tls.VersionTLS13, true},
		{"TLSv1.2 TLSv1.3", tls.VersionTLS12, tls.VersionTLS13, true},
		{"", 0, 0, false},
		{",", 0, 0, false},
		{"SSLv3", 0, 0, false},
		{"TLSv1.2,tlsv1.3", 0, 0, false},
	} {
		lo, hi, err := ParseTLSProtocols(tc.in)
		if (err == nil) != tc.ok || lo != tc.lo || hi != tc.hi {
			t.Errorf("ParseTLSProtocols(%q) = %#x, %#x, %v; want %#x, %#x, ok=%v", tc.in, lo, hi, err, tc.lo, tc.hi, tc.ok)
		}
	}
}

func FuzzParseTLSProtocols(f *testing.F) {
	for _, s := range []string{"TLSv1,TLSv1.1", "TLSv1.3", "", " , ", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lo, hi, err := ParseTLSProtocols(s)
		if err == nil && (lo < tls.VersionTLS10 || hi > tls.VersionTLS13 || lo > hi) {
			t.Errorf("%q: bad range %#x..%#x", s, lo, hi)
		}
	})
}

func TestCheckTarget(t *testing.T) {
	for _, tc := range []struct {
		target string
		ok     bool
	}{
		{"ptcp:6641", true},
		{"ptcp:6641:127.0.0.1", true},
		{"pssl:6641:127.0.0.1", true},
		{"punix:/run/ovn/db.sock", true},
		{"tcp:127.0.0.1:6641", true},
		{"ssl:127.0.0.1:6641", true},
		{"unix:/x", true},
		{"ssl:", false},
		{"pssl:", false},
		{"http:1.2.3.4:80", false},
		{"6641", false},
		{"", false},
	} {
		if err := checkTarget(tc.target); (err == nil) != tc.ok {
			t.Errorf("checkTarget(%q) = %v, want ok=%v", tc.target, err, tc.ok)
		}
	}
}

func FuzzRemoteParsers(f *testing.F) {
	for _, s := range []string{"ptcp:6641:127.0.0.1", "pssl:1", "ssl:[::1]:6641", "OVN_Northbound,NB_Global,connections", ",,", "a,b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = checkTarget(s)
		if r, err := parseDBRef(s); err == nil && (r.db == "" || r.table == "" || r.column == "") {
			t.Errorf("parseDBRef(%q) = %+v with an empty part", s, r)
		}
	})
}

// TestStartRemotesErrors checks that bad options are refused up front.
func TestStartRemotesErrors(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t, dir)
	files := TLSOptions{PrivateKey: p.serverKey, Certificate: p.serverCert, CACert: p.ca}
	text, err := schema.Lookup("nb")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Logger: quietLogger()})
	if err := srv.AddDatabase(ovsdb.NewDatabase(ovsdb.MustParseSchema(text)), nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts RemoteOptions
	}{
		{"bad remote", RemoteOptions{Remotes: []string{"http:80"}}},
		{"pssl without SSL files", RemoteOptions{Remotes: []string{"pssl:0:127.0.0.1"}}},
		{"ssl without SSL files", RemoteOptions{Remotes: []string{"ssl:127.0.0.1:1"}}},
		{"unknown database", RemoteOptions{Remotes: []string{"db:Nope,NB_Global,connections"}}},
		{"unknown table", RemoteOptions{Remotes: []string{"db:OVN_Northbound,Nope,connections"}}},
		{"unknown column", RemoteOptions{Remotes: []string{"db:OVN_Northbound,NB_Global,nope"}}},
		{"column of the wrong type", RemoteOptions{Remotes: []string{"db:OVN_Northbound,NB_Global,nb_cfg"}}},
		{"short reference", RemoteOptions{Remotes: []string{"db:OVN_Northbound,NB_Global"}}},
		{"bad protocols", RemoteOptions{Remotes: []string{"pssl:0:127.0.0.1"}, TLS: TLSOptions{PrivateKey: files.PrivateKey, Certificate: files.Certificate, CACert: files.CACert, Protocols: "SSLv2"}}},
		{"bad key reference", RemoteOptions{TLS: TLSOptions{PrivateKey: "db:x"}}},
		{"key column missing", RemoteOptions{TLS: TLSOptions{PrivateKey: "db:OVN_Northbound,SSL,nope"}}},
		{"protocols column missing", RemoteOptions{TLS: TLSOptions{Protocols: "db:OVN_Northbound,SSL,nope"}}},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		rem, err := srv.StartRemotes(ctx, tc.opts)
		cancel()
		if err == nil {
			rem.Wait()
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// TestSSLProtocols checks that --ssl-protocols bounds the versions: a
// server limited to TLS 1.3 refuses a client that stops at TLS 1.2.
func TestSSLProtocols(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t, dir)
	rem := startGovnRemotes(t, dir, "nb", []string{"pssl:0:127.0.0.1"}, TLSOptions{PrivateKey: p.serverKey, Certificate: p.serverCert, CACert: p.ca, Protocols: "TLSv1.3"})
	addr := rem.Listening()["pssl:0:127.0.0.1"].String()
	dialMax := func(v uint16) error {
		c, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{c}, MaxVersion: v})
		if err == nil {
			conn.Close()
		}
		return err
	}
	if err := dialMax(tls.VersionTLS13); err != nil {
		t.Errorf("TLS 1.3 client refused: %v", err)
	}
	if err := dialMax(tls.VersionTLS12); err == nil {
		t.Error("TLS 1.2 client accepted by a TLS 1.3 server")
	}
}

// TestActiveRemotes has the server connect out (tcp: and ssl:) to the
// real ovsdb-client listening passively, which then lists the databases.
func TestActiveRemotes(t *testing.T) {
	if _, err := exec.LookPath("ovsdb-client"); err != nil {
		t.Skip("ovsdb-client not installed")
	}
	dir := t.TempDir()
	p := newPKI(t, dir)
	tcpPort, sslPort := freePort(t), freePort(t)
	for sslPort == tcpPort {
		sslPort = freePort(t)
	}
	// The clients listen first; the server connects out and retries
	// (from 1 s apart) until they do.
	type result struct {
		out []byte
		err error
	}
	run := func(args ...string) chan result {
		ch := make(chan result, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, "ovsdb-client", args...)
		go func() { out, err := cmd.Output(); cancel(); ch <- result{out, err} }()
		return ch
	}
	tcpRes := run("list-dbs", fmt.Sprintf("ptcp:%d:127.0.0.1", tcpPort))
	sslRes := run("-p", p.clientKey, "-c", p.clientCert, "-C", p.ca, "list-dbs", fmt.Sprintf("pssl:%d:127.0.0.1", sslPort))
	// No probing of the ports: ovsdb-client serves the first connection
	// only.
	startGovnRemotes(t, dir, "nb", []string{fmt.Sprintf("tcp:127.0.0.1:%d", tcpPort), fmt.Sprintf("ssl:127.0.0.1:%d", sslPort)},
		TLSOptions{PrivateKey: p.serverKey, Certificate: p.serverCert, CACert: p.ca})
	for name, ch := range map[string]chan result{"tcp": tcpRes, "ssl": sslRes} {
		r := <-ch
		if r.err != nil || string(r.out) != "OVN_Northbound\n_Server\n" {
			t.Errorf("ovsdb-client list-dbs over an active %s remote: %v\n%s", name, r.err, r.out)
		}
	}
}

// TestReadOnlyConnection: a Southbound Connection row with read_only=true
// serves sessions that may read but not write, with ovsdb-server's errors
// (compared with the real one), and read_only=false makes it writable
// again; the role column is read along (rbac_test.go tests enforcing it).
func TestReadOnlyConnection(t *testing.T) {
	for _, tool := range []string{"ovn-sbctl", "ovsdb-client"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	sbRemotes := func(dir string) []string {
		return []string{"punix:" + filepath.Join(dir, "sb.sock"), "db:OVN_Southbound,SB_Global,connections"}
	}
	// script makes the connection read-only and tries each kind of
	// operation over it; it returns what ovsdb-client printed.
	script := func(t *testing.T, sock string) []string {
		port := freePort(t)
		sbctl := func(args ...string) {
			t.Helper()
			runTool(t, "ovn-sbctl", append([]string{"--timeout=5", "--db=unix:" + sock}, args...)...)
		}
		sbctl("init")
		sbctl("set-connection", "read-only", fmt.Sprintf("ptcp:%d:127.0.0.1", port))
		if !waitListening(port, true) {
			t.Fatal("read-only connection not opened")
		}
		remote := fmt.Sprintf("tcp:127.0.0.1:%d", port)
		var out []string
		for _, req := range []string{
			`{"op":"insert","table":"Chassis","row":{"name":"x","hostname":"h"}}`,
			`{"op":"select","table":"Chassis","where":[],"columns":["name"]}`,
			`{"op":"comment","comment":"c"},{"op":"mutate","table":"SB_Global","where":[],"mutations":[["nb_cfg","+=",1]]}`,
			`{"op":"wait","table":"SB_Global","where":[],"columns":["nb_cfg"],"until":"==","rows":[{"nb_cfg":0}],"timeout":0}`,
			`{"op":"delete","table":"Chassis","where":[]},{"op":"update","table":"SB_Global","where":[],"row":{"nb_cfg":5}}`,
		} {
			cmd := exec.Command("ovsdb-client", "--timeout=5", "transact", remote, `["OVN_Southbound",`+req+`]`)
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("ovsdb-client transact %s: %v: %s", req, err, b)
			}
			out = append(out, strings.TrimSpace(string(b)))
		}
		// Read-write again: writes go through.
		sbctl("set", "connection", ".", "read_only=false")
		ok := false
		for range 100 {
			b, err := exec.Command("ovsdb-client", "--timeout=5", "transact", remote,
				`["OVN_Southbound",{"op":"insert","table":"Chassis","row":{"name":"y","hostname":"h"}}]`).CombinedOutput()
			if err == nil && strings.Contains(string(b), `"uuid"`) {
				ok = true
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		out = append(out, fmt.Sprintf("insert after read_only=false: %v", ok))
		return out
	}
	want := []string{
		`[{"details":"insert operation not allowed when database server is in read only mode","error":"not allowed"}]`,
		`[{"rows":[]}]`,
		`[{},{"details":"mutate operation not allowed when database server is in read only mode","error":"not allowed"}]`,
		`[{}]`,
		`[{"details":"delete operation not allowed when database server is in read only mode","error":"not allowed"},null]`,
		`insert after read_only=false: true`,
	}
	dir := t.TempDir()
	srv := startGovnRemotes(t, dir, "sb", sbRemotes(dir), TLSOptions{}).srv
	sock := filepath.Join(dir, "sb.sock")
	got := script(t, sock)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("govn db:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The other columns of the row are read too.
	runTool(t, "ovn-sbctl", "--timeout=5", "--db=unix:"+sock, "set", "connection", ".", "role=ovn-controller", "inactivity_probe=0", "max_backoff=2000")
	specs, err := srv.readRemotes(dbRef{"OVN_Southbound", "SB_Global", "connections"})
	if err != nil || len(specs) != 1 || specs[0].role != "ovn-controller" || specs[0].probe != 0 || specs[0].maxBackoff != 2*time.Second || specs[0].readOnly {
		t.Errorf("readRemotes = %+v, %v", specs, err)
	}
	if _, err := exec.LookPath("ovsdb-server"); err != nil {
		t.Skip("ovsdb-server not installed")
	}
	// The last line differs on purpose: ovsdb-server 3.1 keeps serving a
	// listener read-only after its row says read_only=false (until the
	// target itself changes or the server restarts); govn applies the
	// change, as the row asks.
	realDir := t.TempDir()
	startRealRemotes(t, realDir, "sb", sbRemotes(realDir), TLSOptions{})
	real := script(t, filepath.Join(realDir, "sb.sock"))
	n := len(want) - 1
	if strings.Join(got[:n], "\n") != strings.Join(real[:n], "\n") {
		t.Errorf("govn db:\n%s\novsdb-server:\n%s", strings.Join(got[:n], "\n"), strings.Join(real[:n], "\n"))
	}
	t.Logf("ovsdb-server, after read_only=false: %s", real[n])
}

// TestOvsPKI serves SSL with the RSA certificates that ovs-pki makes, as
// deployments do, to the real ovn-nbctl.
func TestOvsPKI(t *testing.T) {
	for _, tool := range []string{"ovs-pki", "ovn-nbctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	pkiDir := filepath.Join(dir, "pki")
	pkiTool := func(args ...string) {
		t.Helper()
		cmd := exec.Command("ovs-pki", append([]string{"--dir=" + pkiDir, "--log=" + filepath.Join(dir, "pki.log")}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ovs-pki %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	pkiTool("init")
	pkiTool("req+sign", "server", "switch")
	pkiTool("req+sign", "client", "switch")
	ca := filepath.Join(pkiDir, "switchca", "cacert.pem")
	rem := startGovnRemotes(t, dir, "nb", []string{"pssl:0:127.0.0.1"}, TLSOptions{
		PrivateKey: filepath.Join(dir, "server-privkey.pem"), Certificate: filepath.Join(dir, "server-cert.pem"), CACert: ca,
	})
	addr := rem.Listening()["pssl:0:127.0.0.1"].String()
	out, ok := nbctl("--db=ssl:"+addr, "-p", filepath.Join(dir, "client-privkey.pem"), "-c", filepath.Join(dir, "client-cert.pem"), "-C", ca, "ls-add", "sw0", "--", "show")
	if !ok || !strings.Contains(out, "(sw0)") {
		t.Errorf("ovn-nbctl with ovs-pki certificates: ok=%v\n%s", ok, out)
	}
	// A certificate of the other CA that ovs-pki made is refused.
	pkiTool("req+sign", "ctl", "controller")
	if _, ok := nbctl("--timeout=1", "--db=ssl:"+addr, "-p", filepath.Join(dir, "ctl-privkey.pem"), "-c", filepath.Join(dir, "ctl-cert.pem"), "-C", ca, "show"); ok {
		t.Error("certificate of the controller CA accepted")
	}
}

// TestSameTargetTwice checks that a target both fixed and in the
// database runs once, and that a database target whose parameters change
// is reopened on the same port.
func TestSameTargetTwice(t *testing.T) {
	if _, err := exec.LookPath("ovn-nbctl"); err != nil {
		t.Skip("ovn-nbctl not installed")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "nb.sock")
	fixed, moving := freePort(t), freePort(t)
	for moving == fixed {
		moving = freePort(t)
	}
	fixedTarget, movingTarget := fmt.Sprintf("ptcp:%d:127.0.0.1", fixed), fmt.Sprintf("ptcp:%d:127.0.0.1", moving)
	rem := startGovnRemotes(t, dir, "nb", []string{"punix:" + sock, fixedTarget, "db:OVN_Northbound,NB_Global,connections"}, TLSOptions{})
	unix := "--db=unix:" + sock
	runTool(t, "ovn-nbctl", unix, "init")
	runTool(t, "ovn-nbctl", unix, "--inactivity-probe=1000", "set-connection", fixedTarget, movingTarget)
	if !waitListening(moving, true) {
		t.Fatal("database target not opened")
	}
	runs := func() int {
		rem.mu.Lock()
		defer rem.mu.Unlock()
		return len(rem.running)
	}
	if n := runs(); n != 3 {
		t.Errorf("%d remotes running, want 3 (punix, and each port once)", n)
	}
	runTool(t, "ovn-nbctl", unix, "--", "set", "connection", movingTarget, "inactivity_probe=0")
	deadline := time.Now().Add(5 * time.Second)
	for {
		rem.mu.Lock()
		var probe time.Duration = -2
		for spec := range rem.running {
			if spec.target == movingTarget {
				probe = spec.probe
			}
		}
		rem.mu.Unlock()
		if probe == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("probe of %s is %v, want 0", movingTarget, probe)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !waitListening(moving, true) || !waitListening(fixed, true) {
		t.Error("a port closed after the change")
	}
	if out, ok := nbctl(fmt.Sprintf("--db=tcp:127.0.0.1:%d", moving), "get-connection"); !ok || !strings.Contains(out, movingTarget) {
		t.Errorf("ovn-nbctl over the reopened target: ok=%v\n%s", ok, out)
	}
}
