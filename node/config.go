package node

import (
	"net/netip"
	"time"

	"github.com/fenec/fenec-entry/discover"
	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/clock"
	"github.com/fenec/fenec-entry/proxy"
)

// Config is the configuration of one entry: every setting of `fenec-entry serve`
// (docs/REFERENCE.md, "Configuration") as a parsed value, each field named after its flag. Build
// one with DefaultConfig, set Routers, Pop and Node at least, and check it with Validate (New
// does).
//
// The zero Config is not valid: Routers, Pop and Node have no default, and the durations and
// limits are zero. A Config is a plain value: copying it copies the slices and maps by
// reference, so do not change one while a Node built from it runs.
//
// Secrets (EntryToken, GossipKey, RPCAuth, AdminToken) are of types that print as "[redacted]" with every
// fmt verb and in JSON; String and MarshalZerologObject summarise the rest (redact.go).
type Config struct {
	// Client listener.

	Listen      string // --listen: host:port of the client-facing listener
	TLSCert     string // --tls-cert: PEM certificate chain file; with TLSKey serves HTTPS
	TLSKey      string // --tls-key: PEM private key file; with TLSCert
	MaxInflight int    // --max-inflight: requests in flight at once, 1..MaxMaxInflight
	// MaxConns (--max-conns) bounds the client connections held at once; 0, the default: the
	// open-file limit less the reserve for routers, gossip and files (conns.go). More than
	// the limit leaves is refused at start.
	MaxConns      int
	HeaderTimeout time.Duration // --header-timeout: how long a request head may take to arrive
	// HTTP1Server (--http1-server) serves HTTP/1.x, plain and over TLS: "lean" (package h1,
	// the default, DefaultHTTP1Server: an idle connection holds no buffer, and on Linux,
	// parked in epoll, no goroutine either) or "std" (Go's net/http server). h2, h2c and
	// PROXY-protocol connections are net/http's either way.
	HTTP1Server string

	// Routers.

	// Routers are the regions in fallback order with their routers (--routers). Each router
	// is scheme://host:port with scheme http or https and no path, query or user, or a DNS
	// name of routers: dns+http(s)://NAME:PORT (every address NAME resolves to) or
	// srv+http(s)://NAME (every SRV target and port), resolved at start and every
	// ResolveInterval (package discover).
	Routers         []proxy.Region
	ResolveInterval time.Duration // --resolve-interval: how often the routers' DNS names are resolved again
	DNSServer       string        // --dns-server: host:port of the DNS server for those names; "" for the system's
	RouterCA        string        // --router-ca: PEM file of extra CAs for https:// routers; "" for none
	AnswerTimeout   time.Duration // --answer-timeout: a router with no answer head within it has failed
	BodyBuffer      int64         // --body-buffer: request bodies up to this many bytes are kept for a retry
	ReadBackoff     time.Duration // --read-backoff: how long a failed region is asked last by reads
	Homes           int           // --homes: homes kept, 1..MaxHomes

	// Where a tenant heard nowhere goes first.

	// Continents maps a client continent code (EU, NA, SA, AS, OC, AF, AN) to a region name
	// (--continents). Nil means DefaultContinents of the configured regions; an empty non-nil
	// map means no mapping at all (every continent goes to DefaultRegion).
	Continents     map[string]string
	DefaultRegion  string         // --default-region: "" means the first region of Routers
	Pop            string         // --pop: this entry's PoP name; required
	Continent      string         // --continent: this entry's continent code; "" if unknown
	GeoIP          string         // --geoip: .mmdb file giving a client address's continent; "" for none
	CountryHeader  string         // --country-header: header naming the client's country; "" for none
	ClientIP       string         // --client-ip: peer, proxy-protocol, fly or header:NAME
	TrustedProxies []netip.Prefix // --trusted-proxies: peers whose address headers are believed

	// The routers' side of the protocol.

	EntryToken Secret // --entry-token: shared with the routers; enables Fenec-Client
	CORS       string // --cors: "" (off), "*" or a comma list of origins

	// Gossip (taken by the gossip package when it exists; validated already).

	Node            string      // --node: serf node name, also the home table's Origin; required
	GossipBind      string      // --gossip-bind: host:port for memberlist, UDP and TCP
	GossipAdvertise string      // --gossip-advertise: host:port told to peers; "" to detect
	Join            []string    // --join: peers, host:port each
	JoinDNS         string      // --join-dns: name (or name:port) resolved again every 5 s
	GossipKey       SecretBytes // --gossip-key: 16, 24 or 32 bytes; nil for clear-text gossip
	InsecureGossip  bool        // --insecure-gossip: allow peers to join without GossipKey
	RPCAddr         string      // --rpc-addr: host:port of serf's RPC
	RPCAuth         Secret      // --rpc-auth: token every RPC client must send; "" for none

	// Operations.

	AdminListen string        // --admin-listen: host:port of /metrics, /healthz, /readyz, /status.json
	AdminToken  Secret        // --admin-token: as "Authorization: Bearer", POST /reload from anywhere (mayChange)
	Drain       time.Duration // --drain: after SIGTERM, keep serving this long with Connection: close
	LogLevel    string        // --log-level: debug, info, warn or error
	LogFormat   string        // --log-format: json or console
	// StateDir (--state-dir) keeps the home table and serf's member snapshot on disk, for a
	// warm restart (package state); "" keeps nothing. An existing directory New can write.
	StateDir string
	// PIDFile (--pid-file) is where the process writes its PID once it serves, again after each
	// upgrade in place, for systemd's PIDFile= to follow the new process; "" for none. Written
	// by the command's upgrader (package upgrade), not by the node.
	PIDFile string

	// Version is this build's version, shown in /status.json and the start line. Set by
	// cmd from the build, not a flag; "" shows as "dev".
	Version string

	// ConfigFile (--config) is the file of settings a reload re-reads, "" for none. cmd reads
	// it; node shows it and reloads through Reloader.
	ConfigFile string
	// Reloader re-reads the configuration for Reload (SIGHUP, POST /reload); nil without
	// --config. Not a flag.
	Reloader Reloader `json:"-"`
	// ReloadOn delivers a value for each reload asked by signal (SIGHUP); nil for none. Not a
	// flag. Without a Reloader each one is logged and changes nothing.
	ReloadOn <-chan struct{} `json:"-"`
	// Upgrades replaces this process with a new binary on the same sockets (package upgrade,
	// over cloudflare/tableflip), and takes over from the process an upgrade replaced; nil:
	// neither (tests, or a platform that cannot pass sockets). Not a flag.
	Upgrades Upgrades `json:"-"`
	// UpgradeOn delivers a value for each upgrade asked by signal (SIGUSR2); nil for none. Not
	// a flag. Without Upgrades each one is logged and changes nothing.
	UpgradeOn <-chan struct{} `json:"-"`
	// SetLogLevel, when not nil, is called with the new level when a reload changes
	// --log-level (the process owns its loggers). Not a flag.
	SetLogLevel func(level string) `json:"-"`
	// AdaptProcs runs the process on as many Ps (GOMAXPROCS) as its load needs, from one up to
	// Go's default (package procs). Not a flag: cmd sets it unless the environment fixes
	// GOMAXPROCS, which is then the operator's choice.
	AdaptProcs bool `json:"-"`

	// Clock is the time source of what the entry decides by time: the home table (read
	// backoff, versions), the proxy (idle router connections, Fenec-Client stamps), gossip's
	// stamps and checks, and the status (its time, the start, the gossip rates). Not a flag;
	// nil is the system clock, tests inject one.
	//
	// Real time, not Clock, runs what the kernel or a period enforces, where a test's clock
	// would change nothing or stall it: timers and tickers (the resolver's, the state file's
	// write-behind and its share of the period, the latency rounds),
	// socket deadlines (h1's head and idle timeouts and its sweeper, the router connections'
	// answer timeout), and durations that are only measured (the log line's, the upstream
	// histogram, the latency samples).
	Clock clock.Clock `json:"-"`
}

