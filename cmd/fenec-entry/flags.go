package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fenec/fenec-entry/node"
)

// errHelp is returned by parse for -h, -help, --help.
var errHelp = errors.New("help requested")

// envPrefix is the prefix of every flag's environment variable.
const envPrefix = "FENEC_ENTRY_"

// flagDef is one flag of `serve`: how it is shown in --help and how its text becomes a field
// of node.Config.
type flagDef struct {
	name   string // without dashes
	arg    string // what the value looks like, in --help; "" for a boolean flag
	group  string
	usage  string
	def    string // the default as --help shows it; "" for unset
	later  string // what the flag waits for to take effect, if anything
	secret bool   // its value is never shown, not even in an error
	isBool bool
	apply  func(c *node.Config, v string) error // v is the flag's text; errors say what is wrong, without the flag
}

// reloadable says whether a reload of --config applies the flag (node.Reloadable).
func (d *flagDef) reloadable() bool { return slices.Contains(node.Reloadable, d.name) }

// envName returns the flag's environment variable: FENEC_ENTRY_ and the name in capitals,
// dashes as underscores.
func (d *flagDef) envName() string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(d.name, "-", "_"))
}

const (
	groupClient    = "Client listener"
	groupRouters   = "Routers"
	groupPlacement = "Where a tenant heard nowhere goes first, and who the client is"
	groupProtocol  = "Shared with the routers"
	groupGossip    = "Gossip"
	groupOps       = "Operations"
)

var groups = []string{groupClient, groupRouters, groupPlacement, groupProtocol, groupGossip, groupOps}

