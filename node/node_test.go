package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/status"
)

// startNode builds and starts a node for cfg and closes it when the test ends.
func startNode(t *testing.T, cfg Config) (*Node, *testutil.LogBuffer) {
	t.Helper()
	log, logs := testLogger(t)
	n, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return n, logs
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp, string(body)
}

func TestNodeServes(t *testing.T) {
	router := newRouter(t, "eu", nil)
	n, logs := startNode(t, testConfig(t, "eu", router.URL))
	client := &http.Client{Timeout: 5 * time.Second}
	base, admin := "http://"+n.ClientAddr().String(), "http://"+n.AdminAddr().String()

	resp, body := get(t, client, base+"/t/acme/items/1")
	if resp.StatusCode != 200 || body != "hello from eu" {
		t.Fatalf("GET through the entry = %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("Connection") == "close" {
		t.Error("Connection: close before any drain")
	}

	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		if resp, body := get(t, client, admin+path); resp.StatusCode != 200 || body != want {
			t.Errorf("%s = %d %q, want 200 %q", path, resp.StatusCode, body, want)
		}
	}
	// The request is counted when its handler returns, which may be just after the body
	// reached the client.
	var metrics string
	testutil.Eventually(t, 5*time.Second, "the request is counted", func() bool {
		_, metrics = get(t, client, admin+"/metrics")
		return strings.Contains(metrics, `fenec_entry_requests_total{outcome="answer"} 1`)
	})
	for _, want := range []string{
		`fenec_entry_requests_total{outcome="answer"} 1`,
		`fenec_entry_homes{source="local"} 1`,
		`fenec_entry_region_marked{region="eu"} 0`,
		`fenec_entry_ready 1`,
		"fenec_entry_http1_idle_workers ",
		"fenec_entry_http1_leader_served_total ",
		`fenec_entry_refused_total{reason="bad_chunk"} 0`,
		"fenec_entry_underscore_headers_dropped_total 0",
		"fenec_entry_procs ", "fenec_entry_procs_max ",
		"fenec_entry_procs_changes_total 0", // testConfig leaves GOMAXPROCS to the process
		`fenec_entry_build_info{continent="EU",goversion=`,
		"go_goroutines", "process_",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	resp, body = get(t, client, admin+"/status.json")
	var st status.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/status.json = %v %q: %v", resp.Header, body, err)
	}
	if st.Pop != "test" || st.Node != "entry-test" || st.Version != "v0.0.0-test" || !st.Ready ||
		len(st.Regions) != 1 || st.Regions[0].Routers[0] != router.URL || st.Homes.Local != 1 || st.Homes.Capacity != DefaultHomes {
		t.Errorf("/status.json = %s", body)
	}

	if !strings.Contains(logs.String(), `"message":"entry started"`) || !strings.Contains(logs.String(), router.URL) {
		t.Errorf("no start line with the routers: %s", logs)
	}
	// The start line says what the process was given to run on.
	if want := fmt.Sprintf(`"cpus":%d,`, runtime.GOMAXPROCS(0)); !strings.Contains(logs.String(), want) {
		t.Errorf("the start line does not say %s: %s", want, logs)
	}
}

func TestNodeH2C(t *testing.T) {
	router := newRouter(t, "eu", nil)
	n, _ := startNode(t, testConfig(t, "eu", router.URL))
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Protocols: protos}}
	resp, body := get(t, client, "http://"+n.ClientAddr().String()+"/t/acme/x")
	if resp.ProtoMajor != 2 || body != "hello from eu" {
		t.Errorf("h2c: %s %d %q", resp.Proto, resp.StatusCode, body)
	}
}

func TestNodeTLS(t *testing.T) {
	router := newRouter(t, "eu", nil)
	certFile, keyFile := testutil.CertFiles(t)
	first := testutil.WriteCert(t, certFile, keyFile, "first")
	cfg := testConfig(t, "eu", router.URL)
	cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	log, _ := testLogger(t)
	n, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	n.certsEvery = 10 * time.Millisecond
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	url := "https://" + n.ClientAddr().String() + "/t/acme/x"

	clientFor := func(cert *x509.Certificate, h2 bool) *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(cert)
		protos := new(http.Protocols)
		protos.SetHTTP1(true)
		protos.SetHTTP2(h2)
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool}, Protocols: protos}}
	}
	if resp, body := get(t, clientFor(first, true), url); resp.ProtoMajor != 2 || body != "hello from eu" {
		t.Errorf("h2 by ALPN: %s %q", resp.Proto, body)
	}
	if resp, _ := get(t, clientFor(first, false), url); resp.ProtoMajor != 1 {
		t.Errorf("HTTP/1.1 over TLS: %s", resp.Proto)
	}

	// A new certificate is served once the watcher sees the files change.
	second := testutil.WriteCert(t, certFile, keyFile, "second")
	testutil.Eventually(t, 5*time.Second, "the new certificate is served", func() bool {
		resp, err := clientFor(second, false).Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
}

func TestNodeRouterCA(t *testing.T) {
	router := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fenec-Shard", "1")
		w.Write([]byte("hello over tls"))
	}))
	t.Cleanup(router.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: router.Certificate().Raw}), 0o600)

	cfg := testConfig(t, "eu", router.URL)
	cfg.RouterCA = caFile
	n, _ := startNode(t, cfg)
	resp, body := get(t, &http.Client{Timeout: 5 * time.Second}, "http://"+n.ClientAddr().String()+"/t/acme/x")
	if resp.StatusCode != 200 || body != "hello over tls" {
		t.Errorf("through an https router with --router-ca: %d %q", resp.StatusCode, body)
	}
}

func TestNewFileErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	tests := []struct {
		name   string
		flag   string
		mutate func(*Config)
	}{
		{"router ca missing", "router-ca", func(c *Config) { c.RouterCA = filepath.Join(dir, "missing.pem") }},
		{"router ca not PEM", "router-ca", func(c *Config) { c.RouterCA = notPEM }},
		{"tls cert missing", "tls-cert", func(c *Config) { c.TLSCert, c.TLSKey = filepath.Join(dir, "c"), notPEM }},
		{"tls key missing", "tls-key", func(c *Config) { c.TLSCert, c.TLSKey = notPEM, filepath.Join(dir, "k") }},
		{"invalid config", "homes", func(c *Config) { c.Homes = 0 }},
	}
	for _, tt := range tests {
		cfg := testConfig(t, "eu", "http://127.0.0.1:1")
		tt.mutate(&cfg)
		_, err := New(cfg, zerolog.Nop())
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Flag != tt.flag || !strings.HasPrefix(err.Error(), "--"+tt.flag+": ") {
			t.Errorf("%s: New = %v, want a *ConfigError naming --%s", tt.name, err, tt.flag)
		}
	}
}

func TestStartBindErrorNamesTheFlag(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, flag := range []string{"listen", "admin-listen"} {
		cfg := testConfig(t, "eu", "http://127.0.0.1:1")
		if flag == "listen" {
			cfg.Listen = taken.Addr().String()
		} else {
			cfg.AdminListen = taken.Addr().String()
		}
		n, err := New(cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		err = n.Start(context.Background())
		var ce *ConfigError
		if err == nil || !strings.HasPrefix(err.Error(), "--"+flag+": listen tcp") || errors.As(err, &ce) {
			t.Errorf("Start with --%s taken = %v, want a runtime error naming the flag", flag, err)
		}
		if again := n.Start(context.Background()); again != err {
			t.Errorf("second Start = %v, want the first's %v", again, err)
		}
		n.Close()
	}
}

func TestLifecycleCallsTwice(t *testing.T) {
	router := newRouter(t, "eu", nil)
	cfg := testConfig(t, "eu", router.URL)
	n, _ := startNode(t, cfg)
	if err := n.Start(context.Background()); err != nil {
		t.Errorf("second Start = %v", err)
	}
	n.Close()
	n.Close()
	if err := n.Drain(context.Background()); err != nil {
		t.Errorf("Drain after Close = %v", err)
	}
	if _, err := net.Dial("tcp", n.ClientAddr().String()); err == nil {
		t.Error("client listener still open after Close")
	}

	// Never started: Drain and Close are harmless, Start afterwards refuses.
	fresh, err := New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.Drain(context.Background()); err != nil {
		t.Errorf("Drain before Start = %v", err)
	}
	fresh.Close()
	if err := fresh.Start(context.Background()); !errors.Is(err, errClosed) {
		t.Errorf("Start after Drain = %v, want errClosed", err)
	}
}

func TestDrain(t *testing.T) {
	// The router streams to the client until the client goes: a stream outlives any drain.
	streaming := make(chan struct{}, 1)
	router := newRouter(t, "eu", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events") {
			w.Write([]byte("ok"))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		streaming <- struct{}{}
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
				w.Write([]byte(": keep-alive\n\n"))
				w.(http.Flusher).Flush()
			}
		}
	})
	cfg := testConfig(t, "eu", router.URL)
	cfg.Drain = 300 * time.Millisecond
	log, logs := testLogger(t)
	n, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	n.grace = 300 * time.Millisecond
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	base, admin := "http://"+n.ClientAddr().String(), "http://"+n.AdminAddr().String()
	client := &http.Client{Timeout: 10 * time.Second}

	stream, err := client.Get(base + "/t/acme/events")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	select {
	case <-streaming:
	case <-time.After(5 * time.Second):
		t.Fatal("the router's stream did not start within 5s")
	}
	streamEnded := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, bufio.NewReader(stream.Body))
		streamEnded <- err
	}()

	start := time.Now()
	drained := make(chan error, 1)
	go func() { drained <- n.Drain(context.Background()) }()

	// While draining: answers carry Connection: close, /readyz says 503.
	testutil.Eventually(t, 2*time.Second, "/readyz answers 503", func() bool {
		resp, err := client.Get(admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	resp, body := get(t, client, base+"/t/acme/items/1")
	if body != "ok" || !resp.Close {
		t.Errorf("during the drain: %q, Connection: close = %v", body, resp.Close)
	}

	select {
	case err := <-drained:
		if err != nil {
			t.Errorf("Drain = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return within drain + grace + 4s")
	}
	if took := time.Since(start); took < cfg.Drain {
		t.Errorf("Drain took %v, less than --drain %v", took, cfg.Drain)
	}
	select {
	case <-streamEnded:
	case <-time.After(2 * time.Second):
		t.Error("the open stream was not ended after the grace")
	}
	if _, err := net.Dial("tcp", n.ClientAddr().String()); err == nil {
		t.Error("client listener still open after the drain")
	}
	if err := n.Drain(context.Background()); err != nil {
		t.Errorf("second Drain = %v", err)
	}
	if !strings.Contains(logs.String(), "drained") {
		t.Errorf("no drained line: %s", logs)
	}
}

// TestReadyzFollowsReady: /readyz answers 503 while the node is not ready (a starting entry
// fetching a peer's table), 200 once it is.
func TestReadyzFollowsReady(t *testing.T) {
	router := newRouter(t, "eu", nil)
	n, _ := startNode(t, testConfig(t, "eu", router.URL))
	admin := "http://" + n.AdminAddr().String() + "/readyz"
	client := &http.Client{Timeout: 5 * time.Second}
	n.ready.Store(false)
	if resp, _ := get(t, client, admin); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz while not ready = %d", resp.StatusCode)
	}
	n.ready.Store(true)
	if resp, _ := get(t, client, admin); resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz once ready = %d", resp.StatusCode)
	}
}

func TestRun(t *testing.T) {
	router := newRouter(t, "eu", nil)
	cfg := testConfig(t, "eu", router.URL)
	log, _ := testLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, log) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}

	cfg.Homes = 0
	var ce *ConfigError
	if err := Run(context.Background(), cfg, log); !errors.As(err, &ce) {
		t.Errorf("Run with a bad config = %v, want a *ConfigError", err)
	}
}

