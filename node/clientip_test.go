package node

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		name    string
		mode    string
		trusted []netip.Prefix
		peer    string
		headers map[string][]string
		want    string
	}{
		{"peer ignores headers", "peer", nil, "192.0.2.1:5000",
			map[string][]string{"X-Forwarded-For": {"203.0.113.9"}}, ""},
		{"header from trusted peer", "header:X-Forwarded-For", trusted, "10.0.0.5:5000",
			map[string][]string{"X-Forwarded-For": {"203.0.113.9"}}, "203.0.113.9"},
		{"header from untrusted peer", "header:X-Forwarded-For", trusted, "192.0.2.1:5000",
			map[string][]string{"X-Forwarded-For": {"203.0.113.9"}}, "192.0.2.1"},
		{"right-most untrusted wins", "header:X-Forwarded-For", trusted, "10.0.0.5:5000",
			map[string][]string{"X-Forwarded-For": {"6.6.6.6, 203.0.113.9, 10.0.0.7"}}, "203.0.113.9"},
		{"across header lines", "header:X-Forwarded-For", trusted, "10.0.0.5:5000",
			map[string][]string{"X-Forwarded-For": {"6.6.6.6", "203.0.113.9", "10.1.1.1"}}, "203.0.113.9"},
		{"all trusted gives left-most", "header:X-Forwarded-For", trusted, "10.0.0.5:5000",
			map[string][]string{"X-Forwarded-For": {"10.0.0.9, 10.0.0.7"}}, "10.0.0.9"},
		{"garbage gives peer", "header:X-Forwarded-For", trusted, "10.0.0.5:5000",
			map[string][]string{"X-Forwarded-For": {"203.0.113.9, nonsense"}}, "10.0.0.5"},
		{"absent gives peer", "header:X-Real-Ip", trusted, "10.0.0.5:5000", nil, "10.0.0.5"},
		{"ipv6 without brackets", "header:X-Real-IP", trusted, "[fd00::1]:5000",
			map[string][]string{"X-Real-Ip": {"[2001:db8::7]:443"}}, "2001:db8::7"},
		{"mapped ipv4 unmapped", "header:X-Real-IP", trusted, "[::ffff:10.0.0.5]:5000",
			map[string][]string{"X-Real-Ip": {"::ffff:203.0.113.9"}}, "203.0.113.9"},
		{"fly from anyone without proxies", "fly", nil, "192.0.2.1:5000",
			map[string][]string{"Fly-Client-Ip": {"203.0.113.9"}}, "203.0.113.9"},
		{"fly only from trusted with proxies", "fly", trusted, "192.0.2.1:5000",
			map[string][]string{"Fly-Client-Ip": {"203.0.113.9"}}, "192.0.2.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{ClientIP: tt.mode, TrustedProxies: tt.trusted}
			f := clientAddrFunc(c)
			if tt.want == "" {
				if f != nil {
					t.Fatal("want the proxy's default (nil)")
				}
				return
			}
			r := httptest.NewRequest("GET", "/t/acme/x", nil)
			r.RemoteAddr = tt.peer
			for k, vs := range tt.headers {
				r.Header[k] = vs
			}
			if got := f(r); got != tt.want {
				t.Errorf("client address = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestClientSourceHeaders(t *testing.T) {
	tests := []struct {
		name     string
		clientIP string
		country  string
		want     []string
	}{
		{"peer", "peer", "", nil},
		{"fly: Fly-* is dropped anyway", "fly", "", nil},
		{"proxy-protocol", "proxy-protocol", "", nil},
		{"address header", "header:X-Client-IP", "", []string{"X-Client-IP"}},
		{"country header", "peer", "CF-IPCountry", []string{"CF-IPCountry"}},
		{"both", "header:X-Real-IP", "X-Country", []string{"X-Real-IP", "X-Country"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := clientSourceHeaders(Config{ClientIP: tt.clientIP, CountryHeader: tt.country})
			if !slices.Equal(got, tt.want) {
				t.Errorf("clientSourceHeaders = %q, want %q", got, tt.want)
			}
		})
	}
}

// Issue 8 item 8: --client-ip header:NAME and --country-header reached the router. Through a
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
