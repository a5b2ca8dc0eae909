package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/govn/govn/ovsdb/jsonrpc"
)

// checkEndpoint reports whether the client can dial e: "unix:PATH",
// "tcp:HOST:PORT" or, with Options.TLS set, "ssl:HOST:PORT".
func checkEndpoint(e string, tlsConf *tls.Config) error {
	rest, ok := strings.CutPrefix(e, "ssl:")
	if !ok {
		_, _, err := jsonrpc.ParseTarget(e)
		return err
	}
	if tlsConf == nil {
		return fmt.Errorf("endpoint %s: SSL needs Options.TLS (see LoadTLS)", e)
	}
	if _, _, err := jsonrpc.ParseTarget("tcp:" + rest); err != nil {
		return fmt.Errorf("bad endpoint %q: %w", e, err)
	}
	return nil
}

// dial connects to an endpoint, with a TLS handshake for ssl: ones.
func dial(ctx context.Context, endpoint string, tlsConf *tls.Config) (net.Conn, error) {
	rest, ok := strings.CutPrefix(endpoint, "ssl:")
	if !ok {
		return jsonrpc.Dial(ctx, endpoint)
	}
	if tlsConf == nil {
		return nil, fmt.Errorf("endpoint %s: SSL needs Options.TLS", endpoint)
	}
	nc, err := jsonrpc.Dial(ctx, "tcp:"+rest)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(nc, tlsConf)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("SSL handshake with %s: %w", endpoint, err)
	}
	return tc, nil
}

// LoadTLS returns the configuration for ssl: endpoints that ovsdb-client
// and ovn-nbctl build from -p KEY -c CERT -C CACERT: this client presents
// the certificate, and the server's certificate must be signed by the CA
// (its names are not checked, as Open vSwitch does not check them).
func LoadTLS(keyFile, certFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading certificate %s and key %s: %w", certFile, keyFile, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificate: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate found", caFile)
	}
	return &tls.Config{
		Certificates:       []tls.Certificate{cert},
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // the chain is checked below, names are not
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("server sent no certificate")
			}
			leaf, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return fmt.Errorf("parsing server certificate: %w", err)
			}
			inter := x509.NewCertPool()
			for _, b := range raw[1:] {
				if c, err := x509.ParseCertificate(b); err == nil {
					inter.AddCert(c)
				}
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
				return fmt.Errorf("server certificate: %w", err)
			}
			return nil
		},
	}, nil
}
