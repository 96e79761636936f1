package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/node"
)

// configSecret is planted in values that no error may show.
const configSecret = "s3cr3t-value"

// writeEnvFile writes text to the --config file path.
func writeEnvFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// newEnvFile writes text to a new --config file and returns its path.
func newEnvFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fenec-entry.env")
	writeEnvFile(t, path, text)
	return path
}

func boxHost() (string, error) { return "box-1", nil }

// configError returns err as a *node.ConfigError, failing the test if it is not one.
func configError(t *testing.T, err error) *node.ConfigError {
	t.Helper()
	var ce *node.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a *node.ConfigError", err, err)
	}
	return ce
}

func TestConfigFilePrecedence(t *testing.T) {
	path := newEnvFile(t, "# the entry\n"+
		"FENEC_ENTRY_ROUTERS="+testRouters+"\n"+
		"FENEC_ENTRY_LISTEN=127.0.0.1:9100\n"+
		"FENEC_ENTRY_DRAIN=4s\n"+
		"FENEC_ENTRY_LOG_LEVEL=\n") // empty: unset, the default
	env := map[string]string{
		"FENEC_ENTRY_LISTEN":    "127.0.0.1:9200", // the file wins
		"FENEC_ENTRY_HOMES":     "9",              // not in the file: the environment's
		"FENEC_ENTRY_LOG_LEVEL": "debug",          // in the file, empty there: the default, not this
	}
	_, _, err := parseWith([]string{"--config", path, "--drain", "6s"}, envOf(env), boxHost)
	if err == nil {
		t.Fatal("--drain on the command line and in the file accepted")
	}
	if ce := configError(t, err); ce.Flag != "config" || !strings.Contains(err.Error(), "--drain is given on the command line") {
		t.Fatalf("error %v, want one of --config naming --drain", err)
	}

	cfg, _, err := parseWith([]string{"--config", path, "--answer-timeout", "7s"}, envOf(env), boxHost)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"file beats environment", cfg.Listen, "127.0.0.1:9100"},
		{"file applies", cfg.Drain, 4 * time.Second},
		{"routers from file", len(cfg.Routers), 2},
		{"environment applies to what the file lacks", cfg.Homes, 9},
		{"command line applies", cfg.AnswerTimeout, 7 * time.Second},
		{"empty in the file is the default, not the environment's", cfg.LogLevel, node.DefaultLogLevel},
		{"default kept", cfg.ReadBackoff, node.DefaultReadBackoff},
		{"config recorded", cfg.ConfigFile, path},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if cfg.Reloader == nil {
		t.Error("no Reloader with --config")
	}
}

func TestConfigFromEnvironment(t *testing.T) {
	path := newEnvFile(t, "FENEC_ENTRY_ROUTERS="+testRouters+"\nFENEC_ENTRY_LISTEN=127.0.0.1:9100\n")
	cfg, _, err := parseWith(nil, envOf(map[string]string{"FENEC_ENTRY_CONFIG": "  " + path + " "}), boxHost)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9100" || len(cfg.Routers) != 2 {
		t.Errorf("FENEC_ENTRY_CONFIG's file not read: listen %q, %d regions", cfg.Listen, len(cfg.Routers))
	}
	if cfg.Reloader == nil {
		t.Error("no Reloader with FENEC_ENTRY_CONFIG")
	}

	// The command line's --config wins over FENEC_ENTRY_CONFIG.
	other := newEnvFile(t, "FENEC_ENTRY_ROUTERS="+testRouters+"\nFENEC_ENTRY_LISTEN=127.0.0.1:9300\n")
	cfg, _, err = parseWith([]string{"--config", other}, envOf(map[string]string{"FENEC_ENTRY_CONFIG": path}), boxHost)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9300" {
		t.Errorf("listen %q, want --config's file's", cfg.Listen)
	}
}

func TestNoReloaderWithoutConfig(t *testing.T) {
	cfg, _, err := parseWith([]string{"--routers", testRouters}, envOf(nil), boxHost)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Reloader != nil {
		t.Error("a Reloader without --config")
	}
	cfg, _, err = parseWith(nil, envOf(map[string]string{"FENEC_ENTRY_ROUTERS": testRouters, "FENEC_ENTRY_CONFIG": "  "}), boxHost)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Reloader != nil {
		t.Error("a Reloader with a blank FENEC_ENTRY_CONFIG")
	}
}

