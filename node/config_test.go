package node

import (
	"errors"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/proxy"
)

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// validConfig is DefaultConfig with what has no default: a valid configuration.
func validConfig(t testing.TB) Config {
	c := DefaultConfig()
	c.Routers = []proxy.Region{
		{Name: "eu", Routers: []*url.URL{mustURL(t, "http://r1:7000"), mustURL(t, "http://r2:7000")}},
		{Name: "us", Routers: []*url.URL{mustURL(t, "https://r3.example.com:7443")}},
	}
	c.Pop = "ams"
	c.Node = "entry-1"
	return c
}

func TestValidConfig(t *testing.T) {
	if err := validConfig(t).Validate(); err != nil {
		t.Fatalf("validConfig: %v", err)
	}
	c := validConfig(t)
	c.Continents = map[string]string{"EU": "eu", "NA": "us"}
	c.DefaultRegion = "us"
	c.Continent = "EU"
	c.ClientIP = "header:X-Forwarded-For"
	c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	c.CountryHeader = "CF-IPCountry"
	c.CORS = "https://app.example.com, http://localhost:3000"
	c.Join = []string{"10.0.0.2:7946", "peer.internal:7946"}
	c.JoinDNS = "fenec-entry.internal"
	c.GossipKey = make([]byte, 32)
	c.RPCAddr = "0.0.0.0:7373"
	c.RPCAuth = "rpc-token"
	c.TLSCert, c.TLSKey = "cert.pem", "key.pem"
	c.Drain = 0
	c.GossipAdvertise = "[fdaa::3]:7946"
	if err := c.Validate(); err != nil {
		t.Fatalf("full config: %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		flag   string // the error must start with "--flag: "
		want   string // and contain this
		mutate func(c *Config)
	}{
		{"listen not host:port", "listen", "not host:port", func(c *Config) { c.Listen = "8080" }},
		{"listen bad port", "listen", "port", func(c *Config) { c.Listen = ":http" }},
		{"listen bad host", "listen", "neither an IP address nor a host name", func(c *Config) { c.Listen = "a b:80" }},
		{"tls cert alone", "tls-cert", "without --tls-key", func(c *Config) { c.TLSCert = "c.pem" }},
		{"tls key alone", "tls-key", "without --tls-cert", func(c *Config) { c.TLSKey = "k.pem" }},
		{"max inflight zero", "max-inflight", "want 1 to", func(c *Config) { c.MaxInflight = 0 }},
		{"max inflight huge", "max-inflight", "want 1 to", func(c *Config) { c.MaxInflight = MaxMaxInflight + 1 }},
		{"max conns negative", "max-conns", "want 1 to", func(c *Config) { c.MaxConns = -1 }},
		{"max conns huge", "max-conns", "want 1 to", func(c *Config) { c.MaxConns = MaxMaxConns + 1 }},
		{"header timeout zero", "header-timeout", "more than 0s", func(c *Config) { c.HeaderTimeout = 0 }},
		{"header timeout huge", "header-timeout", "at most", func(c *Config) { c.HeaderTimeout = time.Hour }},
		{"unknown http1 server", "http1-server", "want lean or std", func(c *Config) { c.HTTP1Server = "fast" }},

		{"routers none", "routers", "required", func(c *Config) { c.Routers = nil }},
		{"routers too many", "routers", "at most 64", func(c *Config) {
			c.Routers = nil
			for i := range MaxRegions + 1 {
				c.Routers = append(c.Routers, proxy.Region{Name: "r" + string(rune('a'+i%26)) + strings.Repeat("x", i/26),
					Routers: []*url.URL{mustURL(t, "http://h"+string(rune('a'+i%26))+strings.Repeat("x", i/26)+":1")}})
			}
		}},
		{"region no routers", "routers", `region "eu" has no routers (want eu=http://host:port,...;us=...)`, func(c *Config) { c.Routers[0].Routers = nil }},
		{"region twice", "routers", `region "eu" is listed twice`, func(c *Config) { c.Routers[1].Name = "eu" }},
		{"region empty name", "routers", "1 to 64 bytes", func(c *Config) { c.Routers[0].Name = "" }},
		{"region bad name", "routers", "want lower-case letters", func(c *Config) { c.Routers[0].Name = "e u" }},
		{"router scheme", "routers", "scheme must be http or https", func(c *Config) { c.Routers[0].Routers[0] = mustURL(t, "ftp://r1:21") }},
		{"router no scheme", "routers", "scheme must be http or https", func(c *Config) { c.Routers[0].Routers[0] = mustURL(t, "r1:7000") }},
		{"router path", "routers", "no path", func(c *Config) { c.Routers[0].Routers[0] = mustURL(t, "http://r1:7000/api") }},
		{"router query", "routers", "no path, query", func(c *Config) { c.Routers[0].Routers[0] = mustURL(t, "http://r1:7000?x=1") }},
		{"router no port", "routers", "not host:port", func(c *Config) { c.Routers[0].Routers[0] = mustURL(t, "http://r1") }},
		{"router port 0", "routers", "port 0", func(c *Config) { c.Routers[0].Routers[0] = mustURL(t, "http://r1:0") }},
		{"router no host", "routers", "no host", func(c *Config) { c.Routers[0].Routers[0] = mustURL(t, "http://:7000") }},
		{"router user", "routers", "user information", func(c *Config) { c.Routers[0].Routers[0] = mustURL(t, "http://u:pw@r1:7000") }},
		{"router twice", "routers", "listed twice", func(c *Config) { c.Routers[1].Routers[0] = mustURL(t, "http://r1:7000") }},

		{"continent unknown region", "continents", `maps to region "ap"`, func(c *Config) { c.Continents = map[string]string{"AS": "ap"} }},
		{"continent bad code", "continents", "not a continent code", func(c *Config) { c.Continents = map[string]string{"XX": "eu"} }},
		{"default region unknown", "default-region", `region "ap" is not configured`, func(c *Config) { c.DefaultRegion = "ap" }},
		{"pop empty", "pop", "empty", func(c *Config) { c.Pop = "" }},
		{"pop space", "pop", "space", func(c *Config) { c.Pop = "a b" }},
		{"continent bad", "continent", "not a continent code", func(c *Config) { c.Continent = "Europe" }},
		{"country header no proxies", "country-header", "needs --trusted-proxies", func(c *Config) { c.CountryHeader = "CF-IPCountry" }},
		{"country header bad name", "country-header", "not a header name", func(c *Config) { c.CountryHeader = "a b" }},

		{"client ip unknown", "client-ip", "want peer, proxy-protocol, fly or header:NAME", func(c *Config) { c.ClientIP = "xff" }},
		{"client ip header no proxies", "client-ip", "needs --trusted-proxies", func(c *Config) { c.ClientIP = "header:X-Real-IP" }},
		{"client ip header no name", "client-ip", "not a header name", func(c *Config) {
			c.ClientIP = "header:"
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		}},
		{"trusted proxies invalid", "trusted-proxies", "invalid prefix", func(c *Config) { c.TrustedProxies = []netip.Prefix{{}} }},

		{"entry token newline", "entry-token", "line break", func(c *Config) { c.EntryToken = "tok\n" }},
		{"cors star in list", "cors", "must be alone", func(c *Config) { c.CORS = "https://a.example,*" }},
		{"cors path", "cors", "not an origin", func(c *Config) { c.CORS = "https://a.example/app" }},
		{"cors bare host", "cors", "not an origin", func(c *Config) { c.CORS = "a.example" }},

		{"homes zero", "homes", "want 1 to", func(c *Config) { c.Homes = 0 }},
		{"homes huge", "homes", "want 1 to", func(c *Config) { c.Homes = MaxHomes + 1 }},
		{"read backoff zero", "read-backoff", "more than 0s", func(c *Config) { c.ReadBackoff = 0 }},
		{"answer timeout negative", "answer-timeout", "more than 0s", func(c *Config) { c.AnswerTimeout = -time.Second }},
		{"body buffer zero", "body-buffer", "1 byte to 1GiB", func(c *Config) { c.BodyBuffer = 0 }},
		{"body buffer huge", "body-buffer", "1 byte to 1GiB", func(c *Config) { c.BodyBuffer = 1<<30 + 1 }},

		{"node empty", "node", "empty", func(c *Config) { c.Node = "" }},
		{"node too long", "node", "longer than", func(c *Config) { c.Node = strings.Repeat("n", MaxNameLen+1) }},
		{"gossip bind", "gossip-bind", "not host:port", func(c *Config) { c.GossipBind = "7946" }},
		{"gossip advertise wildcard", "gossip-advertise", "not a wildcard", func(c *Config) { c.GossipAdvertise = "0.0.0.0:7946" }},
		{"gossip advertise no host", "gossip-advertise", "not a wildcard", func(c *Config) { c.GossipAdvertise = ":7946" }},
		{"join bad peer", "join", `peer "10.0.0.1"`, func(c *Config) { c.Join = []string{"10.0.0.1"}; c.InsecureGossip = true }},
		{"join port 0", "join", "port 0", func(c *Config) { c.Join = []string{"10.0.0.1:0"}; c.InsecureGossip = true }},
		{"join dns bad", "join-dns", "not a DNS name", func(c *Config) { c.JoinDNS = "bad name"; c.InsecureGossip = true }},
		{"join dns bad port", "join-dns", "port", func(c *Config) { c.JoinDNS = "app.internal:x"; c.InsecureGossip = true }},
		{"gossip key length", "gossip-key", "not base64 of 16, 24 or 32 bytes", func(c *Config) { c.GossipKey = make([]byte, 20) }},
		{"join without key", "gossip-key", "--insecure-gossip", func(c *Config) { c.Join = []string{"10.0.0.2:7946"} }},
		{"join dns without key", "gossip-key", "--insecure-gossip", func(c *Config) { c.JoinDNS = "app.internal" }},
		{"rpc addr", "rpc-addr", "not host:port", func(c *Config) { c.RPCAddr = "7373" }},
		{"rpc open without auth", "rpc-auth", "not a loopback address", func(c *Config) { c.RPCAddr = ":7373" }},

		{"admin listen", "admin-listen", "not host:port", func(c *Config) { c.AdminListen = "9091" }},
		{"admin is listen", "admin-listen", "also --listen", func(c *Config) { c.AdminListen = c.Listen }},
		{"admin token short", "admin-token", "at least 16 characters", func(c *Config) { c.AdminToken = "short" }},
		{"admin token with a space", "admin-token", "without spaces", func(c *Config) { c.AdminToken = "0123456789 abcdef" }},
		{"drain negative", "drain", "out of range", func(c *Config) { c.Drain = -time.Second }},
		{"drain huge", "drain", "out of range", func(c *Config) { c.Drain = time.Hour }},
		{"log level", "log-level", "want debug, info, warn or error", func(c *Config) { c.LogLevel = "trace" }},
		{"log format", "log-format", "want json or console", func(c *Config) { c.LogFormat = "text" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t)
			tt.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want an error naming --%s", tt.flag)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Flag != tt.flag {
				t.Errorf("Validate() = %#v, want a *ConfigError for %q", err, tt.flag)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "--"+tt.flag+": ") || !strings.Contains(msg, tt.want) {
				t.Errorf("Validate() = %q, want it to start with %q and contain %q", msg, "--"+tt.flag+": ", tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("Validate() = %q spans lines", err)
			}
		})
	}
}

