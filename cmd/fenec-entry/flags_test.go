package main

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fenec/fenec-entry/node"
)

const testRouters = "eu=http://127.0.0.1:7101,http://127.0.0.1:7102;us=http://127.0.0.1:7201"

// envOf returns an environment lookup over m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func noHost() (string, error) { return "", errors.New("no hostname") }

func TestParseEnvAndFlags(t *testing.T) {
	env := map[string]string{
		"FENEC_ENTRY_ROUTERS":         testRouters,
		"FENEC_ENTRY_LISTEN":          "127.0.0.1:9000",
		"FENEC_ENTRY_BODY_BUFFER":     "512KiB",
		"FENEC_ENTRY_DRAIN":           "3s",
		"FENEC_ENTRY_ENTRY_TOKEN":     "tok",
		"FENEC_ENTRY_GOSSIP_KEY":      "AAAAAAAAAAAAAAAAAAAAAA==",
		"FENEC_ENTRY_JOIN":            "10.0.0.2:7946, 10.0.0.3:7946",
		"FENEC_ENTRY_INSECURE_GOSSIP": "", // empty counts as unset
		"FLY_REGION":                  "fra",
		"FLY_MACHINE_ID":              "148ed193b95e89",
	}
	cfg, _, err := parseWith([]string{"--listen", "127.0.0.1:9001", "-homes=7", "--continents", "EU=us", "--insecure-gossip"},
		envOf(env), noHost)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"flag wins over env", cfg.Listen, "127.0.0.1:9001"},
		{"env applies", cfg.BodyBuffer, int64(512 << 10)},
		{"env duration", cfg.Drain, 3 * time.Second},
		{"single dash and =", cfg.Homes, 7},
		{"routers from env", len(cfg.Routers), 2},
		{"continents", cfg.Continents["EU"], "us"},
		{"bool flag alone", cfg.InsecureGossip, true},
		{"secret", string(cfg.EntryToken), "tok"},
		{"gossip key", len(cfg.GossipKey), 16},
		{"join list", strings.Join(cfg.Join, " "), "10.0.0.2:7946 10.0.0.3:7946"},
		{"pop from FLY_REGION", cfg.Pop, "fra"},
		{"continent from FLY_REGION", cfg.Continent, "EU"},
		{"node from FLY_MACHINE_ID", cfg.Node, "148ed193b95e89"},
		{"default kept", cfg.AnswerTimeout, node.DefaultAnswerTimeout},
		{"default admin", cfg.AdminListen, node.DefaultAdminListen},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestParseHostnameDefaults(t *testing.T) {
	cfg, _, err := parseWith([]string{"--routers", testRouters}, envOf(nil),
		func() (string, error) { return "box-7", nil })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pop != "box-7" || cfg.Node != "box-7" || cfg.Continent != "" {
		t.Errorf("pop %q node %q continent %q, want the hostname and no continent", cfg.Pop, cfg.Node, cfg.Continent)
	}
	// Flags win over FLY_*.
	cfg, _, err = parseWith([]string{"--routers", testRouters, "--pop", "ams-1", "--node", "n1", "--continent", "na"},
		envOf(map[string]string{"FLY_REGION": "fra", "FLY_MACHINE_ID": "m"}), noHost)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pop != "ams-1" || cfg.Node != "n1" || cfg.Continent != "NA" {
		t.Errorf("pop %q node %q continent %q", cfg.Pop, cfg.Node, cfg.Continent)
	}
	// No hostname and no FLY_*: --pop is asked for.
	_, _, err = parseWith([]string{"--routers", testRouters}, envOf(nil), noHost)
	if err == nil || !strings.HasPrefix(err.Error(), "--pop: ") {
		t.Errorf("without any name: %v, want a --pop error", err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		flag string // the message must start with "--flag: "
		want string // and contain this
	}{
		{"unknown flag", []string{"--nope=1"}, nil, "nope", "unknown flag"},
		{"missing value", []string{"--routers", testRouters, "--listen"}, nil, "listen", "needs a value"},
		{"bad syntax", []string{"---listen", ":1"}, nil, "listen", "bad flag syntax"},
		{"no routers", nil, nil, "routers", "required"},
		{"bad routers", []string{"--routers", "eu="}, nil, "routers", `region "eu" has no routers`},
		{"router scheme", []string{"--routers", "eu=ftp://r:1"}, nil, "routers", "scheme must be http or https"},
		{"router without the colon", []string{"--routers", "eu=http//r1:7000"}, nil, "routers", `no ":" after http (want http://host:port)`},
		{"router without the colon, https", []string{"--routers", "eu=https//r1:7000"}, nil, "routers", `no ":" after https (want https://host:port)`},
		{"router with one slash", []string{"--routers", "eu=http:/r1:7000"}, nil, "routers", `one "/" after http: (want http://host:port)`},
		{"routers given twice", []string{"--routers", "eu=http://r1:7000", "--routers", "us=http://r3:7000"}, nil, "routers", "given twice on the command line"},
		{"bool given twice", []string{"--insecure-gossip", "--insecure-gossip=false"}, nil, "insecure-gossip", "given twice"},
		{"router list ends in a comma", []string{"--routers", "eu=http://r1:7101,"}, nil, "routers", `region "eu": an empty router`},
		{"region list ends in a semicolon", []string{"--routers", "eu=http://r1:7101;"}, nil, "routers", "an empty region"},
		{"upper-case region", []string{"--routers", "EU=http://r1:7101"}, nil, "routers", `region name "EU": lower case only`},
		{"env upper-case region", nil, map[string]string{"FENEC_ENTRY_ROUTERS": "eu=http://r1:7101;US=http://r3:7101"}, "routers",
			`FENEC_ENTRY_ROUTERS: region name "US": lower case only`},
		{"bad int", []string{"--max-inflight", "many"}, nil, "max-inflight", `"many" is not a whole number`},
		{"removed flag", []string{"--routers", testRouters, "--workers", "2"}, nil, "workers", "no longer a flag: the entry is one process"},
		{"removed bool flag", []string{"--routers", testRouters, "--reuse-port"}, nil, "reuse-port", "no longer a flag: the entry is one process"},
		{"bad duration", []string{"--read-backoff", "10"}, nil, "read-backoff", "not a duration"},
		{"bad size", []string{"--body-buffer", "2XB"}, nil, "body-buffer", "not a size"},
		{"size too big", []string{"--body-buffer", "2GiB"}, nil, "body-buffer", "1 byte to 1GiB"},
		{"bad bool", []string{"--insecure-gossip=maybe"}, nil, "insecure-gossip", "not true or false"},
		{"bad cidrs", []string{"--trusted-proxies", "10.0.0/8"}, nil, "trusted-proxies", "not a CIDR"},
		{"bad continents", []string{"--continents", "EU"}, nil, "continents", "CODE=region"},
		{"continent to unknown region", []string{"--continents", "EU=ap"}, nil, "continents", `region "ap"`},
		{"client ip header needs proxies", []string{"--client-ip", "header:X-Real-IP"}, nil, "client-ip", "--trusted-proxies"},
		{"tls half", []string{"--tls-cert", "c.pem"}, nil, "tls-cert", "--tls-key"},
		{"join without key", []string{"--join", "10.0.0.2:7946"}, nil, "gossip-key", "--insecure-gossip"},
		{"log level", []string{"--log-level", "loud"}, nil, "log-level", "want debug, info, warn or error"},
		{"env bad size", nil, map[string]string{"FENEC_ENTRY_BODY_BUFFER": "2XB"}, "body-buffer", "FENEC_ENTRY_BODY_BUFFER: \"2XB\" is not a size"},
		{"env bad duration", nil, map[string]string{"FENEC_ENTRY_DRAIN": "soon"}, "drain", "FENEC_ENTRY_DRAIN: "},
		{"env bad bool", nil, map[string]string{"FENEC_ENTRY_INSECURE_GOSSIP": "yes please"}, "insecure-gossip", "FENEC_ENTRY_INSECURE_GOSSIP"},
		{"env bad validate", nil, map[string]string{"FENEC_ENTRY_HOMES": "0"}, "homes", "want 1 to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"FENEC_ENTRY_ROUTERS": testRouters, "FLY_REGION": "fra", "FLY_MACHINE_ID": "m1"}
			if tt.name == "no routers" {
				delete(env, "FENEC_ENTRY_ROUTERS")
			}
			for k, v := range tt.env {
				env[k] = v
			}
			_, _, err := parseWith(tt.args, envOf(env), noHost)
			if err == nil {
				t.Fatalf("parse = nil, want an error naming --%s", tt.flag)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "--"+tt.flag+": ") || !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("parse = %q, want one line starting with --%s: and containing %q", msg, tt.flag, tt.want)
			}
		})
	}
}

