package clientinfo

import (
	"net/http/httptest"
	"net/netip"
	"slices"
	"testing"
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
			f := AddrFunc(tt.mode, tt.trusted)
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
			got := SourceHeaders(tt.clientIP, tt.country)
			if !slices.Equal(got, tt.want) {
				t.Errorf("SourceHeaders = %q, want %q", got, tt.want)
			}
		})
	}
}
