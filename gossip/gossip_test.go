package gossip

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/gossiptest"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
)

type testNode struct {
	name  string
	g     *Gossip
	table *homes.Table
}

// fastConfig is a Config for loopback clusters: short intervals so that a test takes
// seconds, not so short that a 2-core machine under -race misses probes.
func fastConfig(t *testing.T, name string, table *homes.Table) Config {
	log := zerolog.Nop()
	if os.Getenv("GOSSIP_TEST_LOG") != "" {
		log = zerolog.New(zerolog.NewConsoleWriter()).With().Str("node", name).Logger()
	}
	c := DefaultConfig()
	c.NodeName, c.BindAddr, c.Key = name, "127.0.0.1:0", clusterKey
	c.Tags = map[string]string{"pop": "pop-" + name, "continent": "EU", "version": "test"}
	c.Table, c.Regions, c.Logger, c.Registerer = table, testRegions, log, prometheus.NewRegistry()
	c.Spread.FlushInterval, c.Spread.MaxFlushInterval = 20*time.Millisecond, 200*time.Millisecond
	c.JoinInterval = 200 * time.Millisecond
	m := &c.Membership
	m.GossipInterval, m.ProbeInterval, m.ProbeTimeout = 50*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
	m.PushPullInterval, m.TCPTimeout, m.LeavePropagateDelay = 5*time.Second, 2*time.Second, 100*time.Millisecond
	return c
}

func startNode(t *testing.T, name string, mod func(*Config)) *testNode {
	t.Helper()
	table, err := homes.New(homes.Config{Regions: testRegions, Origin: name})
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(t, name, table)
	if mod != nil {
		mod(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("close %s: %v", name, err)
		}
	})
	return &testNode{name: name, g: g, table: table}
}

// startCluster starts n keyed nodes a, b, c, ... joined to the first, and waits until every
// one sees all the others alive.
// mod, if given, changes every node's config.
func startCluster(t *testing.T, n int, mod ...func(*Config)) []*testNode {
	t.Helper()
	apply := func(c *Config) {
		for _, m := range mod {
			m(c)
		}
	}
	nodes := []*testNode{startNode(t, "a", apply)}
	for i := 1; i < n; i++ {
		name := string(rune('a' + i))
		nodes = append(nodes, startNode(t, name, func(c *Config) { apply(c); c.Join = []string{nodes[0].g.Addr()} }))
	}
	// A setup step, not the contract's 3 s (the tests that claim that measure it): ten real
	// members on loopback under -race on a loaded 2-CPU host took longer than 5 s once.
	testutil.Eventually(t, 20*time.Second, "cluster formed", func() bool {
		for _, nd := range nodes {
			if len(nd.g.Peers()) != n-1 || !nd.g.Joined() {
				return false
			}
		}
		return true
	})
	return nodes
}

// flush makes n's publisher send what is pending now; a publisher that does not within 5s
// fails the test.
func (n *testNode) flush(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.g.spread.Flush(ctx); err != nil {
		t.Fatalf("%s: within 5s: %v", n.name, err)
	}
}

func (n *testNode) has(tenant, region string) bool {
	id, ok := n.table.Lookup(tenant)
	want, _ := n.table.RegionID(region)
	return ok && id == want
}

func TestHomesTravel(t *testing.T) {
	nodes := startCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	start := time.Now()
	a.table.LearnName("acme", "eu")
	c.table.LearnName("globex", "us")
	testutil.Eventually(t, 3*time.Second, "acme at b and c, globex at a and b", func() bool {
		return b.has("acme", "eu") && c.has("acme", "eu") && a.has("globex", "us") && b.has("globex", "us")
	})
	t.Logf("two homes reached every entry in %v", time.Since(start))
	// A tenant that moves converges to its new home everywhere.
	b.table.LearnName("acme", "ap")
	testutil.Eventually(t, 3*time.Second, "acme moved to ap", func() bool { return a.has("acme", "ap") && c.has("acme", "ap") })
	if st := c.table.Stats(); st.Gossip != 1 || st.Local != 1 {
		t.Errorf("c holds %d gossiped and %d local homes, want 1 and 1", st.Gossip, st.Local)
	}
	if n := b.seriesCount(t, "fenec_entry_gossip_propagation_seconds"); n != 2 {
		t.Errorf("propagation histogram has %d series, want one per clock", n)
	}
	if got := a.metric(t, "fenec_entry_gossip_homes_applied_total"); got < 2 {
		t.Errorf("a applied %v homes from gossip, want 2", got)
	}
	if got := a.metric(t, "fenec_entry_gossip_members", "state", "alive"); got != 3 {
		t.Errorf("members alive gauge %v, want 3", got)
	}
}

