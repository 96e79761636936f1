package tablesync

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/gossip/internal/validate"
	"github.com/fenec/fenec-entry/homes"
)

// Two tables that each hold homes the other lacks, and different versions of some tenants,
// agree after each pulled for a few rounds, with the newer home of every tenant on both sides.
func TestRepairConverges(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	base := ver(-time.Minute, 0, "o")
	fill(a.table, 0, 3000, base)                                                 // shared 0..2999
	fill(b.table, 0, 3000, base)                                                 //
	fill(a.table, 3000, 500, base)                                               // only at a
	fill(b.table, 3500, 700, base)                                               // only at b
	newerA, newerB := ver(-10*time.Second, 1, "a"), ver(-10*time.Second, 2, "b") // settled: older than the cutoff
	for i := 0; i < 100; i++ {                                                   // conflicts: 0..49 newer at a, 50..99 newer at b
		a.table.Apply(homes.Home{Tenant: fmt.Sprintf("tenant-%d", i), Region: "ap", Version: newerA})
		if i >= 50 {
			b.table.Apply(homes.Home{Tenant: fmt.Sprintf("tenant-%d", i), Region: "us", Version: newerB})
		}
	}
	a.table.Mark(2)

	// Nearly every bucket differs: a round pulls at most a quarter of them, so four rounds
	// each way converge, and a fifth finds nothing.
	for round := range digestBuckets/maxPullBuckets + 1 {
		ra, err := a.sync.Repair(context.Background(), b.peer())
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.sync.Repair(context.Background(), a.peer())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: a pulled %+v; b pulled %+v", round, ra, rb)
		if ra.Buckets > maxPullBuckets || rb.Buckets > maxPullBuckets {
			t.Fatalf("a round pulled %d and %d buckets, at most %d", ra.Buckets, rb.Buckets, maxPullBuckets)
		}
		if round == digestBuckets/maxPullBuckets && (ra.Buckets != 0 || rb.Buckets != 0) {
			t.Errorf("still differing after %d rounds", round)
		}
	}
	equalTables(t, a.table, b.table)
	if a.table.Len() != 4200 {
		t.Errorf("%d homes, want 4200", a.table.Len())
	}
	for i := 0; i < 100; i++ {
		h, _, _ := b.table.Get(fmt.Sprintf("tenant-%d", i))
		want := newerA
		if i >= 50 {
			want = newerB
		}
		if h.Version != want {
			t.Errorf("tenant-%d: %v, want %v", i, h.Version, want)
		}
	}
	if !b.table.Marked(2, homes.Strict) {
		t.Error("a's failure of ap did not reach b")
	}
	if got := testutil.ToFloat64(a.sync.m.applied.WithLabelValues(viaRepair, typeHome)); got != 750 {
		t.Errorf("repair applied metric %v", got)
	}

	// Now in sync: a round transfers no homes and makes no pull.
	pulls := b.served("pull", "ok")
	r, err := a.sync.Repair(context.Background(), b.peer())
	if err != nil || r != (RepairResult{}) || b.served("pull", "ok") != pulls {
		t.Errorf("repair of equal tables: %+v, %v, pulls %d -> %d", r, err, pulls, b.served("pull", "ok"))
	}
}

func TestRepairIdenticalTablesTransferNothing(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	v := ver(-time.Minute, 0, "o")
	// The same homes inserted in different orders: digests do not depend on order.
	for i := 0; i < 2000; i++ {
		a.table.Apply(homes.Home{Tenant: fmt.Sprintf("t%d", i), Region: "eu", Version: v})
		b.table.Apply(homes.Home{Tenant: fmt.Sprintf("t%d", 1999-i), Region: "eu", Version: v})
	}
	r, err := a.sync.Repair(context.Background(), b.peer())
	if err != nil || r != (RepairResult{}) {
		t.Fatalf("Repair: %+v, %v", r, err)
	}
	if n := b.served("pull", "ok"); n != 0 {
		t.Errorf("%d pulls served", n)
	}
	if n := testutil.ToFloat64(a.sync.m.rounds.WithLabelValues("in_sync")); n != 1 {
		t.Errorf("in_sync rounds %v", n)
	}
}

