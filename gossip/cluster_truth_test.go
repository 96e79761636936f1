package gossip

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/mux"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
)

// TestTableTravelsOnTheGossipPort pins docs/REFERENCE.md, "Configuration": the joiner's table and
// repair go through --gossip-bind, with no listener of their own. A joiner fetches a peer's whole
// table (homes a direct packet never brought it) through the peer's memberlist port.
func TestTableTravelsOnTheGossipPort(t *testing.T) {
	nodes := startCluster(t, 2)
	a := nodes[0]
	for i := range 50 {
		a.table.Learn(fmt.Sprintf("old-%d", i), i%3)
	}
	a.table.Mark(1)
	testutil.Eventually(t, 3*time.Second, "b holds a's homes", func() bool { return nodes[1].table.Len() == 50 })

	c := startNode(t, "c", func(cfg *Config) { cfg.Join = []string{a.g.Addr()} })
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if err := c.g.Bootstrap(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := c.table.Len(); n != 50 || !c.table.Marked(1, homes.Strict) {
		t.Fatalf("after Bootstrap c holds %d homes, us failing %v; want 50 and true", n, c.table.Marked(1, homes.Strict))
	}
	if got := c.metric(t, "fenec_entry_snapshot_fetches_total", "result", "ok"); got != 1 {
		t.Errorf("c fetched %v tables, want 1", got)
	}
	// And repair, over the same port.
	res, err := c.g.sync.Repair(ctx, Peer{Name: "a", Addr: a.g.Addr()})
	if err != nil || res.Buckets != 0 || res.MarksDiffer {
		t.Errorf("repair after the fetch: %+v, %v; want in sync", res, err)
	}
}

// TestGossipPortSortsStreams pins the sorter (package mux): a stream that opens with SyncMagic
// reaches the table's HTTP server, whose refusal a stranger gets; memberlist's own streams
// (joins and push/pull, which formed the cluster above) still reach memberlist.
func TestGossipPortSortsStreams(t *testing.T) {
	nodes := startCluster(t, 2)
	c, err := net.DialTimeout("tcp", nodes[0].g.Addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, string([]byte{mux.SyncMagic})+"GET /_gossip/challenge?node=mallory HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 403") {
		t.Fatalf("answer %q, %v; want the table server's 403 (not a member)", line, err)
	}
	// A push/pull after the sorter saw a stream of its own.
	if err := nodes[1].g.serfOrNil().Memberlist().UpdateNode(time.Second); err != nil {
		t.Fatal(err)
	}
	if n, err := nodes[1].g.serfOrNil().Join([]string{nodes[0].g.Addr()}, true); err != nil || n != 1 {
		t.Fatalf("a join (memberlist's own stream) after: %d, %v", n, err)
	}
}

// TestKeyRotation is docs/REFERENCE.md, "Cluster and operations" in one process: serf's key manager
// installs B, makes it primary and removes A while homes keep travelling; an entry holding only B
// joins and gets the table; one holding only A can neither join nor teach a home.
func TestKeyRotation(t *testing.T) {
	keyA := clusterKey
	keyB := bytes.Repeat([]byte{5}, 32)
	b64 := base64.StdEncoding.EncodeToString
	nodes := startCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	learn := func(at *testNode, tenant string, region int) {
		t.Helper()
		at.table.Learn(tenant, region)
		testutil.Eventually(t, 3*time.Second, tenant+" everywhere", func() bool {
			for _, n := range nodes {
				if r, ok := n.table.Lookup(tenant); !ok || r != region {
					return false
				}
			}
			return true
		})
	}
	learn(a, "before", 0)
	km := a.g.serfOrNil().KeyManager()
	if _, err := km.InstallKey(b64(keyB)); err != nil {
		t.Fatalf("install B: %v", err)
	}
	learn(b, "installed", 1) // sealed with A, B installed everywhere
	if _, err := km.UseKey(b64(keyB)); err != nil {
		t.Fatalf("use B: %v", err)
	}
	learn(c, "in-use", 2) // sealed with B
	if _, err := km.RemoveKey(b64(keyA)); err != nil {
		t.Fatalf("remove A: %v", err)
	}
	learn(a, "removed", 1)
	for _, n := range nodes {
		if got := n.g.keys.All(); len(got) != 1 || !bytes.Equal(got[0], keyB) {
			t.Fatalf("%s holds %d keys after the rotation, want B alone", n.name, len(got))
		}
	}

	d := startNode(t, "d", func(cfg *Config) { cfg.Key = keyB; cfg.Join = []string{a.g.Addr()} })
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if err := d.g.Bootstrap(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := d.table.Len(); n != 4 {
		t.Errorf("an entry holding only B got %d homes, want the 4", n)
	}

	e := startNode(t, "e", func(cfg *Config) { cfg.Key = keyA; cfg.Join = []string{a.g.Addr()} })
	e.table.Learn("mallory", 0)
	time.Sleep(2 * time.Second) // a bounded wait for what must not happen
	if e.g.Joined() {
		t.Error("an entry holding only the removed key joined")
	}
	for _, n := range append(nodes, d) {
		if _, ok := n.table.Lookup("mallory"); ok {
			t.Errorf("%s took a home from an entry holding only the removed key", n.name)
		}
	}
	// Nor can it fetch the table: its proof is made with a removed key.
	if _, _, err := e.g.sync.Fetch(ctx, Peer{Name: "a", Addr: a.g.Addr()}); err == nil {
		t.Error("an entry holding only the removed key fetched the table")
	}
}

// TestNameConflictSaysGossipDown pins the --node row of docs/REFERENCE.md: an entry whose name
// another member holds says so at error, with both addresses, reports gossip down (Up, the
// gauge, no members) while serf is shut down, and starts a fresh serf rather than sitting
// dead.
func TestNameConflictSaysGossipDown(t *testing.T) {
	logs := map[string]*testutil.LogBuffer{"first": {}, "second": {}}
	withLog := func(which string) func(*Config) {
		return func(c *Config) {
			c.Logger = zerolog.New(logs[which]).Level(zerolog.InfoLevel)
			c.NodeName = "dup"
		}
	}
	first := startNode(t, "first", withLog("first"))
	second := startNode(t, "second", func(c *Config) { withLog("second")(c); c.Join = []string{first.g.Addr()} })
	both := []*testNode{first, second}

	sawDown := false
	testutil.Eventually(t, 20*time.Second, "a conflict logged, gossip seen down and a fresh serf started", func() bool {
		restarted := false
		for _, n := range both {
			// A shut-down serf stays shut down, but the supervisor may put a fresh one in its
			// place between two reads: what is read counts only if the entry still holds the
			// same serf after (checking Up and then Members could see the old and the new).
			if s := n.g.serfOrNil(); s != nil && s.State() == serf.SerfShutdown {
				up, members, gauge := n.g.Up(), n.g.Members(), n.metric(t, "fenec_entry_gossip_up")
				if n.g.serfOrNil() == s {
					if up || members != nil || gauge != 0 {
						t.Fatalf("%s: serf is down, yet Up says %v, it lists %d members, the gauge says %v",
							n.name, up, len(members), gauge)
					}
					sawDown = true
				}
			}
			restarted = restarted || n.metric(t, "fenec_entry_gossip_restarts_total") >= 1
		}
		return sawDown && restarted
	})
	conflict := false
	for which, l := range logs {
		for _, line := range strings.Split(l.String(), "\n") {
			if strings.Contains(line, `"level":"error"`) && strings.Contains(line, "node name") &&
				strings.Contains(line, `"node":"dup"`) && strings.Contains(line, `"other_addr":"127.0.0.1:`) &&
				strings.Contains(line, `"addr":"127.0.0.1:`) {
				conflict = true
			}
		}
		if strings.Contains(l.String(), "Serf can't Join") {
			t.Errorf("%s logged joins on a shut-down serf:\n%s", which, l.String())
		}
	}
	if !conflict {
		t.Errorf("no error line names the conflict with both addresses:\n%s\n%s", logs["first"], logs["second"])
	}
}

// TestUpFollowsLeave pins that gossip reports down once it left, and is not restarted.
func TestUpFollowsLeave(t *testing.T) {
	nodes := startCluster(t, 2)
	a := nodes[0]
	if !a.g.Up() || a.metric(t, "fenec_entry_gossip_up") != 1 {
		t.Fatal("a running member does not report gossip up")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.g.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if a.g.Up() || a.metric(t, "fenec_entry_gossip_up") != 0 || a.g.State() != "left" {
		t.Errorf("after Leave: up %v, state %q; want down, left", a.g.Up(), a.g.State())
	}
	time.Sleep(restartMin + 200*time.Millisecond) // a bounded wait for what must not happen
	if a.metric(t, "fenec_entry_gossip_restarts_total") != 0 {
		t.Error("serf was started again after Leave")
	}
}

// skewedClock is a clock off the real one by a fixed amount.
type skewedClock time.Duration

func (c skewedClock) Now() time.Time { return time.Now().Add(time.Duration(c)) }

// TestPropagationByTwoClocks pins the histogram of docs/REFERENCE.md, "Metrics", "by the two
// clocks": with the origin's clock 5 s behind, the origin-stamp measure is off by the skew, the
// local one (the origin's wait by its clock, half the round trip, the wait here) is not.
func TestPropagationByTwoClocks(t *testing.T) {
	const skew = -5 * time.Second
	nodes := startCluster(t, 2, func(c *Config) {
		if c.NodeName == "a" { // the whole origin's clock is behind: its table's and its gossip's
			tbl, err := homes.New(homes.Config{Regions: testRegions, Origin: "a", Clock: skewedClock(skew)})
			if err != nil {
				t.Fatal(err)
			}
			c.Table, c.Clock = tbl, skewedClock(skew)
		}
	})
	a, b := nodes[0], nodes[1]
	a.table = a.g.cfg.Table
	testutil.Eventually(t, 5*time.Second, "b knows a's network coordinate", func() bool { _, ok := b.g.rtt("a"); return ok })
	a.table.LearnName("acme", "eu")
	testutil.Eventually(t, 3*time.Second, "acme at b", func() bool { return b.has("acme", "eu") })
	hist := func(clock string) (count uint64, sum float64) {
		h := b.series(t, "fenec_entry_gossip_propagation_seconds", "clock", clock).GetHistogram()
		return h.GetSampleCount(), h.GetSampleSum()
	}
	if n, sum := hist("origin"); n != 1 || sum < 4.5 {
		t.Errorf("origin clock: %d samples, %.3f s; want 1 off by the 5 s skew", n, sum)
	}
	if n, sum := hist("local"); n != 1 || sum > 1 {
		t.Errorf("local clock: %d samples, %.3f s; want 1 within a second, the skew not in it", n, sum)
	}
}

// An entry bound to one of its host's addresses fetches and repairs from that address, not
// the one the kernel would pick (127.0.0.1 here), so that the peer's check that the stream
// comes from a member's address passes. On Linux every 127.0.0.0/8 address is the host's.
func TestTableFetchedFromTheBoundAddress(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs 127.0.0.2 and 127.0.0.3 on loopback, which only Linux has without aliases")
	}
	a := startNode(t, "a", func(c *Config) { c.BindAddr = "127.0.0.2:0" })
	for i := range 20 {
		a.table.Learn(fmt.Sprintf("old-%d", i), i%3)
	}
	b := startNode(t, "b", func(c *Config) { c.BindAddr = "127.0.0.3:0"; c.Join = []string{a.g.Addr()} })
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if err := b.g.Bootstrap(ctx, 5*time.Second); err != nil {
		t.Fatalf("bootstrap from 127.0.0.3: %v", err)
	}
	if n := b.table.Len(); n != 20 {
		t.Fatalf("b holds %d homes, want 20", n)
	}
	if _, err := b.g.sync.Repair(ctx, Peer{Name: "a", Addr: a.g.Addr()}); err != nil {
		t.Errorf("repair from 127.0.0.3: %v", err)
	}
}

// The repair round after a table fetch is due RepairSettle after the fetch by the entry's own
// clock, which also stamped the fetch: an entry whose clock is ten minutes ahead still runs
// it about RepairSettle after fetching, not ten minutes later.
func TestCatchUpRoundByTheEntrysClock(t *testing.T) {
	a := startNode(t, "a", nil)
	a.table.LearnName("acme", "eu")
	b := startNode(t, "b", func(c *Config) { c.Join = []string{a.g.Addr()}; c.Clock = skewedClock(10 * time.Minute) })
	testutil.Eventually(t, 5*time.Second, "b joined a", func() bool { return len(b.g.Peers()) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.g.RunRepair(ctx) }()
	defer func() { cancel(); <-done }()
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	defer fcancel()
	if err := b.g.Bootstrap(fctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	rounds := func() (n float64) { // every result: the round ran
		for _, f := range b.families(t) {
			if f.GetName() == "fenec_entry_repair_rounds_total" {
				for _, m := range f.GetMetric() {
					n += m.GetCounter().GetValue()
				}
			}
		}
		return n
	}
	settle := b.g.cfg.Sync.RepairSettle
	testutil.Eventually(t, settle+5*time.Second, "a repair round after the fetch", func() bool { return rounds() >= 1 })
}