func TestParseStrayArgument(t *testing.T) {
	for _, args := range [][]string{{"extra"}, {"--routers", testRouters, "--", "x"}, {"--insecure-gossip", "false"}} {
		_, _, err := parseWith(args, envOf(map[string]string{"FLY_REGION": "fra"}), noHost)
		if err == nil || !strings.Contains(err.Error(), "not a flag") {
			t.Errorf("parse(%q) = %v", args, err)
		}
	}
	if _, _, err := parseWith([]string{"--routers", testRouters, "--help"}, envOf(nil), noHost); !errors.Is(err, errHelp) {
		t.Errorf("--help: %v", err)
	}
}

// TestParseNeverShowsSecrets plants secrets where a careless parser would echo them.
func TestParseNeverShowsSecrets(t *testing.T) {
	const secret = "Zm9vYmFyLXNlY3JldC1wbGFudGVk" // base64, but of 21 bytes
	base := map[string]string{"FENEC_ENTRY_ROUTERS": testRouters, "FLY_REGION": "fra", "FLY_MACHINE_ID": "m1"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		flag string
	}{
		{"gossip key flag", []string{"--gossip-key=" + secret}, nil, "gossip-key"},
		{"gossip key env", nil, map[string]string{"FENEC_ENTRY_GOSSIP_KEY": secret}, "gossip-key"},
		{"gossip key not base64", []string{"--gossip-key", secret + "!"}, nil, "gossip-key"},
		{"unknown flag with a secret", []string{"--gossip-kye=" + secret}, nil, "gossip-kye"},
		{"secret as a stray argument", []string{"--insecure-gossip", secret}, nil, ""},
		{"entry token with newline", []string{"--entry-token", secret + "\n"}, nil, "entry-token"},
		{"rpc auth, error elsewhere", []string{"--rpc-auth", secret, "--rpc-addr", "7373"}, nil, "rpc-addr"},
		{"secret in a router URL", []string{"--routers", "eu=http://user:" + secret + "@r1:7000"}, nil, "routers"},
	}
	for _, tt := range tests {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range tt.env {
			env[k] = v
		}
		_, _, err := parseWith(tt.args, envOf(env), noHost)
		if err == nil {
			t.Errorf("%s: parse = nil, want an error", tt.name)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:12]) {
			t.Errorf("%s: the error shows the secret: %v", tt.name, err)
		}
		if tt.flag != "" && !strings.HasPrefix(err.Error(), "--"+tt.flag+": ") {
			t.Errorf("%s: %v, want it to name --%s", tt.name, err, tt.flag)
		}
	}
}