func TestRepairRefusedWithoutProof(t *testing.T) {
	ms := newMembers("a", "b")
	a := newSyncNode(t, "a", ms)
	for _, path := range []string{pathDigest, pathPull} {
		method := http.MethodGet
		if path == pathPull {
			method = http.MethodPost
		}
		req, _ := http.NewRequest(method, a.srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s %s: %d, want 401", method, path, resp.StatusCode)
		}
	}
	b := newSyncNode(t, "b", ms, withKey([]byte("a wrong key, 16B")))
	if _, err := b.sync.Repair(context.Background(), a.peer()); err == nil {
		t.Error("Repair with the wrong key succeeded")
	}
}

func TestRepairBadPullBody(t *testing.T) {
	ms := newMembers("a", "b")
	a := newSyncNode(t, "a", ms)
	b := newSyncNode(t, "b", ms)
	for _, body := range [][]byte{nil, []byte("junk"), {0x92, 0x01, 0xc4, 0x01, 0xff}} {
		_, _, err := b.sync.call(context.Background(), a.peer(), http.MethodPost, pathPull, body)
		if se, ok := err.(*StatusError); !ok || se.Status != 400 {
			t.Errorf("body %x: %v, want 400", body, err)
		}
	}
}

// Run repairs every RepairInterval, jittered, until its context ends.
func TestSyncRunLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		calls := 0
		cfg := DefaultConfig()
		cfg.RepairInterval = 10 * time.Second
		s, err := NewSync(Setup{
			Config: cfg, Node: "a", Table: newTable(t, "a", 10), Capacity: 10, Validator: validate.New(syncRegions, nil),
			MemberAddr: newMembers().addr,
			Peers:      func() []Peer { mu.Lock(); defer mu.Unlock(); calls++; return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		time.Sleep(7 * time.Second) // jitter is ±25 %: no round before 7.5 s
		synctest.Wait()
		mu.Lock()
		if calls != 0 {
			t.Errorf("%d rounds before 7.5 s", calls)
		}
		mu.Unlock()
		time.Sleep(93 * time.Second) // 100 s: between 8 and 13 rounds
		synctest.Wait()
		mu.Lock()
		n := calls
		mu.Unlock()
		if n < 8 || n > 13 {
			t.Errorf("%d rounds in 100 s at 10 s ±25 %%", n)
		}
		if got := testutil.ToFloat64(s.m.rounds.WithLabelValues("no_peer")); int(got) != n {
			t.Errorf("no_peer rounds %v, want %d", got, n)
		}
		cancel()
		<-done
	})
}

func TestDigestOrderIndependent(t *testing.T) {
	a, b := newTable(t, "a", 100), newTable(t, "b", 100)
	v := ver(0, 0, "o")
	hs := []homes.Home{{Tenant: "x", Region: "eu", Version: v}, {Tenant: "y", Region: "us", Version: v}, {Tenant: "z", Region: "ap", Version: v}}
	for i := range hs {
		a.Apply(hs[i])
		b.Apply(hs[len(hs)-1-i])
	}
	if *computeDigest(a, 0, nil) != *computeDigest(b, 0, nil) {
		t.Error("digests differ for the same homes")
	}
	b.Apply(homes.Home{Tenant: "y", Region: "us", Version: ver(time.Second, 0, "o")})
	da, db := computeDigest(a, 0, nil), computeDigest(b, 0, nil)
	if da.Buckets[bucketOf("y")] == db.Buckets[bucketOf("y")] {
		t.Error("a newer version left the bucket's digest unchanged")
	}
	diff := 0
	for i := range da.Buckets {
		if da.Buckets[i] != db.Buckets[i] {
			diff++
		}
	}
	if diff != 1 {
		t.Errorf("%d buckets differ, want 1", diff)
	}
}

// Homes younger than the settle time are gossip's: two tables that differ only in them are
// in sync for repair, and nothing is pulled; once settled, the difference is repaired.
func TestRepairLeavesRecentHomesToGossip(t *testing.T) {
	ms := newMembers("a", "b")
	clock := time.Now()
	now := func() time.Time { return clock }
	a := newSyncNode(t, "a", ms, func(c *Setup) { c.Now = now })
	b := newSyncNode(t, "b", ms, func(c *Setup) { c.Now = now })
	base := ver(-time.Minute, 0, "o")
	fill(a.table, 0, 1000, base)
	fill(b.table, 0, 1000, base)
	fill(a.table, 5000, 20, ver(0, 0, "a")) // just learned at a, in flight to b
	res, err := b.sync.Repair(context.Background(), a.peer())
	if err != nil {
		t.Fatal(err)
	}
	if res.Buckets != 0 || res.Homes != 0 {
		t.Errorf("pulled %+v for homes younger than the settle time", res)
	}
	clock = clock.Add(DefaultConfig().RepairSettle + time.Second)
	if res, err = b.sync.Repair(context.Background(), a.peer()); err != nil || res.HomesApplied != 20 {
		t.Errorf("once settled: %+v, %v; want the 20 homes applied", res, err)
	}
}

