package testutil

import (
	"sync"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

func TestClock(t *testing.T) {
	var zero Clock
	if !zero.Now().IsZero() {
		t.Errorf("zero Clock reads %v, want the zero time", zero.Now())
	}
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewClock(start)
	var wg sync.WaitGroup
	for range 4 { // with readers at once (run with -race)
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(400*time.Millisecond); !got.Equal(want) {
		t.Errorf("after 400 advances of 1ms: %v, want %v", got, want)
	}
}

var _ clock.Clock = (*Clock)(nil) // the fake of the one clock
