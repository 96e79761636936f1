//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyUpgrade relays SIGUSR2, the upgrade in place, to c.
func notifyUpgrade(c chan<- os.Signal) { signal.Notify(c, syscall.SIGUSR2) }
