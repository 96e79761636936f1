package spread

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/gossiptest"
	"github.com/fenec/fenec-entry/gossip/internal/validate"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
	itest "github.com/fenec/fenec-entry/internal/testutil"
)

// testPublisher is a publisher driven by hand: no goroutine, no serf, one peer and no send
// budget; sent collects the payloads of the direct batches' first copies, events those of
// the serf events, and depth is serf's queue depth as the test sets it.
type testPublisher struct {
	*publisher
	sent, events [][]byte
	depth        int
}

func newTestPublisher(t *testing.T, mod func(*Setup)) *testPublisher {
	t.Helper()
	table, err := homes.New(homes.Config{Regions: testRegions, Origin: "a"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testSetup(table)
	if mod != nil {
		mod(&cfg)
	}
	m, _ := newMetrics(nil)
	tp := &testPublisher{}
	tp.publisher = newPublisher(cfg, func(p []byte) error { tp.events = append(tp.events, p); return nil },
		func() int { return tp.depth }, m, zerolog.Nop())
	codec := wire.NewCodec(keysOf(clusterKey), "lbl")
	peers := []memberlist.Address{{Addr: "10.0.0.2:7946", Name: "b"}}
	tp.direct = &directSender{codec: codec, peers: func() []memberlist.Address { return peers }, copies: 1, m: m,
		write: func(pkt []byte, _ memberlist.Address) error {
			payload, err := codec.Open(pkt)
			if err != nil {
				t.Fatalf("a direct packet that does not open: %v", err)
			}
			tp.sent = append(tp.sent, payload)
			return nil
		}}
	return tp
}

func (tp *testPublisher) addHomes(hs []homes.Home) {
	for _, h := range hs {
		tp.add(homes.Change{Kind: homes.ChangeHome, Home: h})
	}
}

func TestBackpressureWidensAndNarrows(t *testing.T) {
	p := newTestPublisher(t, nil)
	now := time.Unix(1_800_000_000, 0)
	p.addHomes(gossiptest.Homes(3, 10, "a", 1))
	p.tick(now)
	if len(p.sent) != 1 || p.interval != p.cfg.FlushInterval {
		t.Fatalf("healthy queue: %d batches, interval %v", len(p.sent), p.interval)
	}
	// serf's queue grows: each tick doubles the interval up to MaxFlushInterval, and the
	// changes that keep coming wait, counted as deferred flushes.
	p.depth = p.cfg.QueueHigh + 10
	var intervals []time.Duration
	for i := range 10 {
		now = now.Add(p.cfg.FlushInterval)
		p.addHomes(gossiptest.Homes(1, 10, "a", uint64(10+i)))
		p.tick(now)
		intervals = append(intervals, p.interval)
	}
	if p.interval != p.cfg.MaxFlushInterval {
		t.Fatalf("interval %v after a long high queue (steps %v), want %v", p.interval, intervals, p.cfg.MaxFlushInterval)
	}
	if d := testutil.ToFloat64(p.m.flushesDeferred); d < 5 {
		t.Fatalf("%v deferred flushes", d)
	}
	if got := testutil.ToFloat64(p.m.queueDepth); got != float64(p.depth) {
		t.Fatalf("queue depth gauge %v", got)
	}
	sentHigh := len(p.sent)
	// Once the interval has passed, one flush carries everything that waited.
	now = now.Add(p.cfg.MaxFlushInterval)
	p.tick(now)
	if len(p.sent) != sentHigh+1 || p.homes.n != 0 {
		t.Fatalf("after the widened interval: %d new batches, %d pending", len(p.sent)-sentHigh, p.homes.n)
	}
	// The queue drains: the interval narrows back step by step.
	p.depth = 0
	for range 10 {
		now = now.Add(p.cfg.FlushInterval)
		p.tick(now)
	}
	if p.interval != p.cfg.FlushInterval {
		t.Fatalf("interval %v after the queue drained", p.interval)
	}
}

func TestPendingBoundedDropsOldest(t *testing.T) {
	p := newTestPublisher(t, func(c *Setup) { c.MaxPending = 10 })
	hs := gossiptest.Homes(25, 10, "a", 3)
	p.addHomes(hs)
	if got := testutil.ToFloat64(p.m.pendingDropped); got != 15 {
		t.Fatalf("dropped %v, want 15", got)
	}
	p.flush(time.Now(), false)
	_, _, got := gossiptest.Decode(t, p.sent[0])
	if len(got) != 10 || got[0] != hs[15] || got[9] != hs[24] {
		t.Fatalf("sent %d homes from %v: want the newest 10", len(got), got[0].Tenant)
	}
}

func TestFlushBoundedPerRound(t *testing.T) {
	p := newTestPublisher(t, func(c *Setup) { c.MaxEventsPerFlush = 2 })
	p.addHomes(gossiptest.Homes(400, 40, "a", 4))
	p.flush(time.Now(), false)
	if len(p.sent) != 2 || p.homes.n == 0 {
		t.Fatalf("one flush sent %d batches, left %d homes: want 2 batches and a rest", len(p.sent), p.homes.n)
	}
}

func TestMemoryBoundedWhateverTheRate(t *testing.T) {
	p := newTestPublisher(t, nil)
	p.depth = 1 << 20 // serf hopelessly behind: nothing is flushed for long
	now := time.Unix(1_800_000_000, 0)
	for i := range 50 {
		p.addHomes(gossiptest.Homes(1000, 16, "a", uint64(i)))
		now = now.Add(p.cfg.FlushInterval)
		p.tick(now)
	}
	if p.homes.n > p.cfg.MaxPending || len(p.homes.buf) != p.cfg.MaxPending {
		t.Fatalf("pending %d in a buffer of %d, bound %d", p.homes.n, len(p.homes.buf), p.cfg.MaxPending)
	}
	if testutil.ToFloat64(p.m.pendingDropped) == 0 {
		t.Fatal("nothing counted as dropped")
	}
}

// The publisher's pacing is by the injected clock: a batch's extra copies are due
// DirectCopyInterval after its first by that clock, so while it stands still none goes,
// however long the timers run, and each step of the clock past the interval sends one.
func TestCopiesAreDueByTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := itest.NewClock(time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC))
		table, err := homes.New(homes.Config{Regions: testRegions, Origin: "a", Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		peers := []memberlist.Address{{Addr: "10.0.0.2:7946", Name: "b"}}
		var mu sync.Mutex
		packets := 0
		cfg := testSetup(table)
		cfg.Now, cfg.Keys, cfg.Validator = clock.Now, keysOf(clusterKey), validate.NewTable(table, clock.Now)
		cfg.Peers = func() []memberlist.Address { return peers }
		cfg.PeerAddr = func(string) (memberlist.Address, bool) { return peers[0], true }
		cfg.Plan = func() *Plan { return nil }
		cfg.RTT = func(string) (time.Duration, bool) { return 0, false }
		cfg.Send = func([]byte) error { return nil }
		cfg.Depth = func() int { return 0 }
		cfg.Write = func([]byte, memberlist.Address) error { mu.Lock(); packets++; mu.Unlock(); return nil }
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		defer func() { cancel(); <-done }()
		sent := func() int { synctest.Wait(); mu.Lock(); defer mu.Unlock(); return packets }

		table.LearnName("acme", testRegions[0])
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * cfg.DirectCopyInterval)
		if got := sent(); got != 1 {
			t.Fatalf("%d packets while the clock stood still, want the first copy alone", got)
		}
		for want := 2; want <= cfg.DirectCopies; want++ {
			clock.Advance(cfg.DirectCopyInterval)
			time.Sleep(2 * cfg.DirectCopyInterval)
			if got := sent(); got != want {
				t.Fatalf("%d packets after the clock moved %d intervals, want %d", got, want-1, want)
			}
		}
	})
}