func TestConfigAndCommandLineSameFlag(t *testing.T) {
	for _, c := range []struct{ flag, line, arg string }{
		{"listen", "FENEC_ENTRY_LISTEN=10.66.77.88:4242", "10.99.88.77:4343"},
		{"entry-token", "FENEC_ENTRY_ENTRY_TOKEN=" + configSecret, configSecret + "-cmd"},
	} {
		path := newEnvFile(t, "FENEC_ENTRY_ROUTERS="+testRouters+"\n"+c.line+"\n")
		_, _, err := parseWith([]string{"--config", path, "--" + c.flag, c.arg}, envOf(nil), boxHost)
		if err == nil {
			t.Fatalf("--%s on the command line and in --config accepted", c.flag)
		}
		ce := configError(t, err)
		msg := err.Error()
		if want := "--config: " + path + ": line 2: "; ce.Flag != "config" || !strings.HasPrefix(msg, want) {
			t.Errorf("error %q, want it to start %q", msg, want)
		}
		if !strings.Contains(msg, "--"+c.flag+" is given on the command line and in --config") {
			t.Errorf("error %q, want it to name --%s", msg, c.flag)
		}
		_, fileValue, _ := strings.Cut(c.line, "=")
		if strings.Contains(msg, fileValue) || strings.Contains(msg, c.arg) {
			t.Errorf("error %q shows a value", msg)
		}
	}
}

func TestConfigFileKeys(t *testing.T) {
	good := "FENEC_ENTRY_ROUTERS=" + testRouters + "\n"
	for _, c := range []struct {
		name, text string
		line       int
		says       string // "" for no error
	}{
		{"unknown FENEC_ENTRY_ key", good + "# typo below\nFENEC_ENTRY_LISTN=" + configSecret + "\n", 3,
			"FENEC_ENTRY_LISTN names no flag"},
		{"FENEC_ENTRY_CONFIG inside the file", good + "FENEC_ENTRY_CONFIG=/etc/other.env\n", 2,
			"FENEC_ENTRY_CONFIG cannot name another file"},
		{"removed flag", "\n" + good + "FENEC_ENTRY_SNAPSHOT_LISTEN=" + configSecret + "\n", 3,
			removedEnv["FENEC_ENTRY_SNAPSHOT_LISTEN"]},
		{"the first bad line by line number", "FENEC_ENTRY_NOPE_B=1\nFENEC_ENTRY_NOPE_A=1\n" + good, 1,
			"FENEC_ENTRY_NOPE_B names no flag"},
		{"a syntax error", good + "FENEC_ENTRY_LISTEN '" + configSecret + "'\n", 2, `no "="`},
		{"a flag's variable without the prefix", "# routers\nROUTERS=" + testRouters + "\n", 2,
			"ROUTERS names no flag: --routers's variable is FENEC_ENTRY_ROUTERS"},
		{"a flag's name without the prefix, lower case", good + "read_backoff=15s\n", 2,
			"read_backoff names no flag: --read-backoff's variable is FENEC_ENTRY_READ_BACKOFF"},
		{"a flag's name not in upper case", good + "FENEC_ENTRY_log_level=debug\n", 2, "FENEC_ENTRY_log_level names no flag"},
		{"keys without the prefix ignored", "GOMAXPROCS=2\nPATH=/usr/bin\nlower_case=x\nFENEC_ENTRYX=1\n" + good, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := newEnvFile(t, c.text)
			cfg, _, err := parseWith([]string{"--config", path}, envOf(nil), boxHost)
			if c.says == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(cfg.Routers) != 2 {
					t.Errorf("%d regions, want the file's 2", len(cfg.Routers))
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if ce := configError(t, err); ce.Flag != "config" {
				t.Errorf("error %q names --%s, want --config", msg, ce.Flag)
			}
			want := fmt.Sprintf("--config: %s: line %d: ", path, c.line)
			if !strings.HasPrefix(msg, want) || !strings.Contains(msg, c.says) {
				t.Errorf("error %q, want %q and %q", msg, want, c.says)
			}
			if strings.Contains(msg, configSecret) {
				t.Errorf("error %q shows the value", msg)
			}
		})
	}
}

