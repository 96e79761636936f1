package gossip

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/internal/testutil"
)

func memberState(n *testNode, name string) string {
	for _, m := range n.g.Members() {
		if m.Name == name {
			return m.State
		}
	}
	return ""
}

// TestSnapshotRejoinsAfterLeave: an entry with a member snapshot that left gracefully (the
// drain) and starts again with nothing to join finds its cluster through the snapshot.
func TestSnapshotRejoinsAfterLeave(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "serf.snapshot")
	a := startNode(t, "a", nil)
	b1 := startNode(t, "b", func(c *Config) { c.Join = []string{a.g.Addr()}; c.SnapshotPath = snap })
	testutil.Eventually(t, 5*time.Second, "b alive at a", func() bool { return memberState(a, "b") == "alive" })
	_, port, _ := net.SplitHostPort(b1.g.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b1.g.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	b1.g.Close()
	testutil.Eventually(t, 5*time.Second, "b left at a", func() bool { return memberState(a, "b") == "left" })

	b2 := startNode(t, "b", func(c *Config) { c.BindAddr = "127.0.0.1:" + port; c.SnapshotPath = snap })
	testutil.Eventually(t, 10*time.Second, "b alive at a again, through its snapshot", func() bool {
		return memberState(a, "b") == "alive" && memberState(b2, "a") == "alive"
	})
}

// TestBadSnapshotStartsWithout: a snapshot serf cannot open is logged, moved aside, and
// gossip starts with a fresh one.
func TestBadSnapshotStartsWithout(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "serf.snapshot")
	if err := os.Mkdir(snap, 0o700); err != nil { // not a file at all
		t.Fatal(err)
	}
	var log testutil.LogBuffer
	n := startNode(t, "a", func(c *Config) { c.SnapshotPath = snap; c.Logger = zerolog.New(&log) })
	if !n.g.Up() {
		t.Fatal("gossip is not up")
	}
	if fi, err := os.Stat(snap); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("no fresh snapshot file at %s: %v", snap, err)
	}
	if fi, err := os.Stat(snap + ".bad"); err != nil || !fi.IsDir() {
		t.Errorf("the bad snapshot was not moved to %s.bad: %v", snap, err)
	}
	if out := log.String(); !strings.Contains(out, "member snapshot") || !strings.Contains(out, snap) {
		t.Errorf("no log line names the bad snapshot:\n%s", out)
	}
}

// TestGarbageSnapshotStarts: serf reads its snapshot by lines and skips what it does not
// understand; random bytes there do not keep gossip down.
func TestGarbageSnapshotStarts(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "serf.snapshot")
	garbage := []byte("alive: \x00\xff\nclock: x\n\x01\x02\x03 no newline at the end")
	if err := os.WriteFile(snap, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "a", func(c *Config) { c.SnapshotPath = snap })
	if !n.g.Up() {
		t.Fatal("gossip is not up")
	}
}
