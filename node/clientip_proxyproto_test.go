package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// clientRouter starts a router for region that records the address of each request's
// Fenec-Client and how many requests it saw.
func clientRouter(t *testing.T, region string) (url string, clients chan string, seen *atomic.Int64) {
	t.Helper()
	clients = make(chan string, 16)
	seen = new(atomic.Int64)
	r := newRouter(t, region, func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		addr, _, _ := strings.Cut(r.Header.Get("Fenec-Client"), " ")
		clients <- addr
		io.WriteString(w, "hello from "+region)
	})
	return r.URL, clients, seen
}

// proxyClient is an HTTP client whose every connection starts with hdr (nil: no header).
func proxyClient(hdr *proxyproto.Header) *http.Client {
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil || hdr == nil {
				return c, err
			}
			if _, err := hdr.WriteTo(c); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func proxyHeader(version byte, src string) *proxyproto.Header {
	ap := netip.MustParseAddrPort(src)
	dst := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	proto := proxyproto.TCPv4
	if ap.Addr().Is6() {
		proto = proxyproto.TCPv6
		dst = &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}
	}
	return &proxyproto.Header{
		Version:           version,
		Command:           proxyproto.PROXY,
		TransportProtocol: proto,
		SourceAddr:        net.TCPAddrFromAddrPort(ap),
		DestinationAddr:   dst,
	}
}

func proxyProtocolConfig(t *testing.T, routerURL string) Config {
	cfg := testConfig(t, "eu", routerURL)
	cfg.ClientIP = ClientIPProxyProtocol
	cfg.EntryToken = "entry-secret"
	return cfg
}

func TestProxyProtocolClientAddress(t *testing.T) {
	url, clients, _ := clientRouter(t, "eu")
	n, logs := startNode(t, proxyProtocolConfig(t, url))
	base := "http://" + n.ClientAddr().String()
	tests := []struct {
		name    string
		version byte
		src     string
		want    string
	}{
		{"v1 ipv4", 1, "203.0.113.9:40000", "203.0.113.9"},
		{"v1 ipv6", 1, "[2001:db8::7]:40000", "2001:db8::7"},
		{"v2 ipv4", 2, "198.51.100.4:1234", "198.51.100.4"},
		{"v2 ipv6", 2, "[2001:db8::9]:1234", "2001:db8::9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, proxyClient(proxyHeader(tt.version, tt.src)), base+"/t/acme/items/1")
			if resp.StatusCode != 200 || body != "hello from eu" {
				t.Fatalf("answer %d %q", resp.StatusCode, body)
			}
			if got := <-clients; got != tt.want {
				t.Errorf("Fenec-Client address %q, want %q", got, tt.want)
			}
			// The request's log line names the same client.
			waitFor(t, 2*time.Second, "the request's log line", func() bool {
				return strings.Contains(logs.String(), `"client":"`+tt.want+`"`)
			})
		})
	}

	// A LOCAL header (a proxy's health check) is served, as from the TCP peer.
	local := &proxyproto.Header{Version: 2, Command: proxyproto.LOCAL, TransportProtocol: proxyproto.UNSPEC}
	if resp, _ := get(t, proxyClient(local), base+"/t/acme/items/1"); resp.StatusCode != 200 {
		t.Fatalf("LOCAL: status %d", resp.StatusCode)
	}
	if got := <-clients; got != "127.0.0.1" {
		t.Errorf("LOCAL: Fenec-Client address %q, want the TCP peer", got)
	}
}

// refusedConn sends raw on a new connection to addr and returns what the entry wrote back
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
		t.Fatalf("the entry did not close the connection (read %q)", got)
	}
	return string(got)
}

func TestProxyProtocolRequired(t *testing.T) {
	url, _, seen := clientRouter(t, "eu")
	cfg := proxyProtocolConfig(t, url)
	cfg.HeaderTimeout = 300 * time.Millisecond
	n, logs := startNode(t, cfg)
	addr := n.ClientAddr().String()

	request := "GET /t/acme/items/1 HTTP/1.1\r\nHost: x\r\n\r\n"
	if got := refusedConn(t, addr, request); got != "" {
		t.Errorf("without a header the entry answered %q, want the connection closed", got)
	}
	if got := refusedConn(t, addr, "PROXY TCP4 nonsense\r\n"+request); got != "" {
		t.Errorf("with a bad header the entry answered %q, want the connection closed", got)
	}
	start := time.Now()
	if got := refusedConn(t, addr, ""); got != "" { // silent: closed after --header-timeout
		t.Errorf("a silent connection got %q", got)
	}
	if d := time.Since(start); d < cfg.HeaderTimeout/2 {
		t.Errorf("a silent connection was closed after %v, before --header-timeout %v", d, cfg.HeaderTimeout)
	}
	waitFor(t, 2*time.Second, "the refusals counted", func() bool {
		return testutil.ToFloat64(n.pp.noHeader) == 2 && testutil.ToFloat64(n.pp.badHeader) == 1
	})
	// Through the HTTP client too.
	if _, err := proxyClient(nil).Get("http://" + addr + "/t/acme/items/1"); err == nil {
		t.Error("a request without a header got an answer")
	}
	if s := seen.Load(); s != 0 {
		t.Errorf("the router saw %d requests, want none", s)
	}
	if !strings.Contains(logs.String(), "proxy protocol: connection refused") {
		t.Error("no debug line for a refused connection")
	}
	// The entry still serves a connection with a header.
	if resp, _ := get(t, proxyClient(proxyHeader(2, "203.0.113.9:1")), "http://"+addr+"/t/acme/items/1"); resp.StatusCode != 200 {
		t.Errorf("status %d after refusals", resp.StatusCode)
	}
}