var lineNumber = regexp.MustCompile(`line [0-9]+`)

// TestConfigFileErrorFormat: every error of a line of --config's file, whichever part finds
// it (the parser, the names, the command line, a flag's value, the validation), reads
// "--config: <path>: line N: <what>", and is a --config error.
func TestConfigFileErrorFormat(t *testing.T) {
	good := "FENEC_ENTRY_ROUTERS=" + testRouters + "\n"
	for _, c := range []struct {
		name, text string
		args       []string
		line       int
		what       string // the start of <what>
	}{
		{"no =", "# c\n" + good + "FENEC_ENTRY_LISTEN 127.0.0.1:80\n", nil, 3, `no "="`},
		{"no variable name", good + "FENEC-ENTRY-LISTEN=127.0.0.1:80\n", nil, 2, `the text before "=" is not a variable name`},
		{"quote not closed", good + "FENEC_ENTRY_POP='ams\n", nil, 2, `FENEC_ENTRY_POP: a ' quote is not closed`},
		{"names no flag", good + "FENEC_ENTRY_LISTN=127.0.0.1:80\n", nil, 2, "FENEC_ENTRY_LISTN names no flag"},
		{"another file", good + "FENEC_ENTRY_CONFIG=/etc/other.env\n", nil, 2, "FENEC_ENTRY_CONFIG cannot name another file"},
		{"removed flag", good + "\nFENEC_ENTRY_SNAPSHOT_LISTEN=:7947\n", nil, 3, "--snapshot-listen is gone: "},
		{"on the command line too", good + "FENEC_ENTRY_DRAIN=4s\n", []string{"--drain", "6s"}, 2,
			"FENEC_ENTRY_DRAIN: --drain is given on the command line and in --config: give it in one place"},
		{"a bad value", good + "FENEC_ENTRY_DRAIN=soon\n", nil, 2, "FENEC_ENTRY_DRAIN: "},
		{"a value validation refuses", good + "FENEC_ENTRY_LISTEN=nowhere\n", nil, 2, "FENEC_ENTRY_LISTEN: "},
		{"a bad router", "\nFENEC_ENTRY_ROUTERS=eu=ftp://127.0.0.1:7101\n", nil, 2, "FENEC_ENTRY_ROUTERS: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := newEnvFile(t, c.text)
			_, _, err := parseWith(append([]string{"--config", path}, c.args...), envOf(nil), boxHost)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if ce := configError(t, err); ce.Flag != "config" {
				t.Errorf("error %q names --%s, want --config", msg, ce.Flag)
			}
			if want := fmt.Sprintf("--config: %s: line %d: %s", path, c.line, c.what); !strings.HasPrefix(msg, want) {
				t.Errorf("error %q, want it to start %q", msg, want)
			}
			if len(lineNumber.FindAllString(msg, -1)) != 1 || strings.Contains(msg, "\n") {
				t.Errorf("error %q names more than one line, or takes more than one", msg)
			}
		})
	}
}

func TestConfigFileUnreadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.env")
	_, _, err := parseWith([]string{"--config", path}, envOf(map[string]string{"FENEC_ENTRY_ROUTERS": testRouters}), boxHost)
	if err == nil {
		t.Fatal("a missing --config file accepted")
	}
	if msg := err.Error(); configError(t, err).Flag != "config" || msg != "--config: "+path+": no such file or directory" {
		t.Errorf("error %q", msg)
	}
}

// reloaderOf parses args with --config's file and returns its Reloader.
func reloaderOf(t *testing.T, args []string, env map[string]string) (node.Config, node.Reloader) {
	t.Helper()
	cfg, _, err := parseWith(args, envOf(env), boxHost)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Reloader == nil {
		t.Fatal("no Reloader with --config")
	}
	return cfg, cfg.Reloader
}