// BenchmarkRepairDigest is the cost of one digest of a full table of 50,000 (the default) and
// 1,000,000 homes: one Range plus a hash per home.
func BenchmarkRepairDigest(b *testing.B) {
	for _, n := range []int{50_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			t := newTable(b, "a", n)
			fill(t, 0, n, ver(-time.Minute, 0, "some-node-name"))
			b.ReportAllocs()
			for b.Loop() {
				computeDigest(t, 0, nil)
			}
		})
	}
}

// BenchmarkSnapshot is a whole snapshot of 50,000 and 1,000,000 homes over loopback HTTP into
// an empty table: serve, stream, verify, validate, apply; what a joiner waits for before it
// is ready. bytes/op is the stream's size.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{50_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchSnapshot(b, n) })
	}
}

func benchSnapshot(b *testing.B, n int) {
	ms := newMembers("a", "b")
	a := newSyncNode(b, "a", ms, withCapacity(n))
	fill(a.table, 0, n, ver(-time.Minute, 0, "some-node-name"))
	var size int64
	a.wrap(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		cw := &countingWriter{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		if r.URL.Path == pathSnapshot {
			size = cw.n
		}
	})
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		c := newSyncNode(b, "b", ms, withCapacity(n))
		b.StartTimer()
		if applied, _, err := c.sync.Fetch(context.Background(), a.peer()); err != nil || applied != n {
			b.Fatal(applied, err)
		}
	}
	b.ReportMetric(float64(size), "stream-bytes")
}

// BenchmarkSnapshotServe50k is the serving side alone: Range, encode, seal, to io.Discard.
func BenchmarkSnapshotServe50k(b *testing.B) {
	ms := newMembers("a", "b")
	a := newSyncNode(b, "a", ms, withKey(nil), withCapacity(50000))
	fill(a.table, 0, 50000, ver(-time.Minute, 0, "some-node-name"))
	req := httptest.NewRequest(http.MethodGet, pathSnapshot, nil)
	req.RemoteAddr = "127.0.0.1:1"
	req.Header.Set(proofHeader, "b")
	b.ReportAllocs()
	for b.Loop() {
		a.sync.Handler().ServeHTTP(discardWriter{h: http.Header{}}, req)
	}
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.ResponseWriter.Write(p)
}

func (c *countingWriter) Flush()                      { c.ResponseWriter.(http.Flusher).Flush() }
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d discardWriter) WriteHeader(int)             {}