// Defaults of DefaultConfig, as docs/REFERENCE.md, "Configuration" gives them. Each setting a
// package owns takes that package's default; the flag help shows these.
const (
	DefaultListen          = ":8080"
	DefaultMaxInflight     = proxy.DefaultMaxInflight
	DefaultHeaderTimeout   = 10 * time.Second
	DefaultAnswerTimeout   = proxy.DefaultAnswerTimeout
	DefaultBodyBuffer      = proxy.DefaultBodyBuffer
	DefaultReadBackoff     = homes.DefaultReadBackoff
	DefaultResolveInterval = discover.DefaultInterval
	DefaultHomes           = homes.DefaultCapacity
	DefaultClientIP        = "peer"
	DefaultGossipBind      = gossip.DefaultBindAddr
	DefaultRPCAddr         = "127.0.0.1:7373"
	DefaultAdminListen     = "127.0.0.1:9091"
	DefaultDrain           = 10 * time.Second
	DefaultLogLevel        = "info"
	DefaultLogFormat       = "json"
)

// Bounds Validate enforces. They catch typos (a unit too many) rather than encode a limit of
// the design; each is far above what a deployment needs.
const (
	MaxRegions          = homes.MaxRegions       // regions in --routers: what the home table holds
	MaxRoutersPerRegion = 64                     // routers in one region
	MaxHomes            = 10_000_000             // --homes: about 750 MB of table at ~57 bytes a home and a 19-byte name
	MaxMaxInflight      = 1_000_000              // --max-inflight
	MaxBodyBuffer       = 1 << 30                // --body-buffer: 1 GiB
	MaxHeaderTimeout    = 10 * time.Minute       // --header-timeout
	MaxAnswerTimeout    = time.Hour              // --answer-timeout
	MaxReadBackoff      = time.Hour              // --read-backoff
	MinResolveInterval  = time.Second            // --resolve-interval: DNS servers are not to be hammered
	MaxResolveInterval  = time.Hour              // --resolve-interval
	MaxDrain            = 10 * time.Minute       // --drain
	MaxNameLen          = 128                    // --node and --pop, in bytes
	MaxRegionNameLen    = homes.MaxRegionNameLen // a region name, in bytes
)

