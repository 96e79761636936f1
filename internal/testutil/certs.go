package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CertFiles returns the paths of a certificate and a key file in a fresh temporary directory
// (neither exists yet).
func CertFiles(tb testing.TB) (certFile, keyFile string) {
	tb.Helper()
	dir := tb.TempDir()
	return filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
}

// WriteCert writes a fresh self-signed certificate for 127.0.0.1 and localhost with the given
// common name to certFile and keyFile (PEM), and returns it parsed.
func WriteCert(tb testing.TB, certFile, keyFile, cn string) *x509.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	WriteFile(tb, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	WriteFile(tb, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return cert
}

// WriteFile writes data and moves the modification time on, so that a change is seen even
// within the file system's time granularity.
func WriteFile(tb testing.TB, name string, data []byte) {
	tb.Helper()
	var prev time.Time
	if st, err := os.Stat(name); err == nil {
		prev = st.ModTime()
	}
	if err := os.WriteFile(name, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	mod := time.Now()
	if !mod.After(prev) {
		mod = prev.Add(time.Second)
	}
	if err := os.Chtimes(name, mod, mod); err != nil {
		tb.Fatal(err)
	}
}
