package proxy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/clock"
	"github.com/fenec/fenec-entry/internal/httpsyntax"
)

// Region is one region of routers, in the fallback order of --routers.
type Region struct {
	Name    string
	Routers []*url.URL // http:// or https://, host:port; path must be empty
	// Discovered are the routers found for the region's DNS names (dns+http://, srv+http://),
	// asked after Routers.
	Discovered []Router
	// Discovery says the region has DNS names: it may then have no router at all (its names
	// resolved to nothing yet), and is asked after every other region.
	Discovery bool
}

// Router is a router found by discovery.
type Router struct {
	URL        *url.URL // http:// or https:// with the address found, host:port: where to connect, what logs show
	ServerName string   // for https, the name the router's certificate must hold (the DNS name); "": URL's host
}

// Config configures a Handler. The zero value of every optional field is
// documented on it; Regions and Homes are required.
type Config struct {
	// Regions in fallback order. New makes them the Homes table's regions
	// (homes.Table.SetRegions), whose IDs the handler uses; SetRouting replaces them while
	// serving.
	Regions []Region

	// Homes is the home table and region marks. Required.
	Homes *homes.Table

	// Continents maps a client continent code (EU, NA, ...) to a region name,
	// for tenants heard nowhere. Nil: no mapping, DefaultRegion is used.
	Continents map[string]string

	// DefaultRegion is asked first for a tenant heard nowhere whose client
	// continent has no mapping. Empty: the first region.
	DefaultRegion string

	// LatencyChoice sends a tenant heard nowhere whose client continent Continents does not
	// map to the region with the lowest measured latency from this entry, instead of
	// DefaultRegion, when that region is clearly closer (latency.go). False: DefaultRegion.
	LatencyChoice bool

	// ClientAddr returns the client's address for Fenec-Client and the log
	// line. Nil: the TCP peer's address (http.Request.RemoteAddr, no port).
	ClientAddr func(*http.Request) string

	// ClientContinent returns the client's continent code, or "" if unknown.
	// Nil: always "" (then DefaultRegion).
	ClientContinent func(r *http.Request, addr string) string

	// EntryToken, if non-empty, enables Fenec-Client marks (docs/REFERENCE.md, "Headers").
	EntryToken string

	// StripHeaders names more client headers that must not reach the router, besides the
	// fixed ones of docs/REFERENCE.md, "Headers": the operator's sources of the client's address or
	// country (--client-ip header:NAME, --country-header), so that the router learns the
	// client from Fenec-Client alone. Names match without regard to case; New canonicalises
	// them once and leaves out those already dropped, so naming X-Forwarded-For costs
	// nothing. ClientAddr and ClientContinent still see them. Nil: the fixed ones only.
	StripHeaders []string

	// CORS is "" (off), "*" or a comma-separated list of allowed origins.
	CORS string

	// MaxInflight bounds requests in flight; beyond it the entry answers 503
	// overloaded at once. 0 means 10000.
	MaxInflight int

	// BodyBuffer is the largest request body kept for a retry. 0 means 1 MiB.
	BodyBuffer int64

	// MaxBufferedBytes bounds the request body bytes kept in memory at once across all
	// requests. A body with a length that finds no room is streamed to one router (it then
	// cannot be sent to another); a body without a length, which needs BodyBuffer bytes of
	// room to be judged, is refused 503 overloaded. 0 means 256 MiB.
	MaxBufferedBytes int64

	// AnswerTimeout: a router that sends no answer head within it has failed.
	// 0 means 35s.
	AnswerTimeout time.Duration

	// DialTimeout bounds one connection attempt (and TLS handshake) to a
	// router. 0 means 3s.
	DialTimeout time.Duration

	// MaxIdlePerRouter bounds idle keep-alive connections kept per router;
	// a connection returned beyond it is closed. 0 means 128.
	MaxIdlePerRouter int

	// IdleTimeout: an idle connection older than this is closed rather than
	// reused. 0 means 60s.
	IdleTimeout time.Duration

	// RouterTLS is the TLS configuration for https:// routers (RootCAs from
	// --router-ca). Nil: system roots.
	RouterTLS *tls.Config

	// FreeDescriptors, if non-nil, is called when a dial to a router fails for want of a
	// file descriptor (EMFILE, ENFILE): it frees some (the client server closes its
	// longest-idle kept-alive connections) and reports whether it did, and the dial is then
	// made once more. Nil: such a dial fails as any other that made no connection.
	FreeDescriptors func() bool

	// Logger receives one line per request at debug, one per failed attempt and
	// per entry-made 5xx at warn, and one per region marked or cleared at info.
	// Nil: no logs.
	Logger *zerolog.Logger

	// Metrics, if non-nil, is updated on every request.
	Metrics *Metrics

	// Clock is the time source of every time-based behaviour of the handler: the idle
	// timeout of pooled router connections, Fenec-Client timestamps, RouterStatus's LastAt,
	// and the latency windows (when a sample was taken, how long it counts, which regions
	// Probe finds idle). Two readings stay on the system clock (clock.System): socket
	// deadlines (AnswerTimeout, DialTimeout, a held write's), which the kernel enforces, and
	// the durations of real work measured for latency samples, logs and metrics, which a
	// fake clock would see take no time. Nil: the system clock.
	Clock clock.Clock

	// Ready, if non-nil, answers GET /_entry/ready (200 or 503); nil: always ready.
	Ready func() bool

	// ConnClose, if non-nil and returning true, makes every answer carry Connection: close,
	// the entry's own (errors, health, preflights) as well as the routers' (the drain after
	// SIGTERM).
	ConnClose func() bool
}

