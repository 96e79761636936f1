package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/gossip/simcluster"
)

// small is a gossipsim run that takes seconds: a dozen entries, short windows, memnet's
// 1-20 ms and 2 % loss.
func small() flags {
	return flags{nodes: 12, rate: 40, duration: 2 * time.Second, minLat: time.Millisecond,
		maxLat: 20 * time.Millisecond, loss: 0.02, seed: 1, repair: 2 * time.Second,
		drain: 3 * time.Second, settle: 15 * time.Second, idle: 200 * time.Millisecond,
		poll: 5 * time.Millisecond, tune: gossip.DefaultConfig()}
}

// The relay path at a small size (make test): relays at any cost (DirectLimit 1) carry every home to
// every entry by gossip alone, acked.
func TestRelaysAtASmallSize(t *testing.T) {
	f := small()
	f.tune.Spread.DirectLimit = 1
	res, err := run(f)
	if err != nil {
		t.Fatal(err)
	}
	if *res.CompleteByG != 1 || res.Lost != 0 {
		t.Errorf("relays: %.4f of homes complete by gossip, %d lost; want every one by gossip", *res.CompleteByG, res.Lost)
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
		*res.CompleteByG, res.BudgetDef, res.PendDropped, res.Repaired)
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

// Churn at a small size: every restart is seen, every restarted entry gets every home
// learned before it, and none is lost.
func TestChurnAtASmallSize(t *testing.T) {
	f := small()
	f.churn, f.churnOver, f.duration = 2, 2*time.Second, 3*time.Second
	res, err := run(f)
	if err != nil {
		t.Fatal(err)
	}
	if res.churnResult == nil || res.Restarts != 2 || res.RefillMaxMS == nil {
		t.Fatalf("churn fields %+v, want 2 restarts, each refilled", res.churnResult)
	}
	if res.Lost != 0 || res.LostPairs != 0 || res.MaxMS == nil {
		t.Errorf("%d homes (%d pairs) never reached every current incarnation", res.Lost, res.LostPairs)
	}
	if res.CompleteByG != nil || res.CoverageG != nil {
		t.Error("gossip-only coverage reported while repair ran throughout")
	}
	t.Logf("p99 %v ms, max %v ms, refill max %v ms", *res.P99MS, *res.MaxMS, *res.RefillMaxMS)
}

func TestChurnFlags(t *testing.T) {
	for name, tc := range map[string]struct {
		churn           int
		over, duration  time.Duration
		falseFail       time.Duration
		wantFlagInError string
	}{
		"off":                 {churn: 0, over: time.Minute, duration: time.Second},
		"on":                  {churn: 9, over: time.Minute, duration: time.Minute},
		"negative":            {churn: -1, over: time.Minute, duration: time.Minute, wantFlagInError: "-churn "},
		"into the join seeds": {churn: 10, over: time.Minute, duration: time.Minute, wantFlagInError: "-churn "},
		"no window":           {churn: 1, over: 0, duration: time.Minute, wantFlagInError: "-churn-over "},
		"learning too short":  {churn: 1, over: time.Minute, duration: 59 * time.Second, wantFlagInError: "-duration "},
		"false failures":      {churn: 1, over: time.Minute, duration: time.Minute, falseFail: time.Minute, wantFlagInError: "-false-failure"},
	} {
		f := flags{nodes: 12, churn: tc.churn, churnOver: tc.over, duration: tc.duration, falseFailure: tc.falseFail}
		err := f.checkChurn()
		switch {
		case tc.wantFlagInError == "" && err != nil:
			t.Errorf("%s: %v, want nil", name, err)
		case tc.wantFlagInError != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantFlagInError)):
			t.Errorf("%s: %v, want an error naming %s first", name, err, tc.wantFlagInError)
		}
	}
}

func TestChurnSetSparesTheSeeds(t *testing.T) {
	set := churnSet(1, 100, 10)
	for _, i := range set {
		if i < 3 || i >= 100 {
			t.Errorf("entry %d in the churned set %v", i, set)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(set)))) != 10 {
		t.Errorf("churned set %v: want 10 distinct entries", set)
	}
	if again := churnSet(1, 100, 10); !slices.Equal(set, again) {
		t.Errorf("seed 1 drew %v, then %v", set, again)
	}
}
