package gossip

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/gossip/memnet"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
)

func fleet(n int, tagged bool) []serf.Member {
	ms := make([]serf.Member, n)
	for i := range ms {
		ms[i] = serf.Member{Name: fmt.Sprintf("entry-%03d", i), Status: serf.StatusAlive, Port: 7946,
			Tags: map[string]string{}}
		if tagged {
			ms[i].Tags[relayTag] = relayVersion
		}
	}
	return ms
}

// Above RelayAbove, each shard has one relay in every other group and the own group gets the
// batch straight, so every home reaches every group; every entry computes the same relays
// (whichever the origin, whatever the order of its member list); below the threshold,
// without a key, or with a member that cannot relay (or relays by copies, version 1), relays
// are off.
func TestPlanRelays(t *testing.T) {
	const shards = 4
	ms := fleet(100, true)
	origin := ms[7].Name
	p := planRelays(origin, ms, 64, shards, true)
	if p == nil {
		t.Fatal("no plan for 100 members above 64")
	}
	groups := 10 // ceil(sqrt(100))
	if len(p.groups) != groups || len(p.relays) != shards {
		t.Fatalf("%d groups and %d shards, want %d and %d", len(p.groups), len(p.relays), groups, shards)
	}
	for s, relays := range p.relays {
		covered := map[int]bool{groupOf(origin, groups): true}
		for _, r := range relays {
			g := groupOf(r.Name, groups)
			if covered[g] {
				t.Errorf("shard %d: two relays in group %d, or one in the origin's own", s, g)
			}
			covered[g] = true
		}
		if len(covered) != groups {
			t.Errorf("shard %d reaches %d of %d groups", s, len(covered), groups)
		}
	}
	for _, m := range p.own {
		if groupOf(m.Name, groups) != groupOf(origin, groups) || m.Name == origin {
			t.Errorf("%s in the origin's own list", m.Name)
		}
	}
	total := 0
	for _, g := range p.groups {
		total += len(g)
	}
	if total != len(ms) {
		t.Errorf("the groups hold %d members, want %d", total, len(ms))
	}
	// Every other entry, with its members in another order, picks the same relay for a
	// (group, shard): a relay's group gets one stream per shard, not one per origin.
	relayOf := map[[2]int]string{}
	for s, relays := range p.relays {
		for _, r := range relays {
			relayOf[[2]int{groupOf(r.Name, groups), s}] = r.Name
		}
	}
	shuffled := append(append([]serf.Member(nil), ms[50:]...), ms[:50]...)
	for _, other := range []string{ms[0].Name, ms[50].Name, ms[99].Name} {
		q := planRelays(other, shuffled, 64, shards, true)
		for s, relays := range q.relays {
			for _, r := range relays {
				if want, ok := relayOf[[2]int{groupOf(r.Name, groups), s}]; ok && want != r.Name {
					t.Errorf("%s picks %s for shard %d of group %d, %s picks %s", other, r.Name, s,
						groupOf(r.Name, groups), origin, want)
				}
			}
		}
	}
	// A tenant's shard is the same everywhere.
	if q := planRelays(ms[50].Name, shuffled, 64, shards, true); q.shard("acme") != p.shard("acme") {
		t.Error("two entries put acme in different shards")
	}
	// The rest of a relay's group: the group but the relay and the origin.
	r := p.relays[0][0]
	rest := p.rest(r.Name, origin)
	if len(rest) != len(p.groups[groupOf(r.Name, groups)])-1 {
		t.Errorf("rest of %s's group: %d members, want its group's %d but one", r.Name, len(rest),
			len(p.groups[groupOf(r.Name, groups)]))
	}
	for _, a := range rest {
		if a.Name == r.Name || a.Name == origin || groupOf(a.Name, groups) != groupOf(r.Name, groups) {
			t.Errorf("%s in the rest of %s's group", a.Name, r.Name)
		}
	}
	if planRelays(origin, ms[:64], 64, shards, true) != nil {
		t.Error("relays on at 64 members, RelayAbove 64")
	}
	if planRelays(origin, ms, 64, shards, false) != nil {
		t.Error("relays on without a key")
	}
	if planRelays(origin, ms, -1, shards, true) != nil {
		t.Error("relays on with RelayAbove negative")
	}
	old := fleet(100, true)
	delete(old[3].Tags, relayTag)
	if planRelays(origin, old, 64, shards, true) != nil {
		t.Error("relays on with a member that cannot relay (a rolling deploy)")
	}
	old[3].Tags[relayTag] = "1"
	if planRelays(origin, old, 64, shards, true) != nil {
		t.Error("relays on with a member that relays by copies (version 1), not acks")
	}
}

