//go:build !unix

package main

import "os"

// notifyUpgrade relays nothing here: there is no SIGUSR2, and upgrades in place need Unix
// (package upgrade; tableflip).
func notifyUpgrade(chan<- os.Signal) {}