// flags are the flags of `serve`, in the order of docs/REFERENCE.md, Configuration, within
// each group.
var flags = []*flagDef{
	{name: "listen", arg: "host:port", group: groupClient, def: node.DefaultListen,
		usage: "client-facing HTTP/1.1 and h2c listener (HTTPS with --tls-cert)",
		apply: setString(func(c *node.Config) *string { return &c.Listen })},
	{name: "tls-cert", arg: "file", group: groupClient,
		usage: "serve HTTPS (HTTP/1.1 and h2 by ALPN) with this PEM certificate chain, reloaded when it changes",
		apply: setString(func(c *node.Config) *string { return &c.TLSCert })},
	{name: "tls-key", arg: "file", group: groupClient,
		usage: "the PEM private key of --tls-cert",
		apply: setString(func(c *node.Config) *string { return &c.TLSKey })},
	{name: "max-inflight", arg: "n", group: groupClient, def: strconv.Itoa(node.DefaultMaxInflight),
		usage: "requests in flight at once; beyond it the entry answers 503 overloaded at once",
		apply: setInt(func(c *node.Config) *int { return &c.MaxInflight })},
	{name: "max-conns", arg: "n", group: groupClient, def: "0",
		usage: "client connections held at once; 0: the open-file limit less a reserve for routers, gossip and files. " +
			"At the limit the longest-idle kept-alive connections are closed first",
		apply: setInt(func(c *node.Config) *int { return &c.MaxConns })},
	{name: "header-timeout", arg: "duration", group: groupClient, def: node.DefaultHeaderTimeout.String(),
		usage: "a connection whose request head is incomplete after this is closed (a head past the door's limits is refused: 414, 431)",
		apply: setDuration(func(c *node.Config) *time.Duration { return &c.HeaderTimeout })},
	{name: "http1-server", arg: "kind", group: groupClient, def: node.DefaultHTTP1Server,
		usage: "HTTP/1.x, plain and over TLS: lean (an idle connection holds no goroutine and no buffer; Linux only) or std " +
			"(Go's net/http server); the default is the one this build has. h2, h2c and proxy-protocol connections are net/http's either way",
		apply: setString(func(c *node.Config) *string { return &c.HTTP1Server })},

	{name: "routers", arg: "spec", group: groupRouters,
		usage: "required: regions and their routers, in fallback order, eu=http://r1:7000,http://r2:7000;us=http://r3:7000; " +
			"a router may be dns+http://NAME:PORT (every address NAME resolves to) or srv+http://NAME (every SRV target and port), https too",
		apply: func(c *node.Config, v string) (err error) { c.Routers, err = parseRouters(v); return err }},
	{name: "resolve-interval", arg: "duration", group: groupRouters, def: node.DefaultResolveInterval.String(),
		usage: "how often the routers' DNS names are resolved again (a name that fails keeps its last answer)",
		apply: setDuration(func(c *node.Config) *time.Duration { return &c.ResolveInterval })},
	{name: "dns-server", arg: "ip:port", group: groupRouters,
		usage: "the DNS server asked for the routers' names (Consul's DNS: 127.0.0.1:8600) instead of the system's",
		apply: setString(func(c *node.Config) *string { return &c.DNSServer })},
	{name: "router-ca", arg: "file", group: groupRouters,
		usage: "extra CA certificates (PEM) for routers reached over https://",
		apply: setString(func(c *node.Config) *string { return &c.RouterCA })},
	{name: "answer-timeout", arg: "duration", group: groupRouters, def: node.DefaultAnswerTimeout.String(),
		usage: "a router that sends no answer head within this has failed (keep it above a held write's 30s)",
		apply: setDuration(func(c *node.Config) *time.Duration { return &c.AnswerTimeout })},
	{name: "body-buffer", arg: "size", group: groupRouters, def: "1MiB",
		usage: "request bodies up to this are kept for a retry (1MiB, 512KiB, 1048576; at most 1GiB)",
		apply: func(c *node.Config, v string) (err error) { c.BodyBuffer, err = parseSize(v); return err }},
	{name: "read-backoff", arg: "duration", group: groupRouters, def: node.DefaultReadBackoff.String(),
		usage: "how long a failed region is asked last by reads and keyed writes",
		apply: setDuration(func(c *node.Config) *time.Duration { return &c.ReadBackoff })},
	{name: "homes", arg: "n", group: groupRouters, def: strconv.Itoa(node.DefaultHomes),
		usage: "homes kept by this entry, the first heard forgotten first",
		apply: setInt(func(c *node.Config) *int { return &c.Homes })},

	{name: "continents", arg: "map", group: groupPlacement, def: "EU=eu,AF=eu,NA=us,SA=us,AS=ap,OC=ap,AN=ap (configured regions only)",
		usage: "client continent to region, for tenants heard nowhere; empty for no mapping",
		apply: func(c *node.Config, v string) (err error) { c.Continents, err = parseContinents(v); return err }},
	{name: "default-region", arg: "region", group: groupPlacement, def: "the first region of --routers",
		usage: "asked first for a continent with no mapping",
		apply: setString(func(c *node.Config) *string { return &c.DefaultRegion })},
	{name: "pop", arg: "name", group: groupPlacement, def: "$FLY_REGION, else the hostname",
		usage: "this entry's PoP name",
		apply: setString(func(c *node.Config) *string { return &c.Pop })},
	{name: "continent", arg: "code", group: groupPlacement, def: "the continent of $FLY_REGION, else unset",
		usage: "this entry's continent (EU, NA, SA, AS, OC, AF, AN), the clients' when nothing else says",
		apply: func(c *node.Config, v string) error { c.Continent = strings.ToUpper(strings.TrimSpace(v)); return nil }},
	{name: "geoip", arg: "file", group: groupPlacement,
		usage: "a .mmdb file (MaxMind/DB-IP country or city) giving the client's continent; read at start",
		apply: setString(func(c *node.Config) *string { return &c.GeoIP })},
	{name: "country-header", arg: "name", group: groupPlacement,
		usage: "a header naming the client's country (ISO code, e.g. CF-IPCountry), asked when --geoip does not answer; believed only from --trusted-proxies",
		apply: setString(func(c *node.Config) *string { return &c.CountryHeader })},
	{name: "client-ip", arg: "mode", group: groupPlacement, def: node.DefaultClientIP,
		usage: "where the client's address comes from: peer, proxy-protocol (a PROXY v1/v2 header required on every connection), " +
			"fly (Fly-Client-IP) or header:NAME (needs --trusted-proxies)",
		apply: setString(func(c *node.Config) *string { return &c.ClientIP })},
	{name: "trusted-proxies", arg: "cidrs", group: groupPlacement,
		usage: "peers whose address and country headers are believed: 10.0.0.0/8,fd00::/8; with proxy-protocol, the only peers accepted",
		apply: func(c *node.Config, v string) (err error) { c.TrustedProxies, err = parseCIDRs(v); return err }},

	{name: "entry-token", arg: "secret", group: groupProtocol, secret: true,
		usage: "shared with the routers' --entry-token; enables Fenec-Client",
		apply: func(c *node.Config, v string) error { c.EntryToken = node.Secret(v); return nil }},
	{name: "cors", arg: "origins", group: groupProtocol,
		usage: "the routers' --http-cors: * or a comma list of origins; the entry answers preflights",
		apply: setString(func(c *node.Config) *string { return &c.CORS })},

	{name: "node", arg: "name", group: groupGossip, def: "$FLY_MACHINE_ID, else the hostname (-<port> added when --gossip-bind is not on 7946)",
		usage: "this entry's serf node name (also stamps its home observations)",
		apply: setString(func(c *node.Config) *string { return &c.Node })},
	{name: "gossip-bind", arg: "host:port", group: groupGossip, def: node.DefaultGossipBind,
		usage: "serf/memberlist address (UDP and TCP)",
		apply: setString(func(c *node.Config) *string { return &c.GossipBind })},
	{name: "gossip-advertise", arg: "host:port", group: groupGossip, def: "detected",
		usage: "the address peers reach this entry at",
		apply: setString(func(c *node.Config) *string { return &c.GossipAdvertise })},
	{name: "join", arg: "peers", group: groupGossip,
		usage: "peers host:port,...; retried every 5s, serving alone until one answers",
		apply: func(c *node.Config, v string) error { c.Join = parseList(v); return nil }},
	{name: "join-dns", arg: "name", group: groupGossip,
		usage: "a name resolved every 5s for peers (on Fly: <app>.internal)",
		apply: setString(func(c *node.Config) *string { return &c.JoinDNS })},
	{name: "gossip-key", arg: "base64", group: groupGossip, secret: true,
		usage: "base64 of a 16, 24 or 32-byte key: gossip is encrypted; required to join peers",
		apply: setGossipKey},
	{name: "insecure-gossip", group: groupGossip, isBool: true, def: "false",
		usage: "allow joining peers without --gossip-key (gossip in the clear)",
		apply: setBool(func(c *node.Config) *bool { return &c.InsecureGossip })},
	{name: "rpc-addr", arg: "host:port", group: groupGossip, def: node.DefaultRPCAddr,
		usage: "serf's RPC, for `serf members -rpc-addr ...`; not loopback needs --rpc-auth",
		apply: setString(func(c *node.Config) *string { return &c.RPCAddr })},
	{name: "rpc-auth", arg: "secret", group: groupGossip, secret: true,
		usage: "token every serf RPC client must send (-rpc-auth)",
		apply: func(c *node.Config, v string) error { c.RPCAuth = node.Secret(v); return nil }},

	{name: "admin-listen", arg: "host:port", group: groupOps, def: node.DefaultAdminListen,
		usage: "/metrics, /status, /status.json, /healthz, /readyz (open to whoever reaches it) and POST /reload (loopback or --admin-token)",
		apply: setString(func(c *node.Config) *string { return &c.AdminListen })},
	{name: "admin-token", arg: "secret", group: groupOps, secret: true,
		usage: "lets POST /reload come from anywhere with Authorization: Bearer <token> (16 characters at least); without it only loopback may",
		apply: func(c *node.Config, v string) error { c.AdminToken = node.Secret(v); return nil }},
	{name: "drain", arg: "duration", group: groupOps, def: node.DefaultDrain.String(),
		usage: "after SIGTERM, keep serving this long with Connection: close, then stop (open requests get 10s more)",
		apply: setDuration(func(c *node.Config) *time.Duration { return &c.Drain })},
	{name: "log-level", arg: "level", group: groupOps, def: node.DefaultLogLevel,
		usage: "debug (a line per request), info, warn or error",
		apply: func(c *node.Config, v string) error { c.LogLevel = strings.ToLower(strings.TrimSpace(v)); return nil }},
	{name: "config", arg: "file", group: groupOps,
		usage: "a file of FENEC_ENTRY_NAME=value lines (systemd's EnvironmentFile format), read at start after the environment; " +
			"SIGHUP or POST /reload re-read it and apply the settings marked [reload], all at once or none",
		apply: setString(func(c *node.Config) *string { return &c.ConfigFile })},
	{name: "log-format", arg: "format", group: groupOps, def: node.DefaultLogFormat,
		usage: "json (one object per line) or console (for people)",
		apply: func(c *node.Config, v string) error { c.LogFormat = strings.ToLower(strings.TrimSpace(v)); return nil }},
	{name: "state-dir", arg: "dir", group: groupOps,
		usage: "keep the home table, serf's member snapshot and, with --tls-cert, the TLS session ticket keys in this existing, " +
			"writable directory (the table written every 5s at most, and at the drain), so that a restart is ready at once " +
			"with what the entry knew, rejoins the members it knew and resumes its clients' TLS sessions",
		apply: setString(func(c *node.Config) *string { return &c.StateDir })},
	{name: "pid-file", arg: "file", group: groupOps,
		usage: "write the process's PID here once it serves, and the new process's after an upgrade in place (SIGUSR2), for systemd's PIDFile=",
		apply: setString(func(c *node.Config) *string { return &c.PIDFile })},
}