// A cluster above RelayAbove: homes learned at one entry reach every other through relays,
// with the origin's versions, and the origin sends fewer packets a batch than one to each
// member.
func TestHomesTravelThroughRelays(t *testing.T) {
	const n = 10
	nodes := startCluster(t, n, func(c *Config) { c.RelayAbove = 4; c.RelayShards = 2; c.RelayFlush = 50 * time.Millisecond })
	origin := nodes[0]
	testutil.Eventually(t, 5*time.Second, "relays on at the origin", func() bool { return origin.g.relayPlan() != nil })
	for i := range 40 {
		origin.table.Learn(fmt.Sprintf("tenant-%d", i), i%len(testRegions))
	}
	origin.flush(t)
	testutil.Eventually(t, 10*time.Second, "every home at every entry", func() bool {
		for _, nd := range nodes[1:] {
			for i := range 40 {
				if !nd.has(fmt.Sprintf("tenant-%d", i), testRegions[i%len(testRegions)]) {
					return false
				}
			}
		}
		return true
	})
	relayed, packed := 0.0, 0.0
	for _, nd := range nodes {
		relayed += promtest.ToFloat64(nd.g.m.relayed)
		packed += promtest.ToFloat64(nd.g.m.relayBatches)
	}
	if relayed == 0 || packed == 0 {
		t.Errorf("relays took %v batches and sent %v: the homes did not go through relays", relayed, packed)
	}
	// Versions travel through relays unchanged: the origin's, not the relay's.
	for _, nd := range nodes[1:] {
		if h, _, _ := nd.table.Get("tenant-3"); h.Version.Origin != origin.name {
			t.Errorf("%s holds tenant-3 from %q, want the origin %q", nd.name, h.Version.Origin, origin.name)
		}
	}
	// Once each, acked: no blind copies. Loopback loses nothing, so every packet the origin
	// sent was acked, and nothing waits.
	batches := promtest.ToFloat64(origin.g.m.directBatches)
	packets := promtest.ToFloat64(origin.g.m.directPackets)
	if per := packets / batches; per >= n-1 {
		t.Errorf("the origin sent %.1f packets a batch, %d members: no fewer than direct", per, n)
	}
	testutil.Eventually(t, 5*time.Second, "every packet acked", func() bool {
		for _, nd := range nodes {
			if nd.g.acks.pendingCount() != 0 {
				return false
			}
		}
		return true
	})
	if a := promtest.ToFloat64(origin.g.m.acksReceived.WithLabelValues("matched")); a == 0 {
		t.Error("the origin got no ack")
	}
	// What each entry says of itself (/status): relays on, and the relays the origin sends
	// to are the ones that say they relay those shards; every group has one per shard.
	byName := map[string]RelayStatus{}
	claims := 0
	for _, nd := range nodes {
		st := nd.g.Relays()
		if !st.On || st.Shards != 2 || st.Groups != 4 { // ceil(sqrt(10))
			t.Errorf("%s: relays %+v, want on with 4 groups and 2 shards", nd.name, st)
		}
		byName[nd.name] = st
		claims += len(st.RelayFor)
	}
	plan := origin.g.relayPlan()
	for s, relays := range plan.relays {
		for _, r := range relays {
			if !slices.Contains(byName[r.Name].RelayFor, s) {
				t.Errorf("the origin sends shard %d to %s, which says it relays %v", s, r.Name, byName[r.Name].RelayFor)
			}
		}
	}
	groupsSeen := 0
	for _, g := range plan.groups {
		if len(g) > 0 {
			groupsSeen++
		}
	}
	if claims != groupsSeen*2 {
		t.Errorf("%d (entry, shard) relay claims, want one per shard in each of %d groups", claims, groupsSeen)
	}
}

