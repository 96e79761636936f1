//go:build !unix

package procs

import "time"

// Supported: here the process's CPU time is not read (no getrusage), so the Ps cannot follow
// the load: the command leaves GOMAXPROCS to Go (cmd/fenec-entry's adaptProcs).
const Supported = false

// processCPUTime is 0 here; a Controller is never run where Supported is false.
func processCPUTime() time.Duration { return 0 }
