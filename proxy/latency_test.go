package proxy

import (
	"context"
	"net/http"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

func TestLatencyWindowedMinimum(t *testing.T) {
	var l latency
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	at := func(d time.Duration) int64 { return int64(time.Hour) + int64(d) }
	if _, ok := l.estimate(at(0)); ok {
		t.Fatal("an estimate before any sample")
	}
	l.observe(ms(40), at(0))
	l.observe(ms(30), at(time.Second))
	l.observe(30*time.Second, at(2*time.Second)) // a held write: the minimum ignores it
	if e, _ := l.estimate(at(3 * time.Second)); e != ms(30) {
		t.Errorf("within one window: %v, want 30ms", e)
	}
	// The next window: the route got slower; the old minimum counts one window more.
	l.observe(ms(80), at(31*time.Second))
	if e, _ := l.estimate(at(32 * time.Second)); e != ms(30) {
		t.Errorf("one window on: %v, want the previous window's 30ms", e)
	}
	l.observe(ms(90), at(62*time.Second))
	if e, _ := l.estimate(at(63 * time.Second)); e != ms(80) {
		t.Errorf("two windows on: %v, want 80ms (30ms forgotten)", e)
	}
	// No sample for two windows: no estimate.
	if _, ok := l.estimate(at(125 * time.Second)); ok {
		t.Error("an estimate two silent windows after the last sample")
	}
	l.observe(ms(50), at(200*time.Second))
	if e, _ := l.estimate(at(201 * time.Second)); e != ms(50) {
		t.Errorf("after a silence: %v, want the new 50ms alone", e)
	}
}

// With LatencyChoice, a tenant heard nowhere goes first to a region clearly closer than the
// default; close ones (within the margins) leave the default in place; a continent mapping
// still wins; a tenant with a home goes home.
func TestLatencyChoice(t *testing.T) {
	e := newEnv(t, withConfig(func(c *Config) { c.LatencyChoice = true; c.DefaultRegion = "us" }))
	rt := e.h.rt.Load()
	eu, us := rt.byID[0].st, rt.byID[1].st
	// Requests measure the regions they reach: us (the default) answers first.
	e.do("GET", "/_x", nil, "")
	if _, ok := us.lat.estimate(time.Now().UnixNano()); !ok {
		t.Fatal("an answer from us left it unmeasured")
	}
	// Latencies as a distant us and a near eu would give (loopback cannot).
	us.lat.reset()
	us.lat.observe(60*time.Millisecond, time.Now().UnixNano())
	eu.lat.observe(time.Millisecond, time.Now().UnixNano())
	e.h.choose(rt)
	if got := e.h.closest.Load(); got != 0 {
		t.Fatalf("closest %d, want eu (0)", got)
	}
	euBefore := e.direct("eu")
	e.do("GET", "/t/umbrella/items/1", nil, "") // heard nowhere, home us
	if e.direct("eu") != euBefore+1 {
		t.Error("a tenant heard nowhere did not go to the closer region first")
	}
	// A tenant with a home goes home, whatever the latency.
	e.learn("globex")
	usBefore := e.direct("us")
	e.do("GET", "/t/globex/items/1", nil, "")
	if e.direct("us") != usBefore+1 {
		t.Error("a tenant with a home did not go home")
	}

	// Within the margins nothing moves: eu at 50 against us at 60 (not 20% better).
	rt.byID[0].st.lat.reset() // no request runs meanwhile
	rt.byID[1].st.lat.reset()
	n := time.Now().UnixNano()
	rt.byID[0].st.lat.observe(50*time.Millisecond, n)
	rt.byID[1].st.lat.observe(60*time.Millisecond, n)
	e.h.choose(rt)
	if got := e.h.closest.Load(); got != -1 {
		t.Errorf("closest %d with eu 50ms against us 60ms, want -1 (the default)", got)
	}
}

func TestLatencyChoiceOff(t *testing.T) {
	e := newEnv(t, withConfig(func(c *Config) { c.DefaultRegion = "us" }))
	rt := e.h.rt.Load()
	n := time.Now().UnixNano()
	rt.byID[0].st.lat.observe(time.Millisecond, n)
	rt.byID[1].st.lat.observe(200*time.Millisecond, n)
	e.h.choose(rt)
	if got := e.h.closest.Load(); got != -1 {
		t.Errorf("closest %d without LatencyChoice", got)
	}
}

// A continent mapping wins over latency.
func TestLatencyChoiceAfterContinent(t *testing.T) {
	e := newEnv(t, withConfig(func(c *Config) {
		c.LatencyChoice = true
		c.DefaultRegion = "us"
		c.Continents = map[string]string{"NA": "us"}
		c.ClientContinent = func(*http.Request, string) string { return "NA" }
	}))
	rt := e.h.rt.Load()
	n := time.Now().UnixNano()
	rt.byID[0].st.lat.observe(time.Millisecond, n)
	rt.byID[1].st.lat.observe(200*time.Millisecond, n)
	e.h.choose(rt)
	usBefore := e.direct("us")
	e.do("GET", "/t/acme/items/1", nil, "")
	if e.direct("us") != usBefore+1 {
		t.Error("a mapped continent's region was not asked first")
	}
}

// Probe connects to the regions no sample reached lately, and only to those.
func TestProbe(t *testing.T) {
	e := newEnv(t)
	e.h.Probe(context.Background(), time.Minute)
	if got := promtest.ToFloat64(e.h.met.m.Probes); got != 2 {
		t.Fatalf("%v probes of two unmeasured regions, want 2", got)
	}
	for _, l := range e.h.Latencies() {
		if !l.Measured || l.LastAt.IsZero() {
			t.Errorf("%s not measured by the probe: %+v", l.Region, l)
		}
	}
	e.do("GET", "/t/acme/items/1", nil, "")
	e.h.Probe(context.Background(), time.Minute)
	if got := promtest.ToFloat64(e.h.met.m.Probes); got != 2 {
		t.Errorf("%v probes after every region had a recent sample, want still 2", got)
	}
}

func (l *latency) reset() {
	l.start.Store(0)
	l.cur.Store(0)
	l.prev.Store(0)
	l.lastAt.Store(0)
}