// startMemCluster starts n keyed nodes on one memnet network (latency 1-20 ms, loss as
// given), joined to the first, and waits until every one sees all the others alive. No
// repair runs: what arrives, gossip carried.
func startMemCluster(t *testing.T, n int, loss float64, mod func(*Config)) ([]*testNode, *memnet.Network) {
	t.Helper()
	network := memnet.New(1)
	network.SetLatency(time.Millisecond, 20*time.Millisecond)
	var nodes []*testNode
	for i := range n {
		name := fmt.Sprintf("e%02d", i)
		tr := network.NewTransport(name)
		nodes = append(nodes, startNode(t, name, func(c *Config) {
			c.BindAddr = ""
			c.Transport = tr
			if i > 0 {
				a, _ := network.Addr(nodes[0].name)
				c.Join = []string{a}
			}
			mod(c)
		}))
	}
	testutil.Eventually(t, 20*time.Second, "cluster formed", func() bool {
		for _, nd := range nodes {
			if len(nd.g.Peers()) != n-1 || !nd.g.Joined() {
				return false
			}
		}
		return true
	})
	network.SetLoss(loss) // after the join, which memberlist's streams carry anyway
	return nodes, network
}

func relayConfig(c *Config) {
	c.RelayAbove, c.RelayShards = 8, 2
	c.RelayFlush = 50 * time.Millisecond
	c.RelayAckTimeout = 100 * time.Millisecond
}

// With 5 % of packets lost, homes learned all over a 16-entry cluster reach every entry
// through relays without repair: what a hop loses is acked nowhere and sent again (blind,
// each of a pair's two hops would lose 5 %).
func TestRelaysCarryHomesThroughLoss(t *testing.T) {
	const n, homesN = 16, 120
	nodes, _ := startMemCluster(t, n, 0.05, relayConfig)
	testutil.Eventually(t, 5*time.Second, "relays on everywhere", func() bool {
		for _, nd := range nodes {
			if nd.g.relayPlan() == nil {
				return false
			}
		}
		return true
	})
	for i := range homesN {
		nodes[i%n].table.Learn(fmt.Sprintf("tenant-%d", i), i%len(testRegions))
	}
	missing := func() int {
		k := 0
		for _, nd := range nodes {
			for i := range homesN {
				if !nd.has(fmt.Sprintf("tenant-%d", i), testRegions[i%len(testRegions)]) {
					k++
				}
			}
		}
		return k
	}
	deadline := time.Now().Add(20 * time.Second)
	for missing() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if k := missing(); k > 0 {
		t.Fatalf("%d of %d (home, entry) pairs missing after 20 s", k, homesN*n)
	}
	resent, relayed := 0.0, 0.0
	for _, nd := range nodes {
		resent += promtest.ToFloat64(nd.g.m.ackedResent)
		relayed += promtest.ToFloat64(nd.g.m.relayBatches)
	}
	if resent == 0 || relayed == 0 {
		t.Errorf("resent %v, relay batches %v: the loss was not met by acks through relays", resent, relayed)
	}
}

// A relay that dies (its host cut off, not yet listed failed) acks nothing: its origins give
// up on it after their tries and send its batches straight to the rest of its group.
func TestDeadRelayFallsBackToItsGroup(t *testing.T) {
	const n = 16
	nodes, network := startMemCluster(t, n, 0, func(c *Config) {
		relayConfig(c)
		// Slow enough failure detection that the relay is still a member when its
		// origins give up on it (5 tries, 100 ms apart).
		c.ProbeInterval, c.ProbeTimeout = 5*time.Second, 2*time.Second
	})
	origin := nodes[0]
	var plan *relayPlan
	testutil.Eventually(t, 5*time.Second, "relays on at the origin", func() bool {
		plan = origin.g.relayPlan()
		return plan != nil
	})
	dead := plan.relays[0][0].Name
	network.Kill(dead)
	// Tenants of shard 0, all from the origin.
	var tenants []string
	for i := 0; len(tenants) < 10; i++ {
		if tn := fmt.Sprintf("tenant-%d", i); plan.shard(tn) == 0 {
			tenants = append(tenants, tn)
		}
	}
	for _, tn := range tenants {
		origin.table.Learn(tn, 0)
	}
	origin.flush(t)
	testutil.Eventually(t, 10*time.Second, "the dead relay's group has every home", func() bool {
		for _, a := range plan.rest(dead, origin.name) {
			for _, nd := range nodes {
				if nd.name != a.Name {
					continue
				}
				for _, tn := range tenants {
					if !nd.has(tn, testRegions[0]) {
						return false
					}
				}
			}
		}
		return true
	})
	if promtest.ToFloat64(origin.g.m.relayFallbacks) == 0 {
		t.Error("no fallback counted at the origin")
	}
}

