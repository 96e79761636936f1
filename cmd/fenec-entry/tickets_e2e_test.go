package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/certs"
	"github.com/fenec/fenec-entry/internal/testutil"
)

// TestTLSResumptionAcrossRestart: an entry with --tls-cert and --state-dir, stopped with
// SIGTERM and started again on the same directory, resumes a client's TLS session.
func TestTLSResumptionAcrossRestart(t *testing.T) {
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fenec-Shard", "1")
		io.WriteString(w, "ok")
	}))
	defer router.Close()
	certFile, keyFile := testutil.CertFiles(t)
	leaf := testutil.WriteCert(t, certFile, keyFile, "e2e")
	dir := t.TempDir()
	args := []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--drain", "50ms",
		"--routers", "eu=" + router.URL, "--tls-cert", certFile, "--tls-key", keyFile, "--state-dir", dir}

	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	// One connection a request; the session cache is keyed by the host, the same for both
	// processes whatever their ports.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, ClientSessionCache: tls.NewLRUClientSessionCache(4)},
		DisableKeepAlives: true}}
	resumed := func(addr string) bool {
		t.Helper()
		resp, err := client.Get("https://" + addr + "/t/acme/x")
		if err != nil {
			t.Fatalf("GET through the entry: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.TLS.DidResume
	}

	first := startEntry(t, args, cleanEnv())
	addr, _ := first.started(t)
	if resumed(addr) {
		t.Fatal("the first connection resumed")
	}
	first.stop(t)
	if fi, err := os.Stat(filepath.Join(dir, certs.TicketsFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the ticket keys' file after the stop: %v", err)
	}

	again := startEntry(t, args, cleanEnv())
	addr, _ = again.started(t)
	if !resumed(addr) {
		t.Error("the restarted entry did not resume the client's session")
	}
	if !again.logged("session ticket keys restored") {
		t.Error("no log line says the ticket keys were restored")
	}
}
