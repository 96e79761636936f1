package h1

import (
	"os"
	"sync/atomic"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

// A busy connection's goroutine that must wait for its socket (epoll's: sock_linux.go) waits on
// a waitPoint of its connection, which dispatch notifies on the poller's event, as Go's
// netpoller wakes a net.Conn's reader. The portable poller's sockets wait in Go's netpoller
// instead, and leave these alone.

// waiter is what the goroutine serving a connection blocks on while its socket is not ready,
// kept in the session: an idle connection holds none.
type waiter struct {
	ch    chan struct{} // buffered: notify never blocks
	timer *time.Timer   // for a deadline; made at first use
}

// readyMark, in a waitPoint: an event came while no one waited.
var readyMark = &waiter{}

// waitPoint is one direction's readiness, between the poller and the goroutine serving the
// connection (Go's pollDesc rg and wg): nil, readyMark, or the waiter blocked on it. Only
// the notify that takes a waiter out sends it its wake, so a waiter gets one per wait.
type waitPoint struct{ p atomic.Pointer[waiter] }

// notify is the poller's, on an event (and kill's): it wakes the waiter, or leaves the mark
// for the next wait. woke: a waiter was woken.
func (w *waitPoint) notify() (woke bool) {
	old := w.p.Swap(readyMark)
	if old == nil || old == readyMark {
		return false
	}
	old.ch <- struct{}{}
	return true
}

var errTimeout = os.ErrDeadlineExceeded

// wait blocks wt until notify or the deadline (Unix ns; 0: none): nil, the socket may be
// ready (try again); errTimeout, the deadline passed first. An event that came since the
// last wait returns at once.
func (w *waitPoint) wait(wt *waiter, deadline int64) error {
	var d time.Duration
	if deadline != 0 {
		if d = time.Unix(0, deadline).Sub(clock.System.Now()); d <= 0 {
			return errTimeout
		}
	}
	if !w.p.CompareAndSwap(nil, wt) { // the mark: an event came meanwhile
		w.p.CompareAndSwap(readyMark, nil)
		return nil
	}
	if deadline == 0 {
		<-wt.ch
		w.p.CompareAndSwap(readyMark, nil)
		return nil
	}
	if wt.timer == nil {
		wt.timer = time.NewTimer(d)
	} else {
		wt.timer.Reset(d)
	}
	select {
	case <-wt.ch:
		wt.timer.Stop()
		w.p.CompareAndSwap(readyMark, nil)
		return nil
	case <-wt.timer.C:
	}
	if w.p.CompareAndSwap(wt, nil) {
		return errTimeout
	}
	<-wt.ch // notify took wt out as the deadline passed: its wake is on the way
	w.p.CompareAndSwap(readyMark, nil)
	return nil
}
