// Package clientinfotest has what the tests of clientinfo and node share: a small GeoIP
// database (WriteGeoIP) and HTTP clients that open every connection with a PROXY protocol
// header (ProxyClient, ProxyHeader).
package clientinfotest

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/pires/go-proxyproto"
)

// Addresses of the database WriteGeoIP writes.
const (
	GeoEU4 = "81.2.69.7"            // in 81.2.69.0/24, EU (GB)
	GeoNA4 = "8.8.8.8"              // in 8.8.8.0/24, NA (US)
	GeoEU6 = "2a02:2770::1"         // in 2a02:2770::/32, EU (DE)
	GeoNA6 = "2001:4860:4860::8888" // in 2001:4860::/32, NA (US)
	GeoNo4 = "198.51.100.1"         // in no network
	GeoNo6 = "2001:db8::1"          // in no network
)

// WriteGeoIP writes a small GeoIP2-Country-like database to a file in t's temporary
// directory and returns its path: an IPv4 and an IPv6 network on each of two continents,
// records shaped like MaxMind's (names and country beside the continent code), and two
// networks whose records give no continent, 203.0.113.0/24 (none at all) and 192.0.2.0/24
// (XX, not a continent code).
func WriteGeoIP(t testing.TB) string {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType:            "Fenec-Test-Country",
		RecordSize:              24,
		IncludeReservedNetworks: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	record := func(continent, name, country string) mmdbtype.Map {
		return mmdbtype.Map{
			"continent": mmdbtype.Map{
				"code":       mmdbtype.String(continent),
				"geoname_id": mmdbtype.Uint32(6255148),
				"names":      mmdbtype.Map{"en": mmdbtype.String(name), "de": mmdbtype.String(name)},
			},
			"country": mmdbtype.Map{"iso_code": mmdbtype.String(country)},
		}
	}
	for _, n := range []struct {
		cidr string
		rec  mmdbtype.Map
	}{
		{"81.2.69.0/24", record("EU", "Europe", "GB")},
		{"8.8.8.0/24", record("NA", "North America", "US")},
		{"2a02:2770::/32", record("EU", "Europe", "DE")},
		{"2001:4860::/32", record("NA", "North America", "US")},
		{"203.0.113.0/24", mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String("ZZ")}}}, // no continent
		{"192.0.2.0/24", record("XX", "Nowhere", "ZZ")},                                              // not a continent code
	} {
		_, ipnet, err := net.ParseCIDR(n.cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Insert(ipnet, n.rec); err != nil {
			t.Fatalf("insert %s: %v", n.cidr, err)
		}
	}
	path := filepath.Join(t.TempDir(), "geo.mmdb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// ProxyClient is an HTTP client whose every connection starts with hdr (nil: no header).
func ProxyClient(hdr *proxyproto.Header) *http.Client {
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

// ProxyHeader is a PROXY protocol header of version (1 or 2) for a TCP connection from src
// (an address and port, IPv4 or IPv6) to the loopback address.
func ProxyHeader(version byte, src string) *proxyproto.Header {
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
