package standin

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/internal/clock"
)

// DefaultKeepAlive is the interval of the SSE keep-alive comment when Config.KeepAlive is 0.
const DefaultKeepAlive = 15 * time.Second

// MaxItems is the largest Config.Items: the items are kept in memory, every tenant's.
const MaxItems = 10000

// maxTenantLen is the longest tenant name a router accepts, as the entry does.
const maxTenantLen = 255

// Config describes the routers of a stand-in cluster. The zero value is not valid: at least
// one region with one router is required.
type Config struct {
	// Regions lists the regions and their routers, in order. An address may use port 0
	// ("127.0.0.1:0"): every listener is bound before any router serves, and the directory,
	// the relays and Fenec-Router use the bound addresses.
	Regions []Region

	// Tenants is the directory: tenant -> home region. Every region named must be in
	// Regions. The map is copied by Start.
	Tenants map[string]string

	// EntryToken, if set, makes the routers check the Fenec-Client mark of every request
	// received from outside (no Fenec-Router) and count the result (Cluster.ClientMarks).
	// The request is served whatever the result.
	EntryToken string

	// CORS is "" (off), "*" or a comma-separated list of origins ("https://a.example"),
	// as the routers' --http-cors.
	CORS string

	// KeepAlive is the interval of the ": keep-alive" comment on event streams.
	// If 0, DefaultKeepAlive is used.
	KeepAlive time.Duration

	// Items, if positive, seeds items 1..Items of every tenant in the directory at Start, in
	// its home region as its first router would have written them but with no ledger entry
	// (POSTs get ids past them), and again after every Reset, so that a GET of
	// /t/<tenant>/items/1 answers 200 before anyone writes. A tenant added by Move gets none
	// until the next Reset. At most MaxItems; 0 seeds nothing.
	Items int

	// Logger receives one line per state change at info and one per request at debug. It
	// never receives EntryToken. If nil, nothing is logged.
	Logger *zerolog.Logger

	// Clock is the time source of the Fenec-Client check (a mark counts within 60 s of it)
	// and of the times in Seen and the Ledger; nil: the system clock. Held writes
	// (Fenec-Wait), slow faults and event streams wait on real timers.
	Clock clock.Clock
}

// Region is one region of a stand-in cluster and the listen addresses of its routers.
type Region struct {
	Name  string
	Addrs []string
	// Remote: the region's routers are served by another process (another stand-in, in the
	// lab's WAN one per region); this cluster does not listen on Addrs, and relays a request
	// for a tenant homed there to them (each address a fixed host:port, not port 0).
	Remote bool
}

// A ConfigError is a Config that Start refuses. Field names the Config field at fault.
type ConfigError struct {
	Field string // "Regions", "Tenants", "CORS", "KeepAlive" or "Items"
	Msg   string
}

func (e *ConfigError) Error() string { return "standin: " + e.Field + ": " + e.Msg }

func configErrorf(field, format string, args ...any) error {
	return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate reports the first thing wrong with c, as a *ConfigError. It does no I/O.
func (c *Config) Validate() error {
	if len(c.Regions) == 0 {
		return configErrorf("Regions", "at least one region is required")
	}
	names := make(map[string]bool, len(c.Regions))
	addrs := make(map[string]string)
	local := 0
	for _, r := range c.Regions {
		if !r.Remote {
			local++
		}
		if err := validName(r.Name); err != nil {
			return configErrorf("Regions", "region name %q: %v", r.Name, err)
		}
		if names[r.Name] {
			return configErrorf("Regions", "region %q is listed twice", r.Name)
		}
		names[r.Name] = true
		if len(r.Addrs) == 0 {
			return configErrorf("Regions", "region %q has no router address", r.Name)
		}
		for _, a := range r.Addrs {
			if err := validAddr(a); err != nil {
				return configErrorf("Regions", "region %q: address %q: %v", r.Name, a, err)
			}
			if _, port, _ := net.SplitHostPort(a); port == "0" {
				if r.Remote {
					return configErrorf("Regions", "remote region %q: address %q: a remote router's port must be given", r.Name, a)
				}
				continue // each bind picks its own port
			}
			if other, dup := addrs[a]; dup {
				return configErrorf("Regions", "address %q is listed twice (regions %q and %q)", a, other, r.Name)
			}
			addrs[a] = r.Name
		}
	}
	if local == 0 {
		return configErrorf("Regions", "every region is remote: at least one must be served here")
	}
	for t, home := range c.Tenants {
		if err := validTenant(t); err != nil {
			return configErrorf("Tenants", "tenant %q: %v", t, err)
		}
		if !names[home] {
			return configErrorf("Tenants", "tenant %q is homed in unknown region %q (regions: %s)", t, home, c.regionList())
		}
	}
	if _, err := parseCORS(c.CORS); err != nil {
		return configErrorf("CORS", "%v", err)
	}
	if c.KeepAlive < 0 {
		return configErrorf("KeepAlive", "must not be negative, got %v", c.KeepAlive)
	}
	if c.Items < 0 || c.Items > MaxItems {
		return configErrorf("Items", "must be from 0 to %d, got %d", MaxItems, c.Items)
	}
	return nil
}

func (c *Config) regionList() string {
	s := make([]string, len(c.Regions))
	for i, r := range c.Regions {
		s[i] = r.Name
	}
	return strings.Join(s, ", ")
}

func validName(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("only letters, digits, '-', '_' and '.' are allowed")
		}
	}
	return nil
}

// validTenant accepts what a router can receive as the first path segment after /t/ once
// the path is decoded: not empty, at most 255 bytes, no '/', no NUL.
func validTenant(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty")
	case len(s) > maxTenantLen:
		return fmt.Errorf("longer than %d bytes", maxTenantLen)
	case strings.ContainsAny(s, "/\x00"):
		return fmt.Errorf("contains '/' or NUL")
	}
	return nil
}

func validAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("bad host %q", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// corsPolicy is a parsed --http-cors. The zero value is off.
type corsPolicy struct {
	any     bool
	origins map[string]bool
}

func parseCORS(s string) (corsPolicy, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return corsPolicy{}, nil
	}
	if s == "*" {
		return corsPolicy{any: true}, nil
	}
	p := corsPolicy{origins: make(map[string]bool)}
	for _, o := range strings.Split(s, ",") {
		o = strings.TrimSpace(o)
		if o == "*" {
			return corsPolicy{}, fmt.Errorf("\"*\" must be alone, got %q", s)
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.Path != "" || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
			return corsPolicy{}, fmt.Errorf("origin %q: want scheme://host[:port], as a browser sends it", o)
		}
		p.origins[o] = true
	}
	return p, nil
}
