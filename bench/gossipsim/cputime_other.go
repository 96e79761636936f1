//go:build !unix

package main

import "time"

// cpuTime is 0 here (no getrusage): the report's CPU figures read 0.
func cpuTime() time.Duration { return 0 }
