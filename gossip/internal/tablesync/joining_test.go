package tablesync

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmihailenco/msgpack/v5"
)

// What a join costs the peer that serves it (bench/joiner, docs/BENCHMARKS.md): the joiner
// starts no repair and answers none while it fetches; the stream writes a few large blocks,
// unchunked, and paces itself without falling behind a joiner's bound.

// Regression (bench/joiner, pinned: A's p99 2.5-3.4x its idle one while B joined): the peer
// that saw the joiner come alive repaired with it, computing a digest of its million homes
// and pulling buckets of homes it held. An entry fetching its table from empty refuses
// digests and pulls; a warm one answers them.
func TestRepairRefusedByBootstrappingPeer(t *testing.T) {
	ms := newMembers("a", "b", "c")
	a, b, c := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms), newSyncNode(t, "c", ms)
	fill(a.table, 0, 2000, ver(-time.Minute, 0, "a"))
	fill(c.table, 0, 10, ver(-time.Minute, 0, "a")) // warm: restored from its state file

	endB := b.sync.BeginBootstrap()
	endC := c.sync.BeginBootstrap()
	_, err := a.sync.Repair(context.Background(), b.peer())
	if se := (*StatusError)(nil); !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable || se.Code != "bootstrapping" {
		t.Fatalf("Repair with a bootstrapping peer: %v, want 503 bootstrapping", err)
	}
	if got := b.served("digest", "bootstrapping"); got != 1 {
		t.Errorf("b refused %d digests, want 1", got)
	}
	if got := testutil.ToFloat64(a.sync.m.rounds.WithLabelValues("peer_bootstrapping")); got != 1 {
		t.Errorf("a's peer_bootstrapping rounds %v, want 1", got)
	}
	body := make([]byte, digestBuckets/8)
	_, _, err = a.sync.call(context.Background(), b.peer(), http.MethodPost, pathPull,
		mustMarshalPull(t, body))
	if se := (*StatusError)(nil); !errors.As(err, &se) || se.Code != "bootstrapping" {
		t.Errorf("pull from a bootstrapping peer: %v, want 503 bootstrapping", err)
	}
	if r, err := a.sync.Repair(context.Background(), c.peer()); err != nil || r.Buckets == 0 {
		t.Errorf("Repair with a warm bootstrapping peer: %+v, %v; want a pull", r, err)
	}

	endB()
	endB() // once only
	endC()
	if r, err := a.sync.Repair(context.Background(), b.peer()); err != nil || r.Buckets == 0 {
		t.Errorf("Repair once b's fetch ended: %+v, %v; want a pull", r, err)
	}
}

func mustMarshalPull(t *testing.T, buckets []byte) []byte {
	t.Helper()
	b, err := msgpack.Marshal(&pullRequest{Version: pullVersion, Buckets: buckets})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An entry fetching its table starts no repair round of its own.
func TestNoRepairRoundWhileBootstrapping(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	fill(b.table, 0, 100, ver(-time.Minute, 0, "b"))
	a.peers = []Peer{b.peer()}

	end := a.sync.BeginBootstrap()
	a.sync.repairRound(context.Background())
	if got := b.served("digest", "ok"); got != 0 {
		t.Errorf("b served %d digests while a bootstrapped", got)
	}
	if got := testutil.ToFloat64(a.sync.m.rounds.WithLabelValues("bootstrapping")); got != 1 {
		t.Errorf("a's bootstrapping rounds %v, want 1", got)
	}
	end()
	a.sync.repairRound(context.Background())
	if got := testutil.ToFloat64(a.sync.m.rounds.WithLabelValues("pulled")); got != 1 {
		t.Errorf("a's pulled rounds after its fetch %v, want 1", got)
	}
}

// Sync.Bootstrap holds the mark for as long as it fetches, and only then.
func TestSyncBootstrapPausesRepair(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	fill(a.table, 0, 100, ver(-time.Minute, 0, "a"))
	b.peers = []Peer{a.peer()}
	var paused, partial bool
	a.wrap(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.URL.Path == pathSnapshot {
			paused, partial = b.sync.RepairPaused(), b.sync.partial.Load()
		}
		next.ServeHTTP(w, r)
	})
	if err := b.sync.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !paused || !partial {
		t.Errorf("during the fetch: repair paused %v, digests refused %v; want both", paused, partial)
	}
	if b.sync.RepairPaused() || b.sync.partial.Load() {
		t.Error("still paused after Bootstrap returned")
	}
}