func TestValidateDoesNotChangeConfig(t *testing.T) {
	c := validConfig(t)
	before := c.String()
	c.Validate()
	if after := c.String(); after != before {
		t.Errorf("Validate changed the config:\n%s\n%s", before, after)
	}
}

func TestConfigDerived(t *testing.T) {
	c := validConfig(t)
	if got := c.DefaultRegionName(); got != "eu" {
		t.Errorf("DefaultRegionName() = %q, want the first region eu", got)
	}
	got := c.ContinentMap()
	want := map[string]string{"EU": "eu", "AF": "eu", "NA": "us", "SA": "us"}
	if len(got) != len(want) {
		t.Fatalf("ContinentMap() = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("ContinentMap()[%s] = %q, want %q", k, got[k], v)
		}
	}
	c.Continents = map[string]string{}
	if got := c.ContinentMap(); len(got) != 0 {
		t.Errorf("ContinentMap() with an empty --continents = %v, want no mapping", got)
	}
}

// The plain HTTP/1.x server is h1 by default, on every system, and std may be asked for.
func TestHTTP1ServerOfTheSystem(t *testing.T) {
	if DefaultHTTP1Server != "lean" {
		t.Fatalf("DefaultHTTP1Server %q on %s, want lean", DefaultHTTP1Server, runtime.GOOS)
	}
	for _, server := range []string{"lean", "std"} {
		c := testConfig(t, "eu", "http://127.0.0.1:1")
		c.HTTP1Server = server
		if err := c.Validate(); err != nil {
			t.Errorf("--http1-server %s refused: %v", server, err)
		}
	}
}