func lookupFlag(name string) *flagDef {
	for _, d := range flags {
		if d.name == name {
			return d
		}
	}
	return nil
}

// parse turns serve's arguments and environment into a validated node.Config. Each flag's
// value is taken from the command line, else from its FENEC_ENTRY_ variable (empty counts as
// unset), else from its default; --pop, --continent and --node default from FLY_REGION,
// FLY_MACHINE_ID and the hostname. It returns errHelp for -h/--help, and otherwise the first
// error as a *node.ConfigError (one line, naming the flag, never holding a secret) or, for a
// stray argument, a plain error.
//
// The warnings are what it found that works but is probably a mistake (warnSecrets); serve
// logs them at start.
func parse(args []string, env func(string) string) (node.Config, []warning, error) {
	return parseWith(args, env, os.Hostname)
}

func parseWith(args []string, env func(string) string, hostname func() (string, error)) (node.Config, []warning, error) {
	cfg, in, err := parseInput(args, env, hostname)
	if err != nil {
		return node.Config{}, nil, err
	}
	return cfg, in.warnSecrets(), nil
}

func parseInput(args []string, env func(string) string, hostname func() (string, error)) (node.Config, input, error) {
	cmdline, err := scanArgs(args)
	if err != nil {
		return node.Config{}, input{}, err
	}
	in := input{cmdline: cmdline, env: env, hostname: hostname}
	if p, ok := cmdline["config"]; ok {
		in.path = strings.TrimSpace(p)
	} else {
		in.path = strings.TrimSpace(env(lookupFlag("config").envName()))
	}
	file, err := in.readFile()
	if err != nil {
		return node.Config{}, input{}, err
	}
	in.shadow = map[string]bool{}
	for name := range file {
		in.shadow[name] = true
	}
	cfg, texts, err := in.build(file)
	if err != nil {
		return node.Config{}, input{}, err
	}
	in.texts = texts
	if in.path != "" {
		cfg.Reloader = in.reloader(texts)
	}
	return cfg, in, nil
}

