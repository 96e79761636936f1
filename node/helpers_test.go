package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/proxy"
)

// testLogger returns a debug logger writing to a buffer the test can read, printed if the
// test fails.
func testLogger(t *testing.T) (zerolog.Logger, *testutil.LogBuffer) {
	lb := &testutil.LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", lb)
		}
	})
	return zerolog.New(lb).Level(zerolog.DebugLevel).With().Timestamp().Logger(), lb
}

// newRouter starts a stand-in router for region: every answer carries Fenec-Shard: 1, and
// Fenec-Home: <region> when the request asked with Fenec-Home: 1. It answers with its
// region's name; handler, if non-nil, answers instead.
func newRouter(t *testing.T, region string, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fenec-Shard", "1")
		if r.Header.Get("Fenec-Home") == "1" {
			w.Header().Set("Fenec-Home", region)
		}
		if handler != nil {
			handler(w, r)
			return
		}
		w.Write([]byte("hello from " + region))
	}))
	t.Cleanup(s.Close)
	return s
}

// testConfig is a valid Config on loopback ports chosen by the kernel, with one region per
// router URL given as name, url pairs.
func testConfig(t *testing.T, regionURLs ...string) Config {
	t.Helper()
	c := DefaultConfig()
	c.Listen = "127.0.0.1:0"
	c.AdminListen = "127.0.0.1:0"
	c.Pop, c.Node, c.Continent = "test", "entry-test", "EU"
	c.Drain = 50 * time.Millisecond
	c.Version = "v0.0.0-test"
	for i := 0; i+1 < len(regionURLs); i += 2 {
		u, err := url.Parse(regionURLs[i+1])
		if err != nil {
			t.Fatal(err)
		}
		c.Routers = append(c.Routers, proxy.Region{Name: regionURLs[i], Routers: []*url.URL{u}})
	}
	return c
}

// writeCert writes a fresh self-signed certificate for 127.0.0.1 and localhost with the
// given common name to certFile and keyFile, and returns it parsed.
func writeCert(t *testing.T, certFile, keyFile, cn string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
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
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// writeFile writes data and moves the modification time on, so that a change is seen even
// within the file system's time granularity.
func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	var prev time.Time
	if st, err := os.Stat(name); err == nil {
		prev = st.ModTime()
	}
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	mod := time.Now()
	if !mod.After(prev) {
		mod = prev.Add(time.Second)
	}
	if err := os.Chtimes(name, mod, mod); err != nil {
		t.Fatal(err)
	}
}

func tempFiles(t *testing.T) (certFile, keyFile string) {
	dir := t.TempDir()
	return filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
}
