package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// TestSecretWarnings: a row for each place a secret can be left open to the host's other
// users, and for each one that is fine.
func TestSecretWarnings(t *testing.T) {
	const token = "planted-admin-token-0123456789"
	dir := t.TempDir()
	file := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	routers := "FENEC_ENTRY_ROUTERS=" + testRouters + "\n"
	secretOpen := file("open.env", routers+"FENEC_ENTRY_ADMIN_TOKEN="+token+"\n", 0o644)
	secretGroup := file("group.env", routers+"FENEC_ENTRY_ADMIN_TOKEN="+token+"\n", 0o640)
	secretWritable := file("writable.env", routers+"FENEC_ENTRY_ADMIN_TOKEN="+token+"\n", 0o602)
	plainOpen := file("plain.env", routers, 0o644)
	certFile, keyFile := testutil.CertFiles(t)
	testutil.WriteCert(t, certFile, keyFile, "entry")
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	keyOpen := file("open.key", string(keyPEM), 0o644)
	keyClosed := file("closed.key", string(keyPEM), 0o600)

	for _, row := range []struct {
		name  string
		args  []string
		env   map[string]string
		flags []string // the flags warned about, in order
		says  string   // in the one warning, when there is one
	}{
		{"a secret on the command line", []string{"--routers", testRouters, "--admin-token", token}, nil,
			[]string{"admin-token"}, "ps shows it"},
		{"a secret in the environment", []string{"--routers", testRouters}, map[string]string{"FENEC_ENTRY_ADMIN_TOKEN": token}, nil, ""},
		{"the --config file holding a secret, readable by all", []string{"--config", secretOpen}, nil,
			[]string{"config"}, "mode 0644"},
		{"the --config file holding a secret, writable by all", []string{"--config", secretWritable}, nil,
			[]string{"config"}, "mode 0602"},
		{"the --config file holding a secret, 0640", []string{"--config", secretGroup}, nil, nil, ""},
		{"the --config file holding no secret, readable by all", []string{"--config", plainOpen}, nil, nil, ""},
		{"the TLS key readable by all", []string{"--routers", testRouters, "--tls-cert", certFile, "--tls-key", keyOpen}, nil,
			[]string{"tls-key"}, "TLS private key"},
		{"the TLS key 0600", []string{"--routers", testRouters, "--tls-cert", certFile, "--tls-key", keyClosed}, nil, nil, ""},
		{"both on the command line and the file open", []string{"--config", plainOpen, "--entry-token", token,
			"--tls-cert", certFile, "--tls-key", keyOpen}, nil, []string{"entry-token", "tls-key"}, ""},
	} {
		t.Run(row.name, func(t *testing.T) {
			_, warnings, err := parseWith(row.args, envOf(row.env), boxHost)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range warnings {
				got = append(got, w.flag)
				if strings.Contains(w.msg, token) {
					t.Errorf("a warning shows the secret: %q", w.msg)
				}
				if !strings.HasPrefix(w.msg, "--"+w.flag) {
					t.Errorf("warning %q does not begin with its flag --%s", w.msg, w.flag)
				}
			}
			if strings.Join(got, ",") != strings.Join(row.flags, ",") {
				t.Fatalf("warned about %v, want %v: %v", got, row.flags, warnings)
			}
			if row.says != "" && !strings.Contains(warnings[0].msg, row.says) {
				t.Errorf("warning %q does not say %q", warnings[0].msg, row.says)
			}
		})
	}
}

// TestServeWarnsOfAnOpenSecret: serve logs each warning at start, at warn, with its flag,
// and never the secret.
func TestServeWarnsOfAnOpenSecret(t *testing.T) {
	const token = "planted-entry-token-0123456789"
	e := startEntry(t, []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--entry-token", token},
		cleanEnv("FENEC_ENTRY_ROUTERS=eu=http://127.0.0.1:1"))
	e.started(t)
	var warned []map[string]any
	for _, l := range e.stderr() {
		if strings.Contains(l, token) {
			t.Errorf("a log line shows --entry-token: %q", l)
		}
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["level"] == "warn" && m["flag"] != nil {
			warned = append(warned, m)
		}
	}
	if len(warned) != 1 || warned[0]["flag"] != "entry-token" || !strings.Contains(warned[0]["message"].(string), "FENEC_ENTRY_ENTRY_TOKEN") {
		t.Errorf("warned %v, want one line of --entry-token naming its variable", warned)
	}
	_ = e.cmd.Process.Kill()
	e.exitStatus(t, 5*time.Second)
}
