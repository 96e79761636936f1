//go:build !windows

package h1

// outOfSockets: the syscall package's errors say it all here (outOfDescriptors).
func outOfSockets(error) bool { return false }
