package clientinfo

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/oschwald/maxminddb-golang/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// GeoIP is a MaxMind or DB-IP country or city database (--geoip), memory-mapped. Safe for
// concurrent use.
type GeoIP struct {
	db *maxminddb.Reader
}

// OpenGeoIP opens an .mmdb file and checks that it is one. Its error says what is wrong with
// path, for the caller to prefix with the flag.
//
// The database stays mapped for the life of the process: it has no Close, because a request
// still running after the entry closed may be reading it; the garbage collector unmaps it
// once nothing refers to it.
func OpenGeoIP(path string) (*GeoIP, error) {
	db, err := maxminddb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%q is not a readable MaxMind DB file (want a .mmdb from MaxMind or DB-IP): %w", path, err)
	}
	if db.Metadata.IPVersion != 4 && db.Metadata.IPVersion != 6 {
		return nil, fmt.Errorf("%q: IP version %d in its metadata (want 4 or 6)", path, db.Metadata.IPVersion)
	}
	return &GeoIP{db: db}, nil
}

// DatabaseType returns the database's type from its metadata ("GeoLite2-Country", ...).
func (g *GeoIP) DatabaseType() string { return g.db.Metadata.DatabaseType }

// BuildTime returns when the database was built, from its metadata.
func (g *GeoIP) BuildTime() time.Time { return g.db.Metadata.BuildTime() }

// ContinentSources are where Continents looks for a client's continent. The zero value has
// none: every client's continent is unknown.
type ContinentSources struct {
	GeoIP          *GeoIP         // --geoip, from OpenGeoIP; nil for none
	CountryHeader  string         // --country-header: header naming the client's country; "" for none
	TrustedProxies []netip.Prefix // --trusted-proxies: the peers CountryHeader is believed from
	// Mode is the client address's mode (--client-ip): under ModeProxyProtocol with
	// TrustedProxies, the listener refuses every other peer, so every peer is trusted.
	Mode         string
	PopContinent string // --continent: this PoP's continent code; "" if unknown
}

// Continents answers proxy.Config.ClientContinent: the continent of the client, from the
// first source that answers (docs/REFERENCE.md, "Configuration"):
//  1. --geoip: the continent.code of the client's address (the one --client-ip gives) in a
//     MaxMind or DB-IP database;
//  2. --country-header: the country named by that header, through countryContinents, believed
//     only when the request's TCP peer is in --trusted-proxies;
//  3. --continent: this PoP's continent ("" if unset: then --default-region).
//
// It is asked once per request for a tenant heard nowhere, so it allocates nothing: the
// database is memory-mapped and only the continent code is decoded. Safe for concurrent use;
// nothing in it changes after NewContinents.
type Continents struct {
	geo       *GeoIP         // nil without --geoip
	header    string         // canonical --country-header; "" for none
	trusted   []netip.Prefix // --trusted-proxies
	trustPeer bool           // every TCP peer is trusted (proxy-protocol with --trusted-proxies)
	pop       string         // --continent

	// By source: how many clients' continents each source gave.
	fromGeoIP, fromHeader, fromPop, unknown prometheus.Counter
}

// NewContinents returns the Continents of src and registers
// fenec_entry_client_continent_total in reg, if not nil.
func NewContinents(src ContinentSources, reg prometheus.Registerer) *Continents {
	cc := &Continents{
		geo:       src.GeoIP,
		trusted:   src.TrustedProxies,
		trustPeer: src.Mode == ModeProxyProtocol && len(src.TrustedProxies) > 0,
		pop:       src.PopContinent,
	}
	if src.CountryHeader != "" {
		cc.header = http.CanonicalHeaderKey(src.CountryHeader)
	}
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fenec_entry_client_continent_total",
		Help: "Clients of tenants heard nowhere whose continent was found, by source: geoip (--geoip), " +
			"header (--country-header), pop (--continent), none (no source answered).",
	}, []string{"source"})
	if reg != nil {
		reg.MustRegister(v)
	}
	cc.fromGeoIP = v.WithLabelValues("geoip")
	cc.fromHeader = v.WithLabelValues("header")
	cc.fromPop = v.WithLabelValues("pop")
	cc.unknown = v.WithLabelValues("none")
	return cc
}

// Of returns the client's continent code, or "" if no source answers. addr is the client's
// address as --client-ip gives it (no port, no brackets).
func (cc *Continents) Of(r *http.Request, addr string) string {
	if cc.geo != nil {
		if c := cc.geo.lookup(addr); c != "" {
			cc.fromGeoIP.Inc()
			return c
		}
	}
	if cc.header != "" && cc.peerTrusted(r) {
		if vs := r.Header[cc.header]; len(vs) > 0 {
			if c := countryContinent(vs[0]); c != "" {
				cc.fromHeader.Inc()
				return c
			}
		}
	}
	if cc.pop != "" {
		cc.fromPop.Inc()
		return cc.pop
	}
	cc.unknown.Inc()
	return ""
}

// geoRecord is the one field of a MaxMind/DB-IP country or city record the entry needs;
// decoding into it skips the rest of the record.
type geoRecord struct {
	Continent struct {
		Code string `maxminddb:"code"`
	} `maxminddb:"continent"`
}

// geoRecords recycles the records lookup decodes into: Decode takes an interface, so a
// record on the stack would escape and cost an allocation per lookup.
var geoRecords = sync.Pool{New: func() any { return new(geoRecord) }}

// lookup returns the continent code of addr in the database, or "" if addr is not an
// address, is not in the database, or has no valid continent code there. It does not
// allocate (the decoder caches the few continent strings).
func (g *GeoIP) lookup(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return ""
	}
	res := g.db.Lookup(a.Unmap().WithZone(""))
	if !res.Found() {
		return ""
	}
	rec := geoRecords.Get().(*geoRecord)
	*rec = geoRecord{}
	code := ""
	if res.Decode(rec) == nil {
		code = canonicalContinent(rec.Continent.Code)
	}
	*rec = geoRecord{}
	geoRecords.Put(rec)
	return code
}

// continentCodes are the continent codes of MaxMind and DB-IP, in the order of the entry's
// default --continents mapping.
var continentCodes = [...]string{"EU", "AF", "NA", "SA", "AS", "OC", "AN"}

// ContinentCodes returns the continent codes of MaxMind and DB-IP (EU, AF, NA, SA, AS, OC,
// AN), in the order of the entry's default --continents mapping; a fresh slice each call.
func ContinentCodes() []string { return slices.Clone(continentCodes[:]) }

// canonicalContinent returns code if it is a continent code, as a constant string (so that a
// string decoded from the database is not kept), else "".
func canonicalContinent(code string) string {
	for _, c := range continentCodes {
		if c == code {
			return c
		}
	}
	return ""
}

// peerTrusted reports whether the request's TCP peer is a trusted proxy. Under
// proxy-protocol with --trusted-proxies the listener refuses every other peer, and
// RemoteAddr is the PROXY header's source (the client), so every request's peer is trusted.
func (cc *Continents) peerTrusted(r *http.Request) bool {
	if cc.trustPeer {
		return true
	}
	a, ok := peerAddr(r.RemoteAddr)
	if !ok {
		return false
	}
	for _, p := range cc.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Func returns Of for proxy.Config.ClientContinent, or nil when no source can answer.
func (cc *Continents) Func() func(*http.Request, string) string {
	if cc.geo == nil && cc.header == "" && cc.pop == "" {
		return nil
	}
	return cc.Of
}
