package testutil

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Interval is how often Eventually looks again.
const Interval = 10 * time.Millisecond

// Eventually calls cond every Interval, on the calling goroutine, until it returns true,
// and returns how long that took. If cond has not held within the given time, it fails t
// with t.Fatalf, naming what it waited for: "not within 5s: the cluster formed".
//
// cond is called once more at the deadline, so a condition that holds by then passes. cond
// may itself call t.Fatal to stop at once (for example when a process it waits on exits).
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return EventuallyEvery(t, within, Interval, what, cond)
}

// EventuallyEvery is Eventually looking again every interval instead of every Interval:
// longer for a condition that is costly to check (an HTTP status page), shorter where a
// test measures how soon something happens.
func EventuallyEvery(t testing.TB, within, interval time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	took, err := poll(ctx, interval, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
	if err != nil {
		t.Fatalf("not within %v: %s", within, what)
	}
	return took
}

// errNotYet is the reason Eventually's conditions give for not holding; it is never shown.
var errNotYet = errors.New("not yet")

// Poll calls check every interval, on the calling goroutine, until it returns nil, and
// returns how long that took. Once ctx ends it calls check a last time and, if that fails
// too, returns an error that names what it waited for, ctx's error (wrapped, for errors.Is)
// and check's last error, which should say what is still missing:
// "cluster whole: context deadline exceeded after 30s: b: ready false".
//
// Poll never fails a test by itself: it is for waits whose caller goes on after a timeout
// (to report more, or to record a failed run) or polls off the test's goroutine.
func Poll(ctx context.Context, interval time.Duration, what string, check func() error) (time.Duration, error) {
	took, err := poll(ctx, interval, check)
	if err != nil {
		return took, fmt.Errorf("%s: %w", what, err)
	}
	return took, nil
}

// poll is the loop of Eventually and Poll. Its error wraps ctx's and check's last one.
func poll(ctx context.Context, interval time.Duration, check func() error) (time.Duration, error) {
	start := time.Now()
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		err := check()
		if err == nil {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			if err = check(); err == nil {
				return time.Since(start), nil
			}
			took := time.Since(start)
			return took, fmt.Errorf("%w after %v: %w", ctx.Err(), took.Round(time.Millisecond), err)
		case <-timer.C:
			timer.Reset(interval)
		}
	}
}
