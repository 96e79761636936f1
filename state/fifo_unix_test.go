//go:build unix

package state

import "syscall"

// mkfifo makes a named pipe where the state file would be (none where there are none).
var mkfifo = []func(string) error{func(p string) error { return syscall.Mkfifo(p, 0o600) }}
