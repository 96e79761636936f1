package node

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fenec/fenec-entry/clientinfo"
	"github.com/fenec/fenec-entry/discover"
	"github.com/fenec/fenec-entry/internal/httpsyntax"
)

// ConfigError is a configuration error: the value of one flag is wrong, or wrong together with
// another. Its text starts with the flag, "--routers: region \"eu\" has no routers (...)", says
// what is wrong and what is allowed, and never holds a secret. A process that gets one should
// exit with status 2.
type ConfigError struct {
	Flag string // without dashes: "routers"
	Msg  string
}

func (e *ConfigError) Error() string { return "--" + e.Flag + ": " + e.Msg }

func cfgErr(flag, format string, args ...any) error {
	return &ConfigError{Flag: flag, Msg: fmt.Sprintf(format, args...)}
}

// Validate reports the first thing wrong with c as a *ConfigError, checking the flags in the
// order of docs/REFERENCE.md, "Configuration". It is pure: it reads no file, no environment and no
// DNS (files are read by New, names resolved by whoever dials them).
func (c Config) Validate() error {
	for _, check := range []func() error{
		c.validateListen, c.validateRouters, c.validateDiscovery, c.validatePlacement, c.validateClientIP,
		c.validateProtocol, c.validateLimits, c.validateGossip, c.validateOps,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (c Config) validateListen() error {
	if err := checkHostPort(c.Listen, false); err != nil {
		return cfgErr("listen", "%v", err)
	}
	switch {
	case c.TLSCert != "" && c.TLSKey == "":
		return cfgErr("tls-cert", "given without --tls-key (want both or neither)")
	case c.TLSKey != "" && c.TLSCert == "":
		return cfgErr("tls-key", "given without --tls-cert (want both or neither)")
	}
	if c.MaxInflight < 1 || c.MaxInflight > MaxMaxInflight {
		return cfgErr("max-inflight", "%d is out of range (want 1 to %d)", c.MaxInflight, MaxMaxInflight)
	}
	if c.MaxConns < 0 || c.MaxConns > MaxMaxConns {
		return cfgErr("max-conns", "%d is out of range (want 1 to %d, or 0 for the open-file limit less the reserve)", c.MaxConns, MaxMaxConns)
	}
	switch c.HTTP1Server {
	case "std", "lean":
	default:
		return cfgErr("http1-server", "%q is not a server (want lean or std)", c.HTTP1Server)
	}
	return checkDuration("header-timeout", c.HeaderTimeout, MaxHeaderTimeout)
}

// RoutersSyntax is what --routers looks like, for error messages.
const RoutersSyntax = "want eu=http://host:port,...;us=..."

func (c Config) validateRouters() error {
	if len(c.Routers) == 0 {
		return cfgErr("routers", "required (%s)", RoutersSyntax)
	}
	if len(c.Routers) > MaxRegions {
		return cfgErr("routers", "%d regions, at most %d", len(c.Routers), MaxRegions)
	}
	regions := map[string]bool{}
	routers := map[string]string{} // scheme://host:port -> region
	for _, r := range c.Routers {
		if err := checkRegionName(r.Name); err != nil {
			return cfgErr("routers", "%v", err)
		}
		if regions[r.Name] {
			return cfgErr("routers", "region %q is listed twice (want each region once, its routers comma-separated)", r.Name)
		}
		regions[r.Name] = true
		if len(r.Routers) == 0 {
			return cfgErr("routers", "region %q has no routers (%s)", r.Name, RoutersSyntax)
		}
		if len(r.Routers) > MaxRoutersPerRegion {
			return cfgErr("routers", "region %q has %d routers, at most %d", r.Name, len(r.Routers), MaxRoutersPerRegion)
		}
		for _, u := range r.Routers {
			if u == nil {
				return cfgErr("routers", "region %q has a nil router", r.Name)
			}
			if discover.IsSource(u) {
				src, err := discover.ParseSource(u)
				if err != nil {
					return cfgErr("routers", "router %q of region %q: %v", u.Redacted(), r.Name, err)
				}
				if prev, dup := routers[src.String()]; dup {
					return cfgErr("routers", "router %q is listed twice (in regions %q and %q)", src.String(), prev, r.Name)
				}
				routers[src.String()] = r.Name
				continue
			}
			if err := checkRouterURL(u); err != nil {
				return cfgErr("routers", "router %q of region %q: %v", u.Redacted(), r.Name, err)
			}
			key := u.Scheme + "://" + u.Host
			if prev, dup := routers[key]; dup {
				return cfgErr("routers", "router %q is listed twice (in regions %q and %q)", key, prev, r.Name)
			}
			routers[key] = r.Name
		}
	}
	return nil
}

// validateDiscovery checks the settings of the routers' DNS names.
func (c Config) validateDiscovery() error {
	if c.ResolveInterval < MinResolveInterval || c.ResolveInterval > MaxResolveInterval {
		return cfgErr("resolve-interval", "%v is out of range (want %v to %v)", c.ResolveInterval, MinResolveInterval, MaxResolveInterval)
	}
	if c.DNSServer != "" {
		if err := checkHostPort(c.DNSServer, true); err != nil {
			return cfgErr("dns-server", "%v", err)
		}
		if host, _, _ := net.SplitHostPort(c.DNSServer); net.ParseIP(host) == nil {
			return cfgErr("dns-server", "%q: want an IP address and port (a name would need a DNS server to find it)", c.DNSServer)
		}
	}
	return nil
}

func checkRegionName(name string) error {
	if name == "" || len(name) > MaxRegionNameLen {
		return fmt.Errorf("region name %q must be 1 to %d bytes", name, MaxRegionNameLen)
	}
	for _, ch := range []byte(name) {
		if 'A' <= ch && ch <= 'Z' {
			// Region names are compared as they are, and the routers' are lower case: EU=
			// is most likely a continent code (--continents) in the place of a region.
			return fmt.Errorf("region name %q: lower case only, as the routers name regions (%q is a continent code: those go in --continents)", name, name)
		}
		if !isAlnum(ch) && ch != '-' && ch != '_' && ch != '.' {
			return fmt.Errorf("region name %q: want lower-case letters, digits, '-', '_' or '.'", name)
		}
	}
	return nil
}

func checkRouterURL(u *url.URL) error {
	for _, s := range []string{"http", "https"} {
		switch {
		case u.Scheme == "" && strings.HasPrefix(u.Path, s+"//"):
			return fmt.Errorf("no \":\" after %s (want %s://host:port)", s, s)
		case u.Scheme == s && u.Host == "" && strings.HasPrefix(u.Path, "/") && !strings.HasPrefix(u.Path, "//"):
			return fmt.Errorf("one \"/\" after %s: (want %s://host:port)", s, s)
		}
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme must be http or https")
	case u.User != nil:
		return fmt.Errorf("user information is not allowed (routers take no credentials in the URL)")
	case u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("want scheme://host:port with no path, query or fragment")
	}
	if err := checkHostPort(u.Host, true); err != nil {
		return err
	}
	if host, _, _ := net.SplitHostPort(u.Host); host == "" {
		return fmt.Errorf("no host (want scheme://host:port)")
	}
	return nil
}

func (c Config) validatePlacement() error {
	regions := c.RegionNames()
	if c.Continents != nil {
		// Sorted, so that the first error is the same on every run.
		codes := make([]string, 0, len(c.Continents))
		for k := range c.Continents {
			codes = append(codes, k)
		}
		slices.Sort(codes)
		for _, code := range codes {
			if !slices.Contains(clientinfo.ContinentCodes(), code) {
				return cfgErr("continents", "%q is not a continent code (want %s)", code, strings.Join(clientinfo.ContinentCodes(), ", "))
			}
			if r := c.Continents[code]; !slices.Contains(regions, r) {
				return cfgErr("continents", "%s maps to region %q, which --routers does not configure (want one of %s)",
					code, r, strings.Join(regions, ", "))
			}
		}
	}
	if c.DefaultRegion != "" && !slices.Contains(regions, c.DefaultRegion) {
		return cfgErr("default-region", "region %q is not configured by --routers (want one of %s)",
			c.DefaultRegion, strings.Join(regions, ", "))
	}
	if err := checkName(c.Pop); err != nil {
		return cfgErr("pop", "%v (FLY_REGION and the hostname gave none: set --pop)", err)
	}
	if c.Continent != "" && !slices.Contains(clientinfo.ContinentCodes(), c.Continent) {
		return cfgErr("continent", "%q is not a continent code (want %s, or empty)", c.Continent, strings.Join(clientinfo.ContinentCodes(), ", "))
	}
	if c.CountryHeader != "" {
		if !httpsyntax.Token(c.CountryHeader) {
			return cfgErr("country-header", "%q is not a header name", c.CountryHeader)
		}
		if len(c.TrustedProxies) == 0 {
			return cfgErr("country-header", "needs --trusted-proxies (the header is believed only from them)")
		}
	}
	return nil
}

// ClientIP modes (package clientinfo owns them).
const (
	ClientIPPeer          = clientinfo.ModePeer
	ClientIPProxyProtocol = clientinfo.ModeProxyProtocol
	ClientIPFly           = clientinfo.ModeFly
	ClientIPHeaderPrefix  = clientinfo.ModeHeaderPrefix
)

func (c Config) validateClientIP() error {
	switch c.ClientIP {
	case ClientIPPeer, ClientIPProxyProtocol, ClientIPFly:
	default:
		name, ok := strings.CutPrefix(c.ClientIP, ClientIPHeaderPrefix)
		if !ok {
			return cfgErr("client-ip", "%q is not a mode (want peer, proxy-protocol, fly or header:NAME)", c.ClientIP)
		}
		if !httpsyntax.Token(name) {
			return cfgErr("client-ip", "%q: %q is not a header name (want header:NAME, e.g. header:X-Forwarded-For)", c.ClientIP, name)
		}
		if len(c.TrustedProxies) == 0 {
			return cfgErr("client-ip", "%s needs --trusted-proxies (the header is believed only from them)", c.ClientIP)
		}
	}
	for _, p := range c.TrustedProxies {
		if !p.IsValid() {
			return cfgErr("trusted-proxies", "invalid prefix (want 10.0.0.0/8,fd00::/8 or addresses)")
		}
	}
	return nil
}

func (c Config) validateProtocol() error {
	if strings.ContainsAny(string(c.EntryToken), "\r\n\x00") {
		// Said without the token, which must never be printed.
		return cfgErr("entry-token", "contains a line break or NUL (is it read from a file with a trailing newline?)")
	}
	if c.CORS == "" || c.CORS == "*" {
		return nil
	}
	for _, o := range strings.Split(c.CORS, ",") {
		o = strings.TrimSpace(o)
		u, err := url.Parse(o)
		if o == "*" {
			return cfgErr("cors", "\"*\" must be alone (want * or a comma list of origins)")
		}
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
			return cfgErr("cors", "%q is not an origin (want * or a comma list such as https://app.example.com,http://localhost:3000)", o)
		}
	}
	return nil
}

func (c Config) validateLimits() error {
	if c.Homes < 1 || c.Homes > MaxHomes {
		return cfgErr("homes", "%d is out of range (want 1 to %d)", c.Homes, MaxHomes)
	}
	if err := checkDuration("read-backoff", c.ReadBackoff, MaxReadBackoff); err != nil {
		return err
	}
	if err := checkDuration("answer-timeout", c.AnswerTimeout, MaxAnswerTimeout); err != nil {
		return err
	}
	if c.BodyBuffer < 1 || c.BodyBuffer > MaxBodyBuffer {
		return cfgErr("body-buffer", "%d bytes is out of range (want 1 byte to 1GiB)", c.BodyBuffer)
	}
	return nil
}

func (c Config) validateGossip() error {
	if err := checkName(c.Node); err != nil {
		return cfgErr("node", "%v (FLY_MACHINE_ID and the hostname gave none: set --node)", err)
	}
	if err := checkHostPort(c.GossipBind, false); err != nil {
		return cfgErr("gossip-bind", "%v", err)
	}
	if c.GossipAdvertise != "" {
		if err := checkHostPort(c.GossipAdvertise, true); err != nil {
			return cfgErr("gossip-advertise", "%v", err)
		}
		host, _, _ := net.SplitHostPort(c.GossipAdvertise)
		if a, err := netip.ParseAddr(host); host == "" || (err == nil && a.IsUnspecified()) {
			return cfgErr("gossip-advertise", "%q: want the address peers reach this entry at, not a wildcard", c.GossipAdvertise)
		}
	}
	for _, p := range c.Join {
		if err := checkHostPort(p, true); err != nil {
			return cfgErr("join", "peer %q: %v (want host:port,...)", p, err)
		}
	}
	if c.JoinDNS != "" {
		host := c.JoinDNS
		if h, port, err := net.SplitHostPort(c.JoinDNS); err == nil {
			if err := checkPort(port, true); err != nil {
				return cfgErr("join-dns", "%q: %v", c.JoinDNS, err)
			}
			host = h
		}
		if !validDNSName(host) {
			return cfgErr("join-dns", "%q is not a DNS name (want NAME or NAME:PORT, e.g. my-app.internal)", c.JoinDNS)
		}
	}
	if n := len(c.GossipKey); n != 0 && n != 16 && n != 24 && n != 32 {
		return cfgErr("gossip-key", "not base64 of 16, 24 or 32 bytes")
	}
	if c.hasPeersToJoin() && len(c.GossipKey) == 0 && !c.InsecureGossip {
		return cfgErr("gossip-key", "required with --join or --join-dns (a node without it cannot join); "+
			"give --insecure-gossip to gossip in the clear")
	}
	if err := checkHostPort(c.RPCAddr, false); err != nil {
		return cfgErr("rpc-addr", "%v", err)
	}
	if c.RPCAuth == "" && !isLoopback(c.RPCAddr) {
		return cfgErr("rpc-auth", "required when --rpc-addr %q is not a loopback address "+
			"(serf's RPC can send events and make the entry leave)", c.RPCAddr)
	}
	return nil
}

// MinAdminToken is the shortest --admin-token taken (`openssl rand -hex 16` makes one).
const MinAdminToken = 16

func (c Config) validateOps() error {
	if err := checkHostPort(c.AdminListen, false); err != nil {
		return cfgErr("admin-listen", "%v", err)
	}
	if _, port, _ := net.SplitHostPort(c.Listen); c.AdminListen == c.Listen && port != "0" {
		return cfgErr("admin-listen", "%q is also --listen (want another address)", c.AdminListen)
	}
	if t := string(c.AdminToken); t != "" && (len(t) < MinAdminToken || strings.ContainsAny(t, " \t\r\n\x00")) {
		return cfgErr("admin-token", "want at least %d characters, without spaces or control characters", MinAdminToken)
	}
	if c.Drain < 0 || c.Drain > MaxDrain {
		return cfgErr("drain", "%v is out of range (want 0s to %v)", c.Drain, MaxDrain)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return cfgErr("log-level", "%q is not a level (want debug, info, warn or error)", c.LogLevel)
	}
	switch c.LogFormat {
	case "json", "console":
	default:
		return cfgErr("log-format", "%q is not a format (want json or console)", c.LogFormat)
	}
	return nil
}

// checkHostPort checks that s is host:port with a numeric port (0 allowed unless needPort:
// a listener may take any port, a peer must be dialable). The host may be empty (all
// interfaces), an IP address or a name.
func checkHostPort(s string, needPort bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port (want e.g. 127.0.0.1:8080, [::1]:8080 or :8080)", s)
	}
	if err := checkPort(port, needPort); err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	if host != "" && !validDNSName(host) {
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("%q: %q is neither an IP address nor a host name", s, host)
		}
	}
	return nil
}

