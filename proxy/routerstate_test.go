package proxy

import (
	"net/http/httptest"
	"testing"
	"time"
)

// TestRouterStatus drives real stand-in routers into each state the status page shows: a
// router that is down (never_made), one that answers, one that answers 503 with
// Fenec-Shard and no Fenec-Home (shard_5xx), and one never asked.
func TestRouterStatus(t *testing.T) {
	e := newEnv(t)
	for _, s := range e.h.RouterStatus() {
		if s.LastOutcome != "" || s.LastStatus != 0 || !s.LastAt.IsZero() || s.Failures != 0 {
			t.Fatalf("before any request: %+v", s)
		}
	}
	e.fault("eu", 0, "down")
	e.fault("us", 0, "marked_5xx_no_home")
	e.homes.Learn("acme", 0)   // eu
	e.homes.Learn("globex", 1) // us
	before := time.Now()
	acme := e.do("GET", "/t/acme/items/1", nil, "") // the stand-in's 404: no such item
	if acme.status >= 500 {
		t.Fatalf("GET acme = %d %s", acme.status, acme.body)
	}
	// A write is not sent to another region after shard_5xx: eu is left as acme left it.
	if r := e.do("POST", "/t/globex/items", nil, "{}"); r.status != 503 {
		t.Fatalf("POST globex = %d %s, want the router's 503", r.status, r.body)
	}
	after := time.Now()

	got := e.h.RouterStatus()
	if len(got) != 4 {
		t.Fatalf("RouterStatus has %d routers, want 4: %+v", len(got), got)
	}
	want := []struct {
		region, router, outcome string
		status                  int
		failing                 bool
	}{
		{"eu", "http://" + e.router("eu", 0), "never_made", 0, true},
		{"eu", "http://" + e.router("eu", 1), "answer", acme.status, false},
		{"us", "http://" + e.router("us", 0), "shard_5xx", 503, true},
		{"us", "http://" + e.router("us", 1), "", 0, false},
	}
	for i, w := range want {
		g := got[i]
		if g.Region != w.region || g.Router != w.router || g.LastOutcome != w.outcome ||
			g.LastStatus != w.status || g.Failing() != w.failing {
			t.Errorf("router %d = %+v, want %+v", i, g, w)
		}
		if w.outcome != "" && (g.LastAt.Before(before) || g.LastAt.After(after)) {
			t.Errorf("router %d last attempt at %v, not between %v and %v", i, g.LastAt, before, after)
		}
	}
}

func TestRouterStateRecord(t *testing.T) {
	type step struct {
		o      outcome
		status int
	}
	tests := []struct {
		name     string
		steps    []step
		outcome  string
		status   int
		failures int
	}{
		{"none", nil, "", 0, 0},
		{"answer", []step{{outAnswer, 200}}, "answer", 200, 0},
		{"home 5xx is an answer", []step{{outNeverMade, 0}, {outHome5xx, 502}}, "home_5xx", 502, 0},
		{"failures count", []step{{outNeverMade, 0}, {outMayHaveReached, 0}, {outShard5xx, 503}}, "shard_5xx", 503, 3},
		{"an answer resets", []step{{outNeverMade, 0}, {outNeverMade, 0}, {outAnswer, 404}}, "answer", 404, 0},
		{"stale not recorded", []step{{outAnswer, 200}, {outStale, 0}}, "answer", 200, 0},
		{"canceled not recorded", []step{{outNeverMade, 0}, {outCanceled, 0}}, "never_made", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s routerState
			for i, st := range tt.steps {
				s.record(st.o, st.status, int64(i+1)*int64(time.Second))
			}
			g := s.load("eu", "http://r")
			if g.LastOutcome != tt.outcome || g.LastStatus != tt.status || g.Failures != tt.failures {
				t.Errorf("state = %+v, want outcome %q status %d failures %d", g, tt.outcome, tt.status, tt.failures)
			}
		})
	}
}

// TestRouterStateStamp: a steady outcome writes the time at most every stampEvery; a change
// writes it at once.
func TestRouterStateStamp(t *testing.T) {
	var s routerState
	s.record(outAnswer, 200, 1000)
	s.record(outAnswer, 200, 1000+stampEvery/2)
	if got := s.lastAt.Load(); got != 1000 {
		t.Errorf("steady answer within stampEvery: lastAt %d, want 1000", got)
	}
	s.record(outAnswer, 200, 1000+stampEvery)
	if got := s.lastAt.Load(); got != 1000+stampEvery {
		t.Errorf("steady answer after stampEvery: lastAt %d, want %d", got, 1000+stampEvery)
	}
	s.record(outNeverMade, 0, 1001+stampEvery)
	if got := s.lastAt.Load(); got != 1001+stampEvery {
		t.Errorf("failure: lastAt %d, want %d", got, 1001+stampEvery)
	}
}

// TestLogAttemptAllocs pins that recording an attempt adds no allocation to the hot path:
// logAttempt for an answer (the common case) allocates nothing.
func TestLogAttemptAllocs(t *testing.T) {
	h := benchHandler(t)
	r := httptest.NewRequest("GET", "/t/acme/items/1", nil)
	x := &exchange{rt: h.rt.Load(), tenant: "acme"}
	rt := h.rt.Load().byID[0].routers[0]
	at := attemptResult{out: outAnswer}
	if n := testing.AllocsPerRun(1000, func() { h.logAttempt(r, x, rt, at, actDeliver) }); n != 0 {
		t.Errorf("logAttempt of an answer: %v allocations, want 0", n)
	}
	var s routerState
	now := int64(0)
	if n := testing.AllocsPerRun(1000, func() { now += stampEvery; s.record(outNeverMade, 0, now) }); n != 0 {
		t.Errorf("record: %v allocations, want 0", n)
	}
}

// BenchmarkRouterStateRecord is the cost recording adds to every attempt, with every
// goroutine recording answers of one router (the contended case).
func BenchmarkRouterStateRecord(b *testing.B) {
	var s routerState
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.record(outAnswer, 200, time.Now().UnixNano())
		}
	})
}