func TestMarksAndClearsTravel(t *testing.T) {
	nodes := startCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	us, _ := a.table.RegionID("us")
	eu, _ := a.table.RegionID("eu")
	a.table.Mark(us)
	a.table.Mark(eu)
	testutil.Eventually(t, 3*time.Second, "marks at b and c", func() bool {
		return b.table.Marked(us, homes.Lenient) && c.table.Marked(us, homes.Lenient) &&
			b.table.Marked(eu, homes.Strict) && c.table.Marked(eu, homes.Strict)
	})
	// A clear observed at c ends the marks everywhere.
	c.table.Clear(us)
	c.table.Clear(eu)
	testutil.Eventually(t, 3*time.Second, "clears at a and b", func() bool {
		return !a.table.Marked(us, homes.Strict) && !b.table.Marked(us, homes.Strict) &&
			!a.table.Marked(eu, homes.Strict) && !b.table.Marked(eu, homes.Strict)
	})
	if got := b.metric(t, "fenec_entry_gossip_marks_applied_total"); got != 4 {
		t.Errorf("b applied %v marks and clears, want 4", got)
	}
}

// TestKnownHomeSendsNothing: a request to a known home sends nothing.
func TestKnownHomeSendsNothing(t *testing.T) {
	a := startNode(t, "a", nil)
	if !a.table.LearnName("acme", "eu") {
		t.Fatal("first Learn changed nothing")
	}
	a.flush(t)
	batches := func() float64 {
		return a.metric(t, "fenec_entry_gossip_events_sent_total") + a.metric(t, "fenec_entry_gossip_direct_batches_sent_total")
	}
	sent := batches()
	if sent != 1 {
		t.Fatalf("sent %v batches for one new home, want 1", sent)
	}
	for range 100 {
		a.table.LearnName("acme", "eu")
	}
	a.flush(t)
	if got := batches(); got != sent {
		t.Fatalf("re-learning a known home sent %v batches", got-sent)
	}
}

func TestWrongKeyCannotJoinNorInject(t *testing.T) {
	nodes := startCluster(t, 2)
	a, b := nodes[0], nodes[1]
	x := startNode(t, "x", func(c *Config) { c.Key = strangerKey })
	if n, err := x.g.serfOrNil().Join([]string{a.g.Addr()}, true); err == nil || n != 0 {
		t.Fatalf("join with another key: joined %d, err %v", n, err)
	}
	// Nor with no key at all.
	y := startNode(t, "y", func(c *Config) { c.Key, c.Insecure = nil, true })
	if n, err := y.g.serfOrNil().Join([]string{a.g.Addr()}, true); err == nil || n != 0 {
		t.Fatalf("join without a key: joined %d, err %v", n, err)
	}
	x.table.LearnName("evil", "ap")
	x.flush(t)
	y.table.LearnName("evil2", "ap")
	y.flush(t)
	// Gossip among the keyed nodes still works, and carried nothing of x's or y's.
	a.table.LearnName("acme", "eu")
	testutil.Eventually(t, 3*time.Second, "acme at b", func() bool { return b.has("acme", "eu") })
	for _, n := range nodes {
		if _, ok := n.table.Lookup("evil"); ok {
			t.Errorf("%s holds a home injected without the key", n.name)
		}
		if _, ok := n.table.Lookup("evil2"); ok {
			t.Errorf("%s holds a home injected in clear", n.name)
		}
		for _, m := range n.g.Members() {
			if m.Name == "x" || m.Name == "y" {
				t.Errorf("%s lists %s as a member (%s)", n.name, m.Name, m.State)
			}
		}
	}
	if x.g.Joined() || y.g.Joined() {
		t.Error("a node without the key reports Joined")
	}
}

