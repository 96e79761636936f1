//go:build unix

package procs

import (
	"syscall"
	"time"
)

// Supported: the process's CPU time can be read here, so the Ps can follow the load.
const Supported = true

// processCPUTime is the process's user and system CPU time so far (getrusage).
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