// input is where serve's settings come from: the command line, then --config's file, then
// the environment, then the defaults.
type input struct {
	cmdline  map[string]string
	env      func(string) string
	hostname func() (string, error)
	path     string            // --config; "" for none
	shadow   map[string]bool   // flags the file held at start: their variable is not read
	texts    map[string]string // the text each flag took (build's)
}

// readFile reads the --config file's settings by flag name (nil without --config). Its
// errors are *node.ConfigError naming --config: the file, then its line (lineErr).
func (in input) readFile() (map[string]envVar, error) {
	if in.path == "" {
		return nil, nil
	}
	vars, err := readEnvFile(in.path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &node.ConfigError{Flag: "config", Msg: fmt.Sprintf("%s: %v", in.path, err)}
	}
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return vars[a].line - vars[b].line })
	out := map[string]envVar{}
	for _, name := range names {
		v := vars[name]
		bad := func(msg string) error { return in.lineErr(v.line, msg) }
		if !strings.HasPrefix(name, envPrefix) {
			// GOMAXPROCS and the like are the unit's, not the entry's; but ROUTERS= is a
			// flag's variable without its prefix, which would be ignored without a word.
			if d := lookupFlag(strings.ToLower(strings.ReplaceAll(name, "_", "-"))); d != nil {
				return nil, bad(name + " names no flag: --" + d.name + "'s variable is " + d.envName())
			}
			continue
		}
		if buildEnv[name] {
			continue
		}
		flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, envPrefix), "_", "-"))
		if why, ok := removedEnv[name]; ok {
			return nil, bad(why)
		}
		d := lookupFlag(flag)
		if d != nil && d.envName() != name {
			d = nil // as in the environment, names are upper case: FENEC_ENTRY_log_level is a typo
		}
		switch {
		case d == nil:
			return nil, bad(name + " names no flag (see fenec-entry serve --help)")
		case flag == "config":
			return nil, bad(name + " cannot name another file from within one")
		}
		if _, dup := in.cmdline[flag]; dup {
			return nil, bad(name + ": --" + flag + " is given on the command line and in --config: give it in one place")
		}
		out[flag] = v
	}
	return out, nil
}