func TestEveryFlagHasAField(t *testing.T) {
	// Each flag's text must land in Config: set each to a recognisable valid value and
	// check the config changed.
	valid := map[string]string{
		"listen": "127.0.0.1:1", "tls-cert": "c", "tls-key": "k", "max-inflight": "3", "max-conns": "3", "header-timeout": "3s", "http1-server": "std",
		"routers": "x=http://h:1", "router-ca": "ca.pem", "answer-timeout": "40s", "body-buffer": "3KiB",
		"read-backoff": "3s", "homes": "3", "continents": "EU=x", "default-region": "x", "pop": "p3",
		"continent": "OC", "geoip": "g.mmdb", "country-header": "X-Country", "client-ip": "fly",
		"trusted-proxies": "10.0.0.0/8", "entry-token": "t", "cors": "*", "node": "n3",
		"gossip-bind": ":3", "gossip-advertise": "10.0.0.1:3", "join": "h:3", "join-dns": "a.internal",
		"gossip-key": "AAAAAAAAAAAAAAAAAAAAAA==", "insecure-gossip": "true", "rpc-addr": "127.0.0.1:3",
		"rpc-auth": "r", "admin-listen": "127.0.0.1:2", "admin-token": "0123456789abcdef-t", "drain": "3s", "log-level": "debug", "log-format": "console",
		"resolve-interval": "7s", "dns-server": "127.0.0.1:53", "config": "/etc/fenec-entry/env",
		"state-dir": "/var/lib/fenec-entry", "pid-file": "/run/fenec-entry/fenec-entry.pid",
	}
	def := node.DefaultConfig().String()
	for _, d := range flags {
		v, ok := valid[d.name]
		if !ok {
			t.Errorf("--%s: no test value", d.name)
			continue
		}
		cfg := node.DefaultConfig()
		if err := d.apply(&cfg, v); err != nil {
			t.Errorf("--%s=%s: %v", d.name, v, err)
			continue
		}
		if cfg.String() == def {
			t.Errorf("--%s=%s changes nothing in the config", d.name, v)
		}
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	printServeUsage(&out)
	help := out.String()
	for _, d := range flags {
		if !strings.Contains(help, "--"+d.name+" ") && !strings.Contains(help, "--"+d.name+"\n") {
			t.Errorf("--help lacks --%s", d.name)
		}
		if !strings.Contains(help, d.envName()) {
			t.Errorf("--help lacks %s", d.envName())
		}
	}
	for _, name := range []string{"geoip", "country-header", "client-ip"} {
		if d := lookupFlag(name); d == nil || d.later != "" {
			t.Errorf("--%s is still marked as waiting for something", name)
		}
	}
}

// TestHelpFitsTheWidth: every line of every help is at most helpWidth runes (that it points
// at nothing outside the repository is TestNoPointerOutside's, over the sources); serve's
// wraps each flag's help at word boundaries under the flag, losing no word.
func TestHelpFitsTheWidth(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}, {"serve", "--help"}, {"demo", "--help"}, {"version", "--help"}} {
		var stdout, stderr bytes.Buffer
		if status := run(args, &stdout, &stderr, envOf(nil)); status != 0 || stdout.Len() == 0 {
			t.Errorf("%q: status %d, %d bytes of help (stderr %q)", args, status, stdout.Len(), stderr.String())
		}
		for i, line := range strings.Split(stdout.String(), "\n") {
			if n := utf8.RuneCountInString(line); n > helpWidth {
				t.Errorf("%q: line %d is %d columns, more than %d: %q", args, i+1, n, helpWidth, line)
			}
		}
	}

	var out bytes.Buffer
	printServeUsage(&out)
	help := out.String()
	if !strings.Contains(help, "docs/REFERENCE.md") || !strings.Contains(help, "FENEC_ENTRY_<FLAG>") {
		t.Errorf("serve's help does not say where the reference is, or that flags read variables:\n%s", help)
	}
	// Each flag's block: its head line, then lines indented to flagColumn.
	blocks := map[string][]string{}
	var cur string
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.HasPrefix(line, "  --"):
			cur = strings.Fields(line)[0][2:]
			blocks[cur] = []string{line[min(len(line), flagColumn):]}
		case cur != "" && strings.HasPrefix(line, strings.Repeat(" ", flagColumn)):
			blocks[cur] = append(blocks[cur], line[flagColumn:])
		default:
			cur = ""
		}
	}
	for _, d := range flags {
		b := blocks[d.name]
		if len(b) == 0 {
			t.Errorf("no block for --%s", d.name)
			continue
		}
		text := strings.Join(b, " ")
		if want := strings.Join(strings.Fields(d.usage), " "); !strings.HasPrefix(text, want+" (env "+d.envName()) {
			t.Errorf("--%s's help reads %q, want its usage %q whole, then (env %s", d.name, text, want, d.envName())
		}
	}
}