// --max-conns in effect: by default the open-file limit less the reserve (a router connection a
// request in flight, at most half the limit; each router's idle pool; ReserveOther); as given
// when the limit leaves room for it; refused, naming the flag, when it does not.
func TestMaxConns(t *testing.T) {
	cfg := func(maxConns, inflight, routers int) Config {
		c := DefaultConfig()
		c.MaxConns, c.MaxInflight = maxConns, inflight
		var r proxy.Region
		for range routers {
			r.Routers = append(r.Routers, &url.URL{Scheme: "http", Host: "r:1"})
		}
		c.Routers = []proxy.Region{r}
		return c
	}
	idle := proxy.DefaultMaxIdlePerRouter
	for _, tt := range []struct {
		name    string
		cfg     Config
		limit   int
		want    int
		wantErr string
	}{
		{"default: the limit less the reserve", cfg(0, 10000, 2), 20000, 20000 - 10000 - 2*idle - ReserveOther, ""},
		{"default: in flight counted up to half the limit", cfg(0, 10000, 2), 1 << 20, 1<<20 - 10000 - 2*idle - ReserveOther, ""},
		{"default: half the limit at most for requests in flight", cfg(0, 100000, 1), 40000, 40000 - 20000 - idle - ReserveOther, ""},
		{"default under a low limit: a quarter of it", cfg(0, 10000, 6), 1024, 256, ""},
		{"default with no limit known", cfg(0, 10000, 2), 0, noLimitMaxConns, ""},
		{"given, within the limit", cfg(5000, 10000, 2), 20000, 5000, ""},
		{"given, with no limit known", cfg(5000, 10000, 2), 0, 5000, ""},
		{"given, past what the limit leaves", cfg(10000, 10000, 2), 20000, 0, "--max-conns: 10000 is more than the open-file limit (20000) leaves"},
	} {
		got, err := tt.cfg.maxConns(tt.limit)
		if tt.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("%s: %d, %v; want the error %q", tt.name, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.name, got, err, tt.want)
		}
	}
}