func TestTableDigest(t *testing.T) {
	mk := func() *homes.Table {
		tb, err := homes.New(homes.Config{Regions: []string{"eu", "us"}, Origin: "x"})
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	a, b := mk(), mk()
	hs := []homes.Home{
		{Tenant: "acme", Region: "eu", Version: homes.Version{HLC: 10 << 16, Origin: "n1"}},
		{Tenant: "globex", Region: "us", Version: homes.Version{HLC: 11 << 16, Origin: "n2"}},
	}
	if TableDigest(a) != TableDigest(b) {
		t.Fatal("empty tables differ")
	}
	a.Apply(hs[0])
	a.Apply(hs[1])
	if TableDigest(a) == TableDigest(b) {
		t.Fatal("a table with homes has the empty table's digest")
	}
	b.Apply(hs[1])
	b.Apply(hs[0])
	if TableDigest(a) != TableDigest(b) {
		t.Error("the same homes in another order give another digest")
	}
	moved := hs[0]
	moved.Region, moved.Version.HLC = "us", 12<<16
	b.Apply(moved)
	if TableDigest(a) == TableDigest(b) {
		t.Error("a moved home does not change the digest")
	}
}

// TestRepairMendsALostClear pins that marks are repaired like homes: b heard eu fail but not
// the clear that followed (gossip lost it), and is mended by one repair round, which also
// brings it a failure it missed.
func TestRepairMendsALostClear(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	v := ver(-time.Minute, 0, "o")
	fill(a.table, 0, 100, v)
	fill(b.table, 0, 100, v)
	a.table.Mark(0)
	for _, m := range a.table.Marks() { // b hears eu's failure...
		b.table.ApplyMark(m)
	}
	a.table.Clear(0) // ...and not its clear
	a.table.Mark(2)  // nor ap's failure
	if !b.table.Marked(0, homes.Strict) || b.table.Marked(2, homes.Strict) {
		t.Fatal("setup: b should hold eu's failure only")
	}
	res, err := b.sync.Repair(context.Background(), a.peer())
	if err != nil {
		t.Fatal(err)
	}
	if !res.MarksDiffer || res.Buckets != 0 || res.MarksApplied != 2 {
		t.Errorf("repair %+v, want the marks to differ and 2 applied (eu's clear, ap's failure), no bucket", res)
	}
	if b.table.Marked(0, homes.Strict) || !b.table.Marked(2, homes.Strict) {
		t.Errorf("after repair b fails %#b, want ap only", b.table.Failing())
	}
	if res, err := b.sync.Repair(context.Background(), a.peer()); err != nil || res.MarksDiffer {
		t.Errorf("second repair %+v %v: want in sync", res, err)
	}
}

// BenchmarkRepairRound1M is one repair round between two entries holding the same million
// settled homes, as the puller sees it: the two digests and the pull, over loopback. "in
// flight": the peer also holds 500 homes learned in the last second (gossip's, not yet
// everywhere): nothing is pulled. "lost": the puller lacks one settled home: one bucket is.
// pulled-bytes is the pull stream's size; digest time is most of ns/op.
func BenchmarkRepairRound1M(b *testing.B) {
	const n = 1_000_000
	start := time.Now()
	now := func() time.Time { return start } // the 500 homes stay in flight however long the runs take
	ms := newMembers("a", "b")
	a := newSyncNode(b, "a", ms, withCapacity(2*n), withNow(now))
	p := newSyncNode(b, "b", ms, withCapacity(2*n), withNow(now))
	base := ver(-time.Minute, 0, "o")
	fill(a.table, 0, n, base)
	fill(p.table, 0, n, base)
	fill(p.table, n, 500, homes.Version{HLC: uint64(start.Add(-time.Second/2).UnixMilli()) << 16, Origin: "b"})
	var pulled int64
	p.wrap(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		cw := &countingWriter{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		if r.URL.Path == pathPull {
			pulled += cw.n
		}
	})
	run := func(b *testing.B, before func(i int)) {
		pulled = 0
		buckets := 0
		i := 0
		for b.Loop() {
			before(i)
			i++
			res, err := a.sync.Repair(context.Background(), p.peer())
			if err != nil {
				b.Fatal(err)
			}
			buckets += res.Buckets
		}
		b.ReportMetric(float64(pulled)/float64(b.N), "pulled-bytes")
		b.ReportMetric(float64(buckets)/float64(b.N), "buckets")
	}
	b.Run("in_flight", func(b *testing.B) { run(b, func(int) {}) })
	b.Run("lost", func(b *testing.B) {
		run(b, func(i int) { fill(p.table, n+1000+i, 1, base) }) // a settled home a lacks, each round
	})
}

// A paced digest is the same digest; the pacer sleeps after every digestPaceEvery homes as
// long as they took, and not between.
func TestDigestPacer(t *testing.T) {
	tb := newTable(t, "a", 40_000)
	fill(tb, 0, 40_000, ver(-time.Minute, 0, "a"))
	if *computeDigest(tb, 0, newDigestPacer().wait) != *computeDigest(tb, 0, nil) {
		t.Fatal("the paced digest differs")
	}
	clock := time.Unix(1_800_000_000, 0)
	var slept []time.Duration
	p := &digestPacer{last: clock, now: func() time.Time { return clock },
		sleep: func(d time.Duration) { slept = append(slept, d); clock = clock.Add(d) }}
	for n := 1; n <= 2*digestPaceEvery; n++ {
		clock = clock.Add(time.Microsecond) // each home takes 1 µs
		p.wait(n)
	}
	want := time.Duration(digestPaceEvery) * time.Microsecond
	if len(slept) != 2 || slept[0] != want || slept[1] != want {
		t.Errorf("slept %v, want twice %v", slept, want)
	}
}