func TestWrap(t *testing.T) {
	for _, c := range []struct {
		text  string
		width int
		want  []string
	}{
		{"", 10, []string{""}},
		{"one two three", 7, []string{"one two", "three"}},
		{"one two three", 6, []string{"one", "two", "three"}},
		{"a verylongword b", 4, []string{"a", "verylongword", "b"}},
		{"été à l'ombre", 7, []string{"été à", "l'ombre"}}, // runes, not bytes
		{"  spaces   inside\nand lines ", 20, []string{"spaces inside and", "lines"}},
	} {
		if got := wrap(c.text, c.width); !slices.Equal(got, c.want) {
			t.Errorf("wrap(%q, %d) = %q, want %q", c.text, c.width, got, c.want)
		}
	}
}

func TestUnknownEnvWarned(t *testing.T) {
	got := unknownEnv([]string{"FENEC_ENTRY_LISTEN=:1", "FENEC_ENTRY_SNAPSHOT_LISTEN=10.0.0.1:7947",
		"FENEC_ENTRY_LISTNE=:2", "PATH=/bin", "FENEC_ENTRY_GOSSIP_KEY=secret-value"})
	if len(got) != 2 || !strings.Contains(got[0], "FENEC_ENTRY_SNAPSHOT_LISTEN") || !strings.Contains(got[0], "--gossip-bind") ||
		!strings.Contains(got[1], "FENEC_ENTRY_LISTNE") || !strings.Contains(got[1], "--listne") {
		t.Fatalf("warnings %q", got)
	}
	for _, w := range got {
		if strings.Contains(w, "10.0.0.1") || strings.Contains(w, "secret") {
			t.Errorf("a warning carries a value: %s", w)
		}
	}
}

// A variable a build reads (buildEnv, as the pprof build's FENEC_ENTRY_PPROF_ADDR) is not
// warned about; without the entry it is.
func TestBuildEnvNotWarned(t *testing.T) {
	const name = "FENEC_ENTRY_TEST_BUILD_ONLY"
	if got := unknownEnv([]string{name + "=x"}); len(got) != 1 {
		t.Fatalf("before: warnings %q, want one", got)
	}
	buildEnv[name] = true
	defer delete(buildEnv, name)
	if got := unknownEnv([]string{name + "=x"}); len(got) != 0 {
		t.Errorf("a build's variable warned about: %q", got)
	}
}
