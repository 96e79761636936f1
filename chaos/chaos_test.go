//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// partitionConvergeBound bounds the convergence of homes learned on both sides of a healed
// partition. The entry repairs by pulling from ONE random peer every 22.5-37.5 s, and has no
// repair on rejoin, so with three entries the time after a heal is random: simulated, the
// share of heals not converged is 49 % at 37.5 s (one interval), 9 % at 75 s, 5 % at 90 s,
// 1.3 % at 120 s, 0.3 % at 150 s and 0.1 % at 178 s. 180 s keeps the verdict deterministic
// (docs/CHAOS.md, "Findings"); the time is printed, and flagged beyond one interval.
const partitionConvergeBound = 180 * time.Second

// rejoinSlack: the joiner retries --join every 5 s; serf then needs a probe round.
const rejoinSlack = 10 * time.Second

const clients = 12

func scenarioSeed(def int64) int64 {
	if *flagSeed != 0 {
		return *flagSeed
	}
	return def
}

// 1. kill -9 entry B under load, restart it with the same flags and node name: it rejoins,
// holds the table when it reports ready, and serves.
func TestChaos1KillEntry(t *testing.T) {
	h := newHarness(t, "kill-B", scenarioSeed(101))
	h.warmup(tenants)
	tr := h.startTraffic(h.seed, clients, tenants)
	time.Sleep(3 * time.Second)
	b := h.entry("b")
	b.kill()
	h.logf("B killed (SIGKILL)")
	time.Sleep(2 * time.Second)
	b.start(t)
	restarted := time.Now()
	h.logf("B restarted with the same flags")
	var atReady statusDoc
	took, ok := h.waitStatus(b, 10*time.Second, "restarted B ready", func(s statusDoc) bool {
		atReady = s
		return s.Ready
	})
	readyAt := time.Now()
	w := h.watchConvergence()
	h.logf("B ready %v after restart, holding %d homes (%d local, %d gossip), digest %s", took.Round(10*time.Millisecond),
		atReady.Homes.Held, atReady.Homes.Local, atReady.Homes.Gossip, atReady.Homes.Digest)
	rejoin := h.waitCluster(15 * time.Second)
	h.logf("every entry sees three alive members %v after B was ready", rejoin.Round(10*time.Millisecond))
	time.Sleep(5 * time.Second)
	tr.stop()
	h.finish(w, repairMax+rejoinSlack, func(s *summary) {
		if ok && atReady.Homes.Held == 0 {
			s.fail("restarted B reported ready holding no homes (the table is %d homes)", len(tenants))
		}
		if took > 5*time.Second {
			s.fail("restarted B took %v to be ready (contract: holds the table within 5 s of its start)", took)
		}
		served := 0
		for _, r := range h.rec.records() {
			if r.Entry == "b" && r.Start.After(readyAt) && r.Shard && r.Status < 500 && r.Err == "" {
				served++
			}
		}
		h.logf("restarted B served %d requests (answered by routers) after ready, restart at %s", served, restarted.Format("15:04:05.000"))
		if served == 0 {
			s.fail("restarted B served nothing")
		}
	})
}

