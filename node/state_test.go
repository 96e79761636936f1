package node

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/state"
)

// joiningConfig is testConfig with gossip on loopback and a peer to join that never answers.
func joiningConfig(t *testing.T, dir string, regionURLs ...string) Config {
	c := testConfig(t, regionURLs...)
	c.GossipBind, c.RPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	c.GossipKey = SecretBytes(make([]byte, 32))
	c.Join = []string{"127.0.0.1:1"}
	c.StateDir = dir
	return c
}

// TestWarmRestart: an entry with --state-dir writes its table at the drain; the next one on
// the same directory holds it (version and source kept) before it starts, and with a peer to
// join that does not answer it is ready at once, where a cold one waits for the join.
func TestWarmRestart(t *testing.T) {
	router := newRouter(t, "eu", nil)
	dir := t.TempDir()
	n1, _ := startNode(t, joiningConfig(t, dir, "eu", router.URL))
	if n1.isReady() { // docs/REFERENCE.md, "Homes": not until the join gives up
		t.Error("a cold entry with a peer to join is ready at once")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	get(t, client, "http://"+n1.ClientAddr().String()+"/t/acme/items/1")
	before, src, ok := n1.homes.Get("acme")
	if !ok || src != homes.SourceLocal {
		t.Fatalf("acme not learned: %v %v", before, ok)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := n1.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, state.HomesFile)); err != nil {
		t.Fatalf("no home table on disk after the drain: %v", err)
	}

	log, logs := testLogger(t)
	n2, err := New(joiningConfig(t, dir, "eu", router.URL), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n2.Close)
	if h, src, ok := n2.homes.Get("acme"); !ok || h != before || src != homes.SourceLocal {
		t.Errorf("restored acme = %+v %v %v, want %+v local", h, src, ok, before)
	}
	if err := n2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !n2.isReady() {
		t.Error("a warm entry is not ready at once")
	}
	if !strings.Contains(logs.String(), "warm start") {
		t.Errorf("no log line says the start is warm:\n%s", logs)
	}
	_, metrics := get(t, client, "http://"+n2.AdminAddr().String()+"/metrics")
	for _, want := range []string{`fenec_entry_state_restore{result="restored"} 1`, `fenec_entry_state_restored_homes{source="local"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Nothing learned since the restore: the drain says the file was not written again.
	if err := n2.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); strings.Contains(out, "home table written at the drain") ||
		!strings.Contains(out, "not written again at the drain") {
		t.Errorf("the drain of an unchanged table does not say it was not written:\n%s", out)
	}
}

// TestStateDirErrorNamesTheFlag: a --state-dir New cannot use is a *ConfigError naming it.
func TestStateDirErrorNamesTheFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), file} {
		cfg := testConfig(t, "eu", "http://127.0.0.1:1")
		cfg.StateDir = dir
		_, err := New(cfg, zerolog.Nop())
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Flag != "state-dir" || !strings.Contains(err.Error(), dir) {
			t.Errorf("--state-dir %s: New = %v, want a *ConfigError naming --state-dir and the directory", dir, err)
		}
	}
}