// DefaultConfig returns the defaults of docs/REFERENCE.md, "Configuration". Routers, Pop and Node
// are left empty (they have no environment-free default: cmd derives Pop and Node from FLY_REGION,
// FLY_MACHINE_ID and the hostname, cmd/fenec-entry derives them); Continents is nil, which
// means DefaultContinents of whatever regions Routers names.
func DefaultConfig() Config {
	return Config{
		Listen:          DefaultListen,
		MaxInflight:     DefaultMaxInflight,
		HeaderTimeout:   DefaultHeaderTimeout,
		HTTP1Server:     DefaultHTTP1Server,
		AnswerTimeout:   DefaultAnswerTimeout,
		BodyBuffer:      DefaultBodyBuffer,
		ReadBackoff:     DefaultReadBackoff,
		ResolveInterval: DefaultResolveInterval,
		Homes:           DefaultHomes,
		ClientIP:        DefaultClientIP,
		GossipBind:      DefaultGossipBind,
		RPCAddr:         DefaultRPCAddr,
		AdminListen:     DefaultAdminListen,
		Drain:           DefaultDrain,
		LogLevel:        DefaultLogLevel,
		LogFormat:       DefaultLogFormat,
	}
}

// RegionNames returns the names of c.Routers, in order.
func (c Config) RegionNames() []string {
	names := make([]string, len(c.Routers))
	for i, r := range c.Routers {
		names[i] = r.Name
	}
	return names
}

// ContinentMap returns the continent mapping in effect: c.Continents, or, when that is nil,
// DefaultContinents of the configured regions. The map returned is a fresh copy.
func (c Config) ContinentMap() map[string]string {
	if c.Continents == nil {
		return DefaultContinents(c.RegionNames())
	}
	m := make(map[string]string, len(c.Continents))
	for k, v := range c.Continents {
		m[k] = v
	}
	return m
}

// DefaultRegionName returns the region asked first for a continent with no mapping:
// c.DefaultRegion, or the first region when that is empty, or "" with no regions.
func (c Config) DefaultRegionName() string {
	if c.DefaultRegion != "" {
		return c.DefaultRegion
	}
	if len(c.Routers) > 0 {
		return c.Routers[0].Name
	}
	return ""
}

// hasPeersToJoin reports whether the entry is told to join peers.
func (c Config) hasPeersToJoin() bool { return len(c.Join) > 0 || c.JoinDNS != "" }

// defaultContinents is the default --continents (the seed's REGIONS), before regions that do
// not exist are dropped.
var defaultContinents = [][2]string{
	{"EU", "eu"}, {"AF", "eu"}, {"NA", "us"}, {"SA", "us"}, {"AS", "ap"}, {"OC", "ap"}, {"AN", "ap"},
}

// DefaultContinents returns the default --continents, EU=eu,AF=eu,NA=us,SA=us,AS=ap,OC=ap,
// AN=ap, keeping only the pairs whose region is one of regions. It may be empty, never nil.
func DefaultContinents(regions []string) map[string]string {
	m := map[string]string{}
	for _, kv := range defaultContinents {
		for _, r := range regions {
			if r == kv[1] {
				m[kv[0]] = kv[1]
			}
		}
	}
	return m
}
