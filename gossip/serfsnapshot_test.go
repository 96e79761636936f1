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
	"github.com/fenec/fenec-entry/state"
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
	// serf's snapshotter takes member events from a queue of its own, and once a leave is
	// issued it records no more (serf snapshot.go, stream): an entry that leaves the instant
	// it joined may never have written a down, and then has nothing to rejoin. A drain comes
	// long after the join; here, a second after it stands for that (the event is taken in
	// microseconds; what the file holds is not visible before the leave flushes it).
	time.Sleep(time.Second)
	_, port, _ := net.SplitHostPort(b1.g.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b1.g.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	// Closed once a knows, as the drain closes only after serving --drain. Under load a may
	// have marked b failed before the leave reached it (and then keeps it so); a reconnects
	// to a failed member by itself only every 30 s (serf's ReconnectInterval), well after
	// this test's bounds, so either way only b's snapshot can bring b back in time.
	testutil.Eventually(t, 10*time.Second, "b left (or failed) at a", func() bool {
		st := memberState(a, "b")
		return st == "left" || st == "failed"
	})
	b1.g.Close()

	b2 := startNode(t, "b", func(c *Config) { c.BindAddr = "127.0.0.1:" + port; c.SnapshotPath = snap })
	testutil.Eventually(t, 10*time.Second, "b alive at a again, through its snapshot", func() bool {
		return memberState(a, "b") == "alive" && memberState(b2, "a") == "alive"
	})
}

// TestBadSnapshotStartsWithout: a snapshot serf cannot open is logged, moved aside to its
// name with the time, and gossip starts with a fresh one.
func TestBadSnapshotStartsWithout(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "serf.snapshot")
	if err := os.Mkdir(snap, 0o700); err != nil { // not a file at all
		t.Fatal(err)
	}
	var log testutil.LogBuffer
	clock := testutil.NewClock(time.Date(2026, 12, 3, 14, 35, 1, 0, time.UTC))
	n := startNode(t, "a", func(c *Config) { c.SnapshotPath = snap; c.Logger = zerolog.New(&log); c.Clock = clock })
	if !n.g.Up() {
		t.Fatal("gossip is not up")
	}
	if fi, err := os.Stat(snap); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("no fresh snapshot file at %s: %v", snap, err)
	}
	bad := snap + ".bad-20261203T143501Z"
	if fi, err := os.Stat(bad); err != nil || !fi.IsDir() {
		t.Errorf("the bad snapshot was not moved to %s: %v", bad, err)
	}
	if out := log.String(); !strings.Contains(out, "member snapshot") || !strings.Contains(out, `"moved_to":"`+bad+`"`) {
		t.Errorf("no log line names the bad snapshot's new name %s:\n%s", bad, out)
	}
}

// TestBadSnapshotsBounded: each bad snapshot keeps its own file, state.KeepBad at most, the
// oldest removed and named in the warning; the same helper as the home table's.
func TestBadSnapshotsBounded(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "serf.snapshot")
	clock := testutil.NewClock(time.Date(2026, 12, 3, 14, 35, 1, 0, time.UTC))
	var kept []string
	for i := range state.KeepBad + 1 {
		if err := os.Mkdir(snap, 0o700); err != nil { // not a file at all
			t.Fatal(err)
		}
		var log testutil.LogBuffer
		n := startNode(t, "a", func(c *Config) { c.SnapshotPath = snap; c.Logger = zerolog.New(&log); c.Clock = clock })
		if err := n.g.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(snap); err != nil { // the fresh one
			t.Fatal(err)
		}
		kept = append(kept, snap+".bad-"+clock.Now().Format("20060102T150405Z"))
		out := log.String()
		if !strings.Contains(out, `"moved_to":"`+kept[i]+`"`) {
			t.Errorf("damage %d: no log line names %s:\n%s", i, kept[i], out)
		}
		if i == state.KeepBad && !strings.Contains(out, `"removed":["`+kept[0]+`"]`) {
			t.Errorf("damage %d: no log line names %s as removed:\n%s", i, kept[0], out)
		}
		clock.Advance(time.Hour)
	}
	got, _ := filepath.Glob(snap + ".bad*")
	if want := kept[1:]; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("bad snapshots %q, want %q", got, want)
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

// TestSnapshotMembers replays serf's snapshot lines as serf does, for the joiner.
func TestSnapshotMembers(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "serf.snapshot")
	text := "alive: a 10.0.0.1:7946\nalive: b 10.0.0.2:7946\nalive: self 10.0.0.9:7946\n" +
		"clock: 7\nnot-alive: b\nalive: c [fd00::3]:7946\nleave\nalive: a 10.0.0.4:7946\ngarbage\x00\nalive: broken"
	if err := os.WriteFile(snap, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	got := snapshotMembers(snap, "self")
	if want := []string{"10.0.0.4:7946", "[fd00::3]:7946"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("snapshotMembers = %v, want %v", got, want)
	}
	if got := snapshotMembers(filepath.Join(t.TempDir(), "none"), "self"); len(got) != 0 {
		t.Errorf("no file: %v", got)
	}
}