func TestProxyProtocolTrustedProxies(t *testing.T) {
	url, clients, seen := clientRouter(t, "eu")
	cfg := proxyProtocolConfig(t, url)
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	n, _ := startNode(t, cfg)
	addr := n.ClientAddr().String()

	if _, err := proxyClient(proxyHeader(1, "203.0.113.9:1")).Get("http://" + addr + "/t/acme/items/1"); err == nil {
		t.Error("a peer outside --trusted-proxies got an answer")
	}
	if s := seen.Load(); s != 0 {
		t.Errorf("the router saw %d requests, want none", s)
	}
	if got := testutil.ToFloat64(n.pp.untrusted); got != 1 {
		t.Errorf("untrusted_peer refusals = %v, want 1", got)
	}

	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	n2, _ := startNode(t, cfg)
	resp, _ := get(t, proxyClient(proxyHeader(1, "203.0.113.9:1")), "http://"+n2.ClientAddr().String()+"/t/acme/items/1")
	if resp.StatusCode != 200 {
		t.Fatalf("a trusted peer: status %d", resp.StatusCode)
	}
	if got := <-clients; got != "203.0.113.9" {
		t.Errorf("Fenec-Client address %q, want the header's source", got)
	}
}

// TestProxyProtocolGeoIP: the address --geoip looks up is the PROXY header's source.
func TestProxyProtocolGeoIP(t *testing.T) {
	eu, us := newRouter(t, "eu", nil), newRouter(t, "us", nil)
	cfg := testConfig(t, "eu", eu.URL, "us", us.URL)
	cfg.ClientIP = ClientIPProxyProtocol
	cfg.GeoIP = writeGeoIP(t)
	cfg.Continent = "EU"
	n, _ := startNode(t, cfg)
	for src, want := range map[string]string{geoNA4 + ":1": "us", "[" + geoNA6 + "]:1": "us", geoEU4 + ":1": "eu"} {
		_, body := get(t, proxyClient(proxyHeader(2, src)), "http://"+n.ClientAddr().String()+"/somewhere")
		if body != "hello from "+want {
			t.Errorf("client %s: answered by %q, want %s", src, body, want)
		}
	}
}

// TestClientAddrReachesRouter: the address --client-ip gives is the one in Fenec-Client and
// in the request's log line (header:NAME from a trusted peer, and the TCP peer).
func TestClientAddrReachesRouter(t *testing.T) {
	url, clients, _ := clientRouter(t, "eu")
	for _, tt := range []struct{ mode, want string }{
		{"header:X-Client-IP", "2001:db8::42"},
		{"peer", "127.0.0.1"},
	} {
		cfg := testConfig(t, "eu", url)
		cfg.EntryToken = "entry-secret"
		cfg.ClientIP = tt.mode
		cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		n, logs := startNode(t, cfg)
		req, _ := http.NewRequest("GET", "http://"+n.ClientAddr().String()+"/t/acme/items/1", nil)
		req.Header.Set("X-Client-IP", "[2001:db8::42]:5555")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := <-clients; got != tt.want {
			t.Errorf("%s: Fenec-Client address %q, want %q", tt.mode, got, tt.want)
		}
		waitFor(t, 2*time.Second, "the request's log line", func() bool {
			return strings.Contains(logs.String(), `"client":"`+tt.want+`"`)
		})
	}
}

// TestProxyProtocolTLS: with --tls-cert the PROXY header comes before the TLS handshake.
func TestProxyProtocolTLS(t *testing.T) {
	url, clients, _ := clientRouter(t, "eu")
	cfg := proxyProtocolConfig(t, url)
	certFile, keyFile := tempFiles(t)
	cert := writeCert(t, certFile, keyFile, "pp")
	cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	n, _ := startNode(t, cfg)

	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client := proxyClient(proxyHeader(2, "[2001:db8::5]:1"))
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
	if resp, body := get(t, client, "https://"+n.ClientAddr().String()+"/t/acme/x"); body != "hello from eu" {
		t.Fatalf("answer %d %q", resp.StatusCode, body)
	}
	if got := <-clients; got != "2001:db8::5" {
		t.Errorf("Fenec-Client address %q, want the header's source", got)
	}
}
