//go:build chaos

package chaos

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// tlsEntry is the entry that serves HTTPS on its --listen (--tls-cert, --tls-key); its admin
// port stays plain HTTP. B: it is killed and restarted (kill-B), it is one of the two entries
// that must answer everything while C is stopped, it sits on the {B, C} side of the partition,
// and the rolling upgrade restarts it three times, onto either release.
const tlsEntry = "b"

// suiteTLS is the certificate of the TLS entry's client port, written in the test's temporary
// directory, and the client side's configuration that trusts it and nothing else.
type suiteTLS struct {
	certFile, keyFile string
	pool              *x509.CertPool
}

// newSuiteTLS writes a self-signed P-256 certificate for 127.0.0.1, ::1 and localhost, valid
// from an hour ago for a day, and its key, into dir.
func newSuiteTLS(dir string) (*suiteTLS, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "fenec-chaos " + tlsEntry},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	s := &suiteTLS{certFile: filepath.Join(dir, "entry-cert.pem"), keyFile: filepath.Join(dir, "entry-key.pem"), pool: x509.NewCertPool()}
	s.pool.AddCert(cert)
	if err := os.WriteFile(s.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	if _, err := tls.LoadX509KeyPair(s.certFile, s.keyFile); err != nil {
		return nil, fmt.Errorf("the pair just written: %w", err)
	}
	return s, nil
}

// client is a client configuration that trusts only the suite's certificate and offers
// HTTP/1.1 alone by ALPN (the clients' TLS is HTTP/1.1; h2 is net/http's path in the entry).
func (s *suiteTLS) client() *tls.Config {
	return &tls.Config{RootCAs: s.pool, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
}