func TestConfigReload(t *testing.T) {
	path := newEnvFile(t, "# fenec-entry\n"+
		"FENEC_ENTRY_ROUTERS=eu=http://127.0.0.1:7101\n"+
		"FENEC_ENTRY_LISTEN=127.0.0.1:9100\n"+
		"FENEC_ENTRY_LOG_LEVEL=info\n")
	start, reload := reloaderOf(t, []string{"--config", path, "--pop", "ams-1"}, nil)

	cfg, restart, err := reload()
	if err != nil {
		t.Fatal(err)
	}
	if len(restart) != 0 || len(cfg.Routers) != 1 || cfg.Listen != start.Listen {
		t.Errorf("unchanged file: restart %q, %d regions, listen %q", restart, len(cfg.Routers), cfg.Listen)
	}

	writeEnvFile(t, path, "FENEC_ENTRY_ROUTERS=eu=http://127.0.0.1:7101;us=http://127.0.0.1:7201\n"+
		"FENEC_ENTRY_LISTEN=127.0.0.1:9101\n"+
		"FENEC_ENTRY_LOG_LEVEL=debug\n")
	cfg, restart, err = reload()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(restart, []string{"listen"}) {
		t.Errorf("needRestart %q, want [listen]", restart)
	}
	var names []string
	for _, r := range cfg.Routers {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"eu", "us"}) || len(cfg.Routers[1].Routers) != 1 ||
		cfg.Routers[1].Routers[0].Host != "127.0.0.1:7201" {
		t.Errorf("reloaded routers %v, want eu and us=127.0.0.1:7201", cfg.Routers)
	}
	if cfg.LogLevel != "debug" || cfg.Listen != "127.0.0.1:9101" || cfg.Pop != "ams-1" {
		t.Errorf("reloaded log-level %q listen %q pop %q", cfg.LogLevel, cfg.Listen, cfg.Pop)
	}

	// needRestart compares with the start, not the last reload: back to the start's listen,
	// nothing to restart for.
	writeEnvFile(t, path, "FENEC_ENTRY_ROUTERS=eu=http://127.0.0.1:7101\nFENEC_ENTRY_LISTEN=127.0.0.1:9100\n")
	if _, restart, err = reload(); err != nil || len(restart) != 0 {
		t.Errorf("back to the start's listen: restart %q, %v", restart, err)
	}
}

// TestConfigReloadDroppedLine is systemd's EnvironmentFile= pointing at the same file: the
// environment holds the file's values from the start, and a line deleted since must give the
// default, not that stale value.
func TestConfigReloadDroppedLine(t *testing.T) {
	path := newEnvFile(t, "FENEC_ENTRY_ROUTERS="+testRouters+"\n"+
		"FENEC_ENTRY_READ_BACKOFF=7s\n"+
		"FENEC_ENTRY_DRAIN=9s\n")
	env := map[string]string{
		"FENEC_ENTRY_CONFIG":       path,
		"FENEC_ENTRY_ROUTERS":      testRouters,
		"FENEC_ENTRY_READ_BACKOFF": "7s",
		"FENEC_ENTRY_DRAIN":        "9s",
		"FENEC_ENTRY_HOMES":        "5", // never in the file: still the environment's
	}
	start, reload := reloaderOf(t, nil, env)
	if start.ReadBackoff != 7*time.Second || start.Drain != 9*time.Second || start.Homes != 5 {
		t.Fatalf("start: read-backoff %v drain %v homes %d", start.ReadBackoff, start.Drain, start.Homes)
	}

	writeEnvFile(t, path, "FENEC_ENTRY_ROUTERS="+testRouters+"\n")
	cfg, restart, err := reload()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ReadBackoff != node.DefaultReadBackoff {
		t.Errorf("read-backoff %v after its line went, want the default %v", cfg.ReadBackoff, node.DefaultReadBackoff)
	}
	if cfg.Drain != node.DefaultDrain {
		t.Errorf("drain %v after its line went, want the default %v", cfg.Drain, node.DefaultDrain)
	}
	if cfg.Homes != 5 {
		t.Errorf("homes %d, want the environment's 5", cfg.Homes)
	}
	if !slices.Equal(restart, []string{"drain"}) {
		t.Errorf("needRestart %q, want [drain]", restart)
	}
}

