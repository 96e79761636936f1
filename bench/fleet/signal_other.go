//go:build !unix

package main

import "os"

// No SIGSTOP here: the failure-detection step kills the entry instead, and resuming it is a
// no-op (the fleet itself needs Linux: lab/wan; this keeps the module building).
var sigStop, sigCont os.Signal = os.Kill, os.Interrupt