func checkPort(port string, needPort bool) error {
	n, err := strconv.ParseUint(port, 10, 16)
	switch {
	case err != nil:
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	case n == 0 && needPort:
		return fmt.Errorf("port 0 cannot be dialled (want 1 to 65535)")
	}
	return nil
}

func checkDuration(flag string, d, max time.Duration) error {
	if d <= 0 || d > max {
		return cfgErr(flag, "%v is out of range (want more than 0s, at most %v)", d, max)
	}
	return nil
}

// checkName checks a --pop or --node name: 1 to MaxNameLen bytes of printable ASCII, no
// space (they travel as serf tags and node names and label the status page).
func checkName(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("longer than %d bytes", MaxNameLen)
	}
	for _, ch := range []byte(s) {
		if ch <= ' ' || ch > '~' {
			return fmt.Errorf("%q has a space or a character outside printable ASCII", s)
		}
	}
	return nil
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func isAlnum(ch byte) bool {
	return ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9'
}

// validDNSName reports whether s is a host name: dot-separated labels of letters, digits,
// '-' and '_' (container names have them), not starting or ending with '-', with an optional
// final dot. It takes no IP address
// with ':' and no name of only digits and dots.
func validDNSName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	allDigits := true
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, ch := range []byte(label) {
			if !isAlnum(ch) && ch != '-' && ch != '_' {
				return false
			}
			if ch < '0' || ch > '9' {
				allDigits = false
			}
		}
	}
	return !allDigits
}