// A stream's body is not chunked (a chunk cost three writes a flush) and still verifies.
func TestStreamBodyNotChunked(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	fill(a.table, 0, 3000, ver(-time.Minute, 0, "a"))
	resp, mac, err := b.sync.call(context.Background(), a.peer(), http.MethodGet, pathSnapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if len(resp.TransferEncoding) != 0 || !resp.Close {
		t.Errorf("transfer encoding %v, close %v; want none, ended by the connection", resp.TransferEncoding, resp.Close)
	}
	got, err := b.sync.readStream(resp.Body, mac, viaSnapshot)
	if err != nil || got.homesApplied != 3000 {
		t.Fatalf("readStream: %d applied, %v", got.homesApplied, err)
	}
}

// The pacer pauses once every paceEvery homes: as long as they took while on schedule, until
// the maxStreamRate schedule when ahead of it, and only yieldPause when behind minStreamRate.
func TestPacer(t *testing.T) {
	rows := []struct {
		name    string
		perHome time.Duration // the clock's advance for each home written
		homes   int
		want    []time.Duration
	}{
		// 1,024 homes take 0.1 ms; at 400,000 a second they are due at 2.56 ms.
		{"ahead of the cap", 100 * time.Nanosecond, 3 * paceEvery, []time.Duration{
			2560*time.Microsecond - 102400*time.Nanosecond,
			2560*time.Microsecond - 102400*time.Nanosecond,
			2560*time.Microsecond - 102400*time.Nanosecond}},
		// 1,024 homes take 3.07 ms: on the 300,000 a second floor (3.41 ms) at first, so
		// a pause as long; behind it after (9.2 ms for 2,048, due at 6.83), so a yield.
		{"a contended CPU", 3 * time.Microsecond, 3 * paceEvery, []time.Duration{
			3072 * time.Microsecond, yieldPause, yieldPause}},
		{"fewer than a batch", time.Microsecond, paceEvery - 1, nil},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			clock := time.Unix(1000, 0)
			var pauses []time.Duration
			p := newPacerClock(func() time.Time { return clock },
				func(d time.Duration) { pauses = append(pauses, d); clock = clock.Add(d) })
			for n := 1; n <= r.homes; n++ {
				clock = clock.Add(r.perHome)
				p.wait(n)
			}
			if !reflect.DeepEqual(pauses, r.want) {
				t.Errorf("pauses %v, want %v", pauses, r.want)
			}
		})
	}
}

// A joiner asking a peer that is itself joining (its fetch began from empty) gets part of a
// table, marked so: it applies it and takes a whole one from another peer in the same round;
// with nothing but joining peers (a fleet starting cold) it takes what they have and is done.
func TestBootstrapPrefersAWholeTable(t *testing.T) {
	ms := newMembers("a", "p", "b")
	a, p := newSyncNode(t, "a", ms), newSyncNode(t, "p", ms)
	fill(a.table, 0, 1000, ver(-time.Minute, 0, "a"))
	end := p.sync.BeginBootstrap() // p is joining, from empty ...
	defer end()
	fill(p.table, 0, 10, ver(-time.Minute, 0, "a")) // ... and has 10 of a's homes so far
	// The peers are tried in random order: each order, several times.
	for i := range 8 {
		b := newSyncNode(t, fmt.Sprintf("b%d", i), ms)
		ms.set(b.name, loopback)
		b.peers = []Peer{p.peer(), a.peer()}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := b.sync.Bootstrap(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if b.table.Len() != 1000 {
			t.Fatalf("run %d: the joiner holds %d homes, want a's whole table of 1000", i, b.table.Len())
		}
	}
	t.Run("only joining peers", func(t *testing.T) {
		b := newSyncNode(t, "c", ms)
		ms.set("c", loopback)
		b.peers = []Peer{p.peer()}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		begin := time.Now()
		if err := b.sync.Bootstrap(ctx); err != nil {
			t.Fatal(err)
		}
		if b.table.Len() != 10 || time.Since(begin) > 5*time.Second {
			t.Errorf("%d homes after %v; want p's 10 at once", b.table.Len(), time.Since(begin))
		}
		if n := testutil.ToFloat64(b.sync.m.fetches.WithLabelValues("partial")); n != 1 {
			t.Errorf("%v partial fetches counted, want 1", n)
		}
	})
}

// LastFetch is the end of the last fetch and the peer whose whole table it brought: what
// the round after a fetch (Gossip.RunRepair) needs to ask another peer, a settle later.
func TestLastFetchNamesThePeer(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	fill(b.table, 0, 10, ver(-time.Minute, 0, "b"))
	a.peers = []Peer{b.peer()}
	if f := a.sync.LastFetch(); f != nil {
		t.Fatalf("before any fetch: %+v", f)
	}
	before := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.sync.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	f := a.sync.LastFetch()
	if f == nil || f.From != "b" || f.At.Before(before) {
		t.Fatalf("after fetching b's table: %+v, want from b, at or after %v", f, before)
	}
	// A fetch that brought no whole table (no peer answered) names none.
	a.peers = nil
	if err := a.sync.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	if g := a.sync.LastFetch(); g == f || g.From != "" {
		t.Errorf("after a fetch with no peer: %+v, want a new end naming none", g)
	}
}
