package clientinfo

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/fenec/fenec-entry/clientinfo/clientinfotest"
)

// openGeoIP opens the test database (clientinfotest.WriteGeoIP).
func openGeoIP(t testing.TB) *GeoIP {
	t.Helper()
	db, err := OpenGeoIP(clientinfotest.WriteGeoIP(t))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestClientContinentSources(t *testing.T) {
	db := openGeoIP(t)
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name    string
		src     ContinentSources
		addr    string // the client's address (ClientAddr)
		peer    string // RemoteAddr
		country string // X-Country
		want    string
	}{
		{"geoip v4 EU", ContinentSources{GeoIP: db}, clientinfotest.GeoEU4, "10.0.0.1:1", "", "EU"},
		{"geoip v4 NA", ContinentSources{GeoIP: db}, clientinfotest.GeoNA4, "10.0.0.1:1", "", "NA"},
		{"geoip v6 EU", ContinentSources{GeoIP: db}, clientinfotest.GeoEU6, "10.0.0.1:1", "", "EU"},
		{"geoip v6 NA", ContinentSources{GeoIP: db}, clientinfotest.GeoNA6, "10.0.0.1:1", "", "NA"},
		{"geoip mapped v4", ContinentSources{GeoIP: db}, "::ffff:" + clientinfotest.GeoEU4, "10.0.0.1:1", "", "EU"},
		{"geoip beats header", ContinentSources{GeoIP: db, CountryHeader: "X-Country", TrustedProxies: trusted, PopContinent: "OC"},
			clientinfotest.GeoNA4, "10.0.0.1:1", "DE", "NA"},
		{"unknown v4 to header", ContinentSources{GeoIP: db, CountryHeader: "X-Country", TrustedProxies: trusted, PopContinent: "OC"},
			clientinfotest.GeoNo4, "10.0.0.1:1", "de", "EU"},
		{"unknown v6 to header", ContinentSources{GeoIP: db, CountryHeader: "X-Country", TrustedProxies: trusted, PopContinent: "OC"},
			clientinfotest.GeoNo6, "10.0.0.1:1", "JP", "AS"},
		{"no continent in record", ContinentSources{GeoIP: db, PopContinent: "OC"}, "203.0.113.5", "10.0.0.1:1", "", "OC"},
		{"bad continent in record", ContinentSources{GeoIP: db, PopContinent: "OC"}, "192.0.2.5", "10.0.0.1:1", "", "OC"},
		{"not an address", ContinentSources{GeoIP: db, PopContinent: "OC"}, "nonsense", "10.0.0.1:1", "", "OC"},
		{"header from untrusted peer", ContinentSources{GeoIP: db, CountryHeader: "X-Country", TrustedProxies: trusted, PopContinent: "OC"},
			clientinfotest.GeoNo4, "192.0.2.9:1", "DE", "OC"},
		{"header not a country", ContinentSources{CountryHeader: "X-Country", TrustedProxies: trusted, PopContinent: "OC"},
			clientinfotest.GeoNo4, "10.0.0.1:1", "XX", "OC"},
		{"header absent", ContinentSources{CountryHeader: "X-Country", TrustedProxies: trusted, PopContinent: "OC"},
			clientinfotest.GeoNo4, "10.0.0.1:1", "", "OC"},
		{"header under proxy-protocol", ContinentSources{Mode: ModeProxyProtocol, CountryHeader: "X-Country",
			TrustedProxies: trusted}, clientinfotest.GeoNo4, clientinfotest.GeoNo4 + ":1", "BR", "SA"},
		{"nothing answers", ContinentSources{GeoIP: db}, clientinfotest.GeoNo4, "10.0.0.1:1", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := NewContinents(tt.src, nil)
			r := httptest.NewRequest("GET", "/x", nil)
			r.RemoteAddr = tt.peer
			if tt.country != "" {
				r.Header.Set("X-Country", tt.country)
			}
			if got := cc.Func()(r, tt.addr); got != tt.want {
				t.Errorf("continent = %q, want %q", got, tt.want)
			}
		})
	}
	if NewContinents(ContinentSources{}, nil).Func() != nil {
		t.Error("with no source, Func() is not nil")
	}
}

func TestGeoIPLookupAllocs(t *testing.T) {
	cc := NewContinents(ContinentSources{GeoIP: openGeoIP(t), PopContinent: "OC"}, nil)
	r := httptest.NewRequest("GET", "/x", nil)
	for _, addr := range []string{clientinfotest.GeoEU4, clientinfotest.GeoNA6, clientinfotest.GeoNo4} {
		cc.Of(r, addr) // warm the decoder's string cache
		if n := testing.AllocsPerRun(100, func() { cc.Of(r, addr) }); n > 0 {
			t.Errorf("Of(%s) allocates %v times, want 0", addr, n)
		}
	}
}

func BenchmarkClientContinent(b *testing.B) {
	cc := NewContinents(ContinentSources{GeoIP: openGeoIP(b), PopContinent: "OC"}, nil)
	r := httptest.NewRequest("GET", "/x", nil)
	b.ReportAllocs()
	for b.Loop() {
		cc.Of(r, clientinfotest.GeoNA6)
	}
}
