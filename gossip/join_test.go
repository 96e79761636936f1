package gossip

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/memnet"
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

// A member that missed another's join broadcast learns of it from the joiner's first member
// list exchanges (settleRounds), not a push/pull interval later. Every packet is lost here,
// so broadcasts reach no one; streams still carry joins, push/pull and TCP pings: c joins a,
// and b, joined before, can learn of c only by a stream.
func TestJoinSettlesTheMemberList(t *testing.T) {
	network := memnet.New(1)
	network.SetLatency(time.Millisecond, 5*time.Millisecond)
	start := func(name string, join ...string) *testNode {
		tr := network.NewTransport(name)
		return startNode(t, name, func(c *Config) {
			c.BindAddr, c.Transport, c.Join = DefaultBindAddr, tr, join
			c.Membership.PushPullInterval = time.Hour // none in this test's time
			c.JoinInterval = time.Hour                // one join, the first
		})
	}
	a := start("a")
	aAddr, _ := network.Addr("a")
	b := start("b", aAddr)
	testutil.Eventually(t, 5*time.Second, "b joined a", func() bool { return len(b.g.Peers()) == 1 && len(a.g.Peers()) == 1 })
	network.SetLoss(1)
	c := start("c", aAddr)
	testutil.Eventually(t, 5*time.Second, "c joined a", func() bool { return len(c.g.Peers()) == 2 })
	knows := func(of *testNode, name string) bool {
		for _, m := range of.g.Members() {
			if m.Name == name && m.State == "alive" {
				return true
			}
		}
		return false
	}
	// b's rounds (its 4 s and 8 s after its join) exchange with a, which knows c; c's own
	// reach b half the time.
	testutil.Eventually(t, 12*time.Second, "b lists c alive", func() bool { return knows(b, "c") })
}

// The rounds' schedule: from an incarnation's first peer, at 1, 2, 4 and 8 s, each once; the
// joiner sleeps until the next; a new incarnation starts again.
func TestSettleSchedule(t *testing.T) {
	s1, s2 := new(serf.Serf), new(serf.Serf)
	t0 := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
	var st settling
	st.start(s1, false, t0)
	if st.due(s1, t0) || st.wait(s1, 5*time.Second, t0) != 5*time.Second {
		t.Fatal("a schedule before the first peer")
	}
	st.start(s1, true, t0)
	now := t0.Add(1500 * time.Millisecond) // 1.5 s since the first peer
	if !st.due(s1, now) || st.due(s1, now) {
		t.Fatal("the 1 s round: not due once")
	}
	if w := st.wait(s1, 5*time.Second, now); w != 500*time.Millisecond {
		t.Errorf("wait %v, want the 0.5 s to the 2 s round", w)
	}
	st.start(s1, true, now) // the same incarnation: the schedule goes on
	if st.next != 1 {
		t.Fatal("a second peer restarted the schedule")
	}
	now = t0.Add(time.Minute)
	for range 3 {
		if !st.due(s1, now) {
			t.Fatal("a round not due a minute on")
		}
	}
	if st.due(s1, now) || st.wait(s1, 5*time.Second, now) != 5*time.Second {
		t.Fatal("more than four rounds")
	}
	st.start(s2, true, now)
	if st.next != 0 || st.wait(s2, 5*time.Second, now) != time.Second {
		t.Fatal("a new incarnation did not start again")
	}
}
