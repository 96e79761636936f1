package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/clientinfo/clientinfotest"
	"github.com/fenec/fenec-entry/internal/testutil"
)

// These tests run an entry and check that node wires package clientinfo in: the listener
// wrapped for --client-ip proxy-protocol (under TLS too), the address in Fenec-Client and the
// log line, the continent choosing the first region, the source headers kept from the router,
// and --geoip's errors naming the flag. clientinfo's own tests cover each source's rules.

// clientRouter starts a router for region that records the address of each request's
// Fenec-Client.
func clientRouter(t *testing.T, region string) (url string, clients chan string) {
	t.Helper()
	clients = make(chan string, 16)
	r := newRouter(t, region, func(w http.ResponseWriter, r *http.Request) {
		addr, _, _ := strings.Cut(r.Header.Get("Fenec-Client"), " ")
		clients <- addr
		io.WriteString(w, "hello from "+region)
	})
	return r.URL, clients
}

func proxyProtocolConfig(t *testing.T, routerURL string) Config {
	cfg := testConfig(t, "eu", routerURL)
	cfg.ClientIP = ClientIPProxyProtocol
	cfg.EntryToken = "entry-secret"
	return cfg
}

func TestProxyProtocolClientAddress(t *testing.T) {
	url, clients := clientRouter(t, "eu")
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
			resp, body := get(t, clientinfotest.ProxyClient(clientinfotest.ProxyHeader(tt.version, tt.src)), base+"/t/acme/items/1")
			if resp.StatusCode != 200 || body != "hello from eu" {
				t.Fatalf("answer %d %q", resp.StatusCode, body)
			}
			if got := <-clients; got != tt.want {
				t.Errorf("Fenec-Client address %q, want %q", got, tt.want)
			}
			// The request's log line names the same client.
			testutil.Eventually(t, 2*time.Second, "the request's log line", func() bool {
				return strings.Contains(logs.String(), `"client":"`+tt.want+`"`)
			})
		})
	}

	// A LOCAL header (a proxy's health check) is served, as from the TCP peer.
	local := &proxyproto.Header{Version: 2, Command: proxyproto.LOCAL, TransportProtocol: proxyproto.UNSPEC}
	if resp, _ := get(t, clientinfotest.ProxyClient(local), base+"/t/acme/items/1"); resp.StatusCode != 200 {
		t.Fatalf("LOCAL: status %d", resp.StatusCode)
	}
	if got := <-clients; got != "127.0.0.1" {
		t.Errorf("LOCAL: Fenec-Client address %q, want the TCP peer", got)
	}
}

// TestProxyProtocolGeoIP: the address --geoip looks up is the PROXY header's source.
func TestProxyProtocolGeoIP(t *testing.T) {
	eu, us := newRouter(t, "eu", nil), newRouter(t, "us", nil)
	cfg := testConfig(t, "eu", eu.URL, "us", us.URL)
	cfg.ClientIP = ClientIPProxyProtocol
	cfg.GeoIP = clientinfotest.WriteGeoIP(t)
	cfg.Continent = "EU"
	n, _ := startNode(t, cfg)
	for src, want := range map[string]string{clientinfotest.GeoNA4 + ":1": "us", "[" + clientinfotest.GeoNA6 + "]:1": "us", clientinfotest.GeoEU4 + ":1": "eu"} {
		_, body := get(t, clientinfotest.ProxyClient(clientinfotest.ProxyHeader(2, src)), "http://"+n.ClientAddr().String()+"/somewhere")
		if body != "hello from "+want {
			t.Errorf("client %s: answered by %q, want %s", src, body, want)
		}
	}
}

// TestClientAddrReachesRouter: the address --client-ip gives is the one in Fenec-Client and
// in the request's log line (header:NAME from a trusted peer, and the TCP peer).
func TestClientAddrReachesRouter(t *testing.T) {
	url, clients := clientRouter(t, "eu")
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
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := <-clients; got != tt.want {
			t.Errorf("%s: Fenec-Client address %q, want %q", tt.mode, got, tt.want)
		}
		testutil.Eventually(t, 2*time.Second, "the request's log line", func() bool {
			return strings.Contains(logs.String(), `"client":"`+tt.want+`"`)
		})
	}
}

// TestProxyProtocolTLS: with --tls-cert the PROXY header comes before the TLS handshake.
func TestProxyProtocolTLS(t *testing.T) {
	url, clients := clientRouter(t, "eu")
	cfg := proxyProtocolConfig(t, url)
	certFile, keyFile := testutil.CertFiles(t)
	cert := testutil.WriteCert(t, certFile, keyFile, "pp")
	cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	n, _ := startNode(t, cfg)

	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client := clientinfotest.ProxyClient(clientinfotest.ProxyHeader(2, "[2001:db8::5]:1"))
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
	if resp, body := get(t, client, "https://"+n.ClientAddr().String()+"/t/acme/x"); body != "hello from eu" {
		t.Fatalf("answer %d %q", resp.StatusCode, body)
	}
	if got := <-clients; got != "2001:db8::5" {
		t.Errorf("Fenec-Client address %q, want the header's source", got)
	}
}