func TestConfigReloadBadValue(t *testing.T) {
	path := newEnvFile(t, "FENEC_ENTRY_ROUTERS="+testRouters+"\n")
	_, reload := reloaderOf(t, []string{"--config", path}, nil)

	writeEnvFile(t, path, "# now wrong\nFENEC_ENTRY_ROUTERS=eu=ftp://127.0.0.1:7101\n")
	cfg, restart, err := reload()
	if err == nil {
		t.Fatalf("bad routers reloaded: %v", cfg.Routers)
	}
	if ce := configError(t, err); ce.Flag != "config" {
		t.Errorf("error %v, want it naming --config", err)
	}
	if want := "--config: " + path + ": line 2: FENEC_ENTRY_ROUTERS: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start %q", err, want)
	}
	if len(cfg.Routers) != 0 || restart != nil {
		t.Errorf("an error, yet routers %v and restart %q", cfg.Routers, restart)
	}

	// Fixed, the next reload works.
	writeEnvFile(t, path, "FENEC_ENTRY_ROUTERS="+testRouters+"\n")
	if _, _, err := reload(); err != nil {
		t.Errorf("fixed file: %v", err)
	}
	// Gone, the reload fails naming --config.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reload(); err == nil || !strings.HasPrefix(err.Error(), "--config: "+path+": ") {
		t.Errorf("file removed: %v", err)
	}
}

// TestConfigNeverShowsSecrets: a secret in a bad line of the file, at start and at a reload,
// is not in the error.
func TestConfigNeverShowsSecrets(t *testing.T) {
	good := "FENEC_ENTRY_ROUTERS=" + testRouters + "\n"
	for _, c := range []struct {
		name, line, flag, prefix string // prefix: of the error, after the flag, with %s the path
	}{
		{"gossip-key not base64", "FENEC_ENTRY_GOSSIP_KEY=" + configSecret + "==", "config", "%s: line 2: FENEC_ENTRY_GOSSIP_KEY: "},
		{"gossip-key of a wrong length", "FENEC_ENTRY_GOSSIP_KEY='czNjcjN0LXZhbHVl'", "config", "%s: line 2: FENEC_ENTRY_GOSSIP_KEY: "},
		{"gossip-key line missing its =", "FENEC_ENTRY_GOSSIP_KEY " + configSecret + "AAAAAAAAAAAAAA==", "config", "%s: line 2: "},
		{"entry-token line missing its =", "FENEC_ENTRY_ENTRY_TOKEN: " + configSecret + "=", "config", "%s: line 2: "},
		{"entry-token quote not closed", "FENEC_ENTRY_ENTRY_TOKEN=\"" + configSecret, "config", "%s: line 2: "},
		{"entry-token text after its quote", "FENEC_ENTRY_ENTRY_TOKEN='" + configSecret + "'" + configSecret, "config", "%s: line 2: "},
		{"entry-token over two lines", "FENEC_ENTRY_ENTRY_TOKEN='" + configSecret + "\n" + configSecret + "'", "config", "%s: line 2: FENEC_ENTRY_ENTRY_TOKEN: "},
		{"rpc-auth quote not closed", "FENEC_ENTRY_RPC_AUTH='" + configSecret, "config", "%s: line 2: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := newEnvFile(t, good+c.line+"\n")
			check := func(when string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s: accepted", when)
				}
				msg := err.Error()
				if ce := configError(t, err); ce.Flag != c.flag {
					t.Errorf("%s: error %q, want it naming --%s", when, msg, c.flag)
				}
				if want := "--" + c.flag + ": " + fmt.Sprintf(c.prefix, path); c.prefix != "" && !strings.HasPrefix(msg, want) {
					t.Errorf("%s: error %q, want it to start %q", when, msg, want)
				}
				if strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "czNjcjN0") {
					t.Errorf("%s: error %q shows the secret", when, msg)
				}
			}
			_, _, err := parseWith([]string{"--config", path}, envOf(nil), boxHost)
			check("start", err)

			writeEnvFile(t, path, good)
			_, reload := reloaderOf(t, []string{"--config", path}, nil)
			writeEnvFile(t, path, good+c.line+"\n")
			_, _, err = reload()
			check("reload", err)
		})
	}
}

// TestReloadFlagsAreNodes: every setting node applies on a reload is a flag of serve (the
// reloader leaves exactly those out of needRestart); a name that is none would be neither
// applied nor reported.
func TestReloadFlagsAreNodes(t *testing.T) {
	for _, name := range node.Reloadable {
		d := lookupFlag(name)
		if d == nil || !d.reloadable() {
			t.Errorf("node.Reloadable names %q, which is no flag of serve", name)
		}
	}
}