// Defaults of Config: a zero field takes the default of the same name. node's flags derive
// theirs from these (--max-inflight, --body-buffer, --answer-timeout).
const (
	DefaultMaxInflight      = 10000            // requests in flight; beyond it 503 overloaded at once
	DefaultBodyBuffer       = 1 << 20          // request bodies kept for a retry, each (1 MiB)
	DefaultMaxBufferedBytes = 256 << 20        // all kept bodies together (256 MiB)
	DefaultAnswerTimeout    = 35 * time.Second // longer than a held write's 30 s
	DefaultDialTimeout      = 3 * time.Second
	DefaultMaxIdlePerRouter = 128              // idle keep-alive connections per router
	DefaultIdleTimeout      = 60 * time.Second // an idle router connection is closed after this
)

const (
	maxTenantLen = 255              // docs/REFERENCE.md, "Which region, which router"
	maxRegions   = homes.MaxRegions // a plan orders at most this many (a mark set is 64 bits)
)

// routing returns the fields of c a Routing holds.
func (c *Config) routing() Routing {
	return Routing{Regions: c.Regions, Continents: c.Continents, DefaultRegion: c.DefaultRegion,
		EntryToken: c.EntryToken, CORS: c.CORS}
}

func (c *Config) withDefaults() Config {
	d := *c
	if d.MaxInflight == 0 {
		d.MaxInflight = DefaultMaxInflight
	}
	if d.BodyBuffer == 0 {
		d.BodyBuffer = DefaultBodyBuffer
	}
	if d.MaxBufferedBytes == 0 {
		d.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if d.AnswerTimeout == 0 {
		d.AnswerTimeout = DefaultAnswerTimeout
	}
	if d.DialTimeout == 0 {
		d.DialTimeout = DefaultDialTimeout
	}
	if d.MaxIdlePerRouter == 0 {
		d.MaxIdlePerRouter = DefaultMaxIdlePerRouter
	}
	if d.IdleTimeout == 0 {
		d.IdleTimeout = DefaultIdleTimeout
	}
	if d.Clock == nil {
		d.Clock = clock.System
	}
	if d.Logger == nil {
		nop := zerolog.Nop()
		d.Logger = &nop
	}
	return d
}

func (c *Config) validate() error {
	if c.Homes == nil {
		return errors.New("proxy: Homes is required")
	}
	rt := c.routing()
	if err := rt.validate(); err != nil {
		return err
	}
	for _, name := range c.StripHeaders {
		if !httpsyntax.Token(name) {
			return fmt.Errorf("proxy: StripHeaders: %q is not a header name", name)
		}
	}
	// 0 means the default; a negative value has no meaning (a negative IdleTimeout would
	// silently turn off connection reuse), so it is refused rather than taken for one.
	for _, f := range [...]struct {
		name   string
		v, def int64
	}{
		{"MaxInflight", int64(c.MaxInflight), DefaultMaxInflight},
		{"BodyBuffer", c.BodyBuffer, DefaultBodyBuffer},
		{"MaxBufferedBytes", c.MaxBufferedBytes, DefaultMaxBufferedBytes},
		{"MaxIdlePerRouter", int64(c.MaxIdlePerRouter), DefaultMaxIdlePerRouter},
	} {
		if f.v < 0 {
			return fmt.Errorf("proxy: %s: %d is negative (0 means %d)", f.name, f.v, f.def)
		}
	}
	for _, f := range [...]struct {
		name   string
		v, def time.Duration
	}{
		{"AnswerTimeout", c.AnswerTimeout, DefaultAnswerTimeout},
		{"DialTimeout", c.DialTimeout, DefaultDialTimeout},
		{"IdleTimeout", c.IdleTimeout, DefaultIdleTimeout},
	} {
		if f.v < 0 {
			return fmt.Errorf("proxy: %s: %v is negative (0 means %v)", f.name, f.v, f.def)
		}
	}
	return nil
}
