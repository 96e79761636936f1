// Package clock is how the module tells time: Clock, the time source every package that
// tells time takes through its Config (a nil Clock there means System), and System, the wall
// clock. It is the only package that reads the wall clock; a test walks the module and fails
// on any time.Now, time.Since or time.Until elsewhere. Tests drive time with the fake in
// internal/testutil (testutil.Clock), which moves only when told.
//
// It knows nothing of the packages that use it.
package clock

import "time"

// Clock tells the time. Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
}

// System is the wall clock: its Now is time.Now, monotonic reading included. It is the
// default of every Config's Clock, and the clock of the few readings only the wall clock can
// serve: socket deadlines (the kernel keeps them), durations of real work (a fake clock would
// see it take no time), and stamps other processes compare.
var System system

type system struct{}

// Now returns time.Now().
func (system) Now() time.Time { return time.Now() }
