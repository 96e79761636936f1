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

func TestFunc(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	var c clock.Clock = clock.Func(func() time.Time { return at })
	if got := c.Now(); !got.Equal(at) {
		t.Errorf("Func(f).Now() = %v, want f's %v", got, at)
	}
}
