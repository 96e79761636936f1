package memnet

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fenec/fenec-entry/internal/testutil"
)

func TestMemberlistConverges(t *testing.T) {
	tests := []struct {
		name     string
		min, max time.Duration
		loss     float64
		probe    time.Duration
	}{
		// 500 ms, not 200: with a 100 ms probe timeout a scheduler stall of the host running the
		// other packages' tests beside this one made a false suspicion (one clean-clone CI run).
		{"no latency", 0, 0, 0, 500 * time.Millisecond},
		{"latency 10-150ms, 1% loss", 10 * time.Millisecond, 150 * time.Millisecond, 0.01, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nw := New(1)
			nw.SetLatency(tt.min, tt.max)
			nw.SetLoss(tt.loss)
			c := startCluster(t, nw, 10, tt.probe)
			d := testutil.Eventually(t, 10*time.Second, "all 10 see 10 alive", func() bool { return allSeeAlive(c.ms, c.names) })
			// Stay converged: no false suspicion at this latency and loss.
			for range 3 * 10 {
				if !allSeeAlive(c.ms, c.names) {
					t.Fatalf("cluster lost convergence: %v", aliveSet(c.ms[0]))
				}
				time.Sleep(tt.probe / 10)
			}
			t.Logf("converged %v after the joins; %+v", d, nw.Stats())
		})
	}
}

func TestMemberlistPartitionAndHeal(t *testing.T) {
	nw := New(1)
	// Probes every 500 ms, not 200: with a 100 ms probe timeout, a host starved by other
	// tests (CI runs two packages at once, under -race) made false suspicions on both sides,
	// before the split and after the heal (seen with two CPU-bound loops beside the test).
	c := startCluster(t, nw, 10, 500*time.Millisecond)
	testutil.Eventually(t, 10*time.Second, "converged", func() bool { return allSeeAlive(c.ms, c.names) })

	nw.Partition([]string{"n0"})
	// What each node saw alive at the last look, logged if the split or the merge is not seen
	// in time (two CI runs on a loaded host missed them, with nothing to tell why).
	var seen string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last seen alive: %s; %+v", seen, nw.Stats())
		}
	})
	look := func() {
		seen = ""
		for i, m := range c.ms {
			seen += fmt.Sprintf("%s: %v ", c.names[i], aliveSet(m))
		}
	}
	split := testutil.Eventually(t, 30*time.Second, "sides see each other failed", func() bool {
		look()
		if !allSeeAlive(c.ms[:1], c.names[:1]) {
			return false
		}
		return allSeeAlive(c.ms[1:], c.names[1:])
	})

	t.Logf("sides saw each other failed %v after the partition", split)
	nw.Heal()
	// memberlist does not rejoin nodes it declared dead by itself: rejoin, as the entries'
	// joiner does, every second until merged (one rejoin was not always enough on a loaded
	// host: its refutations can lose to the dead messages still going round).
	seed, _ := nw.Addr("n1")
	var joined time.Time
	d := testutil.Eventually(t, 15*time.Second, "merged after heal", func() bool {
		look()
		if allSeeAlive(c.ms, c.names) {
			return true
		}
		if time.Since(joined) >= time.Second {
			joined = time.Now()
			if _, err := c.ms[0].Join([]string{seed}); err != nil {
				t.Logf("rejoin: %v", err)
			}
		}
		return false
	})
	t.Logf("merged %v after the rejoin; %+v", d, nw.Stats())
}

func TestMemberlistDetectsFailure(t *testing.T) {
	tests := []struct {
		name string
		fail func(c *cluster)
	}{
		{"shutdown", func(c *cluster) { _ = c.ms[4].Shutdown() }},
		{"kill", func(c *cluster) { c.net.Kill("n4") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nw := New(1)
			c := startCluster(t, nw, 5, 200*time.Millisecond)
			testutil.Eventually(t, 10*time.Second, "converged", func() bool { return allSeeAlive(c.ms, c.names) })
			tt.fail(c)
			d := testutil.Eventually(t, 15*time.Second, "n4 declared dead", func() bool {
				for _, m := range c.ms[:4] {
					for _, node := range m.Members() {
						if node.Name == "n4" { // Members leaves out dead nodes
							return false
						}
					}
				}
				return true
			})
			t.Logf("n4 dead after %v; %+v", d, nw.Stats())
		})
	}
}

// After every node shuts down, no goroutine of the network or of memberlist
// is left blocked on it: the old MockTransport left senders and dialers
// stuck forever.
func TestShutdownLeavesNoGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	nw := New(1)
	nw.SetLatency(time.Millisecond, 20*time.Millisecond)
	var ms []*memberlist.Memberlist
	func() {
		c := startCluster(t, nw, 10, 200*time.Millisecond)
		ms = c.ms
		testutil.Eventually(t, 10*time.Second, "converged", func() bool { return allSeeAlive(c.ms, c.names) })
		t.Logf("10 nodes: %d goroutines (baseline %d)", runtime.NumGoroutine(), base)
	}()
	// Shut down in an order that leaves nodes sending to, and dialling,
	// nodes already gone.
	for _, m := range ms {
		if err := m.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	testutil.Eventually(t, 10*time.Second, "goroutines back to baseline", func() bool {
		n = runtime.NumGoroutine()
		return n <= base+2
	})
	if t.Failed() {
		buf := make([]byte, 1<<20)
		t.Logf("%d goroutines:\n%s", n, buf[:runtime.Stack(buf, true)])
	}
}

// Two nodes pinging each other as fast as they can: with memberlist's
// MockTransport each node's packet goroutine blocked sending its ack to the
// other's, and both froze.
func TestPingStormDoesNotDeadlock(t *testing.T) {
	nw := New(1)
	c := startCluster(t, nw, 2, 200*time.Millisecond)
	testutil.Eventually(t, 10*time.Second, "converged", func() bool { return allSeeAlive(c.ms, c.names) })

	const workers, pings = 8, 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed int
	for i, m := range c.ms {
		peer := c.ms[1-i].LocalNode()
		for range workers {
			wg.Go(func() {
				for range pings {
					if _, err := m.Ping(peer.Name, addrString(peer.FullAddress().Addr)); err != nil {
						mu.Lock()
						failed++
						mu.Unlock()
					}
				}
			})
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ping storm did not finish in 30s: deadlock")
	}
	st := nw.Stats()
	t.Logf("%d pings, %d failed; %+v", 2*workers*pings, failed, st)
	// A freeze fails every ping after it (or hangs, above). Pings that miss their probe
	// timeout behind 15 others are not a freeze: under -race on a shared host 1-2% do (34-70
	// of 3,200 measured on 2026-12-01, before and after that day's changes), so the bound is 5%.
	if failed > 2*workers*pings*5/100 {
		t.Errorf("%d of %d pings failed", failed, 2*workers*pings)
	}
	if !allSeeAlive(c.ms, c.names) {
		t.Error("nodes see each other failed after the storm")
	}
}
