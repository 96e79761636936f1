package node

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/clientinfo"
)

// redacted is what a secret prints as.
const redacted = "[redacted]"

// Secret is a string that is never printed: every fmt verb, JSON and text marshalling show
// "[redacted]" for a set secret and "" for an empty one. Use string(s) where the value is
// needed (and only there).
type Secret string

// Format implements fmt.Formatter for every verb, %#v included.
func (s Secret) Format(f fmt.State, verb rune) { fmt.Fprint(f, s.shown()) }

// String implements fmt.Stringer.
func (s Secret) String() string { return s.shown() }

// MarshalText implements encoding.TextMarshaler (and so JSON).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.shown()), nil }

func (s Secret) shown() string {
	if s == "" {
		return ""
	}
	return redacted
}

// SecretBytes is a byte slice that is never printed, like Secret.
type SecretBytes []byte

// Format implements fmt.Formatter for every verb, %#v included.
func (s SecretBytes) Format(f fmt.State, verb rune) { fmt.Fprint(f, s.shown()) }

// String implements fmt.Stringer.
func (s SecretBytes) String() string { return s.shown() }

// MarshalText implements encoding.TextMarshaler (and so JSON).
func (s SecretBytes) MarshalText() ([]byte, error) { return []byte(s.shown()), nil }

func (s SecretBytes) shown() string {
	if len(s) == 0 {
		return ""
	}
	return redacted
}

// String summarises c on one line, secrets shown only as set or not. It is what %v, %+v and
// %s print.
func (c Config) String() string {
	var b strings.Builder
	b.WriteString("node.Config{")
	first := true
	for _, kv := range c.summary() {
		if !first {
			b.WriteByte(' ')
		}
		first = false
		b.WriteString(kv.key)
		b.WriteByte('=')
		b.WriteString(kv.val)
	}
	b.WriteByte('}')
	return b.String()
}

// GoString is what %#v prints: the same summary, never the secrets.
func (c Config) GoString() string { return c.String() }

// MarshalZerologObject logs the summary of c as fields, secrets only as set or not.
func (c Config) MarshalZerologObject(e *zerolog.Event) {
	for _, kv := range c.summary() {
		e.Str(kv.key, kv.val)
	}
}

type keyVal struct{ key, val string }

// summary is the one place that lists what of a Config may be shown. A field added to Config
// is not shown until it is added here, so a new secret cannot leak by default.
func (c Config) summary() []keyVal {
	var regions []string
	for _, r := range c.Routers {
		var us []string
		for _, u := range r.Routers {
			us = append(us, u.Redacted())
		}
		regions = append(regions, r.Name+"="+strings.Join(us, ","))
	}
	var conts []string
	cm := c.ContinentMap()
	for _, k := range clientinfo.ContinentCodes() {
		if v, ok := cm[k]; ok {
			conts = append(conts, k+"="+v)
		}
	}
	var proxies []string
	for _, p := range c.TrustedProxies {
		proxies = append(proxies, p.String())
	}
	set := func(ok bool) string {
		if ok {
			return "set"
		}
		return "unset"
	}
	return []keyVal{
		{"listen", c.Listen},
		{"tls_cert", c.TLSCert},
		{"tls_key", c.TLSKey},
		{"max_inflight", fmt.Sprint(c.MaxInflight)},
		{"max_conns", fmt.Sprint(c.MaxConns)},
		{"header_timeout", c.HeaderTimeout.String()},
		{"http1_server", c.HTTP1Server},
		{"routers", strings.Join(regions, ";")},
		{"resolve_interval", c.ResolveInterval.String()},
		{"dns_server", c.DNSServer},
		{"router_ca", c.RouterCA},
		{"answer_timeout", c.AnswerTimeout.String()},
		{"body_buffer", fmt.Sprint(c.BodyBuffer)},
		{"read_backoff", c.ReadBackoff.String()},
		{"homes", fmt.Sprint(c.Homes)},
		{"continents", strings.Join(conts, ",")},
		{"default_region", c.DefaultRegionName()},
		{"pop", c.Pop},
		{"continent", c.Continent},
		{"geoip", c.GeoIP},
		{"country_header", c.CountryHeader},
		{"client_ip", c.ClientIP},
		{"trusted_proxies", strings.Join(proxies, ",")},
		{"entry_token", set(c.EntryToken != "")},
		{"cors", c.CORS},
		{"node", c.Node},
		{"gossip_bind", c.GossipBind},
		{"gossip_advertise", c.GossipAdvertise},
		{"join", strings.Join(c.Join, ",")},
		{"join_dns", c.JoinDNS},
		{"gossip_key", set(len(c.GossipKey) > 0)},
		{"insecure_gossip", fmt.Sprint(c.InsecureGossip)},
		{"rpc_addr", c.RPCAddr},
		{"rpc_auth", set(c.RPCAuth != "")},
		{"admin_listen", c.AdminListen},
		{"admin_token", set(c.AdminToken != "")},
		{"drain", c.Drain.String()},
		{"log_level", c.LogLevel},
		{"log_format", c.LogFormat},
		{"config", c.ConfigFile},
		{"state_dir", c.StateDir},
		{"pid_file", c.PIDFile},
		{"version", c.Version},
	}
}
