// Package testpki makes throwaway certificate authorities and certificates
// for tests of SSL connections: ECDSA keys, valid for a day, written as the
// PEM files that OVS tools and govn's options take.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA signs certificates.
type CA struct {
	Key  *ecdsa.PrivateKey
	Cert *x509.Certificate
	// File is the CA certificate's PEM file, DIR/NAME-cacert.pem.
	File string
}

// NewCA makes a CA whose certificate's common name is name and writes its
// certificate to dir.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Key: key, Cert: cert, File: filepath.Join(dir, name+"-cacert.pem")}
	WritePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Issue writes DIR/NAME-privkey.pem and DIR/NAME-cert.pem, a key and a
// certificate with common name name that ca signed, and returns their
// file names.
func (ca *CA) Issue(t testing.TB, dir, name string) (keyFile, certFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, certFile = filepath.Join(dir, name+"-privkey.pem"), filepath.Join(dir, name+"-cert.pem")
	WritePEM(t, keyFile, "PRIVATE KEY", kder)
	WritePEM(t, certFile, "CERTIFICATE", der)
	return keyFile, certFile
}

// WritePEM writes der as one PEM block of type kind to path.
func WritePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
