package gossip

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// deadAddr is a loopback address nothing listens on (a port taken and given back).
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// logLines are the JSON lines of log whose message starts with prefix.
func logLines(t *testing.T, log *testutil.LogBuffer, prefix string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(log.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if msg, _ := m["message"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// oneLine fails the test if any field of line holds a line break or a tab.
func oneLine(t *testing.T, line map[string]any) {
	t.Helper()
	for k, v := range line {
		if s, ok := v.(string); ok && strings.ContainsAny(s, "\n\r\t") {
			t.Errorf("%s of the join failure holds a line break or a tab: %q", k, s)
		}
	}
}

// TestDeadJoinPeerLoggedOnce: an entry clustered through a live peer whose other --join peer
// is dead logs the failure once, at info, on one line naming the dead peer, however often
// the joiner tries it again.
func TestDeadJoinPeerLoggedOnce(t *testing.T) {
	a := startNode(t, "a", nil)
	dead := deadAddr(t)
	var log testutil.LogBuffer
	startNode(t, "b", func(c *Config) {
		c.Join = []string{a.g.Addr(), dead}
		c.Logger = zerolog.New(&log).Level(zerolog.DebugLevel)
	})
	testutil.Eventually(t, 5*time.Second, "b alive at a", func() bool { return memberState(a, "b") == "alive" })
	// Four attempts at the dead peer alone: the first failure and three retries.
	testutil.Eventually(t, 10*time.Second, "four failed attempts", func() bool {
		n := 0
		for _, l := range logLines(t, &log, "gossip: join attempt") {
			if l["joined"] == 0.0 {
				n++
			}
		}
		return n >= 4
	})
	failed := logLines(t, &log, "gossip: join failed")
	if len(failed) != 1 {
		t.Fatalf("%d join failures logged, want 1: %v", len(failed), failed)
	}
	f := failed[0]
	oneLine(t, f)
	if f["level"] != "info" || f["peers"] != 1.0 || !strings.Contains(f["message"].(string), "clustered through other members") {
		t.Errorf("the failure of a clustered entry is logged as %v, want info, 1 peer, clustered", f)
	}
	if e, _ := f["error"].(string); !strings.HasPrefix(e, "failed to join "+dead+": ") || strings.Contains(e, "error occurred") {
		t.Errorf("error %q, want one flat \"failed to join %s: <reason>\"", e, dead)
	}
	if got := logLines(t, &log, "gossip: join recovered"); len(got) != 0 {
		t.Errorf("recovered logged while the peer is dead: %v", got)
	}
}

// TestJoinAloneWarnsOnceThenRecovers: an entry none of whose --join peers answers warns once,
// each peer and its reason on one line; once a peer answers, it says so once; then the peer
// still dead is a failure of a clustered entry, at info, once.
func TestJoinAloneWarnsOnceThenRecovers(t *testing.T) {
	later, dead := deadAddr(t), deadAddr(t)
	var log testutil.LogBuffer
	startNode(t, "b", func(c *Config) {
		c.Join = []string{later, dead}
		c.Logger = zerolog.New(&log).Level(zerolog.DebugLevel)
	})
	testutil.Eventually(t, 10*time.Second, "four failed attempts", func() bool {
		return len(logLines(t, &log, "gossip: join attempt")) >= 4
	})
	failed := logLines(t, &log, "gossip: join failed")
	if len(failed) != 1 {
		t.Fatalf("%d join failures logged, want 1: %v", len(failed), failed)
	}
	f := failed[0]
	oneLine(t, f)
	if f["level"] != "warn" || f["peers"] != 0.0 || !strings.Contains(f["message"].(string), "no peer") {
		t.Errorf("the failure of an entry alone is logged as %v, want warn, no peer", f)
	}
	e, _ := f["error"].(string)
	parts := strings.Split(e, "; ")
	if len(parts) != 2 || !strings.Contains(e, "failed to join "+later+": ") || !strings.Contains(e, "failed to join "+dead+": ") {
		t.Errorf("error %q, want both peers, each with its reason, joined with \"; \"", e)
	}

	startNode(t, "a", func(c *Config) { c.BindAddr = later })
	testutil.Eventually(t, 10*time.Second, "recovered, then the dead peer failing for a clustered entry", func() bool {
		return len(logLines(t, &log, "gossip: join failed")) >= 2
	})
	testutil.Eventually(t, 10*time.Second, "three more attempts", func() bool {
		return len(logLines(t, &log, "gossip: join attempt")) >= 4+1+3
	})
	if got := logLines(t, &log, "gossip: join recovered"); len(got) != 1 || got[0]["level"] != "info" {
		t.Errorf("recovery logged %v, want once at info", got)
	}
	failed = logLines(t, &log, "gossip: join failed")
	if len(failed) != 2 {
		t.Fatalf("%d join failures logged, want 2 (alone, then clustered): %v", len(failed), failed)
	}
	f = failed[1]
	oneLine(t, f)
	if f["level"] != "info" || f["error"] == e || !strings.HasPrefix(f["error"].(string), "failed to join "+dead+": ") {
		t.Errorf("the dead peer's failure once clustered is logged as %v, want info naming %s alone", f, dead)
	}
}
