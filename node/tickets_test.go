package node

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/certs"
	"github.com/fenec/fenec-entry/internal/testutil"
)

// TestNodeTLSSessionsResumeAfterRestart: with --tls-cert and --state-dir, a client resumes its
// TLS session with the entry and with a new entry on the same directory; a rotation through the
// node's clock reaches the config the listener serves with; no key shows in /metrics,
// /status.json or the log.
func TestNodeTLSSessionsResumeAfterRestart(t *testing.T) {
	router := newRouter(t, "eu", nil)
	certFile, keyFile := testutil.CertFiles(t)
	leaf := testutil.WriteCert(t, certFile, keyFile, "tickets")
	dir := t.TempDir()
	clock := testutil.NewClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(t, "eu", router.URL)
	cfg.TLSCert, cfg.TLSKey, cfg.StateDir, cfg.Clock = certFile, keyFile, dir, clock

	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	cache := tls.NewLRUClientSessionCache(8)
	// A new connection for each request (the cache is keyed by the host, 127.0.0.1, the
	// same for both entries whatever their ports).
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, ClientSessionCache: cache},
		DisableKeepAlives: true, ForceAttemptHTTP2: true}}
	resumed := func(n *Node) bool {
		t.Helper()
		resp, body := get(t, client, "https://"+n.ClientAddr().String()+"/t/acme/x")
		if body != "hello from eu" || resp.TLS == nil {
			t.Fatalf("through the entry: %d %q", resp.StatusCode, body)
		}
		return resp.TLS.DidResume
	}

	n1, logs1 := startNode(t, cfg)
	if resumed(n1) {
		t.Fatal("the first connection resumed")
	}
	if !resumed(n1) {
		t.Fatal("the second connection to the same entry did not resume")
	}
	n1.Close()
	file, err := os.ReadFile(filepath.Join(dir, certs.TicketsFile))
	if err != nil {
		t.Fatalf("no ticket keys in --state-dir: %v", err)
	}
	key := file[10:42] // the first key of the file (certs/tickets.go)

	n2, logs2 := startNode(t, cfg)
	if !resumed(n2) {
		t.Error("the entry started again on the same --state-dir did not resume the session")
	}
	admin := &http.Client{Timeout: 5 * time.Second}
	_, metrics := get(t, admin, "http://"+n2.AdminAddr().String()+"/metrics")
	if !strings.Contains(metrics, "fenec_entry_tls_ticket_keys 1\n") {
		t.Errorf("/metrics lacks fenec_entry_tls_ticket_keys 1")
	}
	_, status := get(t, admin, "http://"+n2.AdminAddr().String()+"/status.json")

	// Three periods on, the key of those sessions is gone from the served config.
	clock.Advance(certs.TicketKeysKept * certs.TicketKeyPeriod)
	if !n2.tickets.Rotate() {
		t.Fatal("Rotate three periods on changed nothing")
	}
	if resumed(n2) {
		t.Error("a session of a key three periods old resumed")
	}
	if !resumed(n2) {
		t.Error("the session started under the new key did not resume")
	}

	for what, text := range map[string]string{"/metrics": metrics, "/status.json": status,
		"the first log": logs1.String(), "the second log": logs2.String()} {
		for _, form := range []string{hex.EncodeToString(key), base64.StdEncoding.EncodeToString(key)[:40],
			base64.RawURLEncoding.EncodeToString(key)[:40], string(key)} {
			if strings.Contains(strings.ToLower(text), strings.ToLower(form)) {
				t.Errorf("%s holds a session ticket key", what)
			}
		}
	}
}
