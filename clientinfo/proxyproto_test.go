package clientinfo

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/clientinfo/clientinfotest"
)

// logLines is a log writer that sends each line on itself (dropping it when full), so that a
// test reads the lines of the server's goroutines without a race.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}

// proxyServer serves HTTP on a loopback listener wrapped by p, with headerTimeout as its
// ReadHeaderTimeout (as node serves --listen), and sends each request's client address
// (AddrFunc of ModeProxyProtocol) on the channel it returns.
func proxyServer(t *testing.T, p *ProxyProtocol, headerTimeout time.Duration) (addr string, clients chan string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	clients = make(chan string, 16)
	clientAddr := AddrFunc(ModeProxyProtocol, nil)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			clients <- clientAddr(r)
			io.WriteString(w, "ok")
		}),
		ReadHeaderTimeout: headerTimeout,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(p.Wrap(l))
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return l.Addr().String(), clients
}

// refusedConn sends raw on a new connection to addr and returns what the server wrote back
// before closing it.
func refusedConn(t *testing.T, addr, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if raw != "" {
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
	}
	got, err := io.ReadAll(bufio.NewReader(c))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server did not close the connection (read %q)", got)
	}
	return string(got)
}

// get asks url through c and returns the status, or fails the test.
func get(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// A refused connection is counted and logged before it is closed (in the connection's own
// goroutine), so the tests read counters and logs as soon as the client sees the close.
func TestProxyProtocolRequired(t *testing.T) {
	const headerTimeout = 300 * time.Millisecond
	logs := make(logLines, 16)
	p := NewProxyProtocol(nil, headerTimeout, zerolog.New(logs).Level(zerolog.DebugLevel), nil)
	addr, clients := proxyServer(t, p, headerTimeout)

	request := "GET /t/acme/items/1 HTTP/1.1\r\nHost: x\r\n\r\n"
	if got := refusedConn(t, addr, request); got != "" {
		t.Errorf("without a header the server answered %q, want the connection closed", got)
	}
	if got := refusedConn(t, addr, "PROXY TCP4 nonsense\r\n"+request); got != "" {
		t.Errorf("with a bad header the server answered %q, want the connection closed", got)
	}
	start := time.Now()
	if got := refusedConn(t, addr, ""); got != "" { // silent: closed after the header timeout
		t.Errorf("a silent connection got %q", got)
	}
	if d := time.Since(start); d < headerTimeout/2 {
		t.Errorf("a silent connection was closed after %v, before the header timeout %v", d, headerTimeout)
	}
	if no, bad := testutil.ToFloat64(p.noHeader), testutil.ToFloat64(p.badHeader); no != 2 || bad != 1 {
		t.Errorf("refusals counted: no_header %v, bad_header %v; want 2 and 1", no, bad)
	}
	// Through the HTTP client too.
	if _, err := clientinfotest.ProxyClient(nil).Get("http://" + addr + "/t/acme/items/1"); err == nil {
		t.Error("a request without a header got an answer")
	}
	if n := len(clients); n != 0 {
		t.Errorf("the handler saw %d requests, want none", n)
	}
	select {
	case line := <-logs:
		if !strings.Contains(line, "proxy protocol: connection refused") {
			t.Errorf("log line %q, want a refused connection", line)
		}
	default:
		t.Error("no debug line for a refused connection")
	}
	// The server still serves a connection with a header.
	if status := get(t, clientinfotest.ProxyClient(clientinfotest.ProxyHeader(2, "203.0.113.9:1")), "http://"+addr+"/t/acme/items/1"); status != 200 {
		t.Errorf("status %d after refusals", status)
	}
	if got := <-clients; got != "203.0.113.9" {
		t.Errorf("client address %q, want the header's source", got)
	}
}

func TestProxyProtocolTrustedProxies(t *testing.T) {
	hdr := clientinfotest.ProxyHeader(1, "203.0.113.9:1")

	p := NewProxyProtocol([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, time.Second, zerolog.Nop(), nil)
	addr, clients := proxyServer(t, p, time.Second)
	if _, err := clientinfotest.ProxyClient(hdr).Get("http://" + addr + "/t/acme/items/1"); err == nil {
		t.Error("a peer outside the trusted proxies got an answer")
	}
	if n := len(clients); n != 0 {
		t.Errorf("the handler saw %d requests, want none", n)
	}
	if got := testutil.ToFloat64(p.untrusted); got != 1 {
		t.Errorf("untrusted_peer refusals = %v, want 1", got)
	}

	p2 := NewProxyProtocol([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, time.Second, zerolog.Nop(), nil)
	addr2, clients2 := proxyServer(t, p2, time.Second)
	if status := get(t, clientinfotest.ProxyClient(hdr), "http://"+addr2+"/t/acme/items/1"); status != 200 {
		t.Fatalf("a trusted peer: status %d", status)
	}
	if got := <-clients2; got != "203.0.113.9" {
		t.Errorf("client address %q, want the header's source", got)
	}
}
