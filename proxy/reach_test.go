package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
)

// Every row of reachStep: only this entry's own answer ends the reach, only its own failure
// starts it, and what says nothing changes nothing.
func TestReachStep(t *testing.T) {
	const eu, us = 0, 1
	for _, tt := range []struct {
		name string
		set  uint64
		r    reach
		want uint64
	}{
		{"a failure sets the region", 0, reachFailed, 1 << eu},
		{"a failure keeps the others", 1 << us, reachFailed, 1<<eu | 1<<us},
		{"a failure again changes nothing", 1 << eu, reachFailed, 1 << eu},
		{"an answer clears the region", 1<<eu | 1<<us, reachAnswered, 1 << us},
		{"an answer of a reachable region changes nothing", 1 << us, reachAnswered, 1 << us},
		{"nothing said keeps the region unreachable", 1 << eu, reachNone, 1 << eu},
		{"nothing said keeps it reachable", 0, reachNone, 0},
	} {
		if got := reachStep(tt.set, eu, tt.r); got != tt.want {
			t.Errorf("%s: reachStep(%b, eu, %v) = %b, want %b", tt.name, tt.set, tt.r, got, tt.want)
		}
	}
}

// Every row of probeFor: a region this entry cannot reach gets a request every round, however
// recent its latency sample (a connect is no reach); a reachable one a connect when idle.
func TestProbeFor(t *testing.T) {
	const idle = 30 * time.Second
	for _, tt := range []struct {
		name                    string
		unreachable, hasRouters bool
		since                   time.Duration
		want                    probeKind
	}{
		{"unreachable, sampled just now", true, true, 0, probeAnswer},
		{"unreachable, idle", true, true, time.Hour, probeAnswer},
		{"reachable, idle", false, true, idle, probeConnect},
		{"reachable, sampled lately", false, true, idle - 1, probeNone},
		{"no router", true, false, time.Hour, probeNone},
	} {
		if got := probeFor(tt.unreachable, tt.hasRouters, tt.since, idle); got != tt.want {
			t.Errorf("%s: probeFor = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// asked counts the attempts h made at region's routers, whatever their outcome.
func asked(h *Handler, region string) int {
	n := 0.0
	for _, name := range outcomeNames {
		n += promtest.ToFloat64(h.met.m.Attempts.WithLabelValues(region, name))
	}
	return int(n)
}

// pop is one entry of a fleet in front of the env's stand-in routers: its own home table and
// handler; gossip is swap.
type pop struct {
	h     *Handler
	srv   *httptest.Server
	homes *homes.Table
}

func (e *testEnv) pop(origin string, eu []string) *pop {
	e.t.Helper()
	table, err := homes.New(homes.Config{Regions: []string{"eu", "us"}, Origin: origin, Clock: e.clock})
	if err != nil {
		e.t.Fatal(err)
	}
	rt := e.routingWith(func(r *Routing) {
		r.Regions[0].Routers = nil
		for _, a := range eu {
			r.Regions[0].Routers = append(r.Regions[0].Routers, mustParse(e.t, "http://"+a))
		}
	})
	lg := zerolog.New(e.logs).Level(zerolog.InfoLevel)
	h, err := New(Config{Regions: rt.Regions, DefaultRegion: "us", Homes: table, Clock: e.clock,
		AnswerTimeout: 300 * time.Millisecond, DialTimeout: 300 * time.Millisecond, Logger: &lg})
	if err != nil {
		e.t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	srv.Client().Timeout = testRequestTimeout
	e.t.Cleanup(func() { srv.Close(); h.Close() })
	return &pop{h: h, srv: srv, homes: table}
}

// do sends one request through the pop and returns its status.
func (p *pop) do(t *testing.T, method, path string) int {
	t.Helper()
	req, err := http.NewRequest(method, p.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Body = http.NoBody
	}
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// gossip carries every mark and clear between the pops' tables, both ways.
func gossip(ps ...*pop) {
	for _, a := range ps {
		for _, b := range ps {
			if a != b {
				for _, m := range a.homes.Marks() {
					b.homes.ApplyMark(m)
				}
			}
		}
	}
}

// This entry's own reach, case by case, with the injected clock. acme lives in eu; us relays
// to eu whatever the entry's own path to eu does. In each row the entry's first read into the
// cut pays the failure and is answered through us; from then on every request, read or plain
// write, asks eu last, though us's relayed answers clear eu's fleet mark at once and the read
// backoff passes, until the entry's own probe reaches a router of eu. Without the reach, the
// relayed answer sends the next request back into the cut (and after the backoff, the region
// down everywhere too): every row fails.
func TestOwnReach(t *testing.T) {
	// slow answers with Fenec-Shard after 5 s: past the answer timeout (300 ms here).
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(5 * time.Second):
		}
		w.Header().Set("Fenec-Shard", "1")
	}))
	defer slow.Close()

	tests := map[string]struct {
		setup func(t *testing.T, e *testEnv) (cut []*pop, heal func())
		// status of the reads (no item) and plain writes asked while the cut holds: eu's
		// routers answer through us, or (down everywhere) us's own 502 naming the home
		status, writeStatus int
	}{
		"refused": {setup: func(t *testing.T, e *testEnv) ([]*pop, func()) {
			l0, l1 := testutil.NewLink(t, e.router("eu", 0)), testutil.NewLink(t, e.router("eu", 1))
			p := e.pop("fra", []string{l0.Addr, l1.Addr})
			return []*pop{p}, func() { l0.Set(t, testutil.LinkRefused); l1.Set(t, testutil.LinkRefused) }
		}, status: 404, writeStatus: 201},
		"black hole: accepted, never answered": {setup: func(t *testing.T, e *testEnv) ([]*pop, func()) {
			l0 := testutil.NewLink(t, e.router("eu", 0))
			p := e.pop("fra", []string{l0.Addr})
			return []*pop{p}, func() { l0.Set(t, testutil.LinkBlackhole) }
		}, status: 404, writeStatus: 201},
		"answer timeout": {setup: func(t *testing.T, e *testEnv) ([]*pop, func()) {
			p := e.pop("fra", []string{slow.Listener.Addr().String()})
			return []*pop{p}, func() {}
		}, status: 404, writeStatus: 201},
		"down everywhere": {setup: func(t *testing.T, e *testEnv) ([]*pop, func()) {
			p := e.pop("fra", []string{e.router("eu", 0), e.router("eu", 1)})
			return []*pop{p}, func() { e.fault("eu", 0, "refuse"); e.fault("eu", 1, "refuse") }
		}, status: 502, writeStatus: 502},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			ps, cut := tt.setup(t, e)
			p := ps[0]
			if st := p.do(t, "GET", "/t/acme/items/0"); st != 404 { // learns the home, eu, through us (no item 0)
				t.Fatalf("learning acme: %d", st)
			}
			cut()
			if st := p.do(t, "GET", "/t/acme/items/0"); st != tt.status {
				t.Fatalf("first read into the cut: %d, want %d", st, tt.status)
			}
			if !p.h.Unreachable(euID) {
				t.Fatal("eu not unreachable from here after this entry's own attempt failed")
			}
			euAsked := asked(p.h, "eu")
			for i, m := range []string{"GET", "POST", "GET", "POST", "GET"} {
				e.clock.Advance(4 * time.Second) // past the read backoff by the third
				want := tt.status
				if m == "POST" {
					want = tt.writeStatus
				}
				if st := p.do(t, m, map[string]string{"GET": "/t/acme/items/0", "POST": "/t/acme/items"}[m]); st != want {
					t.Errorf("request %d (%s) during the cut: %d, want %d", i, m, st, want)
				}
				if n := asked(p.h, "eu"); n != euAsked {
					t.Fatalf("request %d (%s), %v after the failure: asked eu first (attempts %d -> %d); want eu last until this entry reaches it",
						i, m, 4*time.Second*time.Duration(i+1), euAsked, n)
				}
			}
			p.h.Probe(context.Background(), time.Minute)
			if !p.h.Unreachable(euID) {
				t.Error("a probe into the cut ended the reach")
			}
			if p.homes.Marked(euID, homes.Lenient) {
				t.Error("eu marked for reads after a failed probe: a probe marks nothing in the fleet")
			}
			if got := promtest.ToFloat64(p.h.met.m.Probes); got < 1 {
				t.Errorf("%v probes of the unreachable region", got)
			}
		})
	}

	// Healed: the cut ends, and the next probe (not a client's request) reaches eu: eu is asked
	// first again. Without the probe's request (a connect only, or no probe) it stays last.
	t.Run("healed", func(t *testing.T) {
		e := newEnv(t)
		l := testutil.NewLink(t, e.router("eu", 0))
		p := e.pop("fra", []string{l.Addr})
		p.do(t, "GET", "/t/acme/items/0")
		l.Set(t, testutil.LinkRefused)
		p.do(t, "GET", "/t/acme/items/0")
		e.clock.Advance(time.Minute)
		before := asked(p.h, "eu")
		p.do(t, "GET", "/t/acme/items/0")
		if asked(p.h, "eu") != before || !p.h.Unreachable(euID) {
			t.Fatal("the cut region was asked first before any probe reached it")
		}
		l.Set(t, testutil.LinkUp)
		p.do(t, "GET", "/t/acme/items/0")
		if asked(p.h, "eu") != before {
			t.Fatal("a client's request was the probe: asked eu first before the probe")
		}
		p.h.Probe(context.Background(), time.Minute)
		if p.h.Unreachable(euID) {
			t.Fatal("the probe reached eu's router but eu is still unreachable from here")
		}
		usBefore := asked(p.h, "us")
		if st := p.do(t, "GET", "/t/acme/items/0"); st != 404 || asked(p.h, "eu") != before+1 || asked(p.h, "us") != usBefore {
			t.Errorf("after the heal and one probe: %d, eu attempts +%d, us +%d; want eu asked first and answering",
				st, asked(p.h, "eu")-before, asked(p.h, "us")-usBefore)
		}
	})

	// A cut seen by two PoPs: fra and par both cut from eu, ams not. Their failures and every
	// relayed clear travel the fleet. ams keeps asking eu first; fra heals and asks it first
	// again; par, still cut, keeps asking it last although fra's and ams's answers clear eu
	// everywhere: the reach is each entry's own.
	t.Run("a cut seen by two PoPs", func(t *testing.T) {
		e := newEnv(t)
		lf, lp := testutil.NewLink(t, e.router("eu", 0)), testutil.NewLink(t, e.router("eu", 0))
		fra, par := e.pop("fra", []string{lf.Addr}), e.pop("par", []string{lp.Addr})
		ams := e.pop("ams", []string{e.router("eu", 0), e.router("eu", 1)})
		fleet := []*pop{fra, par, ams}
		for _, p := range fleet {
			p.do(t, "GET", "/t/acme/items/0")
		}
		lf.Set(t, testutil.LinkRefused)
		lp.Set(t, testutil.LinkRefused)
		fra.do(t, "GET", "/t/acme/items/0")
		par.do(t, "GET", "/t/acme/items/0")
		gossip(fleet...)
		if !fra.h.Unreachable(euID) || !par.h.Unreachable(euID) || ams.h.Unreachable(euID) {
			t.Fatalf("unreachable from fra %v, par %v, ams %v; want fra and par only",
				fra.h.Unreachable(euID), par.h.Unreachable(euID), ams.h.Unreachable(euID))
		}
		amsEU := asked(ams.h, "eu")
		ams.do(t, "GET", "/t/acme/items/0") // the fleet mark, if still live, sends it through us once
		gossip(fleet...)
		for range 3 {
			e.clock.Advance(4 * time.Second)
			for _, p := range fleet {
				p.do(t, "GET", "/t/acme/items/0")
			}
			gossip(fleet...)
		}
		if n := asked(ams.h, "eu") - amsEU; n < 3 {
			t.Errorf("ams, not cut, asked eu %d times in its last 4 requests; want eu first", n)
		}
		lf.Set(t, testutil.LinkUp)
		fraEU, parEU := asked(fra.h, "eu"), asked(par.h, "eu")
		fra.h.Probe(context.Background(), time.Minute)
		par.h.Probe(context.Background(), time.Minute)
		if fra.h.Unreachable(euID) || !par.h.Unreachable(euID) {
			t.Fatalf("after fra's heal: unreachable from fra %v, par %v; want par only", fra.h.Unreachable(euID), par.h.Unreachable(euID))
		}
		fra.do(t, "GET", "/t/acme/items/0")
		par.do(t, "GET", "/t/acme/items/0")
		gossip(fleet...)
		par.do(t, "GET", "/t/acme/items/0")
		if asked(fra.h, "eu") != fraEU+1 {
			t.Error("fra, healed, did not ask eu first")
		}
		if asked(par.h, "eu") != parEU {
			t.Error("par, still cut, asked eu after fra's answers cleared eu in the fleet")
		}
	})
}

// A plain write that may have run is still never sent twice: the cut entry's first plain write
// into a black hole is answered may_have_run and applied nowhere, and the next, asking eu last,
// is applied once, in eu, through us.
func TestOwnReachWritesStaySafe(t *testing.T) {
	e := newEnv(t)
	l := testutil.NewLink(t, e.router("eu", 0))
	p := e.pop("fra", []string{l.Addr})
	p.do(t, "GET", "/t/acme/items/0")
	l.Set(t, testutil.LinkBlackhole)
	if st := p.do(t, "POST", "/t/acme/items"); st != http.StatusBadGateway {
		t.Fatalf("plain write into the black hole: %d, want 502 may_have_run", st)
	}
	if !p.h.Unreachable(euID) {
		t.Fatal("a write that may have run left eu reachable from here")
	}
	e.clock.Advance(time.Minute)
	if st := p.do(t, "POST", "/t/acme/items"); st != http.StatusCreated {
		t.Fatalf("next plain write: %d, want 201 through us", st)
	}
	if n := len(e.applies("acme")); n != 1 {
		t.Errorf("%d writes applied, want 1 (the second; the first never reached eu)", n)
	}
}

const euID = 0 // the env's first region
