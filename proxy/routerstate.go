package proxy

import (
	"sync/atomic"
	"time"
)

// RouterState is what the handler last saw of one router, for the status page. It says
// nothing the request path acts on: retries follow decide, region order follows the marks.
type RouterState struct {
	Region string // the region's name
	Router string // scheme://host:port, never a user or password
	// LastOutcome is the class of the last attempt that says something about the router:
	// "answer", "home_5xx", "shard_5xx", "never_made" or "may_have_reached"; "" before any.
	// Attempts ended by the client ("canceled") or on a keep-alive connection the router had
	// closed ("stale") are not recorded.
	LastOutcome string
	LastStatus  int       // the last answer's status; 0 when the last attempt got no answer head
	LastAt      time.Time // when the last recorded attempt ended; zero before any
	// Failures counts the attempts since the router last answered that ended in shard_5xx,
	// never_made or may_have_reached; 0 once it answers (answer or home_5xx).
	Failures int
}

// Failing reports whether the router's last recorded attempt failed.
func (s RouterState) Failing() bool { return s.Failures > 0 }

// RouterStatus returns the state of every router of the routing in force, regions in their
// order and each region's routers in order (Routers, then Discovered). Safe for concurrent use; each field is read atomically, and a
// state read while attempts end may mix fields of two of them.
func (h *Handler) RouterStatus() []RouterState {
	var out []RouterState
	rt := h.rt.Load()
	for _, id := range rt.order {
		rr := rt.byID[id]
		for _, r := range rr.routers {
			out = append(out, r.state.load(rr.st.name, r.name))
		}
	}
	return out
}

// stampEvery bounds how often lastAt is written while the outcome stays the same: the
// status page shows seconds, and routers answering thousands of requests a second should
// not have every one of them write the same cache line.
const stampEvery = int64(10 * time.Millisecond)

// routerState is one router's last attempt, written by the request path with atomics only
// (no lock, no allocation) and read by RouterStatus. Each field is written only when its
// value changes, so that a router answering steadily costs loads, not stores.
type routerState struct {
	lastOutcome atomic.Uint32 // outcome+1; 0: none recorded yet
	lastStatus  atomic.Uint32
	lastAt      atomic.Int64 // unix nanoseconds
	failures    atomic.Uint32
}

// record notes an attempt's outcome: status is its answer's status (0 without an answer head)
// and now the time it ended, in unix nanoseconds.
func (s *routerState) record(o outcome, status int, now int64) {
	var failed bool
	switch o {
	case outAnswer, outHome5xx:
	case outShard5xx, outNeverMade, outMayHaveReached:
		failed = true
	default: // outStale, outCanceled: nothing about the router's health
		return
	}
	changed := false
	if v := uint32(o) + 1; s.lastOutcome.Load() != v {
		s.lastOutcome.Store(v)
		changed = true
	}
	if v := uint32(status); s.lastStatus.Load() != v {
		s.lastStatus.Store(v)
		changed = true
	}
	if failed {
		s.failures.Add(1)
	} else if s.failures.Load() != 0 {
		s.failures.Store(0)
	}
	if changed || failed || now-s.lastAt.Load() >= stampEvery {
		s.lastAt.Store(now)
	}
}

func (s *routerState) load(region, router string) RouterState {
	st := RouterState{Region: region, Router: router,
		LastStatus: int(s.lastStatus.Load()), Failures: int(s.failures.Load())}
	if o := s.lastOutcome.Load(); o > 0 && int(o) <= len(outcomeNames) {
		st.LastOutcome = outcome(o - 1).String()
	}
	if at := s.lastAt.Load(); at != 0 {
		st.LastAt = time.Unix(0, at)
	}
	return st
}
