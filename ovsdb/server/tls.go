package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// TLSOptions name the key, certificate and CA certificate that pssl: and
// ssl: remotes use, as ovsdb-server's --private-key, --certificate and
// --ca-cert do: each is a file name, or "db:DB,TABLE,COLUMN" to take the
// file name from that column (of the table's first row that sets it), as
// in the SSL table of OVN's databases. The files are read again whenever
// they or the rows change.
type TLSOptions struct {
	PrivateKey, Certificate, CACert string
	// Protocols is ovsdb-server's --ssl-protocols list, such as
	// "TLSv1.2,TLSv1.3", or a db: reference to one (ovn-ctl passes
	// db:OVN_Northbound,SSL,ssl_protocols); it bounds the TLS versions
	// offered. Empty means TLS 1.2 and later.
	Protocols string
	// Ciphers is --ssl-ciphers, an OpenSSL cipher list (see
	// ParseCipherList) or a db: reference to one (ovn-ctl passes
	// db:OVN_Northbound,SSL,ssl_ciphers); it chooses the cipher suites of
	// TLS 1.2 and earlier. TLS 1.3 suites cannot be configured in Go and
	// are not affected. Empty means Go's default suites.
	Ciphers string
}

// configured reports whether all three files are named.
func (o TLSOptions) configured() bool {
	return o.PrivateKey != "" && o.Certificate != "" && o.CACert != ""
}

// ParseTLSProtocols turns an --ssl-protocols list ("TLSv1,TLSv1.1,
// TLSv1.2,TLSv1.3", separated by commas or spaces) into the lowest and
// highest TLS versions it names.
func ParseTLSProtocols(list string) (lo, hi uint16, err error) {
	versions := map[string]uint16{
		"TLSv1":   tls.VersionTLS10,
		"TLSv1.1": tls.VersionTLS11,
		"TLSv1.2": tls.VersionTLS12,
		"TLSv1.3": tls.VersionTLS13,
	}
	for _, name := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
		v, ok := versions[name]
		if !ok {
			return 0, 0, fmt.Errorf("unknown SSL protocol %q (want TLSv1, TLSv1.1, TLSv1.2 or TLSv1.3)", name)
		}
		if lo == 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	if lo == 0 {
		return 0, 0, fmt.Errorf("no SSL protocol in %q", list)
	}
	return lo, hi, nil
}

// tlsSource builds TLS configurations from TLSOptions, reloading the files
// when their names (taken from the database) or contents change.
type tlsSource struct {
	srv  *Server
	opts TLSOptions

	mu     sync.Mutex
	key    string // what the cached pair was loaded from
	cert   tls.Certificate
	roots  *x509.CertPool
	loaded bool

	// The cipher list last parsed, and its suites; a bad list from the
	// database leaves the last good suites in force, as ovsdb-server
	// keeps its previous cipher list.
	cipherText   string
	cipherSuites []uint16
}

func newTLSSource(srv *Server, opts TLSOptions) (*tlsSource, error) {
	src, err := newTLSSourceUnchecked(srv, opts)
	if err != nil {
		return nil, err
	}
	for _, v := range []string{opts.PrivateKey, opts.Certificate, opts.CACert, opts.Protocols, opts.Ciphers} {
		if ref, ok := strings.CutPrefix(v, "db:"); ok {
			r, err := parseDBRef(ref)
			if err != nil {
				return nil, err
			}
			if _, err := srv.readStrings(r); err != nil {
				return nil, err
			}
		}
	}
	return src, nil
}

