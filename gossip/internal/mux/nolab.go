//go:build !lab

package mux

import "time"

// sendPacket sends b (lab.go: a lab build may delay or lose it first).
func sendPacket(b []byte, send func([]byte) (time.Time, error)) (time.Time, error) { return send(b) }

// dialWait is nothing outside a lab build.
func dialWait() {}
