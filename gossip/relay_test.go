package gossip

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fenec/fenec-entry/gossip/internal/spread"
	"github.com/fenec/fenec-entry/gossip/memnet"
	"github.com/fenec/fenec-entry/internal/testutil"
)

// A cluster whose homes go through relays at any cost (DirectLimit 1): homes learned at one
// entry reach every other through relays,
// with the origin's versions, and the origin sends fewer packets a batch than one to each
// member.
func TestHomesTravelThroughRelays(t *testing.T) {
	const n = 10
	nodes := startCluster(t, n, func(c *Config) { c.Spread.DirectLimit = 1; c.Spread.RelayFlush = 50 * time.Millisecond })
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
		relayed += nd.metric(t, "fenec_entry_gossip_relayed_batches_total")
		packed += nd.metric(t, "fenec_entry_gossip_relay_batches_sent_total")
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
	// Once each, acked: no blind copies, and a home alone costs the origin a packet to each
	// member of its group and one to its relay in each other group, fewer than one to each
	// member. Loopback loses nothing, so every packet the origin sent was acked, and nothing
	// waits.
	before := origin.metric(t, "fenec_entry_gossip_direct_packets_sent_total")
	origin.table.Learn("tenant-alone", 0)
	origin.flush(t)
	plan := origin.g.relayPlan()
	if per, want := origin.metric(t, "fenec_entry_gossip_direct_packets_sent_total")-before, len(plan.Own)+len(plan.Others); int(per) != want || want >= n-1 {
		t.Errorf("the origin sent %.0f packets for a home alone, want %d (its group and a relay in each other group), fewer than %d", per, want, n-1)
	}
	testutil.Eventually(t, 5*time.Second, "tenant-alone everywhere", func() bool {
		for _, nd := range nodes[1:] {
			if !nd.has("tenant-alone", testRegions[0]) {
				return false
			}
		}
		return true
	})
	testutil.Eventually(t, 5*time.Second, "every packet acked", func() bool {
		for _, nd := range nodes {
			if nd.metric(t, "fenec_entry_gossip_acked_pending") != 0 {
				return false
			}
		}
		return true
	})
	if a := origin.metric(t, "fenec_entry_gossip_acks_received_total", "result", "matched"); a == 0 {
		t.Error("the origin got no ack")
	}
	// What each entry says of itself (/status): relays on at every entry, each having counted
	// the same homes (learned or applied) against the limit, in 7 groups; every entry of another
	// group that is some tenant's relay relayed homes to its group.
	testutil.Eventually(t, 5*time.Second, "relays on at every entry", func() bool {
		for _, nd := range nodes {
			if !nd.g.Relays().On {
				return false
			}
		}
		return true
	})
	for _, nd := range nodes {
		st := nd.g.Relays()
		if !st.On || st.DirectBytes <= 0 || st.Groups != 7 || st.Group < 1 { // ceil(2 sqrt(10))
			t.Errorf("%s: relays %+v, want on, a direct cost and 7 groups", nd.name, st)
		}
		if on, est := nd.metric(t, "fenec_entry_gossip_relays_on"), nd.metric(t, "fenec_entry_gossip_direct_cost_bytes_per_second"); on != 1 || est <= 0 {
			t.Errorf("%s: fenec_entry_gossip_relays_on %v, direct cost %v; want 1 and the estimate", nd.name, on, est)
		}
	}
	relays := map[string]bool{}
	for _, tn := range append(tenantNames(40), "tenant-alone") {
		for _, r := range plan.Relays(tn) {
			relays[r.Name] = true
		}
	}
	for _, nd := range nodes {
		if got := nd.metric(t, "fenec_entry_gossip_relayed_batches_total"); relays[nd.name] != (got > 0) {
			t.Errorf("%s: a relay of the origin's tenants %v, relayed %v batches", nd.name, relays[nd.name], got)
		}
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
			c.BindAddr = DefaultBindAddr
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
	c.Spread.DirectLimit = 1
	c.Spread.RelayFlush = 50 * time.Millisecond
	c.Spread.RelayAckTimeout = 100 * time.Millisecond
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
		resent += nd.metric(t, "fenec_entry_gossip_acked_resent_total")
		relayed += nd.metric(t, "fenec_entry_gossip_relay_batches_sent_total")
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
		c.Membership.ProbeInterval, c.Membership.ProbeTimeout = 5*time.Second, 2*time.Second
	})
	origin := nodes[0]
	var plan *spread.Plan
	testutil.Eventually(t, 5*time.Second, "relays on at the origin", func() bool {
		plan = origin.g.relayPlan()
		return plan != nil
	})
	dead := plan.Relays("tenant-0")[0].Name
	network.Kill(dead)
	// Tenants the dead member relays, all from the origin.
	var tenants []string
	for i := 0; len(tenants) < 10; i++ {
		if tn := fmt.Sprintf("tenant-%d", i); slices.ContainsFunc(plan.Relays(tn), func(a memberlist.Address) bool { return a.Name == dead }) {
			tenants = append(tenants, tn)
		}
	}
	for _, tn := range tenants {
		origin.table.Learn(tn, 0)
	}
	origin.flush(t)
	testutil.Eventually(t, 10*time.Second, "the dead relay's group has every home", func() bool {
		for _, a := range plan.Rest(dead, origin.name) {
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
	if origin.metric(t, "fenec_entry_gossip_relay_fallbacks_total") == 0 {
		t.Error("no fallback counted at the origin")
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
		c.Sync.RepairInterval = time.Second
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
		if p := nd.metric(t, "fenec_entry_gossip_acked_pending"); p > 1024 { // spread's bound
			t.Errorf("%s: %v packets wait for acks, past the bound", nd.name, p)
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
			if nd.metric(t, "fenec_entry_gossip_acked_pending") != 0 {
				return false
			}
		}
		return true
	})
}

func tenantNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tenant-%d", i)
	}
	return out
}