// sendShards sends each shard's homes to that shard's relays, once: a shard with no relays
// (a group of one) keeps nothing for the next flush, which sends only its own homes.
func TestSendShardsKeepsNothing(t *testing.T) {
	acks, w, m := newTestAcked(t, time.Hour)
	p := &publisher{m: m, log: zerolog.Nop(), enc: wire.NewEncoder("origin", DefaultEventSizeLimit, time.Now),
		direct: &directSender{acks: acks, m: m}}
	plan := &relayPlan{relays: [][]memberlist.Address{nil, addrs("relay-1")}}
	// Two homes of each shard a flush.
	var flushes [2][]homes.Home
	count := map[[2]int]int{}
	for i := 0; len(flushes[0])+len(flushes[1]) < 8; i++ {
		h := homes.Home{Tenant: fmt.Sprintf("tenant-%d", i), Region: "eu", Version: homes.Version{HLC: uint64(i + 1), Origin: "origin"}}
		for f := range flushes {
			if k := [2]int{f, plan.shard(h.Tenant)}; count[k] < 2 {
				count[k]++
				flushes[f] = append(flushes[f], h)
				break
			}
		}
	}
	first, second := flushes[0], flushes[1]
	p.sendShards(time.Now(), plan, first)
	sent1 := w.count("relay-1")
	p.sendShards(time.Now(), plan, second)
	for s, part := range p.scratchS {
		if len(part) != 0 {
			t.Errorf("shard %d keeps %d homes after the flush", s, len(part))
		}
	}
	if sent1 == 0 || w.count("relay-1") != 2*sent1 {
		t.Errorf("relay-1 got %d packets, then %d: want the same number from each flush", sent1, w.count("relay-1")-sent1)
	}
}

// A partition through the relay groups while homes are learned on both sides: each side keeps
// serving its own homes, what could not cross is given up on (counted, never piling up past
// the bound), and after the heal repair brings every home to every entry; nothing waits for
// an ack then.
func TestRelaysThroughAPartition(t *testing.T) {
	const n, homesN = 16, 64
	nodes, network := startMemCluster(t, n, 0.01, func(c *Config) {
		relayConfig(c)
		c.RepairInterval = time.Second
	})
	testutil.Eventually(t, 5*time.Second, "relays on everywhere", func() bool {
		for _, nd := range nodes {
			if nd.g.relayPlan() == nil {
				return false
			}
		}
		return true
	})
	var left, right []string
	for i, nd := range nodes {
		if i < n/2 {
			left = append(left, nd.name)
		} else {
			right = append(right, nd.name)
		}
	}
	network.Partition(left, right)
	for i := range homesN {
		nodes[i%n].table.Learn(fmt.Sprintf("tenant-%d", i), i%len(testRegions))
	}
	// Each side's homes reach its own side, through the relays and fallbacks it still has.
	testutil.Eventually(t, 15*time.Second, "each side has its own side's homes", func() bool {
		for i, nd := range nodes {
			for k := range homesN {
				if (k%n < n/2) == (i < n/2) && !nd.has(fmt.Sprintf("tenant-%d", k), testRegions[k%len(testRegions)]) {
					return false
				}
			}
		}
		return true
	})
	for _, nd := range nodes {
		if p := nd.g.acks.pendingCount(); p > maxAckedPending {
			t.Errorf("%s: %d packets wait for acks, past the bound", nd.name, p)
		}
	}
	network.Heal()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{}, n)
	for _, nd := range nodes {
		go func() { nd.g.RunRepair(ctx); done <- struct{}{} }()
	}
	defer func() {
		cancel()
		for range nodes {
			<-done
		}
	}()
	testutil.Eventually(t, 30*time.Second, "every home at every entry after the heal", func() bool {
		for _, nd := range nodes {
			for k := range homesN {
				if !nd.has(fmt.Sprintf("tenant-%d", k), testRegions[k%len(testRegions)]) {
					return false
				}
			}
		}
		return true
	})
	testutil.Eventually(t, 10*time.Second, "nothing waits for an ack", func() bool {
		for _, nd := range nodes {
			if nd.g.acks.pendingCount() != 0 {
				return false
			}
		}
		return true
	})
}
