package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/gossip/simcluster"
)

// small is a gossipsim run that takes seconds: a dozen entries, short windows, memnet's
// 1-20 ms and 2 % loss.
func small() flags {
	return flags{nodes: 12, rate: 40, duration: 2 * time.Second, minLat: time.Millisecond,
		maxLat: 20 * time.Millisecond, loss: 0.02, seed: 1, repair: 2 * time.Second,
		drain: 3 * time.Second, settle: 15 * time.Second, idle: 200 * time.Millisecond,
		poll: 5 * time.Millisecond}
}

// The relay path at a small size (make test): relays at any cost (DirectLimit 1) carry every home to
// every entry by gossip alone, acked.
func TestRelaysAtASmallSize(t *testing.T) {
	f := small()
	f.directLimit = 1
	res, err := run(f)
	if err != nil {
		t.Fatal(err)
	}
	if res.CompleteByG != 1 || res.Lost != 0 {
		t.Errorf("relays: %.4f of homes complete by gossip, %d lost; want every one by gossip", res.CompleteByG, res.Lost)
	}
	if res.Relayed == 0 || res.Bundles == 0 || res.AcksSent == 0 {
		t.Errorf("relays took %v batches, sent %v, acks %v: the homes did not go through acked relays",
			res.Relayed, res.Bundles, res.AcksSent)
	}
}

// A burst at one entry (-origins 1) at a small size, through relays: whatever gossip did not
// carry (the budget held it back, or MaxPending dropped it), repair does. Whether the budget held it back
// depends on how fast this machine learns (under -race it may not reach the budget);
// gossip's TestDirectBudgetBoundsABurst checks the budget itself on a simulated clock.
func TestBurstAtOneEntryAtASmallSize(t *testing.T) {
	f := small()
	f.nodes, f.rate, f.origins, f.loss = 6, 3000, 1, 0.01
	f.duration, f.repair, f.settle = time.Second, time.Second, 60*time.Second
	res, err := run(f)
	if err != nil {
		t.Fatal(err)
	}
	if res.Lost != 0 || res.LostPairs != 0 {
		t.Errorf("burst: %d homes (%d pairs) never reached every entry", res.Lost, res.LostPairs)
	}
	// 3,000 homes a second would cost every entry 800 KB/s sent straight: relays carry it,
	// however few the entries (the rule is by bytes, not by members).
	if res.Relayed == 0 || res.Homes != 3000 {
		t.Errorf("relays off for a burst of 3,000 homes a second (%v batches relayed), or %d homes learned, not 3000",
			res.Relayed, res.Homes)
	}
	t.Logf("complete by gossip %.3f, budget-deferred flushes %v, pending dropped %v, repaired %v",
		res.CompleteByG, res.BudgetDef, res.PendDropped, res.Repaired)
}

// A cluster that did not form says how: who does not see whom alive, and how many see the
// missing one alive.
func TestNotSeenSaysWhoLacksWhom(t *testing.T) {
	c, err := simcluster.New(simcluster.Options{Nodes: 4, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitMembers(ctx); err != nil {
		t.Fatal(err)
	}
	if got := notSeen(c); got != "" {
		t.Errorf("a formed cluster: %q, want nothing", got)
	}
	c.Kill(3)
	deadline := time.Now().Add(20 * time.Second)
	for notSeen(c) == "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := notSeen(c); !strings.Contains(got, "has e03 ") || !strings.Contains(got, "see e03 alive") {
		t.Errorf("e03 cut off: %q", got)
	}
}