// newTLSSourceUnchecked is newTLSSource without reading the db:
// references' columns now (their databases may not be served yet).
func newTLSSourceUnchecked(srv *Server, opts TLSOptions) (*tlsSource, error) {
	src := &tlsSource{srv: srv, opts: opts}
	if opts.Protocols != "" && !strings.HasPrefix(opts.Protocols, "db:") {
		if _, _, err := ParseTLSProtocols(opts.Protocols); err != nil {
			return nil, err
		}
	}
	if opts.Ciphers != "" && !strings.HasPrefix(opts.Ciphers, "db:") {
		suites, err := ParseCipherList(opts.Ciphers)
		if err != nil {
			return nil, fmt.Errorf("--ssl-ciphers: %w", err)
		}
		src.cipherText, src.cipherSuites = opts.Ciphers, suites
	}
	for _, v := range []string{opts.PrivateKey, opts.Certificate, opts.CACert, opts.Protocols, opts.Ciphers} {
		if ref, ok := strings.CutPrefix(v, "db:"); ok {
			if _, err := parseDBRef(ref); err != nil {
				return nil, err
			}
		}
	}
	return src, nil
}

// TLSConfigs makes TLS configurations from the options the remotes take,
// for the process's other connections: a cluster's peer connections, to
// which ovsdb-server applies its --private-key, --certificate and
// --ca-cert too. Each handshake reads the files (and db: references)
// again when they changed; both sides require a certificate the CA
// signed.
type TLSConfigs struct{ src *tlsSource }

// TLSConfigs returns the configurations of opts, which must name all
// three files. A db: reference is read at the first handshake, so its
// database need not be served yet.
func (s *Server) TLSConfigs(opts TLSOptions) (*TLSConfigs, error) {
	if !opts.configured() {
		return nil, errors.New("SSL needs --private-key, --certificate and --ca-cert")
	}
	src, err := newTLSSourceUnchecked(s, opts)
	if err != nil {
		return nil, err
	}
	return &TLSConfigs{src: src}, nil
}

// ServerConfig is the configuration of one accepted connection.
func (c *TLSConfigs) ServerConfig() (*tls.Config, error) { return c.src.serverConfig() }

// ClientConfig is the configuration of one connection this process makes.
func (c *TLSConfigs) ClientConfig() (*tls.Config, error) { return c.src.clientConfig() }

// value resolves an option: itself, or for a db: reference the first
// string in that column ("" when none).
func (t *tlsSource) value(v string) (string, error) {
	ref, ok := strings.CutPrefix(v, "db:")
	if !ok {
		return v, nil
	}
	r, err := parseDBRef(ref)
	if err != nil {
		return "", err
	}
	vals, err := t.srv.readStrings(r)
	if err != nil || len(vals) == 0 {
		return "", err
	}
	return vals[0], nil
}

// resolve turns a file option into a file name.
func (t *tlsSource) resolve(v string) (string, error) {
	name, err := t.value(v)
	if err == nil && name == "" {
		err = fmt.Errorf("%s: no file name set there", v)
	}
	return name, err
}

// versions returns the TLS versions to allow now; a bad list in the
// database is logged and the default used.
func (t *tlsSource) versions() (lo, hi uint16) {
	list, err := t.value(t.opts.Protocols)
	if err == nil && list != "" {
		lo, hi, err = ParseTLSProtocols(list)
		if err == nil {
			return lo, hi
		}
	}
	if err != nil {
		t.srv.log.Warn("bad SSL protocols; using TLSv1.2 and later", "option", t.opts.Protocols, "err", err)
	}
	return tls.VersionTLS12, 0
}

