package node

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/rs/zerolog"
)

// Addresses of the test database (writeGeoIP).
const (
	geoEU4 = "81.2.69.7"            // in 81.2.69.0/24, EU (GB)
	geoNA4 = "8.8.8.8"              // in 8.8.8.0/24, NA (US)
	geoEU6 = "2a02:2770::1"         // in 2a02:2770::/32, EU (DE)
	geoNA6 = "2001:4860:4860::8888" // in 2001:4860::/32, NA (US)
	geoNo4 = "198.51.100.1"         // in no network
	geoNo6 = "2001:db8::1"          // in no network
)

// writeGeoIP writes a small GeoIP2-Country-like database with an IPv4 and an IPv6 network on
// each of two continents, records shaped like MaxMind's (names and country beside the
// continent code), and returns its path.
func writeGeoIP(t testing.TB) string {
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

func TestClientContinentSources(t *testing.T) {
	db := writeGeoIP(t)
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name    string
		cfg     Config
		addr    string // the client's address (ClientAddr)
		peer    string // RemoteAddr
		country string // X-Country
		want    string
	}{
		{"geoip v4 EU", Config{GeoIP: db}, geoEU4, "10.0.0.1:1", "", "EU"},
		{"geoip v4 NA", Config{GeoIP: db}, geoNA4, "10.0.0.1:1", "", "NA"},
		{"geoip v6 EU", Config{GeoIP: db}, geoEU6, "10.0.0.1:1", "", "EU"},
		{"geoip v6 NA", Config{GeoIP: db}, geoNA6, "10.0.0.1:1", "", "NA"},
		{"geoip mapped v4", Config{GeoIP: db}, "::ffff:" + geoEU4, "10.0.0.1:1", "", "EU"},
		{"geoip beats header", Config{GeoIP: db, CountryHeader: "X-Country", TrustedProxies: trusted, Continent: "OC"},
			geoNA4, "10.0.0.1:1", "DE", "NA"},
		{"unknown v4 to header", Config{GeoIP: db, CountryHeader: "X-Country", TrustedProxies: trusted, Continent: "OC"},
			geoNo4, "10.0.0.1:1", "de", "EU"},
		{"unknown v6 to header", Config{GeoIP: db, CountryHeader: "X-Country", TrustedProxies: trusted, Continent: "OC"},
			geoNo6, "10.0.0.1:1", "JP", "AS"},
		{"no continent in record", Config{GeoIP: db, Continent: "OC"}, "203.0.113.5", "10.0.0.1:1", "", "OC"},
		{"bad continent in record", Config{GeoIP: db, Continent: "OC"}, "192.0.2.5", "10.0.0.1:1", "", "OC"},
		{"not an address", Config{GeoIP: db, Continent: "OC"}, "nonsense", "10.0.0.1:1", "", "OC"},
		{"header from untrusted peer", Config{GeoIP: db, CountryHeader: "X-Country", TrustedProxies: trusted, Continent: "OC"},
			geoNo4, "192.0.2.9:1", "DE", "OC"},
		{"header not a country", Config{CountryHeader: "X-Country", TrustedProxies: trusted, Continent: "OC"},
			geoNo4, "10.0.0.1:1", "XX", "OC"},
		{"header absent", Config{CountryHeader: "X-Country", TrustedProxies: trusted, Continent: "OC"},
			geoNo4, "10.0.0.1:1", "", "OC"},
		{"header under proxy-protocol", Config{ClientIP: ClientIPProxyProtocol, CountryHeader: "X-Country",
			TrustedProxies: trusted}, geoNo4, geoNo4 + ":1", "BR", "SA"},
		{"nothing answers", Config{GeoIP: db}, geoNo4, "10.0.0.1:1", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc, err := newClientContinent(tt.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/x", nil)
			r.RemoteAddr = tt.peer
			if tt.country != "" {
				r.Header.Set("X-Country", tt.country)
			}
			if got := cc.fn()(r, tt.addr); got != tt.want {
				t.Errorf("continent = %q, want %q", got, tt.want)
			}
		})
	}
	if cc, _ := newClientContinent(Config{}, nil); cc.fn() != nil {
		t.Error("with no source, fn() is not nil")
	}
}

func TestGeoIPLookupAllocs(t *testing.T) {
	cc, err := newClientContinent(Config{GeoIP: writeGeoIP(t), Continent: "OC"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/x", nil)
	for _, addr := range []string{geoEU4, geoNA6, geoNo4} {
		cc.continent(r, addr) // warm the decoder's string cache
		if n := testing.AllocsPerRun(100, func() { cc.continent(r, addr) }); n > 0 {
			t.Errorf("continent(%s) allocates %v times, want 0", addr, n)
		}
	}
}

func BenchmarkClientContinent(b *testing.B) {
	cc, err := newClientContinent(Config{GeoIP: writeGeoIP(b), Continent: "OC"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/x", nil)
	b.ReportAllocs()
	for b.Loop() {
		cc.continent(r, geoNA6)
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
	db := writeGeoIP(t)
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
		{"geoip v4 EU", n, geoEU4, "", "eu"},
		{"geoip v4 NA", n, geoNA4, "", "us"},
		{"geoip v6 EU", n, geoEU6, "", "eu"},
		{"geoip v6 NA", n, geoNA6, "JP", "us"},
		{"unknown address, country header", n, geoNo4, "FR", "eu"},
		{"unknown v6 address, country header", n, geoNo6, "CA", "us"},
		{"unknown address, no header: the PoP's continent", n, geoNo4, "", "ap"},
		{"untrusted peer: headers ignored", nu, geoEU4, "DE", "ap"},
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
