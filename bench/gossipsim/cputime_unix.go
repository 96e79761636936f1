//go:build unix

package main

import (
	"syscall"
	"time"
)

// cpuTime is the process's user and system CPU time so far (getrusage).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
