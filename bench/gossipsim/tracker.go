package main

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenec/fenec-entry/gossip/simcluster"
)

// tracker records when each home learned reaches each entry.
//
// Method: one goroutine scans, every poll interval, every entry's table for the homes it
// does not hold yet (Table.Lookup, a read-locked map probe; no hook into gossip). A home's
// arrival at an entry is stamped with the time of the entry's pass that first finds it, so
// it is late by at most one poll interval plus one scan (max_scan_ms in the result); early
// never. A home is "learned" at the instant before Learn returns at its origin, which then
// holds it. Homes every entry holds leave the scan.
//
// Each pass scans every entry's current incarnation (entries, read once a pass). When an entry
// was restarted since the last pass, the homes it had reached but some other entry still
// lacks count as missing there again: the new incarnation's table is empty, so a home is at
// every entry only once every current incarnation holds it. A home every entry held before
// a restart stays done; whether the new incarnation gets it is a refill (below).
type tracker struct {
	entries func() []*simcluster.Entry // the current incarnations (Cluster.Entries)
	nodes   int
	poll    time.Duration

	homes []trackedHome // written once by learned, before n is raised
	n     atomic.Int64  // homes learned so far

	mu       sync.Mutex // guards the following, which the scan goroutine writes
	active   []int      // indexes of homes some entry still lacks
	next     int        // first home not yet in active
	pairs    int        // (home, entry) pairs reached
	complete int        // homes every entry holds
	maxScan  time.Duration
	cur      []*simcluster.Entry // the incarnations of the last pass
	refills  []refill

	done    chan struct{}
	stopped chan struct{}
	allCh   chan struct{} // signalled when a scan finds nothing missing
}

type trackedHome struct {
	tenant  string
	region  int
	t0      time.Time
	reached []time.Time // by entry; zero: not yet
	missing int
	last    time.Time // when the last entry got it
	lastAt  int       // the entry that got it last
}

// refill is a restarted entry's new incarnation getting every home learned before it: from
// the pass that first saw it (late by at most one poll) until it holds them all.
type refill struct {
	e       *simcluster.Entry
	since   time.Time
	pending []int // the homes it still lacks
	took    time.Duration
}

// newTracker tracks total homes over the entries that entries returns (their number must not
// change).
func newTracker(entries func() []*simcluster.Entry, total int, poll time.Duration) *tracker {
	es := entries()
	return &tracker{
		entries: entries, nodes: len(es), cur: es, poll: poll, homes: make([]trackedHome, total),
		done: make(chan struct{}), stopped: make(chan struct{}), allCh: make(chan struct{}, 1),
	}
}

// learned has e (an entry's current incarnation) learn home k and starts tracking it.
func (t *tracker) learned(k int, tenant, region string, e *simcluster.Entry) {
	id, _ := e.Table.RegionID(region)
	h := &t.homes[k]
	h.tenant, h.region = tenant, id
	h.reached = make([]time.Time, t.nodes)
	h.missing = t.nodes
	h.t0 = time.Now()
	e.Table.Learn(tenant, id)
	t.n.Store(int64(k + 1))
}

func (t *tracker) run() {
	defer close(t.stopped)
	tick := time.NewTicker(t.poll)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
		}
		t.scan()
	}
}

func (t *tracker) scan() {
	t.mu.Lock()
	defer t.mu.Unlock()
	start := time.Now()
	for n := int(t.n.Load()); t.next < n; t.next++ {
		t.active = append(t.active, t.next)
	}
	es := t.entries()
	for j, e := range es {
		if e != t.cur[j] {
			t.restartedLocked(j, e, start)
		}
	}
	t.cur = es
	t.refillLocked()
	for j, e := range es {
		now := time.Now()
		for _, k := range t.active {
			h := &t.homes[k]
			if !h.reached[j].IsZero() {
				continue
			}
			if r, ok := e.Table.Lookup(h.tenant); ok && r == h.region {
				h.reached[j] = now
				h.missing--
				t.pairs++
				if h.missing == 0 {
					h.last, h.lastAt = now, j
					t.complete++
				}
			}
		}
	}
	t.active = slices.DeleteFunc(t.active, func(k int) bool { return t.homes[k].missing == 0 })
	t.maxScan = max(t.maxScan, time.Since(start))
	if len(t.active) == 0 && t.next == len(t.homes) && !slices.ContainsFunc(t.refills, func(r refill) bool { return len(r.pending) > 0 }) {
		select {
		case t.allCh <- struct{}{}:
		default:
		}
	}
}

