package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// A pooled router connection is reused until it has been idle IdleTimeout by Config.Clock,
// then closed and a fresh one dialled. Driven by a fake clock: the test waits on no timer.
func TestIdleTimeoutOnTheClock(t *testing.T) {
	var conns atomic.Int32
	router := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fenec-Shard", "1")
		w.Write([]byte("ok"))
	}))
	router.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	router.Start()
	defer router.Close()
	clk := testutil.NewClock(time.Unix(1_800_000_000, 0))
	srv, h := entryWith(t, func(c *Config) { c.Clock = clk; c.IdleTimeout = time.Minute }, router.URL)
	for _, step := range []struct {
		idle  time.Duration // by the fake clock, since the last request
		conns int32         // connections the router has seen after the request
	}{
		{0, 1},
		{59 * time.Second, 1}, // reused
		{61 * time.Second, 2}, // too old: closed, a fresh one dialled
		{0, 2},
	} {
		clk.Advance(step.idle)
		resp, err := srv.Client().Get(srv.URL + "/t/acme/x")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("after %v idle: status %d", step.idle, resp.StatusCode)
		}
		if n := conns.Load(); n != step.conns {
			t.Errorf("after %v idle (IdleTimeout 1m): the router has seen %d connections, want %d", step.idle, n, step.conns)
		}
		waitIdle(t, h)
	}
}

// Fenec-Client timestamps and RouterStatus's LastAt read Config.Clock.
func TestClockStampsMarksAndRouterState(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	clk := testutil.NewClock(at)
	e := newEnv(t, withEntryToken("tok-clock"), withConfig(func(c *Config) { c.Clock = clk }))
	ec := decodeEcho(t, e.do("GET", "/t/acme/echo", nil, ""))
	if v := ec.header("Fenec-Client"); len(v) != 1 || strings.Split(v[0], " ")[1] != "1700000000" {
		t.Errorf("Fenec-Client = %q, want the fake clock's 1700000000", v)
	}
	answered := 0
	for _, s := range e.h.RouterStatus() {
		if s.LastOutcome == "" {
			continue
		}
		answered++
		if !s.LastAt.Equal(at) {
			t.Errorf("%s: LastAt %v, want the fake clock's %v", s.Router, s.LastAt, at)
		}
	}
	if answered == 0 {
		t.Error("no router recorded the attempt")
	}
}

// The latency windows run on Config.Clock: a sample is stamped with its time, counts for two
// windows of that clock, and Probe finds a region idle by it. The samples themselves are real
// connects, measured on the system clock.
func TestLatencyOnTheClock(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	clk := testutil.NewClock(at)
	e := newEnv(t, withConfig(func(c *Config) { c.Clock = clk }))
	probes := func() float64 { return promtest.ToFloat64(e.h.met.m.Probes) }
	measured := func() (n int) {
		for _, l := range e.h.Latencies() {
			if l.Measured {
				n++
			}
		}
		return n
	}
	e.h.Probe(context.Background(), time.Minute)
	for _, l := range e.h.Latencies() {
		if !l.Measured || !l.LastAt.Equal(at) {
			t.Errorf("%s after a probe: %+v, want measured at the fake clock's %v", l.Region, l, at)
		}
	}
	clk.Advance(time.Minute - time.Second)
	e.h.Probe(context.Background(), time.Minute)
	if got := probes(); got != 2 {
		t.Errorf("%v probes after 59 s of the clock, want still the first 2 (idle is 1 m)", got)
	}
	if n := measured(); n != 2 {
		t.Errorf("%d regions measured 59 s after their samples, want 2 (a sample counts two 30 s windows)", n)
	}
	clk.Advance(2 * time.Second)
	if n := measured(); n != 0 {
		t.Errorf("%d regions measured 61 s after their samples, want 0", n)
	}
	e.h.Probe(context.Background(), time.Minute)
	if got := probes(); got != 4 {
		t.Errorf("%v probes after 61 s of the clock, want 4 (both regions idle again)", got)
	}
}