// TestDirectRefusesStrangers: direct packets sealed with another key, or in clear, reach
// a keyed entry's port but change nothing; copies of a valid one are applied once.
func TestDirectRefusesStrangers(t *testing.T) {
	nodes := startCluster(t, 2)
	a, b := nodes[0], nodes[1]
	ver := homes.Version{HLC: uint64(time.Now().UnixMilli()) << 16, Origin: "x"}
	payload, err := wire.NewEncoder("x", wire.DefaultEventSizeLimit, nil).Encode(nil,
		[]homes.Home{{Tenant: "evil", Region: "ap", Version: ver}})
	if err != nil {
		t.Fatal(err)
	}
	stranger := wire.NewCodec(keysOf(strangerKey), DefaultConfig().Label)
	clear := wire.NewCodec(keysOf(nil), DefaultConfig().Label)
	wrongLabel := wire.NewCodec(keysOf(clusterKey), "another-cluster")
	to := memberlist.Address{Addr: a.g.Addr(), Name: "a"}
	write := func(c *wire.Codec, p []byte) {
		pkt, err := c.Seal(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.g.writeDirect(pkt, to); err != nil {
			t.Fatal(err)
		}
	}
	write(stranger, payload)
	write(clear, payload)
	write(wrongLabel, payload)
	testutil.Eventually(t, 3*time.Second, "a counted 3 invalid direct packets", func() bool {
		return a.metric(t, "fenec_entry_gossip_direct_packets_received_total", "result", "invalid") == 3
	})
	if _, ok := a.table.Lookup("evil"); ok {
		t.Fatal("a applied a home from a stranger's direct packet")
	}
	// The same payload sealed with the cluster's key is applied, once for its 3 copies.
	pkt, _ := wire.NewCodec(keysOf(clusterKey), DefaultConfig().Label).Seal(payload) // as a's own
	for range 3 {
		if err := b.g.writeDirect(pkt, to); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 3*time.Second, "evil applied at a, copies dropped", func() bool {
		return a.has("evil", "ap") && a.metric(t, "fenec_entry_gossip_direct_packets_received_total", "result", "duplicate") == 2
	})
	if got := a.metric(t, "fenec_entry_gossip_direct_packets_received_total", "result", "new"); got != 1 {
		t.Fatalf("a queued %v direct packets, want 1", got)
	}
}

func TestLeaveIsSeenLeft(t *testing.T) {
	nodes := startCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.g.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.g.Leave(ctx); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
	state := func(n *testNode, name string) string {
		for _, m := range n.g.Members() {
			if m.Name == name {
				return m.State
			}
		}
		return ""
	}
	testutil.Eventually(t, 3*time.Second, "c left at a and b", func() bool {
		return state(a, "c") == "left" && state(b, "c") == "left"
	})
	if len(a.g.Peers()) != 1 {
		t.Errorf("a has peers %v, want b only", a.g.Peers())
	}
	if err := c.g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.g.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A leave that comes while the entry's join is in flight (the peer has counted the entry
// alive; its answer has not come back) still reaches that peer as a leave: Leave waits for
// the join's answer first. Without the wait it told no one, and the peer saw the entry fail.
func TestLeaveDuringJoinIsSeenLeft(t *testing.T) {
	// a gossips and probes seldom: b learns a from the join's answer only (a's gossip, or its
	// own alive message riding on a probe, would tell b too).
	a := startNode(t, "a", func(c *Config) {
		c.Membership.GossipInterval, c.Membership.ProbeInterval, c.Membership.ProbeTimeout = 3*time.Second, 3*time.Second, time.Second
	})
	slow := delayedAnswers(t, a.g.Addr(), 700*time.Millisecond)
	b := startNode(t, "b", func(c *Config) { c.Join = []string{slow} })
	testutil.EventuallyEvery(t, 5*time.Second, 5*time.Millisecond, "a sees b alive", func() bool { return memberState(a, "b") == "alive" })
	if b.g.Joined() || len(b.g.Peers()) > 0 {
		t.Fatal("b knows a already: the join is not in flight, and the test tests nothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.g.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.g.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "a sees b gone", func() bool {
		st := memberState(a, "b")
		return st != "alive" && st != "leaving"
	})
	if st := memberState(a, "b"); st != "left" {
		t.Errorf("a sees b %q, want left", st)
	}
}

// delayedAnswers forwards TCP connections to target and holds each of target's answers for
// delay: a join through it is in flight that long after the target has taken the joiner in.
func delayedAnswers(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	return testutil.ServeTCP(t, func(c net.Conn) {
		u, err := net.DialTimeout("tcp", target, 2*time.Second)
		if err != nil {
			return
		}
		defer u.Close()
		end := time.Now().Add(10 * time.Second) // nothing here outlives a test
		c.SetDeadline(end)
		u.SetDeadline(end)
		go io.Copy(u, c)
		time.Sleep(delay)
		io.Copy(c, u)
	})
}

func TestInvalidEventsChangeNothing(t *testing.T) {
	nodes := startCluster(t, 2)
	a, b := nodes[0], nodes[1]
	now := time.Now()
	ver := homes.Version{HLC: uint64(now.UnixMilli()) << 16, Origin: "a"}
	future := homes.Version{HLC: uint64(now.Add(time.Hour).UnixMilli()) << 16, Origin: "a"}
	e := wire.NewEncoder("a", wire.DefaultEventSizeLimit, nil)
	bad, err := e.Encode(
		[]homes.Mark{{Region: "mars", Observer: "a", At: now, Version: ver}},
		[]homes.Home{
			{Tenant: "x/y", Region: "eu", Version: ver},
			{Tenant: "acme", Region: "mars", Version: ver},
			{Tenant: "acme", Region: "eu", Version: future},
			{Tenant: strings.Repeat("t", 300), Region: "eu", Version: ver},
		})
	if err != nil {
		t.Fatal(err)
	}
	// Undecodable: a format no entry writes; msgpack (format 1) from "a" that is not msgpack.
	for _, p := range [][]byte{{0xff, 0xff, 0xff}, {1, 1, 'a', 0xc1}, bad} {
		if err := a.g.sendEvent(p); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 3*time.Second, "b counted the invalid events and items", func() bool {
		return b.metric(t, "fenec_entry_gossip_events_invalid_total") == 2 &&
			b.metric(t, "fenec_entry_gossip_items_invalid_total", "kind", "home") == 4 &&
			b.metric(t, "fenec_entry_gossip_items_invalid_total", "kind", "mark") == 1
	})
	if st := b.table.Stats(); st.Homes != 0 || st.Marked != 0 {
		t.Fatalf("invalid events changed b's table: %+v", st)
	}
	if got := b.metric(t, "fenec_entry_gossip_homes_applied_total"); got != 0 {
		t.Fatalf("b applied %v homes", got)
	}
}

// TestManyLongNamesArrive: a burst of homes with long tenant names is split into direct
// batches within EventSizeLimit, each within a packet (a transport refuses a larger one:
// counted as dropped "direct_write"), and all arrive.
func TestManyLongNamesArrive(t *testing.T) {
	nodes := startCluster(t, 2)
	a, b := nodes[0], nodes[1]
	hs := gossiptest.Homes(300, 100, "a", 42)
	for _, h := range hs {
		a.table.LearnName(h.Tenant, h.Region)
	}
	testutil.Eventually(t, 10*time.Second, "300 homes at b", func() bool { return b.table.Stats().Homes == len(hs) })
	for _, h := range hs {
		if !b.has(h.Tenant, h.Region) {
			t.Fatalf("b lacks %s", h.Tenant)
		}
	}
	for _, reason := range []string{"send", "direct_write"} {
		if got := a.metric(t, "fenec_entry_gossip_events_dropped_total", "reason", reason); got != 0 {
			t.Fatalf("%v batches dropped (%s)", got, reason)
		}
	}
	if got := a.metric(t, "fenec_entry_gossip_direct_batches_sent_total"); got < 2 {
		t.Fatalf("300 homes with 100-byte names in %v direct batches: want them split", got)
	}
}

func TestIPC(t *testing.T) {
	a := startNode(t, "a", func(c *Config) { c.RPCAddr = "127.0.0.1:0" })
	b := startNode(t, "b", func(c *Config) {
		c.RPCAddr, c.RPCAuth = "127.0.0.1:0", "s3cret"
		c.Join = []string{a.g.Addr()}
	})
	testutil.Eventually(t, 5*time.Second, "a and b joined", func() bool { return a.g.Joined() && b.g.Joined() })

	list := func(addr, auth string) ([]string, error) {
		cl, err := client.ClientFromConfig(&client.Config{Addr: addr, AuthKey: auth, Timeout: 2 * time.Second})
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		ms, err := cl.Members()
		if err != nil {
			return nil, err
		}
		var out []string
		for _, m := range ms {
			if m.Tags["role"] != "entry" || m.Tags["pop"] != "pop-"+m.Name || m.Tags["version"] != "test" {
				t.Errorf("member %s tags %v", m.Name, m.Tags)
			}
			out = append(out, m.Name+"="+m.Status)
		}
		return out, nil
	}
	for _, row := range []struct {
		name, addr, auth string
		ok               bool
	}{
		{"no auth needed", a.g.RPCAddr().String(), "", true},
		{"auth given", b.g.RPCAddr().String(), "s3cret", true},
		{"auth missing", b.g.RPCAddr().String(), "", false},
		{"auth wrong", b.g.RPCAddr().String(), "nope", false},
	} {
		ms, err := list(row.addr, row.auth)
		if (err == nil) != row.ok {
			t.Errorf("%s: members %v, err %v", row.name, ms, err)
			continue
		}
		if row.ok && len(ms) != 2 {
			t.Errorf("%s: members %v, want a and b alive", row.name, ms)
		}
	}
}

// TestJoinDNSAndRejoin: an entry started before its peer serves alone and keeps resolving
// JoinDNS (at its own gossip port) until the peer answers; when that peer restarts with
// nothing to join, it is back in the cluster and gossip flows again.
func TestJoinDNSAndRejoin(t *testing.T) {
	lookup := func(ctx context.Context, host string) ([]net.IP, error) {
		if host != "entries.test" {
			return nil, fmt.Errorf("no such host %q", host)
		}
		return []net.IP{net.ParseIP("127.0.0.2"), net.ParseIP("127.0.0.3")}, nil
	}
	pc, err := net.ListenPacket("udp", "127.0.0.2:0") // a port free on 127.0.0.2 a moment ago
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
	pc.Close()
	b := startNode(t, "b", func(c *Config) {
		c.BindAddr = "127.0.0.3:" + port
		c.JoinDNS, c.LookupIP = "entries.test", lookup
	})
	if b.g.Joined() {
		t.Fatal("b joined with no peer up")
	}
	a := startNode(t, "a", func(c *Config) { c.BindAddr = "127.0.0.2:" + port })
	testutil.Eventually(t, 5*time.Second, "b's joiner found a through DNS", func() bool { return a.g.Joined() && b.g.Joined() })

	if err := a.g.Close(); err != nil { // a crash: no leave
		t.Fatal(err)
	}
	a2 := startNode(t, "a", func(c *Config) { c.BindAddr = "127.0.0.2:" + port })
	testutil.Eventually(t, 15*time.Second, "restarted a back in the cluster", func() bool { return a2.g.Joined() })
	a2.table.LearnName("acme", "us")
	testutil.Eventually(t, 3*time.Second, "acme at b", func() bool { return b.has("acme", "us") })
}
