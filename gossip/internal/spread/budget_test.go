package spread

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/gossip/internal/stablehash"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
)

// A burst of 2,000 new homes a second for 10 s at one entry (a cold PoP in front of a big
// tenant set), driven tick by tick on a simulated clock: what each member receives stays
// within DirectBudget a second on average and one second's worth more at any peak, the first
// copies go before the extra ones, the pending queue stays within MaxPending (the oldest
// dropped, counted), and once the burst ends every home not dropped has been sent.
func TestDirectBudgetBoundsABurst(t *testing.T) {
	tp := newTestPublisher(t, nil)
	peers := []memberlist.Address{{Addr: "10.0.0.2:7946", Name: "b"}}
	perSecond := map[int64]int{} // bytes to b, by second of the simulated clock
	var now time.Time
	t0 := time.Unix(1_800_000_000, 0)
	tp.direct = &directSender{codec: wire.NewCodec(keysOf(clusterKey), "lbl"), peers: func() []memberlist.Address { return peers },
		copies: tp.cfg.DirectCopies, every: tp.cfg.DirectCopyInterval, m: tp.m,
		write: func(pkt []byte, _ memberlist.Address) error {
			perSecond[int64(now.Sub(t0)/time.Second)] += len(pkt)
			return nil
		},
		budget: newTokenBucket(float64(tp.cfg.DirectBudget), t0)}

	const rate, burst = 2000, 10 * time.Second
	tick := tp.cfg.FlushInterval
	learned := 0
	const tail = 15 * time.Second // MaxPending homes drain at the budget's rate
	for now = t0; now.Before(t0.Add(burst + tail)); now = now.Add(tick) {
		if now.Before(t0.Add(burst)) {
			for range int(rate * tick.Seconds()) {
				tp.add(homes.Change{Kind: homes.ChangeHome, Home: homes.Home{
					// Names that do not compress: real tenants share no long prefixes.
					Tenant: fmt.Sprintf("%016x", stablehash.Mix(uint64(learned))), Region: "eu",
					Version: homes.Version{HLC: 1<<32 + uint64(learned)*7919, Origin: "a"}}})
				learned++
			}
		}
		if tp.homes.n > tp.cfg.MaxPending {
			t.Fatalf("%d homes pending, MaxPending %d", tp.homes.n, tp.cfg.MaxPending)
		}
		tp.tick(now)
		tp.direct.sendCopies(now)
	}
	budget := tp.cfg.DirectBudget
	total := 0
	for sec, n := range perSecond {
		total += n
		if n > 2*budget { // a second's rate and the saved-up second
			t.Errorf("second %d: %d bytes to one member, bound %d", sec, n, 2*budget)
		}
	}
	if avg := total / int((burst+tail)/time.Second); avg > budget*11/10 {
		t.Errorf("%d bytes a second to one member on average, budget %d", avg, budget)
	}
	dropped := int(promtest.ToFloat64(tp.m.pendingDropped))
	if tp.homes.n != 0 {
		t.Errorf("%d homes still pending %v after the burst", tp.homes.n, tail)
	}
	if dropped >= learned/2 {
		t.Errorf("%d of %d homes dropped: the budget sends less than it allows", dropped, learned)
	}
	if dropped == 0 {
		t.Error("20,000 homes in 10 s fit a 20 KB/s budget: the test does not exercise it")
	}
	if promtest.ToFloat64(tp.m.budgetDeferred) == 0 {
		t.Error("no flush waited for the budget")
	}
	t.Logf("learned %d, dropped from pending %d (left to repair), %d bytes to one member in %v",
		learned, dropped, total, burst+tail)
}