// With AdaptProcs (GOMAXPROCS unset), an idle entry steps down to one P within DownAfter
// periods, says so on /metrics, and gives the process its Ps back when it closes. With one CPU
// there is nothing to choose: no change.
func TestProcsFollowTheLoad(t *testing.T) {
	router := newRouter(t, "eu", nil)
	cfg := testConfig(t, "eu", router.URL)
	cfg.AdaptProcs = true
	before := runtime.GOMAXPROCS(0)
	log, _ := testLogger(t)
	n, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		n.Close()
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	admin := "http://" + n.AdminAddr().String()
	want := fmt.Sprintf("fenec_entry_procs_max %d\n", before)
	if before == 1 {
		want += "fenec_entry_procs 1\n"
	}
	// Looked at seldom: the test's own work is the process's CPU use too.
	testutil.EventuallyEvery(t, 20*time.Second, 100*time.Millisecond, "an idle entry on one P", func() bool {
		return n.procs.Procs() == 1
	})
	_, metrics := get(t, client, admin+"/metrics")
	if !strings.Contains(metrics, "fenec_entry_procs 1\n") || !strings.Contains(metrics, want) {
		t.Errorf("/metrics on one P of %d lacks fenec_entry_procs 1 or %q:\n%s", before, want, metrics)
	}
	if before > 1 && strings.Contains(metrics, "fenec_entry_procs_changes_total 0\n") {
		t.Errorf("one P from %d, but no change counted:\n%s", before, metrics)
	}
	n.Close()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS %d after Close, want %d again", got, before)
	}
}

// A port another socket holds is refused at Start, naming the flag.
func TestListenPortInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	router := newRouter(t, "eu", nil)
	cfg := testConfig(t, "eu", router.URL)
	cfg.Listen = held.Addr().String()
	log, _ := testLogger(t)
	n, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = n.Start(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "--listen: ") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Start on a held port: %v, want --listen: ... address already in use", err)
	}
}