// ciphers returns the cipher suites to allow now (nil: Go's defaults). A
// bad list in the database is logged once and the last good one kept.
func (t *tlsSource) ciphers() []uint16 {
	list, err := t.value(t.opts.Ciphers)
	if err != nil {
		t.srv.log.Warn("reading SSL ciphers; keeping the previous ones", "option", t.opts.Ciphers, "err", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil || list == t.cipherText {
		return t.cipherSuites
	}
	if list == "" {
		t.cipherText, t.cipherSuites = "", nil
		return nil
	}
	suites, err := ParseCipherList(list)
	if err != nil {
		t.srv.log.Error("bad SSL ciphers; keeping the previous ones", "option", t.opts.Ciphers, "err", err)
		// Remember the bad text so that it is reported once, not at
		// every handshake; the suites stay the last good ones.
		t.cipherText = list
		return t.cipherSuites
	}
	t.cipherText, t.cipherSuites = list, suites
	t.srv.log.Info("SSL ciphers set", "ciphers", list, "suites", len(suites))
	return suites
}

// stamp identifies a file's current contents well enough to notice edits.
func stamp(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s@%d/%d", path, fi.ModTime().UnixNano(), fi.Size()), nil
}

// current returns the certificate and CA pool, reloading them when the
// file names or files changed since the last call.
func (t *tlsSource) current() (tls.Certificate, *x509.CertPool, error) {
	if !t.opts.configured() {
		return tls.Certificate{}, nil, errors.New("SSL is not configured: --private-key, --certificate and --ca-cert are all needed")
	}
	var paths [3]string
	var key strings.Builder
	for i, v := range []string{t.opts.PrivateKey, t.opts.Certificate, t.opts.CACert} {
		p, err := t.resolve(v)
		if err != nil {
			return tls.Certificate{}, nil, err
		}
		s, err := stamp(p)
		if err != nil {
			return tls.Certificate{}, nil, err
		}
		paths[i] = p
		key.WriteString(s)
		key.WriteByte(0)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.loaded && t.key == key.String() {
		return t.cert, t.roots, nil
	}
	cert, err := tls.LoadX509KeyPair(paths[1], paths[0])
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("loading certificate %s and key %s: %w", paths[1], paths[0], err)
	}
	roots, err := loadCAs(paths[2])
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	t.cert, t.roots, t.key, t.loaded = cert, roots, key.String(), true
	t.srv.log.Info("loaded SSL certificate", "certificate", paths[1], "ca_cert", paths[2])
	return cert, roots, nil
}

// loadCAs reads a PEM file of one or more CA certificates.
func loadCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate found", path)
	}
	return pool, nil
}

// serverConfig is the configuration for one incoming handshake.
func (t *tlsSource) serverConfig() (*tls.Config, error) {
	cert, roots, err := t.current()
	if err != nil {
		t.srv.log.Warn("refusing SSL connection", "err", err)
		return nil, err
	}
	lo, hi := t.versions()
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   lo,
		MaxVersion:   hi,
		CipherSuites: t.ciphers(),
		// Like ovsdb-server, every peer must present a certificate
		// signed by the CA (and fit for a client, as OpenSSL checks);
		// names are not checked. The standard check also sends the
		// alerts OpenSSL sends ("unknown CA", "certificate expired").
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  roots,
	}, nil
}

// clientConfig is the configuration for one outgoing connection (an
// active ssl: remote).
func (t *tlsSource) clientConfig() (*tls.Config, error) {
	cert, roots, err := t.current()
	if err != nil {
		return nil, err
	}
	lo, hi := t.versions()
	return &tls.Config{
		Certificates:          []tls.Certificate{cert},
		MinVersion:            lo,
		MaxVersion:            hi,
		CipherSuites:          t.ciphers(),
		InsecureSkipVerify:    true, // verifyChain checks the chain; OVS checks no host name
		VerifyPeerCertificate: verifyChain(roots),
	}, nil
}

// verifyChain checks that the peer's certificate chains to roots, for any
// purpose and whatever its names, which is what OpenSSL's peer
// verification in Open vSwitch amounts to.
func verifyChain(roots *x509.CertPool) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("peer sent no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, b := range raw {
			c, err := x509.ParseCertificate(b)
			if err != nil {
				return fmt.Errorf("parsing peer certificate: %w", err)
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{
			Roots:         roots,
			Intermediates: inter,
			CurrentTime:   time.Now(),
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
		})
		if err != nil {
			return fmt.Errorf("peer certificate: %w", err)
		}
		return nil
	}
}