// lineErr is an error of line n of --config's file, in the one format of every error of a
// file: "--config: <path>: line <n>: <what>" (parseEnvFile's, after the path, are the same).
func (in input) lineErr(n int, what string) error {
	return &node.ConfigError{Flag: "config", Msg: fmt.Sprintf("%s: line %d: %s", in.path, n, what)}
}

// build makes the Config of in with file's settings, and returns the text each flag took.
func (in input) build(file map[string]envVar) (node.Config, map[string]string, error) {
	host, _ := in.hostname()
	env := in.env
	cfg := node.DefaultConfig()
	cfg.Pop = defaultPop(env("FLY_REGION"), host)
	cfg.Continent = defaultContinent(env("FLY_REGION"))
	cfg.Node = "" // derived below from --gossip-bind unless given
	texts := map[string]string{}
	// Where each flag's text came from, for its errors: a line of the file is named as the
	// file's errors are ("--config: c.env: line 2: FENEC_ENTRY_ROUTERS: ..."), a variable
	// after the flag ("--routers: FENEC_ENTRY_ROUTERS: ..."); the command line needs nothing.
	froms := map[string]func(*node.ConfigError) error{}
	for _, d := range flags {
		v, ok := in.cmdline[d.name]
		if !ok {
			fv, inFile := file[d.name]
			name := d.envName()
			switch {
			case inFile:
				v = fv.value
				froms[d.name] = func(ce *node.ConfigError) error { return in.lineErr(fv.line, name+": "+ce.Msg) }
			case in.shadow[d.name]:
				continue // in the file at start, gone from it now: the default, not a stale variable
			default:
				v = env(name)
				froms[d.name] = func(ce *node.ConfigError) error {
					return &node.ConfigError{Flag: ce.Flag, Msg: name + ": " + ce.Msg}
				}
			}
			if v == "" {
				continue
			}
		}
		texts[d.name] = v
		if err := d.apply(&cfg, v); err != nil {
			msg := err.Error()
			if d.secret {
				msg = "bad value" // apply of a secret never says more, but be sure
				var se secretError
				if errors.As(err, &se) {
					msg = string(se)
				}
			}
			ce := &node.ConfigError{Flag: d.name, Msg: msg}
			if from := froms[d.name]; from != nil {
				return node.Config{}, nil, from(ce)
			}
			return node.Config{}, nil, ce
		}
	}
	if cfg.Node == "" {
		cfg.Node = defaultNode(env("FLY_MACHINE_ID"), host, cfg.GossipBind)
	}
	if err := cfg.Validate(); err != nil {
		// Say where the setting came from, as apply's errors do.
		var ce *node.ConfigError
		if errors.As(err, &ce) && froms[ce.Flag] != nil {
			return node.Config{}, nil, froms[ce.Flag](ce)
		}
		return node.Config{}, nil, err
	}
	return cfg, texts, nil
}

// reloader re-reads the file for a reload: the whole new Config, and the flags a reload does
// not apply whose text differs from start's.
func (in input) reloader(start map[string]string) node.Reloader {
	return func() (node.Config, []string, error) {
		file, err := in.readFile()
		if err != nil {
			return node.Config{}, nil, err
		}
		cfg, texts, err := in.build(file)
		if err != nil {
			return node.Config{}, nil, err
		}
		var restart []string
		for _, d := range flags {
			if !d.reloadable() && texts[d.name] != start[d.name] {
				restart = append(restart, d.name)
			}
		}
		return cfg, restart, nil
	}
}

