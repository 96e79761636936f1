package h1

import (
	"io"
	"net/http"
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
func TestWokenConnectionsReuseWorkers(t *testing.T) { eachPoller(t, testWokenConnectionsReuseWorkers) }

func testWokenConnectionsReuseWorkers(t *testing.T, pk testPoller) {
	s := &Server{Handler: http.HandlerFunc(okHandler)}
	addr := pk.start(t, s)
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
