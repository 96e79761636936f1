package h1

import (
	"context"
	"sync"
	"time"
)

// reqCtx is a request's context: canceled when the client leaves (the poller saw it hang up)
// or when the request's answer is finished; otherwise context.Background's (no deadline, no
// values). It stands in for context.WithCancel because of its AfterFunc method, which
// context.AfterFunc uses (and context.WithCancel for a child, and so on): the proxy's "close
// the router connection when the client leaves" then costs one small record, not a
// cancelCtx, a goroutine-ready afterFuncCtx and their channels (about seven of a request's
// allocations; docs/BENCHMARKS.md).
type reqCtx struct {
	mu   sync.Mutex
	done chan struct{} // made by the first Done, or closed at cancel
	err  error
	one  afterFunc    // the first AfterFunc (the proxy's, usually the only one)
	fns  []*afterFunc // the others
}

type afterFunc struct {
	ctx   *reqCtx
	f     func()
	state uint8 // afterWaiting, afterStarted, afterStopped
}

const (
	afterWaiting = iota
	afterStarted
	afterStopped
)

var closedDone = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

func (c *reqCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *reqCtx) Value(any) any               { return nil }

func (c *reqCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *reqCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc is context.AfterFunc's contract: f runs in its own goroutine once c is canceled
// (at once if it is already); stop keeps it from running and reports whether it did.
func (c *reqCtx) AfterFunc(f func()) (stop func() bool) { return c.afterFunc(f).stop }

// OnCancel is AfterFunc with stop as a method of the record c keeps for f, not a func value
// made for it: the first (the proxy's, usually the only one) allocates nothing.
func (c *reqCtx) OnCancel(f func()) interface{ Stop() bool } { return c.afterFunc(f) }

func (c *reqCtx) afterFunc(f func()) *afterFunc {
	c.mu.Lock()
	var a *afterFunc
	if c.one.ctx == nil {
		a = &c.one
		a.ctx, a.f = c, f
	} else {
		a = &afterFunc{ctx: c, f: f}
		c.fns = append(c.fns, a)
	}
	if c.err != nil {
		a.state = afterStarted
		c.mu.Unlock()
		go f()
		return a
	}
	c.mu.Unlock()
	return a
}

// Stop is stop, for OnCancel.
func (a *afterFunc) Stop() bool { return a.stop() }

func (a *afterFunc) stop() bool {
	a.ctx.mu.Lock()
	defer a.ctx.mu.Unlock()
	if a.state != afterWaiting {
		return false
	}
	a.state = afterStopped
	return true
}

// cancel cancels c (context.Canceled) and starts the functions waiting for it. Idempotent.
func (c *reqCtx) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	if c.done == nil {
		c.done = closedDone
	} else {
		close(c.done)
	}
	var run []func()
	if c.one.ctx != nil && c.one.state == afterWaiting {
		c.one.state = afterStarted
		run = append(run, c.one.f)
	}
	for _, a := range c.fns {
		if a.state == afterWaiting {
			a.state = afterStarted
			run = append(run, a.f)
		}
	}
	c.mu.Unlock()
	for _, f := range run {
		go f()
	}
}
