package clock_test

import (
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

func TestSystem(t *testing.T) {
	var c clock.Clock = clock.System
	before := time.Now()
	got := c.Now()
	after := time.Now()
	if got.Before(before) || got.After(after) {
		t.Errorf("System.Now() = %v, not between %v and %v", got, before, after)
	}
	if got.Round(0) == got {
		t.Errorf("System.Now() = %v has no monotonic reading", got)
	}
}
