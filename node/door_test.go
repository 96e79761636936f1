package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// doorRows: docs/REFERENCE.md, "At the door", a row a rule, as raw bytes on a socket.
// Every refusal is the JSON error with the status and code of its row, the connection closed
// after it, and no router asked. halfClose: the client stops sending after raw (the rules
// about a body the client did not finish).
var doorRows = []struct {
	name      string
	raw       string
	status    int
	code      string
	reason    string
	halfClose bool
}{
	// 400 bad_request: framing
	{"content-length and transfer-encoding", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "bad_request", "length_and_chunked", false},
	{"content-length not a number", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nContent-Length: +5\r\n\r\nhello", 400, "bad_request", "bad_content_length", false},
	{"content-lengths that differ", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400, "bad_request", "content_lengths", false},
	{"content-lengths that agree", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400, "bad_request", "content_lengths", false},
	{"transfer-encoding other than chunked alone", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400, "bad_request", "bad_transfer_coding", false},
	{"a coding the entry does not take", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, "not_implemented", "unknown_coding", false},
	{"transfer-encoding on HTTP/1.0", "POST /t/acme/items HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello", 400, "bad_request", "transfer_coding_http10", false},
	// 400 bad_request: a malformed chunked body, anywhere in it
	{"chunk size 5_0 (a keyed write)", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\nIdempotency-Key: k1\r\n\r\n5_0\r\n{\"a\":1}\r\n0\r\n\r\n", 400, "bad_request", "bad_chunk", false},
	{"chunk size 0x5", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", 400, "bad_request", "bad_chunk", false},
	{"overflowing chunk size", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\nhello\r\n0\r\n\r\n", 400, "bad_request", "bad_chunk", false},
	{"bad chunk extension", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n5;\r\nhello\r\n0\r\n\r\n", 400, "bad_request", "bad_chunk", false},
	{"bare CR in a chunk line", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n5\rhello\r\n0\r\n\r\n", 400, "bad_request", "bad_chunk", false},
	{"bare LF in a chunk line", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", 400, "bad_request", "bad_chunk", false},
	{"no CRLF after the data", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello0\r\n\r\n", 400, "bad_request", "bad_chunk", false},
	{"a bad chunk after good ones", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n5\r\nworld\r\n+1\r\n!\r\n0\r\n\r\n", 400, "bad_request", "bad_chunk", false},
	{"no last chunk before the client stops", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", 400, "bad_request", "body_cut", true},
	{"a short content-length body", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nContent-Length: 10\r\n\r\nhello", 400, "bad_request", "body_cut", true},
	// 400 bad_request: the head's lines
	{"obs-fold", "GET /t/acme/x HTTP/1.1\r\nHost: e\r\nX-A: a\r\n b\r\n\r\n", 400, "bad_request", "obs_fold", false},
	{"folded transfer-encoding", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n", 400, "bad_request", "obs_fold", false},
	{"whitespace before a colon", "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400, "bad_request", "space_before_colon", false},
	{"an invalid header name", "GET /t/acme/x HTTP/1.1\r\nHost: e\r\nX(A): b\r\n\r\n", 400, "bad_request", "bad_field_name", false},
	{"missing Host", "GET /t/acme/x HTTP/1.1\r\n\r\n", 400, "bad_request", "no_host", false},
	{"empty Host", "GET /t/acme/x HTTP/1.1\r\nHost:\r\n\r\n", 400, "bad_request", "empty_host", false},
	{"repeated Host", "GET /t/acme/x HTTP/1.1\r\nHost: e\r\nHost: e\r\n\r\n", 400, "bad_request", "repeated_host", false},
	{"* for GET", "GET * HTTP/1.1\r\nHost: e\r\n\r\n", 400, "bad_request", "bad_target", false},
	{"a lowercase method", "get /t/acme/x HTTP/1.1\r\nHost: e\r\n\r\n", 400, "bad_request", "bad_method", false},
	{"a method that is not a token", "G{T /t/acme/x HTTP/1.1\r\nHost: e\r\n\r\n", 400, "bad_request", "bad_method", false},
	// 405
	{"CONNECT", "CONNECT e:443 HTTP/1.1\r\nHost: e:443\r\n\r\n", 405, "method_not_allowed", "method_not_allowed", false},
	{"TRACE", "TRACE /t/acme/x HTTP/1.1\r\nHost: e\r\n\r\n", 405, "method_not_allowed", "method_not_allowed", false},
	// 414, 431
	{"request line over 8 KiB", "GET /t/acme/" + strings.Repeat("a", 8<<10) + " HTTP/1.1\r\nHost: e\r\n\r\n", 414, "uri_too_long", "request_line_too_long", false},
	{"header line over 16 KiB", "GET /t/acme/x HTTP/1.1\r\nHost: e\r\nX-A: " + strings.Repeat("a", 16<<10) + "\r\n\r\n", 431, "headers_too_large", "field_line_too_long", false},
	{"head over 64 KiB", "GET /t/acme/x HTTP/1.1\r\nHost: e\r\n" + strings.Repeat("X-A: "+strings.Repeat("a", 8000)+"\r\n", 9) + "\r\n", 431, "headers_too_large", "head_too_large", false},
	{"more than 100 header fields", "GET /t/acme/x HTTP/1.1\r\nHost: e\r\n" + strings.Repeat("X-A: b\r\n", 100) + "\r\n", 431, "headers_too_large", "too_many_fields", false},
}

// doorListener is one way a client reaches the entry: dial returns a connection ready for
// the request's bytes (its TLS handshake made, its PROXY header sent).
type doorListener struct {
	name   string
	config func(c *Config)
	dial   func(t *testing.T, addr string) net.Conn
}

func doorListeners(t *testing.T) []doorListener {
	certFile, keyFile := testutil.CertFiles(t)
	cert := testutil.WriteCert(t, certFile, keyFile, "door")
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	plain := func(t *testing.T, addr string) net.Conn {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	withTLS := func(t *testing.T, c net.Conn) net.Conn {
		tc := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		return tc
	}
	withProxy := func(t *testing.T, c net.Conn) net.Conn {
		if _, err := io.WriteString(c, "PROXY TCP4 192.0.2.7 192.0.2.1 4000 80\r\n"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	return []doorListener{
		{"lean", func(c *Config) {}, plain},
		{"std", func(c *Config) { c.HTTP1Server = "std" }, plain},
		{"tls", func(c *Config) { c.TLSCert, c.TLSKey = certFile, keyFile },
			func(t *testing.T, addr string) net.Conn { return withTLS(t, plain(t, addr)) }},
		{"std tls", func(c *Config) {
			c.HTTP1Server = "std"
			c.TLSCert, c.TLSKey = certFile, keyFile
		}, func(t *testing.T, addr string) net.Conn { return withTLS(t, plain(t, addr)) }},
		{"proxy-protocol", func(c *Config) { c.ClientIP = ClientIPProxyProtocol },
			func(t *testing.T, addr string) net.Conn { return withProxy(t, plain(t, addr)) }},
		{"proxy-protocol tls", func(c *Config) {
			c.ClientIP = ClientIPProxyProtocol
			c.TLSCert, c.TLSKey = certFile, keyFile
		}, func(t *testing.T, addr string) net.Conn { return withTLS(t, withProxy(t, plain(t, addr))) }},
	}
}

// doorAnswer is what a client read back: the answer, its JSON error, and whether the
// connection then ended.
type doorAnswer struct {
	status int
	code   string
	closed bool
	err    error
}

// sendRaw writes raw on c (and stops sending, with halfClose), reads one answer and then
// whether the connection ends within 3 s.
func sendRaw(c net.Conn, raw string, halfClose bool) doorAnswer {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	go func() {
		io.WriteString(c, raw) // may fail once the entry has refused and closed: its answer counts
		if halfClose {
			if cw, ok := c.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
		}
	}()
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return doorAnswer{err: err}
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct{ Error string }
	json.Unmarshal(body, &e)
	a := doorAnswer{status: resp.StatusCode, code: e.Error}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = br.ReadByte()
	var ne net.Error
	a.closed = err != nil && !(errors.As(err, &ne) && ne.Timeout())
	return a
}

func TestDoor(t *testing.T) {
	for _, l := range doorListeners(t) {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			var asked atomic.Int64
			var mu sync.Mutex
			var seen []http.Header
			router := newRouter(t, "eu", func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				io.Copy(io.Discard, r.Body)
				mu.Lock()
				seen = append(seen, r.Header.Clone())
				mu.Unlock()
				w.Write([]byte("ok"))
			})
			cfg := testConfig(t, "eu", router.URL)
			l.config(&cfg)
			n, _ := startNode(t, cfg)
			addr := n.ClientAddr().String()
			for _, row := range doorRows {
				before := asked.Load()
				c := l.dial(t, addr)
				a := sendRaw(c, row.raw, row.halfClose)
				c.Close()
				if a.err != nil || a.status != row.status || a.code != row.code || !a.closed {
					t.Errorf("%s: status %d, code %q, closed %v (%v); want %d %q, closed",
						row.name, a.status, a.code, a.closed, a.err, row.status, row.code)
				}
				if got := asked.Load(); got != before {
					t.Errorf("%s: a router was asked", row.name)
				}
			}
			// Each refusal counted by reason.
			_, metrics := get(t, http.DefaultClient, "http://"+n.AdminAddr().String()+"/metrics")
			want := map[string]float64{}
			for _, row := range doorRows {
				want[row.reason]++
			}
			for reason, count := range want {
				if got := scrapeLabeled(metrics, "fenec_entry_refused_total", "reason", reason); got != count {
					t.Errorf("fenec_entry_refused_total{reason=%q} = %v, want %v", reason, got, count)
				}
			}

			// The same connection serves a good request, and then the refusal of a bad one
			// after it; a header whose name holds "_" is dropped before the router.
			mu.Lock()
			seen = nil
			mu.Unlock()
			before := asked.Load()
			c := l.dial(t, addr)
			defer c.Close()
			good := sendRaw(c, "GET /t/acme/x HTTP/1.1\r\nHost: e\r\nFenec_Client: 203.0.113.9 1 forged\r\nX-Fine: 1\r\n\r\n", false)
			if good.status != 200 || good.closed {
				t.Fatalf("a good request: %+v, want 200 on a connection kept open", good)
			}
			bad := sendRaw(c, "GET /t/acme/x HTTP/1.1\r\nHost: e\r\nHost: f\r\n\r\n", false)
			if bad.status != 400 || bad.code != "bad_request" || !bad.closed {
				t.Errorf("a refusal after a good request: %+v", bad)
			}
			if asked.Load() != before+1 {
				t.Errorf("the router was asked %d times, want once", asked.Load()-before)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 1 || seen[0].Get("X-Fine") != "1" {
				t.Fatalf("the router saw %v", seen)
			}
			for k := range seen[0] {
				if strings.Contains(k, "_") {
					t.Errorf("the router saw %q", k)
				}
			}
			_, metrics = get(t, http.DefaultClient, "http://"+n.AdminAddr().String()+"/metrics")
			if got := scrapeSum(metrics, "fenec_entry_underscore_headers_dropped_total"); got != 1 {
				t.Errorf("fenec_entry_underscore_headers_dropped_total = %v, want 1", got)
			}
		})
	}
}

// A streamed body (longer than --body-buffer) that breaks off: the router's request is cut
// off (it never reads a whole body), and the client is answered 400, not a success.
func TestDoorStreamedBodyCut(t *testing.T) {
	got := make(chan error, 1)
	var started atomic.Bool
	router := newRouter(t, "eu", func(w http.ResponseWriter, r *http.Request) {
		started.Store(true)
		_, err := io.ReadAll(r.Body)
		got <- err
		w.Write([]byte("ok"))
	})
	cfg := testConfig(t, "eu", router.URL)
	cfg.BodyBuffer = 1 << 10
	n, _ := startNode(t, cfg)
	c, err := net.DialTimeout("tcp", n.ClientAddr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a := sendRaw(c, "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("x", 50000), true)
	if a.status != 400 || a.code != "bad_request" {
		t.Errorf("answer %+v, want 400 bad_request", a)
	}
	// The router connection may be closed before the head left the entry's buffer (the
	// router never sees the request); a request it did see must end without a whole body.
	select {
	case err := <-got:
		if err == nil {
			t.Error("the router read a whole body")
		}
	case <-time.After(5 * time.Second):
		if started.Load() {
			t.Fatal("the router's request was not cut off")
		}
	}
}

// h2Way is one way a client speaks HTTP/2 to the entry: over TLS (ALPN h2) or h2c with prior
// knowledge; client makes a client for it.
type h2Way struct {
	name   string
	config func(*Config)
	scheme string
	client func() *http.Client
}

func h2Ways(t *testing.T) []h2Way {
	certFile, keyFile := testutil.CertFiles(t)
	cert := testutil.WriteCert(t, certFile, keyFile, "door")
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client := func(set func(*http.Protocols)) func() *http.Client {
		return func() *http.Client {
			protos := new(http.Protocols)
			set(protos)
			return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				Protocols: protos, TLSClientConfig: &tls.Config{RootCAs: pool}}}
		}
	}
	return []h2Way{
		{"h2", func(c *Config) { c.TLSCert, c.TLSKey = certFile, keyFile }, "https", client(func(p *http.Protocols) { p.SetHTTP2(true) })},
		{"h2c", func(c *Config) {}, "http", client(func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) })},
	}
}

// HTTP/2 frames its own requests: over TLS (ALPN h2, which the door hands to net/http as the
// TLS connection it is) and over h2c with prior knowledge, a request the door's rules refuse
// (TRACE here) is refused the same, and a good one is served as HTTP/2.
func TestDoorHTTP2(t *testing.T) {
	var asked atomic.Int64
	router := newRouter(t, "eu", func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Write([]byte("ok"))
	})
	for _, tc := range h2Ways(t) {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "eu", router.URL)
			tc.config(&cfg)
			n, _ := startNode(t, cfg)
			client := tc.client()
			defer client.CloseIdleConnections()
			base := tc.scheme + "://" + n.ClientAddr().String()
			resp, body := get(t, client, base+"/t/acme/x")
			if resp.ProtoMajor != 2 || body != "ok" {
				t.Fatalf("GET: %s %q, want HTTP/2 and the router's answer", resp.Proto, body)
			}
			before := asked.Load()
			req, _ := http.NewRequest("TRACE", base+"/t/acme/x", nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var e struct{ Error string }
			json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			if resp.StatusCode != 405 || e.Error != "method_not_allowed" || resp.ProtoMajor != 2 {
				t.Errorf("TRACE: %s %d %q, want HTTP/2 405 method_not_allowed", resp.Proto, resp.StatusCode, e.Error)
			}
			if asked.Load() != before {
				t.Error("a router was asked for TRACE")
			}
		})
	}
}

// Through a drain, on every way a client reaches the entry, a connection is answered before
// it is closed: a kept-alive one idle when the drain began, whose client sends its next
// request in the drain, and one made in the drain (over TLS too: h1 used to close it after
// its handshake). Both answers carry Connection: close.
func TestDrainAnswersEveryConnection(t *testing.T) {
	for _, l := range doorListeners(t) {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			router := newRouter(t, "eu", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
			cfg := testConfig(t, "eu", router.URL)
			cfg.Drain = 2 * time.Second
			l.config(&cfg)
			n, _ := startNode(t, cfg)
			n.grace = time.Second
			addr := n.ClientAddr().String()
			request := func(c net.Conn, br *bufio.Reader, what string, wantClose bool) {
				t.Helper()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.WriteString(c, "GET /t/acme/items/1 HTTP/1.1\r\nHost: e\r\n\r\n"); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("%s: no answer: %v", what, err)
				}
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 || string(body) != "ok" || resp.Close != wantClose {
					t.Errorf("%s: %d %q, Connection: close %v; want 200 ok, %v", what, resp.StatusCode, body, resp.Close, wantClose)
				}
			}
			kept := l.dial(t, addr)
			keptBr := bufio.NewReader(kept)
			request(kept, keptBr, "before the drain", false)

			drained := make(chan error, 1)
			go func() { drained <- n.Drain(context.Background()) }()
			testutil.Eventually(t, 2*time.Second, "draining", n.draining.Load)
			time.Sleep(50 * time.Millisecond) // the drain's first steps are done
			request(kept, keptBr, "the kept-alive connection's next request", true)
			fresh := l.dial(t, addr)
			request(fresh, bufio.NewReader(fresh), "a connection made in the drain", true)
			select {
			case err := <-drained:
				if err != nil {
					t.Errorf("Drain = %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Drain did not return")
			}
		})
	}
}

// At --max-conns with every connection kept alive and idle, a new client is served at once:
// the connection idle longest is closed to make room, counted, and the connections gauge never
// passes the bound.
func TestMaxConnsServesANewClient(t *testing.T) {
	router := newRouter(t, "eu", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	cfg := testConfig(t, "eu", router.URL)
	cfg.MaxConns = 4
	n, _ := startNode(t, cfg)
	addr := n.ClientAddr().String()
	get2 := get
	get := func(c net.Conn, br *bufio.Reader) error {
		c.SetDeadline(time.Now().Add(time.Second)) // served within a second, at the bound too
		if _, err := io.WriteString(c, "GET /t/acme/items/1 HTTP/1.1\r\nHost: e\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "ok" {
			return fmt.Errorf("%d %q", resp.StatusCode, body)
		}
		return nil
	}
	for i := range 4 + 3 {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := get(c, bufio.NewReader(c)); err != nil {
			t.Fatalf("client %d (bound 4): %v", i, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, metrics := get2(t, http.DefaultClient, "http://"+n.AdminAddr().String()+"/metrics")
	if v := scrapeSum(metrics, "fenec_entry_connections_shed_total"); v < 3 {
		t.Errorf("fenec_entry_connections_shed_total %v, want at least 3", v)
	}
	if v := scrapeSum(metrics, "fenec_entry_connections"); v < 1 || v > 4 {
		t.Errorf("fenec_entry_connections %v, want 1 to 4", v)
	}
	if v := scrapeSum(metrics, "fenec_entry_connections_limit"); v != 4 {
		t.Errorf("fenec_entry_connections_limit %v, want 4", v)
	}
}

// h2 and h2c through a drain: the request a client sends in the drain on the connection it
// held from before is answered, over HTTP/2, on that connection (the drain's Connection: close
// becomes net/http's GOAWAY after it), and a connection made in the drain is served too.
func TestDrainAnswersH2(t *testing.T) {
	router := newRouter(t, "eu", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	for _, tc := range h2Ways(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, "eu", router.URL)
			cfg.Drain = 2 * time.Second
			tc.config(&cfg)
			n, _ := startNode(t, cfg)
			n.grace = time.Second
			newClient := tc.client
			url := tc.scheme + "://" + n.ClientAddr().String() + "/t/acme/items/1"
			send := func(c *http.Client, what string, wantReused bool) {
				t.Helper()
				var reused bool
				req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(),
					&httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused }}), "GET", url, nil)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "ok" || resp.ProtoMajor != 2 || reused != wantReused {
					t.Errorf("%s: %s %d %q on a reused connection %v; want HTTP/2 200 ok, reused %v",
						what, resp.Proto, resp.StatusCode, body, reused, wantReused)
				}
			}
			held := newClient()
			defer held.CloseIdleConnections()
			send(held, "before the drain", false)
			drained := make(chan error, 1)
			go func() { drained <- n.Drain(context.Background()) }()
			testutil.Eventually(t, 2*time.Second, "draining", n.draining.Load)
			time.Sleep(50 * time.Millisecond)
			send(held, "on the held connection in the drain", true)
			fresh := newClient()
			defer fresh.CloseIdleConnections()
			send(fresh, "on a connection made in the drain", false)
			select {
			case err := <-drained:
				if err != nil {
					t.Errorf("Drain = %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Drain did not return")
			}
		})
	}
}