// Once, --client-ip header:NAME and --country-header reached the router. Through a
// running node: the router sees neither, learns the client from Fenec-Client, and both
// headers still did their work (the address in Fenec-Client, the country's region first).
func TestClientSourceHeadersNotPassedOn(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	var regions []string
	record := func(region string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got, regions = append(got, r.Header.Clone()), append(regions, region)
			mu.Unlock()
			w.Write([]byte("ok"))
		}
	}
	eu, us := newRouter(t, "eu", record("eu")), newRouter(t, "us", record("us"))
	cfg := testConfig(t, "us", us.URL, "eu", eu.URL)
	cfg.Continent = "NA" // this PoP: us
	cfg.ClientIP = "header:x-client-ip"
	cfg.CountryHeader = "X-Country"
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	cfg.EntryToken = "tok-strip"
	n, _ := startNode(t, cfg)

	req, _ := http.NewRequest("GET", "http://"+n.ClientAddr().String()+"/t/acme/items/1", nil)
	req.Header.Set("X-Client-IP", "203.0.113.9")
	req.Header.Set("X-Country", "FR")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 || resp.Header.Get("Fenec-Home") != "" {
		t.Fatalf("answer %d %v %q", resp.StatusCode, resp.Header, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || regions[0] != "eu" {
		t.Fatalf("routers of %q got the request, want eu's alone (X-Country: FR)", regions)
	}
	h := got[0]
	for _, k := range []string{"X-Client-Ip", "X-Country"} {
		if v := h.Values(k); len(v) != 0 {
			t.Errorf("%s reached the router: %q", k, v)
		}
	}
	if v := h.Get("Fenec-Client"); !strings.HasPrefix(v, "203.0.113.9 ") {
		t.Errorf("Fenec-Client = %q, want the address from X-Client-IP", v)
	}
	if v := h.Get("Fenec-Home"); v != "1" {
		t.Errorf("Fenec-Home = %q", v)
	}
	if st := n.Status(); st.Homes.Held != 1 {
		t.Errorf("homes held = %d, want acme", st.Homes.Held)
	}
}

func TestGeoIPConfigError(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.mmdb")
	os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 100)), 0o600)
	empty := filepath.Join(dir, "empty.mmdb")
	os.WriteFile(empty, nil, 0o600)
	for _, path := range []string{filepath.Join(dir, "missing.mmdb"), garbage, empty, dir} {
		cfg := testConfig(t, "eu", "http://127.0.0.1:1")
		cfg.GeoIP = path
		_, err := New(cfg, zerolog.Nop())
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Flag != "geoip" || !strings.Contains(err.Error(), path) {
			t.Errorf("New with --geoip %s = %v, want a *ConfigError naming --geoip and the file", path, err)
		}
	}
}

// TestContinentRegionOrder runs an entry with three regions and checks which region a tenant
// heard nowhere is sent to first, for clients placed by --geoip, by the country header and by
// --continent. Paths outside /t/ teach no home, so every request is one heard nowhere.
func TestContinentRegionOrder(t *testing.T) {
	db := clientinfotest.WriteGeoIP(t)
	eu, us, ap := newRouter(t, "eu", nil), newRouter(t, "us", nil), newRouter(t, "ap", nil)
	cfg := testConfig(t, "eu", eu.URL, "us", us.URL, "ap", ap.URL)
	cfg.Continent = "AS" // this PoP: ap
	cfg.GeoIP = db
	cfg.CountryHeader = "X-Country"
	cfg.ClientIP = "header:X-Client-IP"
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	n, _ := startNode(t, cfg)

	// The same, with the test client an untrusted peer: neither header is believed.
	untrusted := cfg
	untrusted.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	nu, _ := startNode(t, untrusted)

	client := &http.Client{Timeout: 5 * time.Second}
	tests := []struct {
		name     string
		node     *Node
		clientIP string
		country  string
		want     string
	}{
		{"geoip v4 EU", n, clientinfotest.GeoEU4, "", "eu"},
		{"geoip v4 NA", n, clientinfotest.GeoNA4, "", "us"},
		{"geoip v6 EU", n, clientinfotest.GeoEU6, "", "eu"},
		{"geoip v6 NA", n, clientinfotest.GeoNA6, "JP", "us"},
		{"unknown address, country header", n, clientinfotest.GeoNo4, "FR", "eu"},
		{"unknown v6 address, country header", n, clientinfotest.GeoNo6, "CA", "us"},
		{"unknown address, no header: the PoP's continent", n, clientinfotest.GeoNo4, "", "ap"},
		{"untrusted peer: headers ignored", nu, clientinfotest.GeoEU4, "DE", "ap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://"+tt.node.ClientAddr().String()+"/somewhere", nil)
			req.Header.Set("X-Client-IP", tt.clientIP)
			if tt.country != "" {
				req.Header.Set("X-Country", tt.country)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if body != "hello from "+tt.want {
				t.Errorf("answered by %q, want hello from %s", body, tt.want)
			}
		})
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