// 2. SIGSTOP entry C for at least 10 s and until its peers show it failed in /status.json;
// traffic to A and B goes on; SIGCONT: C rejoins and serves.
func TestChaos2StopEntry(t *testing.T) {
	h := newHarness(t, "stop-C", scenarioSeed(202))
	h.warmup(tenants)
	tr := h.startTraffic(h.seed, clients, tenants)
	time.Sleep(3 * time.Second)
	a, b, c := h.entry("a"), h.entry("b"), h.entry("c")
	// Clients avoid the frozen C, for a reason other than its requests (those in flight at
	// SIGSTOP may fail, the loss check allows it): its kernel still accepts connections, so
	// each request sent to it would hold its client for the 10 s timeout, and the load on A
	// and B, whose every answer this scenario checks, would fall away.
	tr.setAvoid("c", true)
	c.signal(syscall.SIGSTOP)
	stopped := time.Now()
	h.logf("C stopped (SIGSTOP)")
	failedAfter := map[string]time.Duration{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, e := range []*entryProc{a, b} {
		wg.Go(func() {
			d, _ := h.waitStatus(e, 40*time.Second, e.name+" sees C failed", func(s statusDoc) bool { return s.member("c") == "failed" })
			mu.Lock()
			failedAfter[e.name] = d
			mu.Unlock()
		})
	}
	wg.Wait()
	if rest := 10*time.Second - time.Since(stopped); rest > 0 {
		time.Sleep(rest)
	}
	c.signal(syscall.SIGCONT)
	resumed := time.Now()
	h.logf("C continued (SIGCONT) after %v; A saw it failed after %v, B after %v", resumed.Sub(stopped).Round(100*time.Millisecond),
		failedAfter["a"].Round(100*time.Millisecond), failedAfter["b"].Round(100*time.Millisecond))
	rejoin := h.waitCluster(30 * time.Second)
	h.logf("C rejoined: every entry sees three alive members %v after SIGCONT", rejoin.Round(10*time.Millisecond))
	rejoined := time.Now()
	w := h.watchConvergence()
	tr.setAvoid("c", false)
	time.Sleep(5 * time.Second)
	tr.stop()
	h.finish(w, repairMax+rejoinSlack, func(s *summary) {
		okAB, badAB, servedC := 0, 0, 0
		for _, r := range h.rec.records() {
			during := r.Start.After(stopped) && r.End.Before(resumed)
			if during && r.Entry != "c" {
				if r.Err == "" && r.Shard && r.Status < 500 {
					okAB++
				} else {
					badAB++
					s.fail("while C was stopped, %s %s via %s (%s): %s%s", r.Op, r.ID, r.Entry, r.Conn, r.outcome(), r.errDetail())
				}
			}
			if r.Entry == "c" && r.Start.After(rejoined) && r.Err == "" && r.Shard && r.Status < 500 {
				servedC++
			}
		}
		h.logf("while C was stopped A and B answered %d requests (%d failed); C served %d after it rejoined", okAB, badAB, servedC)
		if okAB == 0 {
			s.fail("no traffic through A and B while C was stopped")
		}
		if servedC == 0 {
			s.fail("C served nothing after it rejoined")
		}
	})
}

// 3. Gossip partition {A} | {B, C} for 20 s, then heal. Homes learned on each side during
// the partition (new tenants, and a tenant whose home moved) converge after the heal.
func TestChaos3Partition(t *testing.T) {
	ensureNft(t)
	h := newHarness(t, "partition-A", scenarioSeed(303))
	general, mover, late := tenants[:7], tenants[7], tenants[8:]
	h.warmup(append(append([]string{}, general...), mover))
	tr := h.startTraffic(h.seed, clients, general)
	time.Sleep(2 * time.Second)
	a, b, c := h.entry("a"), h.entry("b"), h.entry("c")
	p := h.partitionA()
	cut := time.Now()

	// Learned during the partition: t09, t10 and t08's new home at A; t11 at B, t12 at C.
	time.Sleep(500 * time.Millisecond)
	newHome := "ap"
	if h.dirLog.home(mover) == newHome {
		newHome = "eu"
	}
	h.move(mover, newHome)
	h.rec.probe(a, mover, "learn")
	h.rec.probe(a, late[0], "learn")
	h.rec.probe(a, late[1], "learn")
	h.rec.probe(b, late[2], "learn")
	h.rec.probe(c, late[3], "learn")
	h.logf("moved %s to %s and learned it at A; learned %s, %s at A, %s at B, %s at C", mover, newHome, late[0], late[1], late[2], late[3])

	// The partition is real: membership splits, and no home crosses it.
	var wg sync.WaitGroup
	for _, w := range []struct {
		e    *entryProc
		peer string
	}{{a, "b"}, {a, "c"}, {b, "a"}, {c, "a"}} {
		wg.Go(func() {
			if _, ok := h.waitStatus(w.e, 30*time.Second, w.e.name+" sees "+w.peer+" failed", func(s statusDoc) bool { return s.member(w.peer) == "failed" }); ok {
				h.logf("%s sees %s failed %v into the partition", w.e.name, w.peer, time.Since(cut).Round(100*time.Millisecond))
			}
		})
	}
	wg.Wait()
	if rest := 20*time.Second - time.Since(cut); rest > 0 {
		time.Sleep(rest)
	}
	want := len(general) + 1 + 2 // warm-up homes plus two late tenants on each side
	digest := map[string]string{}
	for _, e := range h.entries {
		st, err := e.status()
		if err != nil || st.Homes.Held != want {
			t.Errorf("partition leaked or lost homes: %s holds %d homes at the end of the partition, want %d (%v)", e.name, st.Homes.Held, want, err)
		}
		digest[e.name] = st.Homes.Digest
	}
	// Within a side the tables agree (B and C heard each other's late tenant); across it not.
	h.logf("at the end of the partition: digests a=%s b=%s c=%s", digest["a"], digest["b"], digest["c"])
	if digest["b"] != digest["c"] || digest["a"] == digest["b"] {
		t.Errorf("partition: digests a=%s b=%s c=%s at its end; want b and c equal, a different", digest["a"], digest["b"], digest["c"])
	}
	p.heal()
	healed := time.Now()
	w := h.watchConvergence()
	h.logf("healed after %v", healed.Sub(cut).Round(100*time.Millisecond))
	rejoin := h.waitCluster(30 * time.Second)
	h.logf("every entry sees three alive members %v after the heal", rejoin.Round(10*time.Millisecond))
	time.Sleep(2 * time.Second)
	tr.stop()
	h.finish(w, partitionConvergeBound, func(s *summary) {
		for _, e := range h.entries {
			h.logf("%s: %s", e.name, strings.Join(e.metricLines("fenec_entry_sync_applied_total", "fenec_entry_repair_rounds_total", "fenec_entry_snapshot_fetches_total"), ", "))
		}
		if s.Converge > repairMax+rejoinSlack {
			h.logf("FINDING: homes converged %v after the heal, beyond one repair interval (%v) plus rejoin (%v)",
				s.Converge.Round(100*time.Millisecond), repairMax, rejoinSlack)
		}
		bad := 0
		for _, r := range h.rec.records() {
			if r.Start.After(cut) && r.End.Before(healed) && r.Client >= 0 && !(r.Err == "" && r.Shard && r.Status < 500) {
				bad++
				s.fail("during the partition %s %s via %s (%s): %s%s", r.Op, r.ID, r.Entry, r.Conn, r.outcome(), r.errDetail())
			}
		}
	})
}

// faultModes are the modes a faulted region's routers switch between ("ok" among them, so
// that a region is sometimes half up).
var faultModes = []string{"refuse", "reset_after_request", "unmarked_5xx", "marked_5xx_no_home", "blackhole", "slow", "ok"}

// runFaults switches every router of region between fault modes at seeded random moments
// (each mode held 0.5-3 s) until ctx ends, then clears them.
func (h *harness) runFaults(ctx context.Context, seed int64, region string) {
	var wg sync.WaitGroup
	for i, r := range h.routersOf(region) {
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(1000+i)))
		wg.Go(func() {
			for {
				mode := faultModes[rng.IntN(len(faultModes))]
				if mode == "slow" {
					mode = fmt.Sprintf("slow=%d", 100+rng.IntN(1100))
				}
				hold := time.Duration(500+rng.IntN(2500)) * time.Millisecond
				if ctx.Err() != nil {
					break
				}
				h.setFault(r.Addr, mode)
				if !sleepCtx(ctx, hold) {
					break
				}
			}
			h.setFault(r.Addr, "ok")
		})
	}
	wg.Wait()
}

