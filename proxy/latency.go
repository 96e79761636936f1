package proxy

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

// Latency from this entry to each region: the round trip as the entry sees
// it, from three kinds of samples, all cheap: the time to a router's answer head for every
// request, the time to connect to a router whenever a new connection is made, and a TCP
// connect by Probe to a region no request asked lately (or the connect of its request to a
// region this entry cannot reach, reach.go). The estimate is the smallest sample
// of the last one to two windows (a windowed minimum, as TCP's and BBR's min-RTT filters):
// a router's own time to answer (a held write's 30 s, a slow query) only ever adds to a
// sample, so the minimum tracks the network, and a route that got slower is seen within two
// windows.
const (
	latWindow        = 30 * time.Second
	DefaultProbeIdle = 30 * time.Second // Probe connects to regions no sample reached within this
	// A region replaces the default region as a heard-nowhere tenant's first choice only
	// when it is clearly closer: both margins, so that noise between regions on one network
	// (loopback, a metro) never moves traffic.
	latBetterRatio = 0.8
	latBetterBy    = 5 * time.Millisecond
	// maxProbesPerRegion bounds the connects one Probe makes to a region whose routers fail.
	maxProbesPerRegion = 3
)

// latency is one region's windowed minimum. Safe for concurrent use, lock-free; observe costs
// two atomic loads when the sample is not a new minimum.
type latency struct {
	start  atomic.Int64 // unix ns when the current window began; 0 before any sample
	cur    atomic.Int64 // the current window's minimum, ns; 0: none
	prev   atomic.Int64 // the previous window's, ns; 0: none
	lastAt atomic.Int64 // unix ns of the latest sample
}

func (l *latency) observe(d time.Duration, now int64) {
	if d <= 0 {
		d = 1
	}
	if l.lastAt.Load() < now-int64(time.Second) { // at most one store a second from steady traffic
		l.lastAt.Store(now)
	}
	start := l.start.Load()
	if now-start >= int64(latWindow) {
		if l.start.CompareAndSwap(start, now) {
			if now-start >= 2*int64(latWindow) {
				l.prev.Store(0) // a silent window: forget what is older
			} else {
				l.prev.Store(l.cur.Load())
			}
			l.cur.Store(int64(d))
			l.lastAt.Store(now)
			return
		}
	}
	for {
		c := l.cur.Load()
		if c != 0 && c <= int64(d) {
			return
		}
		if l.cur.CompareAndSwap(c, int64(d)) {
			return
		}
	}
}

// estimate returns the windowed minimum at now, or false when no sample is recent enough.
func (l *latency) estimate(now int64) (time.Duration, bool) {
	start := l.start.Load()
	if start == 0 || now-start >= 2*int64(latWindow) {
		return 0, false
	}
	c, p := l.cur.Load(), l.prev.Load()
	if now-start >= int64(latWindow) { // the current window has ended: it is the previous one now
		p, c = c, 0
	}
	switch {
	case c == 0 && p == 0:
		return 0, false
	case c == 0:
		return time.Duration(p), true
	case p == 0 || c < p:
		return time.Duration(c), true
	}
	return time.Duration(p), true
}

// RegionLatency is one region's latency as this entry measures it.
type RegionLatency struct {
	Region   string
	Estimate time.Duration // 0 when Measured is false
	Measured bool
	LastAt   time.Time // the latest sample; zero before any
}

// Latencies returns the latency of every region of the routing in force, in its order.
func (h *Handler) Latencies() []RegionLatency {
	rt := h.rt.Load()
	now := h.cfg.Clock.Now().UnixNano()
	out := make([]RegionLatency, 0, len(rt.order))
	for _, id := range rt.order {
		st := rt.byID[id].st
		rl := RegionLatency{Region: st.name}
		rl.Estimate, rl.Measured = st.lat.estimate(now)
		if at := st.lat.lastAt.Load(); at != 0 {
			rl.LastAt = time.Unix(0, at)
		}
		out = append(out, rl)
	}
	return out
}

// Probe sends each region what probeFor says, regions in parallel, and then chooses the
// closest region again (see choose):
//   - a region this entry cannot reach itself (reach.go) gets a request, HEAD probePath, on a
//     connection of its own to each of its routers in turn until one gives an answer head
//     with Fenec-Shard (at most maxProbesPerRegion), each bounded by the answer timeout and
//     ctx; that answer is the reach, and the region is asked first again. A probe that fails
//     changes nothing: it marks nothing, here or in the fleet;
//   - a region that no sample reached within idle gets a TCP connect, closed at once (the
//     next router when one fails, at most maxProbesPerRegion), for its latency.
//
// Every connect is bounded by the dial timeout. The node calls it on a ticker, at least every
// --read-backoff; it is the only background I/O of the handler.
func (h *Handler) Probe(ctx context.Context, idle time.Duration) {
	rt := h.rt.Load()
	now := h.cfg.Clock.Now()
	var wg sync.WaitGroup
	for _, id := range rt.order {
		rr := rt.byID[id]
		since := time.Duration(now.UnixNano() - rr.st.lat.lastAt.Load())
		kind := probeFor(h.Unreachable(int(id)), len(rr.routers) > 0, since, idle)
		if kind == probeNone {
			continue
		}
		wg.Go(func() {
			// The region's routers in their order, until one connects (or answers): one that
			// is down says nothing of the way to the region.
			start := rr.start()
			for i := range min(len(rr.routers), maxProbesPerRegion) {
				r := rr.routers[(start+i)%len(rr.routers)]
				h.met.m.Probes.Inc()
				if kind == probeAnswer {
					if r.probeAnswer(ctx, h.cfg.AnswerTimeout) {
						h.setReach(rr.st, reachAnswered, "probe")
						return
					}
					continue
				}
				d := net.Dialer{Timeout: h.cfg.DialTimeout}
				t0 := clock.System.Now() // a duration of real work
				c, err := d.DialContext(ctx, "tcp", r.addr)
				if err != nil {
					continue // no sample: a region none of whose routers connects stays unmeasured
				}
				took := clock.System.Now().Sub(t0)
				c.Close()
				rr.st.lat.observe(took, h.cfg.Clock.Now().UnixNano())
				return
			}
		})
	}
	wg.Wait()
	h.choose(rt)
}

// choose sets the region a heard-nowhere tenant whose continent has no mapping goes to first:
// the default region, unless a measured region is clearly closer (both margins above).
func (h *Handler) choose(rt *routing) {
	now := h.cfg.Clock.Now().UnixNano()
	best := int32(-1)
	base, ok := rt.byID[rt.defaultRegion].st.lat.estimate(now)
	if ok && h.cfg.LatencyChoice {
		bestEst := base
		for _, id := range rt.order {
			if int(id) == rt.defaultRegion || len(rt.byID[id].routers) == 0 {
				continue
			}
			e, ok := rt.byID[id].st.lat.estimate(now)
			if ok && float64(e) < latBetterRatio*float64(base) && base-e >= latBetterBy && e < bestEst {
				best, bestEst = int32(id), e
			}
		}
	}
	h.closest.Store(best)
}

// Closest returns the name of the region a tenant heard nowhere, whose continent has no
// mapping, goes to first now: the default region unless a measured one is clearly closer.
func (h *Handler) Closest() string {
	rt := h.rt.Load()
	if c := int(h.closest.Load()); c >= 0 && c < len(rt.byID) && rt.byID[c] != nil {
		return rt.byID[c].st.name
	}
	return rt.byID[rt.defaultRegion].st.name
}
