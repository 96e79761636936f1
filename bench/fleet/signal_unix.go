//go:build unix

package main

import "syscall"

// The signals that freeze and resume an entry (failure detection).
var sigStop, sigCont = syscall.SIGSTOP, syscall.SIGCONT