// 4. Router faults while writes flow: eu's two routers switch between every fault mode at
// random moments, and a tenant's home moves us -> eu -> ap mid-run.
func TestChaos4RouterFaults(t *testing.T) {
	h := newHarness(t, "router-faults", scenarioSeed(404))
	h.warmup(tenants)
	const run = 30 * time.Second
	// eu's tenants weigh three times as much: most writes meet the faults head on.
	weighted := append([]string{}, tenants...)
	for _, tn := range tenants {
		if initialHomes[tn] == "eu" {
			weighted = append(weighted, tn, tn)
		}
	}
	tr := h.startTraffic(h.seed, clients+4, weighted)
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	// The opening 2 s: both eu routers reset after processing, the worst case for an entry
	// that would send a write again; then the seeded schedule.
	for _, r := range h.routersOf("eu") {
		h.setFault(r.Addr, "reset_after_request")
	}
	time.Sleep(2 * time.Second)
	var wg sync.WaitGroup
	wg.Go(func() { h.runFaults(ctx, h.seed, "eu") })
	mover := "t02" // homed in us
	wg.Go(func() {
		if sleepCtx(ctx, run/3) {
			h.move(mover, "eu")
			h.logf("moved %s to eu (the faulted region)", mover)
		}
		if sleepCtx(ctx, run/3) {
			h.move(mover, "ap")
			h.logf("moved %s to ap", mover)
		}
	})
	wg.Wait()
	w := h.watchConvergence()
	h.logf("faults stopped")
	time.Sleep(2 * time.Second) // traffic on healthy routers: marks clear
	tr.stop()
	h.finish(w, repairMax+rejoinSlack, nil)
}

