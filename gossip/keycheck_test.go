package gossip

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// TestWrongKeySaidOnBothSides: an entry joining with another gossip key, and one joining in
// clear, are told plainly on both sides, once per peer however often the join is tried
// again, and every refused attempt is counted on both sides. The texts matched are
// memberlist's own, so this fails if a memberlist upgrade changes them.
func TestWrongKeySaidOnBothSides(t *testing.T) {
	var aLog, xLog, yLog testutil.LogBuffer
	a := startNode(t, "a", func(c *Config) { c.Logger = zerolog.New(&aLog).Level(zerolog.DebugLevel) })
	x := startNode(t, "x", func(c *Config) {
		c.Key = strangerKey
		c.Join = []string{a.g.Addr()}
		c.Logger = zerolog.New(&xLog).Level(zerolog.DebugLevel)
	})
	// Another host for the peer in clear: a names each peer host once.
	y := startNode(t, "y", func(c *Config) {
		c.Key, c.Insecure = nil, true
		c.BindAddr = "127.0.0.2:0"
		c.Join = []string{a.g.Addr()}
		c.Logger = zerolog.New(&yLog).Level(zerolog.DebugLevel)
	})
	const attempts = 4
	for _, l := range []*testutil.LogBuffer{&xLog, &yLog} {
		testutil.Eventually(t, 10*time.Second, "four join attempts", func() bool {
			return len(logLines(t, l, "gossip: join attempt")) >= attempts
		})
	}

	for _, j := range []struct {
		name string
		n    *testNode
		log  *testutil.LogBuffer
	}{{"x (another key)", x, &xLog}, {"y (no key)", y, &yLog}} {
		refused := logLines(t, j.log, "gossip: join refused")
		if len(refused) != 1 {
			t.Fatalf("%s: %d join refusals logged over %d attempts, want 1: %v", j.name, len(refused), attempts, refused)
		}
		r := refused[0]
		oneLine(t, r)
		msg, _ := r["message"].(string)
		if r["level"] != "warn" || !strings.Contains(msg, "another gossip key, or none") || !strings.Contains(msg, "--gossip-key") {
			t.Errorf("%s: refusal logged as %v, want warn naming the key and --gossip-key", j.name, r)
		}
		if e, _ := r["error"].(string); !strings.HasPrefix(e, "failed to join "+a.g.Addr()+": ") {
			t.Errorf("%s: error %q, want the join of %s", j.name, e, a.g.Addr())
		}
		if got := logLines(t, j.log, "gossip: join failed"); len(got) != 0 {
			t.Errorf("%s: a key refusal also logged as a plain join failure: %v", j.name, got)
		}
		if n := j.n.metric(t, "fenec_entry_gossip_key_mismatches_total"); n < attempts {
			t.Errorf("%s: %v key mismatches counted over %d attempts", j.name, n, attempts)
		}
	}

	said := logLines(t, &aLog, "gossip: a peer's message could not be opened")
	peers := map[string]bool{}
	for _, l := range said {
		oneLine(t, l)
		p, _ := l["peer"].(string)
		if peers[p] {
			t.Errorf("peer %s named twice: %v", p, said)
		}
		peers[p] = true
		if l["level"] != "warn" || !strings.Contains(l["message"].(string), "--gossip-key") {
			t.Errorf("the refused peer logged as %v, want warn naming --gossip-key", l)
		}
	}
	if !peers["127.0.0.1"] || !peers["127.0.0.2"] || len(peers) != 2 {
		t.Errorf("a named %v, want 127.0.0.1 (another key) and 127.0.0.2 (none), once each", peers)
	}
	if n := a.metric(t, "fenec_entry_gossip_key_mismatches_total"); n < 2*attempts {
		t.Errorf("a counted %v key mismatches, want one per refused join (at least %d)", n, 2*attempts)
	}

	// A packet sealed with another key (a member that came back with a new key) is counted,
	// and its host, already named, is not named again.
	before := a.metric(t, "fenec_entry_gossip_key_mismatches_total")
	to := memberlist.Address{Addr: a.g.Addr(), Name: "a"}
	if err := x.g.serfOrNil().Memberlist().SendToAddress(to, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the packet counted", func() bool {
		return a.metric(t, "fenec_entry_gossip_key_mismatches_total") > before
	})
	if got := logLines(t, &aLog, "gossip: a peer's message could not be opened"); len(got) != len(said) {
		t.Errorf("a packet from a named host named it again: %v", got[len(said):])
	}
	for _, n := range []*testNode{a, x, y} {
		if n.g.Joined() {
			t.Errorf("%s reports Joined across different keys", n.name)
		}
	}
}

// TestKeyReportPacketLine: memberlist's line for a packet its keys do not open names the
// sender's host and its reason; past maxKeyPeers hosts, one line says the rest go unnamed.
func TestKeyReportPacketLine(t *testing.T) {
	var log testutil.LogBuffer
	k := newKeyReport(zerolog.New(&log))
	line := "[ERR] memberlist: Decrypt packet failed: unsupported encryption version 4 from=10.0.0.7:7946"
	if !k.received([]byte(line)) || k.received([]byte("[DEBUG] memberlist: Stream connection from=10.0.0.7:51234")) {
		t.Fatal("the packet line not taken, or another line taken")
	}
	if k.received([]byte("[ERR] memberlist: failed to receive: EOF from=10.0.0.8:51234")) {
		t.Error("a stream that failed for another reason was taken for a key mismatch")
	}
	said := logLines(t, &log, "gossip: a peer's message")
	if len(said) != 1 || said[0]["peer"] != "10.0.0.7" || said[0]["reason"] != "unsupported encryption version 4" {
		t.Fatalf("said %v, want one line naming 10.0.0.7 and the reason", said)
	}
	for i := range maxKeyPeers + 10 {
		k.received(fmt.Appendf(nil, "[ERR] memberlist: Decrypt packet failed: x from=10.1.%d.%d:7946", i/256, i%256))
	}
	if got := len(logLines(t, &log, "gossip: a peer's message")); got != maxKeyPeers {
		t.Errorf("%d peers named, want %d at most", got, maxKeyPeers)
	}
	if got := logLines(t, &log, "gossip: more peers hold another gossip key"); len(got) != 1 {
		t.Errorf("the bound said %d times, want once", len(got))
	}
}