// restartedLocked counts the homes entry j's old incarnation had reached, and some other entry
// still lacks, as missing at j again, and starts e's refill: every home learned so far.
func (t *tracker) restartedLocked(j int, e *simcluster.Entry, now time.Time) {
	for _, k := range t.active {
		if h := &t.homes[k]; !h.reached[j].IsZero() {
			h.reached[j] = time.Time{}
			h.missing++
			t.pairs--
		}
	}
	r := refill{e: e, since: now, pending: make([]int, t.next)}
	for k := range r.pending {
		r.pending[k] = k
	}
	t.refills = append(t.refills, r)
}

// refillLocked drops from each refill the homes its incarnation now holds.
func (t *tracker) refillLocked() {
	for i := range t.refills {
		r := &t.refills[i]
		if len(r.pending) == 0 {
			continue
		}
		r.pending = slices.DeleteFunc(r.pending, func(k int) bool {
			got, ok := r.e.Table.Lookup(t.homes[k].tenant)
			return ok && got == t.homes[k].region
		})
		if len(r.pending) == 0 {
			r.took = time.Since(r.since)
		}
	}
}

// refillMax is the longest refill in ms, nil if some restarted entry never got every home
// learned before it, and the number of restarts seen.
func (t *tracker) refillMax() (maxMS *float64, restarts int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var m time.Duration
	for _, r := range t.refills {
		if len(r.pending) > 0 {
			return nil, len(t.refills)
		}
		m = max(m, r.took)
	}
	v := math.Round(ms(m)*10) / 10
	return &v, len(t.refills)
}

// waitAll waits until every home learned is at every entry (restarted ones included), or d
// passes.
func (t *tracker) waitAll(d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-t.allCh:
	case <-tm.C:
	}
}

func (t *tracker) stop() {
	close(t.done)
	<-t.stopped
	t.scan() // one last look
}

// counts returns the (home, entry) pairs reached and the homes every entry holds.
func (t *tracker) counts() (pairs, complete int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pairs, t.complete
}

// percentiles of the time for a home to reach every entry, and for a home to reach one entry
// (every pair, the origin excluded), in ms; nil where the percentile falls on a home or pair
// never reached.
func (t *tracker) percentiles() (p50, p99, pmax, pair50, pair99 *float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	inf := math.Inf(1)
	var all, pairs []float64
	for _, h := range t.homes {
		if h.missing == 0 {
			all = append(all, ms(h.last.Sub(h.t0)))
		} else {
			all = append(all, inf)
		}
		for _, r := range h.reached {
			switch {
			case r.IsZero():
				pairs = append(pairs, inf)
			case r.After(h.t0): // not the origin, which holds it at t0
				pairs = append(pairs, ms(r.Sub(h.t0)))
			}
		}
	}
	slices.Sort(all)
	slices.Sort(pairs)
	return pct(all, 0.5), pct(all, 0.99), pct(all, 1), pct(pairs, 0.5), pct(pairs, 0.99)
}

// slowest is the entry that got the slowest home last (-1 if no home reached every entry).
func (t *tracker) slowest() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, worst := -1, time.Duration(-1)
	for _, h := range t.homes {
		if h.missing == 0 && h.last.Sub(h.t0) > worst {
			at, worst = h.lastAt, h.last.Sub(h.t0)
		}
	}
	return at
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// pct is the nearest-rank percentile of sorted xs, rounded to 0.1 ms; nil if it is +Inf.
func pct(xs []float64, p float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	k := max(int(math.Ceil(p*float64(len(xs))))-1, 0)
	v := xs[k]
	if math.IsInf(v, 1) {
		return nil
	}
	v = math.Round(v*10) / 10
	return &v
}
