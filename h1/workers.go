package h1

import (
	"sync"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

// MaxIdleWorkers bounds the goroutines kept waiting for a connection to serve. Past it, a
// goroutine that finished its connection's requests exits (as one per connection would).
const MaxIdleWorkers = 256

// workerIdleTimeout: a worker idle this long exits; the pool shrinks back after a burst.
const workerIdleTimeout = 10 * time.Second

// workers serves woken connections on goroutines kept from earlier ones. A new goroutine
// starts with a small stack and grows it, copying every frame each time, on its way down the
// request path (net/http's parser, the proxy, the router's answer): a tenth of the entry's
// CPU under load in the profile (docs/BENCHMARKS.md). A kept goroutine has grown it
// already. Idle workers are taken last in, first out, so the ones in use stay warm and the
// others age out.
type workers struct {
	// poll is the poller's role (Server.poll1): given to a worker as pollRole, it returns a
	// connection to serve once it handed the role on, or nil when the poller is closed.
	poll    func() *conn
	mu      sync.Mutex
	idle    []*worker // the last one is the most recently idle
	closed  bool
	cleaner *time.Timer
}

type worker struct {
	ch        chan *conn // one connection to serve; nil: exit
	idleSince time.Time
}

// pollRole, given to a worker instead of a connection, makes it the poller (workers.poll).
var pollRole = new(conn)

// serve runs c.serve on an idle worker, or on a new goroutine (c may be pollRole).
func (p *workers) serve(c *conn) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.ch <- c // buffered: never blocks
		return
	}
	p.mu.Unlock()
	go p.work(c)
}

func (p *workers) work(c *conn) {
	w := &worker{ch: make(chan *conn, 1)}
	for c != nil {
		if c == pollRole {
			if c = p.poll(); c == nil {
				return
			}
		}
		c.serve()
		c = nil
		if !p.park(w) {
			return
		}
		c = <-w.ch
	}
}

// park puts w on the idle list; false: w should exit (the list is full, or closed).
func (p *workers) park(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= MaxIdleWorkers {
		return false
	}
	w.idleSince = clock.System.Now()
	p.idle = append(p.idle, w)
	if p.cleaner == nil {
		p.cleaner = time.AfterFunc(workerIdleTimeout, p.clean)
	}
	return true
}

// clean lets the workers idle past workerIdleTimeout exit; they are at the list's start.
func (p *workers) clean() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleaner = nil
	cut := clock.System.Now().Add(-workerIdleTimeout)
	n := 0
	for n < len(p.idle) && !p.idle[n].idleSince.After(cut) {
		p.idle[n].ch <- nil
		n++
	}
	if n > 0 {
		rest := copy(p.idle, p.idle[n:])
		clear(p.idle[rest:])
		p.idle = p.idle[:rest]
	}
	if len(p.idle) > 0 && !p.closed {
		p.cleaner = time.AfterFunc(p.idle[0].idleSince.Add(workerIdleTimeout).Sub(clock.System.Now()), p.clean)
	}
}

// close lets every idle worker exit, and any that finishes from now on.
func (p *workers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for i, w := range p.idle {
		w.ch <- nil
		p.idle[i] = nil
	}
	p.idle = p.idle[:0]
	if p.cleaner != nil {
		p.cleaner.Stop()
		p.cleaner = nil
	}
}

// idleCount is how many workers wait for a connection.
func (p *workers) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
