//go:build linux

package h1

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A connection woken for each of its requests is served by a kept goroutine, not a new one
// each time (whose stack would grow again down the request path).
func TestWokenConnectionsReuseWorkers(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(okHandler)}
	addr := startLean(t, s)
	c, br := dial(t, addr)
	const requests = 50
	before := goroutinesCreated()
	for range requests {
		resp := get(t, c, br, "/")
		io.Copy(io.Discard, resp.Body)
		time.Sleep(2 * time.Millisecond) // the connection parks between requests
	}
	if made := goroutinesCreated() - before; made > requests/5 {
		t.Fatalf("%d goroutines created for %d requests, each after a park: want the worker kept", made, requests)
	}
	if s.IdleWorkers() < 1 {
		t.Fatalf("IdleWorkers = %d after the requests, want the worker kept", s.IdleWorkers())
	}
}

func TestWorkersBoundAndAgeOut(t *testing.T) {
	var p workers
	ws := make([]*worker, MaxIdleWorkers+1)
	for i := range ws {
		ws[i] = &worker{ch: make(chan *conn, 1)}
		ok := p.park(ws[i])
		if want := i < MaxIdleWorkers; ok != want {
			t.Fatalf("park #%d = %v, want %v (at most MaxIdleWorkers idle)", i+1, ok, want)
		}
	}
	if n := p.idleCount(); n != MaxIdleWorkers {
		t.Fatalf("idle = %d, want %d", n, MaxIdleWorkers)
	}
	// The first half idled long ago: clean lets them go (nil), oldest first, keeps the rest.
	p.mu.Lock()
	old := time.Now().Add(-2 * workerIdleTimeout)
	for _, w := range p.idle[:MaxIdleWorkers/2] {
		w.idleSince = old
	}
	p.mu.Unlock()
	p.clean()
	for i, w := range ws[:MaxIdleWorkers] {
		select {
		case c := <-w.ch:
			if i >= MaxIdleWorkers/2 || c != nil {
				t.Fatalf("worker #%d told %v, want only the aged ones told to exit", i+1, c)
			}
		default:
			if i < MaxIdleWorkers/2 {
				t.Fatalf("aged worker #%d was not told to exit", i+1)
			}
		}
	}
	if n := p.idleCount(); n != MaxIdleWorkers-MaxIdleWorkers/2 {
		t.Fatalf("idle after clean = %d, want %d", n, MaxIdleWorkers-MaxIdleWorkers/2)
	}
	p.close()
	if n := p.idleCount(); n != 0 {
		t.Fatalf("idle after close = %d, want 0", n)
	}
	for _, w := range ws[MaxIdleWorkers/2 : MaxIdleWorkers] {
		select {
		case c := <-w.ch:
			if c != nil {
				t.Fatal("close sent a connection")
			}
		default:
			t.Fatal("close did not tell an idle worker to exit")
		}
	}
	if p.park(&worker{ch: make(chan *conn, 1)}) {
		t.Fatal("park after close = true, want the worker to exit")
	}
}

// With more than one P, the goroutine that polled serves the connection its batch's last
// event woke, having handed the poller's role on (leader/follower); with one, every woken
// connection goes to a worker. Either way each request is answered.
func TestPollerServesTheLastWokenConnection(t *testing.T) {
	for _, procs := range []int{2, 1} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			s := &Server{Handler: http.HandlerFunc(okHandler)}
			addr := startLean(t, s)
			c, br := dial(t, addr)
			const requests = 20
			for range requests {
				resp := get(t, c, br, "/")
				io.Copy(io.Discard, resp.Body)
				time.Sleep(5 * time.Millisecond) // the connection parks between requests
			}
			leads := s.LeaderServed()
			// Each request comes after its connection parked, alone in its batch; a slow
			// machine may still be parking it when the next comes (served without a wake).
			if procs > 1 && leads < requests/2 {
				t.Errorf("the poller served %d of %d woken connections itself, want (nearly) all", leads, requests)
			}
			if procs == 1 && leads != 0 {
				t.Errorf("the poller served %d connections itself under one P, want none", leads)
			}
		})
	}
}

// ProcsChanged makes the poller follow GOMAXPROCS at once (package procs changes it at run
// time), not at the sweeper's next period (a second here).
func TestProcsChangedTakesEffectAtOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	s := &Server{Handler: http.HandlerFunc(okHandler)}
	addr := startLean(t, s)
	c, br := dial(t, addr)
	leads := s.LeaderServed
	serve := func(n int) {
		for range n {
			resp := get(t, c, br, "/")
			io.Copy(io.Discard, resp.Body)
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The poller is made (and reads GOMAXPROCS) when Serve starts: served from on 2 Ps first,
	// so that the change to 1 below is one it must be told of.
	serve(10)
	if leads() == 0 {
		t.Fatal("on 2 Ps the poller served no woken connection itself")
	}
	runtime.GOMAXPROCS(1)
	s.ProcsChanged()
	before := leads()
	serve(10)
	if got := leads() - before; got != 0 {
		t.Errorf("after GOMAXPROCS 1 and ProcsChanged, the poller served %d connections itself, want none", got)
	}
	runtime.GOMAXPROCS(2)
	s.ProcsChanged()
	before = leads()
	serve(20)
	if got := leads() - before; got < 10 {
		t.Errorf("after GOMAXPROCS 2 and ProcsChanged, the poller served %d of 20 woken connections itself, want (nearly) all", got)
	}
}