// 5. Everything at once, longer: router faults rotating over the regions, home moves, kill -9
// of B, SIGSTOP of C, a partition of A. Not in CI: make chaos-long (CHAOS_LONG=1).
func TestChaos5Long(t *testing.T) {
	if os.Getenv("CHAOS_LONG") == "" {
		t.Skip("the long run: make chaos-long (CHAOS_LONG=1)")
	}
	ensureNft(t)
	h := newHarness(t, "long", scenarioSeed(505))
	h.warmup(tenants)
	tr := h.startTraffic(h.seed, 2*clients, tenants)
	rng := rand.New(rand.NewPCG(uint64(h.seed), 7))
	start := time.Now()
	at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }

	// Router faults: 40 s per region, in turn, for the whole run.
	faultsCtx, stopFaults := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; faultsCtx.Err() == nil; i++ {
			ctx, cancel := context.WithTimeout(faultsCtx, 40*time.Second)
			reg := regions[i%len(regions)]
			h.logf("faults on %s", reg)
			h.runFaults(ctx, h.seed+int64(i), reg)
			cancel()
		}
	})
	// Home moves: a random tenant to a random other region every 15 s.
	wg.Go(func() {
		for faultsCtx.Err() == nil {
			if !sleepCtx(faultsCtx, 15*time.Second) {
				return
			}
			tn := tenants[rng.IntN(len(tenants))]
			to := regions[rng.IntN(len(regions))]
			if to != h.dirLog.home(tn) {
				h.move(tn, to)
				h.logf("moved %s to %s", tn, to)
			}
		}
	})

	b, c := h.entry("b"), h.entry("c")
	at(30 * time.Second)
	b.kill()
	h.logf("B killed")
	at(35 * time.Second)
	b.start(t)
	h.logf("B restarted")
	at(70 * time.Second)
	tr.setAvoid("c", true) // as in TestChaos2StopEntry: requests to a frozen C would stall their clients
	c.signal(syscall.SIGSTOP)
	h.logf("C stopped")
	h.waitStatus(h.entry("a"), 40*time.Second, "A sees C failed", func(s statusDoc) bool { return s.member("c") == "failed" })
	c.signal(syscall.SIGCONT)
	tr.setAvoid("c", false)
	h.logf("C continued")
	at(130 * time.Second)
	p := h.partitionA()
	at(155 * time.Second)
	p.heal()
	h.logf("partition healed")
	at(200 * time.Second)
	stopFaults()
	wg.Wait()
	w := h.watchConvergence()
	h.logf("faults stopped")
	time.Sleep(3 * time.Second)
	tr.stop()
	h.finish(w, partitionConvergeBound, nil)
}
