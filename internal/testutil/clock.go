package testutil

import (
	"sync"
	"time"
)

// Clock is the fake clock.Clock, the module's one: it moves only when told, so that a
// time-based behaviour is tested by advancing it, never by sleeping. The zero value reads
// the zero time; NewClock starts it elsewhere. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

// NewClock returns a Clock that reads start until advanced.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the time the clock was last set to.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d (back, if d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
