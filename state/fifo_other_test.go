//go:build !unix

package state

// mkfifo: no named pipes here.
var mkfifo []func(string) error