// scanArgs reads flags the way Go's flag package does (-name, --name, -name=value,
// --name value, a boolean flag alone or as --name=false, "--" ends the flags) and returns
// the value of each. A flag given twice is refused rather than the last one kept: a second
// --routers is more often a region meant to be added than one meant to replace the first
// (docs/DECISIONS.md, "Flags, checks and exit statuses"). Its errors name the flag and never
// print a value.
func scanArgs(args []string) (map[string]string, error) {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) {
				return nil, fmt.Errorf("serve takes no arguments, only flags: argument %d is not a flag (see --help)", i+2)
			}
			break
		}
		if len(a) < 2 || a[0] != '-' {
			return nil, fmt.Errorf("serve takes no arguments, only flags: argument %d is not a flag (see --help)", i+1)
		}
		name := strings.TrimPrefix(a[1:], "-")
		name, val, hasVal := strings.Cut(name, "=")
		if name == "" || name[0] == '-' {
			return nil, &node.ConfigError{Flag: strings.TrimLeft(name, "-"), Msg: "bad flag syntax (want --name value or --name=value)"}
		}
		if name == "h" || name == "help" {
			return nil, errHelp
		}
		d := lookupFlag(name)
		if d == nil {
			if why, ok := removedEnv[(&flagDef{name: name}).envName()]; ok {
				_, why, _ = strings.Cut(why, " is gone: ")
				return nil, &node.ConfigError{Flag: name, Msg: "no longer a flag: " + why}
			}
			return nil, &node.ConfigError{Flag: name, Msg: "unknown flag (see fenec-entry serve --help)"}
		}
		switch {
		case hasVal:
		case d.isBool:
			val = "true"
		case i+1 < len(args):
			i++
			val = args[i]
		default:
			return nil, &node.ConfigError{Flag: name, Msg: "needs a value (" + d.arg + ")"}
		}
		if _, dup := out[name]; dup {
			return nil, &node.ConfigError{Flag: name, Msg: "given twice on the command line: give it once (the second would replace the first)"}
		}
		out[name] = val
	}
	return out, nil
}

func setString(field func(*node.Config) *string) func(*node.Config, string) error {
	return func(c *node.Config, v string) error {
		*field(c) = strings.TrimSpace(v)
		return nil
	}
}

func setInt(field func(*node.Config) *int) func(*node.Config, string) error {
	return func(c *node.Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*field(c) = n
		return nil
	}
}

func setBool(field func(*node.Config) *bool) func(*node.Config, string) error {
	return func(c *node.Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*field(c) = b
		return nil
	}
}

func setDuration(field func(*node.Config) *time.Duration) func(*node.Config, string) error {
	return func(c *node.Config, v string) (err error) {
		*field(c), err = parseDuration(v)
		return err
	}
}

func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (want e.g. 10s, 1m30s, 500ms)", v)
	}
	return d, nil
}

// secretError is an error about a secret flag's value that says what is wrong without it.
type secretError string

func (e secretError) Error() string { return string(e) }

// setGossipKey decodes --gossip-key: standard base64, with or without padding, of 16, 24 or
// 32 bytes (what `serf keygen` prints).
func setGossipKey(c *node.Config, v string) error {
	v = strings.TrimSpace(v)
	key, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(v)
	}
	if err != nil || (len(key) != 16 && len(key) != 24 && len(key) != 32) {
		return secretError("not base64 of 16, 24 or 32 bytes")
	}
	c.GossipKey = key
	return nil
}

// removedEnv are variables of flags that no longer exist, with what replaced them.
var removedEnv = map[string]string{
	envPrefix + "SNAPSHOT_LISTEN": "--snapshot-listen is gone: the joiner's table and repair travel on --gossip-bind",
	envPrefix + "WORKERS":         "--workers is gone: the entry is one process, on every CPU it may use",
	envPrefix + "REUSE_PORT":      "--reuse-port is gone: the entry is one process, on every CPU it may use",
}

// buildEnv are variables a build reads that are not flags (the -tags pprof build's
// FENEC_ENTRY_PPROF_ADDR): no warning for them.
var buildEnv = map[string]bool{}

// unknownEnv returns a warning for each FENEC_ENTRY_* variable in environ that names no flag:
// a typo or a removed flag would otherwise be ignored without a word. Never the value.
func unknownEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) {
			continue
		}
		flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, envPrefix), "_", "-"))
		if lookupFlag(flag) != nil || buildEnv[name] {
			continue
		}
		if why, ok := removedEnv[name]; ok {
			out = append(out, name+" is set and ignored: "+why)
			continue
		}
		out = append(out, name+" is set and ignored: no flag --"+flag+" (see fenec-entry serve --help)")
	}
	return out
}
